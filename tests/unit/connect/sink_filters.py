"""Entry predicates the sink's unit tests load through the allow-list."""

from __future__ import annotations

from typing import Any


def even(cache: str, key: Any, value: dict[str, Any]) -> bool:
    return int(value.get("n", 0)) % 2 == 0


def broken(cache: str, key: Any, value: dict[str, Any]) -> bool:
    raise ValueError("no")
