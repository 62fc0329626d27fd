"""Grouping a call's writes into unlogged batches, by the replicas that own them.

Each planned write is a *unit*: the statements of one row that must travel together (an
INSERT and the row deletion that replaces the row whole, or a single statement). Units
whose partitions live on the same replicas are sent as one ``UNLOGGED`` batch, up to
``max_partitions`` units and ``max_bytes`` of bound values, so the coordinator of each
request is a replica of every row in it and no request fans out across the cluster. One
request per several rows instead of one per row costs the client and the server far less
per row (see docs/benchmarks.md).

Grouping never changes what is written: every statement keeps its own ``USING
TIMESTAMP``, so rows in one batch, or the same row in two, resolve by version exactly as
separate requests would. The defaults stay under Cassandra's warning thresholds
(``unlogged_batch_across_partitions_warn_threshold: 10``, ``batch_size_warn_threshold:
5KiB``); a unit larger than ``max_bytes`` goes alone.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

__all__ = ["Unit", "group_requests", "replica_key"]

Unit = tuple[Any, ...]
"""The statements of one row's write, sent in the same request."""


def replica_key(session: Any) -> Callable[[Any], Hashable]:
    """A function giving the replica set that owns a bound statement's partition (the
    same value for every statement when the cluster has one node or no token map)."""
    metadata = getattr(getattr(session, "cluster", None), "metadata", None)
    if metadata is None or len(metadata.all_hosts()) <= 1 or metadata.token_map is None:
        return lambda statement: None

    def key(statement: Any) -> Hashable:
        routing_key = getattr(statement, "routing_key", None)
        keyspace = getattr(statement, "keyspace", None)
        if routing_key is None or keyspace is None:
            return None
        hosts = metadata.get_replicas(keyspace, routing_key)
        return tuple(sorted(str(host.endpoint) for host in hosts))

    return key


def _size(statement: Any) -> int:
    values = getattr(statement, "values", None) or ()
    return sum(len(v) for v in values if isinstance(v, bytes | bytearray))


def group_requests(
    units: Sequence[Unit],
    *,
    replicas_of: Callable[[Any], Hashable],
    max_partitions: int,
    max_bytes: int,
    consistency_level: int | None,
) -> list[Any]:
    """The requests that carry ``units``: a lone statement as itself, anything else as
    an idempotent unlogged batch."""
    groups: dict[Hashable, list[tuple[Unit, int]]] = {}
    for unit in units:
        size = sum(_size(s) for s in unit)
        groups.setdefault(replicas_of(unit[0]), []).append((unit, size))
    requests: list[Any] = []
    for members in groups.values():
        chunk: list[Unit] = []
        chunk_bytes = 0
        for unit, size in members:
            if chunk and (len(chunk) >= max_partitions or chunk_bytes + size > max_bytes):
                requests.append(_request(chunk, consistency_level))
                chunk, chunk_bytes = [], 0
            chunk.append(unit)
            chunk_bytes += size
        if chunk:
            requests.append(_request(chunk, consistency_level))
    return requests


def _request(chunk: list[Unit], consistency_level: int | None) -> Any:
    if len(chunk) == 1 and len(chunk[0]) == 1:
        return chunk[0][0]
    from cassandra.query import BatchStatement, BatchType

    batch = BatchStatement(BatchType.UNLOGGED, consistency_level=consistency_level)
    for unit in chunk:
        for statement in unit:
            batch.add(statement)
    batch.is_idempotent = True
    return batch
