"""Reading a map's event journal, partition by partition, on each partition's owner.

The client keeps the cluster's id (learnt at authentication, new after a restart of the
whole cluster) and routes partition invocations only in its internals: this module is the
one place that touches them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from hazelcast.errors import HazelcastError, StaleSequenceError
from hazelcast.invocation import Invocation

from gridstream.errors import GridError, PositionLostError
from gridstream.grid.hazelcast import _codec
from gridstream.grid.hazelcast._codec import JournalEvent

__all__ = [
    "MAX_READ", "Bounds", "PartitionRead", "brief", "cluster_id", "read_partitions", "subscribe",
]

MAX_READ = 1000
"""The most events one journal read may ask for (the member's ring-buffer limit)."""

T = TypeVar("T")


def brief(exc: BaseException) -> str:
    """A client error's message without the member's Java stack trace (its ``at ...``
    lines), causes kept on one line: for ``GridError`` messages."""
    lines = [line.strip() for line in str(exc).splitlines()]
    return "; ".join(line for line in lines if line and not line.startswith("at "))


def cluster_id(client: Any) -> str:
    """The id of the cluster the client is connected to (new after a full restart)."""
    value = client._connection_manager._cluster_id
    if value is None:
        raise GridError("the Hazelcast client is not connected to a cluster")
    return str(value)


def _on_partitions(
    client: Any, requests: Sequence[tuple[int, Any]], handler: Callable[[Any], T]
) -> list[T]:
    """Send one request per partition to its owner, all at once; answers in order."""
    service = client._invocation_service
    invocations = []
    for partition, request in requests:
        invocation = Invocation(request, partition_id=partition, response_handler=handler)
        service.invoke(invocation)
        invocations.append(invocation)
    return [invocation.future.result() for invocation in invocations]


@dataclass(frozen=True, slots=True)
class Bounds:
    """A partition's journal: its oldest readable sequence and the next one to be written."""

    oldest: int
    end: int


def subscribe(client: Any, name: str, partitions: Sequence[int]) -> dict[int, Bounds]:
    requests = [(p, _codec.encode_subscribe_request(name)) for p in partitions]
    try:
        answers = _on_partitions(client, requests, _codec.decode_subscribe_response)
    except HazelcastError as exc:
        raise GridError(f"cache {name!r}: journal subscription failed: {brief(exc)}") from exc
    pairs = zip(partitions, answers, strict=True)
    return {p: Bounds(oldest, newest + 1) for p, (oldest, newest) in pairs}


@dataclass(frozen=True, slots=True)
class PartitionRead:
    partition: int
    seqs: list[int]
    events: list[JournalEvent]


def read_partitions(
    client: Any, name: str, starts: dict[int, int], sizes: dict[int, int]
) -> list[PartitionRead]:
    """Read ``sizes[p]`` events (at most) of each partition from ``starts[p]``.

    Raises ``PositionLostError`` when a partition answers from later than asked (its
    journal overflowed past the start) and ``GridError`` when an answer is malformed.
    """
    order = sorted(sizes)
    requests = [
        (p, _codec.encode_read_request(name, starts[p], 0, min(sizes[p], MAX_READ)))
        for p in order
    ]
    try:
        answers = _on_partitions(client, requests, _codec.decode_read_response)
    except StaleSequenceError as exc:
        raise PositionLostError(
            f"cache {name!r}: the journal overflowed past the stored position",
            cache=name, detail="overflow",
        ) from exc
    except HazelcastError as exc:
        raise GridError(f"cache {name!r}: journal read failed: {brief(exc)}") from exc
    reads = []
    for p, answer in zip(order, answers, strict=True):
        seqs = answer.item_seqs
        if seqs is None or len(seqs) != len(answer.items) or answer.read_count != len(seqs):
            raise GridError(f"cache {name!r}: partition {p} answered a malformed journal read")
        if seqs and seqs[0] != starts[p]:
            raise PositionLostError(
                f"cache {name!r}: partition {p}'s journal starts at {seqs[0]}, after the "
                f"stored sequence {starts[p]}: events were overwritten (journal overflow)",
                cache=name, detail="overflow",
            )
        if any(b != a + 1 for a, b in zip(seqs, seqs[1:], strict=False)):
            raise GridError(f"cache {name!r}: partition {p} answered non-contiguous sequences")
        reads.append(PartitionRead(p, seqs, [_codec.decode_event(i) for i in answer.items]))
    return reads
