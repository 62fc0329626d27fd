"""``cacheFilter``: an entry predicate named by import path, from an allow-list only.

Configuration never loads arbitrary code: ``load_filter("myapp.filters:active",
allowed=["myapp.filters"])`` imports ``myapp.filters`` only because the operator listed
it (``[run] allowed_modules`` in the run file, or ``GRIDSTREAM_ALLOWED_MODULES``,
comma-separated). The predicate is called as ``fn(cache, key, value) -> bool``; an entry
for which it returns false is left out (counted as filtered, not an error).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Sequence

from gridstream.errors import ConfigError
from gridstream.grid.contract import Key, Value

__all__ = ["ALLOWED_ENV", "EntryFilter", "allowed_modules", "load_filter"]

ALLOWED_ENV = "GRIDSTREAM_ALLOWED_MODULES"
EntryFilter = Callable[[str, Key, Value], bool]


def allowed_modules(configured: Sequence[str] = ()) -> tuple[str, ...]:
    """The run's allow-list: ``configured`` plus the environment's."""
    extra = [m.strip() for m in os.environ.get(ALLOWED_ENV, "").split(",") if m.strip()]
    return tuple(dict.fromkeys([*configured, *extra]))


def _split(path: str) -> tuple[str, str]:
    if ":" in path:
        module, _, name = path.partition(":")
    else:
        module, _, name = path.rpartition(".")
    if not module or not name or not name.isidentifier():
        raise ConfigError(f"cacheFilter {path!r}: give 'module:function'")
    return module, name


def load_filter(path: str, allowed: Sequence[str]) -> EntryFilter:
    """The predicate at ``path``; ``ConfigError`` unless its module is allowed exactly
    (or is a submodule of an allowed package) and it is callable."""
    module, name = _split(path)
    if not any(module == a or module.startswith(a + ".") for a in allowed):
        raise ConfigError(f"cacheFilter {path!r}: module {module!r} is not in the allow-list "
                          f"(allowed_modules / {ALLOWED_ENV}); configuration never imports "
                          "code the operator has not allowed")
    try:
        loaded = importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"cacheFilter {path!r}: cannot import {module!r}: {exc}") from exc
    fn = getattr(loaded, name, None)
    if not callable(fn):
        raise ConfigError(f"cacheFilter {path!r}: {module}.{name} is not a function")
    return fn  # type: ignore[no-any-return]
