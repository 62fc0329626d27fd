"""``Space``: the embedded, in-process grid, and its transactions."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path
from types import TracebackType
from typing import Literal

from gridstream.errors import TransactionError
from gridstream.model import DEFAULT_TOPIC_PROPERTY
from gridstream.space._api import SpaceApi
from gridstream.space._core import Core, SpaceOptions, TxState, stable_partition
from gridstream.space._open import open_core
from gridstream.space._reader import EmbeddedLogReader, open_log_reader

__all__ = ["Space", "Transaction"]


class Space(SpaceApi):
    """An in-process grid whose every committed operation goes to a durable log.

    Thread-safe. Open it with ``Space.embedded``; close it (or use ``with``) to sync the
    log and write a snapshot, which makes the next open fast.
    """

    def __init__(self, core: Core) -> None:
        self._core = core

    @classmethod
    def embedded(
        cls,
        name: str,
        *,
        data_dir: str | os.PathLike[str],
        partitions: int = 4,
        fsync: Literal["always", "batch", "never"] = "batch",
        fsync_interval_s: float = 0.05,
        max_entry_bytes: int = 4 << 20,
        segment_bytes: int = 64 << 20,
        snapshot_every_ops: int | None = 1_000_000,
        snapshot_on_close: bool = True,
        on_corrupt_tail: Literal["fail", "truncate"] = "fail",
        topic_property: str = DEFAULT_TOPIC_PROPERTY,
    ) -> Space:
        """Open (recovering its state) or create the space stored in ``data_dir``.

        ``fsync``: ``always`` syncs each commit before returning; ``batch`` syncs in the
        background every ``fsync_interval_s``; ``never`` leaves it to the OS. Every
        commit reaches the OS before returning, so it survives a crash of the process.
        ``on_corrupt_tail="truncate"`` cuts a torn log tail left by an unclean shutdown
        (with a warning); by default it raises ``LogCorruptedError``.
        """
        options = SpaceOptions(
            partitions=partitions, fsync=fsync, fsync_interval_s=fsync_interval_s,
            max_entry_bytes=max_entry_bytes, segment_bytes=segment_bytes,
            snapshot_every_ops=snapshot_every_ops, snapshot_on_close=snapshot_on_close,
            on_corrupt_tail=on_corrupt_tail, topic_property=topic_property,
        )
        return cls(open_core(name, data_dir, options))

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def data_dir(self) -> Path:
        return self._core.layout.root

    @property
    def partitions(self) -> int:
        return self._core.options.partitions

    @property
    def next_seq(self) -> int:
        """The sequence number (version) the next operation will get."""
        with self._core.lock:
            return self._core.next_seq

    def partition_for(self, routing: object) -> int:
        """The partition a routing value (or id) maps to, in every process."""
        return stable_partition(routing, self._core.options.partitions)

    def transaction(self) -> Transaction:
        """All-or-nothing: ``with space.transaction() as tx: tx.write(...)``.

        The transaction holds the space lock until it ends (other threads wait);
        operations of this thread on the space join it. Its operations are logged as
        one bulk at commit; on an exception nothing is logged and the state is restored.
        """
        return Transaction(self._core)

    def snapshot(self) -> int:
        """Write a snapshot now; returns the first sequence number it does not cover."""
        return self._core.snapshot()

    def sync(self) -> None:
        """Make every committed operation durable now (whatever the fsync policy)."""
        self._core.sync()

    def log_reader(self) -> EmbeddedLogReader:
        """A reader of this space's log (as another process would open it)."""
        return open_log_reader(self._core.layout.root)

    def close(self) -> None:
        """Sync the log, write a snapshot (unless disabled) and release the directory."""
        self._core.close()

    def __enter__(self) -> Space:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Space({self.name!r}, data_dir={str(self.data_dir)!r})"


class Transaction(SpaceApi):
    """A transaction of one thread; use it once, as a context manager."""

    def __init__(self, core: Core) -> None:
        self._core = core
        self.txn_id = uuid.uuid4().hex
        self._state: TxState | None = None
        self._ended = False

    def __enter__(self) -> Transaction:
        if self._state is not None or self._ended:
            raise TransactionError("a transaction can be entered only once")
        self._state = self._core.begin(self.txn_id)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._ended:
            return
        if exc_type is None:
            self.commit()
        else:
            self.rollback()

    def commit(self) -> None:
        """Log the transaction's operations as one bulk (nothing if it is empty)."""
        self._core.commit(self._end())

    def rollback(self) -> None:
        """Undo every operation of the transaction; nothing is logged."""
        self._core.rollback(self._end())

    def _end(self) -> TxState:
        state = self._active()
        self._ended = True
        return state

    def _active(self) -> TxState:
        if self._state is None or self._ended:
            raise TransactionError("the transaction is not active")
        if self._state.thread != threading.get_ident():
            raise TransactionError("a transaction belongs to the thread that began it")
        return self._state

    def _engine(self) -> Core:
        self._active()
        return self._core
