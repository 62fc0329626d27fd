"""An entry predicate for the allow-list tests (``cacheFilter``)."""

from __future__ import annotations

from gridstream.grid.contract import Key, Value


def active(cache: str, key: Key, value: Value) -> bool:
    return bool(value.get("active"))
