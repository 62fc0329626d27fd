"""Consumers of the log and retention: a segment goes only when nobody needs it.

``consumers.json`` maps each registered consumer to the ``next_seq`` it acknowledged,
and records ``log_start``: every bulk starting at or after it is retained (it is always
the first seq of a retained record, so readers can start there). A segment is deleted
when a later segment of the same partition starts at or below the threshold
``min(every consumer's ack, the snapshot's next_seq)``: then all its records are below
it. Without registered consumers nothing is deleted, so a mirror started later still
receives the whole history.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from typing import NamedTuple

from gridstream.errors import OperationLogError
from gridstream.space._files import Layout, atomic_write, read_json
from gridstream.space._snapshot import read_snapshot_meta

__all__ = ["Consumers", "acknowledge", "apply_retention", "load", "register", "unregister"]


class Consumers(NamedTuple):
    acks: dict[str, int]
    log_start: int


@contextlib.contextmanager
def _locked(layout: Layout) -> Iterator[None]:
    """Serialise read-modify-write of ``consumers.json`` across processes."""
    fd = os.open(layout.consumers_lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def load(layout: Layout) -> Consumers:
    raw = read_json(layout.consumers) or {}
    acks = raw.get("consumers", {})
    start = raw.get("log_start", 1)
    if not isinstance(acks, dict) or not isinstance(start, int):
        raise OperationLogError(f"malformed {layout.consumers}")
    return Consumers({str(k): int(v) for k, v in acks.items()}, start)


def _save(layout: Layout, state: Consumers, *, durable: bool = True) -> None:
    body = {"consumers": dict(sorted(state.acks.items())), "log_start": state.log_start}
    atomic_write(layout.consumers, json.dumps(body, indent=1).encode(), durable=durable)


def register(layout: Layout, consumer: str) -> int:
    """Register ``consumer`` (idempotent); returns its acknowledged ``next_seq``."""
    _check_name(consumer)
    with _locked(layout):
        state = load(layout)
        if consumer not in state.acks:
            state.acks[consumer] = state.log_start
            _save(layout, state)
        return max(state.acks[consumer], state.log_start)


def acknowledge(layout: Layout, consumer: str, next_seq: int) -> bool:
    """Record ``consumer``'s position (it never moves back); true if it advanced."""
    _check_name(consumer)
    with _locked(layout):
        state = load(layout)
        if next_seq <= state.acks.get(consumer, 0):
            return False
        state.acks[consumer] = next_seq
        # Not synced: an ack lost in a power failure only means redelivery (the Kafka
        # endpoint resumes from its own committed position; stores are idempotent by
        # version). apply_retention syncs the acks before it deletes anything.
        _save(layout, state, durable=False)
        return True


def unregister(layout: Layout, consumer: str) -> None:
    with _locked(layout):
        state = load(layout)
        if state.acks.pop(consumer, None) is not None:
            _save(layout, state)


def apply_retention(layout: Layout, partitions: int) -> int:
    """Delete the segments every consumer and the snapshot have passed; new log start."""
    with _locked(layout):
        state = load(layout)
        if not state.acks:
            return state.log_start
        snapshot = read_snapshot_meta(layout)
        threshold = min(min(state.acks.values()), snapshot.next_seq if snapshot else 1)
        doomed = []
        start = state.log_start
        for p in range(partitions):
            segments = layout.segments(p)
            for (_, path), (next_base, _) in zip(segments, segments[1:], strict=False):
                if next_base <= threshold:
                    doomed.append(path)
                    start = max(start, next_base)
        if start != state.log_start:
            _save(layout, Consumers(state.acks, start))  # readers learn it before files go
        for path in doomed:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        return start


def _check_name(consumer: str) -> None:
    if not consumer or not isinstance(consumer, str):
        raise OperationLogError("a consumer needs a non-empty name")
