"""Grid adapters: one contract (``contract``), one implementation per grid."""

from gridstream.grid.contract import (
    CacheEvent,
    Change,
    ChangeBatch,
    Entry,
    GridAdapter,
    Key,
    Position,
    Value,
    Write,
)

__all__ = [
    "CacheEvent",
    "Change",
    "ChangeBatch",
    "Entry",
    "GridAdapter",
    "Key",
    "Position",
    "Value",
    "Write",
]
