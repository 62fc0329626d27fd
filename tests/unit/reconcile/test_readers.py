"""Readers that need no service: the grid, and operations folded like the Kafka topics."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gridstream.model import SpaceDocument, space_class
from gridstream.reconcile import compare
from gridstream.reconcile.readers import from_grid, from_records
from gridstream.space import Change, Space


@dataclass
class Spot:
    city: str
    lat: float


@space_class(type_name="test.reconcile.Venue")
@dataclass
class Venue:
    id: str
    spot: Spot
    price: Decimal
    tags: set[str]


def test_the_grid_and_its_own_log_fold_to_the_same_content(tmp_path: Path) -> None:
    with Space.embedded("r", data_dir=tmp_path) as space:
        space.write(Venue("v-1", Spot("Oslo", 1.5), Decimal("9.90"), {"b", "a"}))
        space.write(Venue("v-2", Spot("Lyon", 2.5), Decimal("1"), set()))
        space.change(Venue, "v-1", [Change.set("spot.city", "Rome")])
        space.write(SpaceDocument("test.reconcile.Doc", {"id": 7, "extra": {"k": [1, 2]}}))
        space.remove(Venue, "v-2")
        names = ["test.reconcile.Venue", "test.reconcile.Doc"]
        grid = from_grid(space, names)
        reader = space.log_reader()
        ops = [op for bulk in reader.read(reader.first_seq(), 100) for op in bulk.operations]
        folded = from_records("log", ops, space.types())
    assert sorted(grid.entities) == [("test.reconcile.Doc", "7"), ("test.reconcile.Venue", "v-1")]
    venue = grid.entities[("test.reconcile.Venue", "v-1")]
    assert venue.data["spot"] == {"city": "Rome", "lat": 1.5} and venue.version == 3
    result = compare(grid, folded)
    assert result.matches, result.first
    assert result.state_hash == compare(grid, grid).state_hash


def test_kafka_reader_reads_past_the_expected_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """An operation delivered twice must show, even when the expected count is reached
    exactly at the end of a fetched batch."""
    from gridstream import consumer as consumer_module
    from gridstream.consumer import OperationRecord
    from gridstream.operations import OpType
    from gridstream.protocol import Envelope
    from gridstream.reconcile.readers import from_kafka

    def record(version: int) -> OperationRecord:
        envelope = Envelope(op=OpType.WRITE, type="T", id="a", version=version, ts=1,
                            partition=0, data={"id": "a", "n": version})
        return OperationRecord(envelope, "t", 0, version - 1, b"a", (), 1)

    batches = [[record(1), record(2)], [record(2)]]  # the second WRITE delivered twice

    class FakeConsumer:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def __enter__(self) -> FakeConsumer:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def consume(self, max_records: int, timeout_s: float) -> list[OperationRecord]:
            return batches.pop(0) if batches else []

    monkeypatch.setattr(consumer_module, "OperationConsumer", FakeConsumer)
    holding = from_kafka("127.0.0.1:1", ["t"], {}, expected_ops=2, group="g", timeout_s=5)
    assert holding.operations == 3
    assert sorted(holding.notes) == ["1 operations out of per-entity order",
                                     "3 operations read, 2 expected"]


def test_ids_with_the_same_text_are_refused_not_merged(tmp_path: Path) -> None:
    from gridstream.errors import ReconcileError

    with Space.embedded("r", data_dir=tmp_path) as space:
        space.write(SpaceDocument("test.reconcile.Doc", {"id": 1, "v": "int"}))
        space.write(SpaceDocument("test.reconcile.Doc", {"id": "1", "v": "str"}))
        assert space.count(SpaceDocument("test.reconcile.Doc")) == 2
        with pytest.raises(ReconcileError, match="same text"):
            from_grid(space, ["test.reconcile.Doc"])
        reader = space.log_reader()
        ops = [op for bulk in reader.read(reader.first_seq(), 100) for op in bulk.operations]
        with pytest.raises(ReconcileError, match="same text"):
            from_records("log", ops, space.types())
