"""The connectors' ``cacheFilter``: an entry predicate named by import path, loaded
from the allow-list only (``gridstream.allowlist``). It is called as
``fn(cache, key, value) -> bool``; an entry for which it returns false is left out
(counted as filtered, not an error).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gridstream.allowlist import load_function
from gridstream.grid.contract import Key, Value

__all__ = ["EntryFilter", "load_filter"]

EntryFilter = Callable[[str, Key, Value], bool]


def load_filter(path: str, allowed: Sequence[str]) -> EntryFilter:
    """The predicate at ``path``, by the rules of ``load_function``."""
    return load_function(path, allowed, what="cacheFilter")  # type: ignore[return-value]
