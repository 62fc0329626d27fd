"""Grouping of a call's writes into unlogged batches (pure logic, fake statements)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import pytest

from gridstream.stores.cassandra._batches import group_requests, replica_key


@dataclass
class Stmt:
    row: str
    owner: str = "a"
    values: tuple[bytes, ...] = (b"xx",)


class Batch:
    def __init__(self, batch_type: Any, consistency_level: Any = None) -> None:
        self.consistency_level = consistency_level
        self.statements: list[Stmt] = []
        self.is_idempotent = False

    def add(self, statement: Stmt) -> None:
        self.statements.append(statement)


@pytest.fixture(autouse=True)
def fake_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cassandra.query.BatchStatement", Batch)


def owner(statement: Stmt) -> Hashable:
    return statement.owner


def rows(requests: list[Any]) -> list[list[str]]:
    return [[s.row for s in r.statements] if isinstance(r, Batch) else [r.row] for r in requests]


def test_a_lone_statement_is_sent_as_itself() -> None:
    only = Stmt("r1")
    assert group_requests([(only,)], replicas_of=owner, max_partitions=10, max_bytes=4096,
                          consistency_level=None) == [only]


def test_rows_of_the_same_replicas_share_a_batch_up_to_the_limit() -> None:
    units = [(Stmt(f"r{i}", owner="ab"[i % 2]),) for i in range(7)]
    requests = group_requests(units, replicas_of=owner, max_partitions=3, max_bytes=4096,
                              consistency_level=6)
    assert rows(requests) == [["r0", "r2", "r4"], ["r6"], ["r1", "r3", "r5"]]
    assert all(isinstance(r, Batch) and r.is_idempotent and r.consistency_level == 6
               for r in requests if not isinstance(r, Stmt))


def test_a_row_never_splits_and_the_byte_limit_holds() -> None:
    pair = (Stmt("p-insert", values=(b"x" * 60,)), Stmt("p-delete", values=(b"x" * 10,)))
    units = [(Stmt("r1", values=(b"x" * 50,)),), pair, (Stmt("r2", values=(b"x" * 200,)),)]
    requests = group_requests(units, replicas_of=owner, max_partitions=10, max_bytes=150,
                              consistency_level=None)
    # r1 (50) + the pair (70) fit in 150 bytes; r2 alone exceeds the limit and goes alone
    assert rows(requests) == [["r1", "p-insert", "p-delete"], ["r2"]]


def test_one_partition_per_request_when_asked() -> None:
    units = [(Stmt(f"r{i}"),) for i in range(3)]
    requests = group_requests(units, replicas_of=owner, max_partitions=1, max_bytes=4096,
                              consistency_level=None)
    assert rows(requests) == [["r0"], ["r1"], ["r2"]]


def test_without_cluster_metadata_every_statement_has_the_same_replicas() -> None:
    key = replica_key(object())
    assert key(Stmt("a")) == key(Stmt("b", owner="z"))
