"""The record both connector kinds filter, transform and convert.

A ``Record`` is one entry on its way between a cache and a topic: the source builds it
from a grid change (``cache``, ``key``, ``value``; ``value`` None for a removal) and
turns it into Kafka bytes; the sink builds it from a Kafka record's decoded key and
value and applies it to ``cache``. Transforms change it in place of a copy
(``dataclasses.replace``); ``where`` names it in errors and dead letters.

Every source record carries ``gs.version`` (``gridstream.protocol.H_VERSION``): the
change's version (the Space: its log sequence number; Hazelcast: its journal sequence),
growing per key within one position lineage. Dead letters carry the headers of
``gridstream.spark.dead_letter``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gridstream.grid.contract import Key, Value

__all__ = ["Record"]


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    cache: str
    key: Key | None
    value: Value | None
    """None: a removal (a tombstone in Kafka)."""
    headers: tuple[tuple[str, bytes], ...] = field(default=())
    timestamp_ms: int | None = None
    where: str = ""
    """``cache/key`` (source) or ``topic[partition]@offset`` (sink), for errors."""
