"""The few places that touch cassandra-driver directly (an optional dependency)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gridstream._optional import require
from gridstream.errors import ConfigError

__all__ = ["CONSISTENCY_LEVELS", "consistency_level", "require_driver", "row_values"]

CONSISTENCY_LEVELS = (
    "ANY",
    "ONE",
    "TWO",
    "THREE",
    "QUORUM",
    "ALL",
    "LOCAL_QUORUM",
    "EACH_QUORUM",
    "LOCAL_ONE",
)
"""Consistency levels a write or read may name."""


def require_driver() -> None:
    """Fail with the install command when cassandra-driver is missing."""
    require("cassandra", "the Cassandra store")


def consistency_level(name: str) -> int:
    """The driver's value for a consistency level name (``LOCAL_QUORUM``)."""
    require_driver()
    from cassandra import ConsistencyLevel

    upper = name.upper()
    if upper not in CONSISTENCY_LEVELS:
        raise ConfigError(f"unknown consistency level {name!r}; one of {CONSISTENCY_LEVELS}")
    return int(ConsistencyLevel.name_to_value[upper])


def row_values(row: Any, names: Sequence[str]) -> tuple[Any, ...]:
    """A row's values in ``names`` order, whatever row factory the session uses."""
    if isinstance(row, Mapping):
        return tuple(row[name] for name in names)
    return tuple(row)
