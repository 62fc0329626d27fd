"""Transforms (SMT-like), chained from config: ``build_chain(configs)(record)``.

Each step takes a ``Record`` and returns a new one; a step that cannot apply to a
record raises ``CodecError`` (the caller names the record and applies the error policy).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gridstream.connect.config import TransformConfig
from gridstream.connect.record import Record
from gridstream.errors import ConfigError

__all__ = ["Chain", "build_chain"]

Chain = Callable[[Record], Record]


def build_chain(configs: Sequence[TransformConfig]) -> Chain:
    """One function applying every step in order; ``ConfigError`` for an unknown type or
    a bad option."""
    if configs:
        raise ConfigError("transforms are not built yet")
    return lambda record: record
