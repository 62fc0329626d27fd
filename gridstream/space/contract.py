"""What the mirror, connectors and sinks may rely on: the space and its operation log.

The embedded space implements these; a distributed backend (Hazelcast) can replace it
without touching the mirror, the connectors or the stores.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

from gridstream.operations import Bulk, Operation, TypeDescriptor

__all__ = ["LogReader", "StateSnapshot"]


@dataclass(frozen=True, slots=True)
class StateSnapshot:
    """The space's whole state just before ``next_seq``, as the space last saved it: each
    live entry as a ``WRITE`` of its full data carrying the entry's version."""

    next_seq: int
    entries: Sequence[Operation]


class LogReader(ABC):
    """Reads committed bulks from a space's durable operation log, in sequence order.

    A reader may run in another process than the writer (``gridstream mirror``) and
    tails the log as it grows. Bulks are returned whole and without gaps: the first bulk
    returned by ``read(from_seq)`` starts exactly at ``resume_seq(from_seq)`` (which is
    ``from_seq`` unless a tail repair left it unused).
    """

    @abstractmethod
    def first_seq(self) -> int:
        """The oldest sequence number still retained in the log."""

    @abstractmethod
    def end_seq(self) -> int:
        """One past the newest committed sequence number visible now."""

    @abstractmethod
    def read(self, from_seq: int, max_operations: int) -> Sequence[Bulk]:
        """Committed bulks from ``from_seq``; at least one whole bulk if any is there,
        and stops before exceeding ``max_operations`` (a larger single bulk still
        comes whole). Raises ``OperationLogError`` if ``from_seq`` is no longer
        retained, ``LogCorruptedError`` on a damaged record."""

    @abstractmethod
    def acknowledge(self, consumer: str, next_seq: int) -> None:
        """Record that ``consumer`` (a mirror's name) has durably delivered everything
        before ``next_seq``; segments every registered consumer has passed may go."""

    @abstractmethod
    def register(self, consumer: str) -> int:
        """Register a consumer (idempotent) and return its acknowledged ``next_seq``;
        the log retains everything from there on."""

    def resume_seq(self, seq: int) -> int:
        """``seq``, or — when a repair of the log's tail left ``seq`` unused (numbering
        goes on above every number ever used, never reusing one) — the first sequence
        number after that void. ``read(seq)`` returns bulks from there."""
        return seq

    def log_id(self) -> str | None:
        """A stable id unique to this log (None if the log has none): a position stored
        elsewhere for another log with the same mirror name must not be reused here."""
        return None

    def state_snapshot(self, type_names: Collection[str] | None = None) -> StateSnapshot | None:
        """The state the space last saved (entries of ``type_names`` only, when given), or
        None if it saved none. With the log retained from its ``next_seq`` on, it
        rebuilds the state at any later sequence number, whatever retention removed."""
        return None

    def tail(self, from_seq: int, max_operations: int, poll_s: float) -> Iterator[Sequence[Bulk]]:
        """Poll ``read`` forever (the caller stops iterating to stop)."""
        import time

        seq = from_seq
        while True:
            bulks = self.read(seq, max_operations)
            if bulks:
                seq = bulks[-1].next_seq
                yield bulks
            else:
                time.sleep(poll_s)

    @abstractmethod
    def types(self) -> Mapping[str, TypeDescriptor]:
        """Every type introduced to the space so far (re-read as the log grows)."""

    @abstractmethod
    def close(self) -> None:
        """Release files and handles."""
