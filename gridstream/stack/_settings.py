"""Service settings read from ``GRIDSTREAM_*`` environment variables, checked."""

from __future__ import annotations

import os

from gridstream.errors import StackError

__all__ = ["env_int"]


def env_int(name: str, default: int, low: int, high: int) -> int:
    """The whole number in ``$name`` (``default`` when unset), within ``low..high``."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise StackError(f"{name}={raw!r} is not a whole number") from exc
    if not low <= value <= high:
        raise StackError(f"{name}={value} is out of range ({low}..{high})")
    return value
