"""The sync endpoint contract: where the mirror delivers bulks of operations."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

from gridstream.operations import Bulk, TypeDescriptor

__all__ = ["SyncEndpoint"]


class SyncEndpoint(ABC):
    """Receives the space's committed bulks, in order, from the mirror.

    ``write_batch`` must be durable when it returns (the mirror then advances its
    position) and must raise ``EndpointError`` on failure (the mirror then retries the
    same bulks). An endpoint that can store the mirror's position atomically with the
    data (Kafka transactions) returns it from ``position()`` and gives exactly-once; an
    endpoint whose writes are idempotent by version (Cassandra, SQL) returns ``None`` and
    gives effectively-once on redelivery.
    """

    name: str = "endpoint"
    bound_log_id: str | None = None

    @abstractmethod
    def open(self, mirror_name: str) -> None:
        """Connect. No network call happens before this."""

    def bind_log(self, log_id: str | None) -> None:
        """Called before ``open`` with the id of the log being mirrored; an endpoint that
        stores a position keeps the id with it and refuses a position of another log."""
        self.bound_log_id = log_id

    def position(self) -> int | None:
        """The ``next_seq`` stored atomically with the delivered data, if the endpoint
        keeps one; ``None`` to let the mirror use the log's acknowledged position."""
        return None

    @abstractmethod
    def write_batch(self, bulks: Sequence[Bulk], types: Mapping[str, TypeDescriptor]) -> None:
        """Deliver ``bulks`` whole and durably (never split a bulk)."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release connections."""
