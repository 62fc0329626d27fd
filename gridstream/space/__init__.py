"""The grid: an embedded, thread-safe space and its durable operation log.

``Space.embedded(name, data_dir=...)`` opens (or recovers) a space; every committed
operation goes to a per-partition, append-only log that ``open_log_reader(data_dir)``
reads back in sequence order from any process (the mirror does). See ``docs/space.md``.
"""

from __future__ import annotations

from gridstream.space._api import Versioned
from gridstream.space._change import Change
from gridstream.space._core import stable_partition
from gridstream.space._reader import BulkRecord, EmbeddedLogReader, open_log_reader
from gridstream.space._space import Space, Transaction
from gridstream.space._writer import FsyncPolicy
from gridstream.space.contract import LogReader, StateSnapshot

__all__ = [
    "BulkRecord",
    "Change",
    "EmbeddedLogReader",
    "FsyncPolicy",
    "LogReader",
    "Space",
    "StateSnapshot",
    "Transaction",
    "Versioned",
    "open_log_reader",
    "stable_partition",
]
