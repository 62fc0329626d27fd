"""Writes, reads, versions, optimistic locking, change sets, partial updates, queries."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal

import pytest

from gridstream.errors import (
    EntryNotFoundError,
    InvalidEntryError,
    SpaceError,
    UnknownTypeError,
    VersionConflictError,
)
from gridstream.model import SpaceDocument
from gridstream.operations import OpType
from gridstream.space import Change, Space

from .models import Address, Order, Person


def _ops(space: Space) -> list[tuple[OpType, object, int]]:
    reader = space.log_reader()
    try:
        bulks = reader.read(reader.first_seq(), 10_000)
    finally:
        reader.close()
    return [(op.op, op.id, op.version) for b in bulks for op in b.operations]


def test_write_read_update_remove(space: Space) -> None:
    v1 = space.write(Person(1, "Ann", 30, Address("Paris")))
    assert space.read(Person, 1) == Person(1, "Ann", 30, Address("Paris"))
    v2 = space.update(Person(1, "Ann", 31))
    assert v2 > v1
    assert space.read_versioned(Person, 1) == (Person(1, "Ann", 31), v2)
    assert space.remove(Person, 1) is not None
    assert space.read(Person, 1) is None
    assert space.remove(Person, 1) is None
    assert [op for op, _, _ in _ops(space)] == [OpType.WRITE, OpType.UPDATE, OpType.REMOVE]


def test_update_of_a_missing_entry_fails(space: Space) -> None:
    with pytest.raises(EntryNotFoundError):
        space.update(Person(9, "Nobody"))
    with pytest.raises(EntryNotFoundError):
        space.change(Person, 9, {"age": 1})
    with pytest.raises(EntryNotFoundError):
        space.partial_update(Person(9, age=3))


def test_versions_grow_across_remove_and_recreate(space: Space) -> None:
    first = space.write(Person(1, "Ann"))
    space.write(Person(2, "Bob"))
    removal = space.remove(Person, 1)
    again = space.write(Person(1, "Ann again"))
    assert first < removal < again  # type: ignore[operator]
    assert space.read_versioned(Person, 1).version == again  # type: ignore[union-attr]
    versions = [v for _, _, v in _ops(space)]
    assert versions == sorted(versions) == list(range(1, len(versions) + 1))


def test_optimistic_locking(space: Space) -> None:
    version = space.write(Person(1, "Ann"), expected_version=0)  # insert only
    with pytest.raises(VersionConflictError) as conflict:
        space.write(Person(1, "Ann"), expected_version=0)
    assert (conflict.value.expected, conflict.value.actual) == (0, version)
    newer = space.update(Person(1, "Ann B"), expected_version=version)
    with pytest.raises(VersionConflictError) as stale:
        space.update(Person(1, "Ann C"), expected_version=version)
    assert (stale.value.expected, stale.value.actual) == (version, newer)
    with pytest.raises(VersionConflictError):
        space.change(Person, 1, {"age": 2}, expected_version=version)
    with pytest.raises(VersionConflictError):
        space.remove(Person, 1, expected_version=version)
    assert space.read(Person, 1) == Person(1, "Ann B")


def test_change_set_is_logged_with_resulting_values(space: Space) -> None:
    space.write(Person(1, "Ann", 30, Address("Paris", "Rue A"), {"x"}))
    space.change(Person, 1, [
        Change.increment("age", 2),
        Change.set("address.city", "Lyon"),
        Change.unset("tags"),
    ])
    assert space.read(Person, 1) == Person(1, "Ann", 32, Address("Lyon", "Rue A"), None)  # type: ignore[arg-type]
    reader = space.log_reader()
    change = reader.read(2, 10)[0].operations[0]
    reader.close()
    assert change.op is OpType.CHANGE
    assert change.data == {"age": 32, "address.city": "Lyon", "tags": None}


def test_change_paths_collapse_to_the_outermost(space: Space) -> None:
    space.write(SpaceDocument("Doc", {"id": "d", "a": {"b": 1, "c": 2}}))
    space.change("Doc", "d", [Change.unset("a"), Change.set("a.b", 5)])
    assert space.read("Doc", "d") == SpaceDocument("Doc", {"id": "d", "a": {"b": 5}})
    reader = space.log_reader()
    change = reader.read(2, 10)[0].operations[0]
    reader.close()
    assert (change.data, change.removed) == ({"a": {"b": 5}}, ())


def test_change_refuses_bad_steps(space: Space) -> None:
    space.write(Person(1, "Ann", 30))
    with pytest.raises(InvalidEntryError):
        space.change(Person, 1, {"id": 2})
    with pytest.raises(InvalidEntryError):
        space.change(Person, 1, [Change.increment("name", 1)])
    with pytest.raises(InvalidEntryError):
        space.change(Person, 1, {"undeclared": 1})
    with pytest.raises(InvalidEntryError):
        space.change(Person, 1, [])
    assert space.read(Person, 1) == Person(1, "Ann", 30)


def test_partial_update_writes_only_non_null_properties(space: Space) -> None:
    space.write(Person(1, "Ann", 30, Address("Paris")))
    space.partial_update(Person(1, age=31, tags=None))  # type: ignore[arg-type]
    assert space.read(Person, 1) == Person(1, "Ann", 31, Address("Paris"))
    reader = space.log_reader()
    op = reader.read(2, 10)[0].operations[0]
    reader.close()
    assert op.op is OpType.PARTIAL_UPDATE
    assert op.data == {"id": 1, "age": 31}


def test_take_returns_the_removed_entry(space: Space) -> None:
    space.write(Person(1, "Ann"))
    assert space.take(Person, 1) == Person(1, "Ann")
    assert space.take(Person, 1) is None
    assert [op for op, _, _ in _ops(space)] == [OpType.WRITE, OpType.TAKE]


def test_templates_where_and_index(space: Space) -> None:
    for i, name in enumerate(["Ann", "Bob", "Ann", "Cy"]):
        space.write(Person(i, name, 20 + i, Address("Paris" if i % 2 else "Oslo")))
    anns = space.read_multiple(Person, Person(id=None, name="Ann"))  # type: ignore[arg-type]
    assert [p.id for p in anns] == [0, 2]
    assert space.count(Person, where={"address.city": "Paris"}) == 2
    assert [p.id for p in space.read_multiple(Person, where=lambda p: p.age > 21)] == [2, 3]
    assert [p.id for p in space.read_multiple(Person, index={"name": "Ann"})] == [0, 2]
    assert space.read_multiple(Person, index={"name": "Ann"}, limit=1)[0].id == 0
    with pytest.raises(SpaceError):
        space.read_multiple(Person, index={"age": 20})
    assert space.read(Person(id=None, name="Cy")) == Person(3, "Cy", 23, Address("Paris"))  # type: ignore[arg-type]
    with pytest.raises(SpaceError):
        space.remove(Person)  # neither an id nor a template
    assert space.remove(Person(id=None, name="Bob")) is not None  # type: ignore[arg-type]
    assert space.count(Person) == 3
    space.change(Person, 2, {"name": "Anna"})
    assert [p.id for p in space.read_multiple(Person, index={"name": "Ann"})] == [0]


def test_clear_logs_one_remove_per_entry(space: Space) -> None:
    for i in range(3):
        space.write(Person(i, "P"))
    space.write(Order("o1", "c"))
    assert space.clear(Person) == 3
    assert space.count(Person) == 0 and space.count(Order) == 1
    reader = space.log_reader()
    last = reader.read(5, 100)[0]
    reader.close()
    assert [op.op for op in last.operations] == [OpType.REMOVE] * 3


def test_documents_and_rich_values(space: Space) -> None:
    doc = SpaceDocument("Product", {
        "id": "p1", "price": Decimal("9.99"), "kafka.topic": "products",
        "made": dt.date(2024, 1, 2), "meta": {"tags": ["a", "b"], "n": 1},
    })
    space.write(doc)
    assert space.read("Product", "p1") == doc
    space.change("Product", "p1", {"price": Decimal("10")})
    reader = space.log_reader()
    change = reader.read(2, 10)[0].operations[0]
    reader.close()
    assert change.data == {"price": Decimal("10"), "kafka.topic": "products"}  # topic rides along
    assert space.types()["Product"].id_property == "id"


def test_routing_decides_the_partition(space: Space) -> None:
    space.write(Order("o1", "alice"))
    space.write(Order("o2", "alice"))
    reader = space.log_reader()
    parts = {op.partition for b in reader.read(1, 10) for op in b.operations}
    reader.close()
    assert parts == {space.partition_for("alice")}


def test_invalid_entries(open_space: Callable[..., Space]) -> None:
    space = open_space(max_entry_bytes=200)
    with pytest.raises(InvalidEntryError, match="id"):
        space.write(Person(None, "No id"))  # type: ignore[arg-type]
    with pytest.raises(InvalidEntryError, match="meta.bad"):
        space.write(SpaceDocument("Doc", {"id": 1, "meta": {"bad": object()}}))
    with pytest.raises(InvalidEntryError, match="200-byte limit"):
        space.write(SpaceDocument("Doc", {"id": 1, "blob": b"x" * 500}))
    with pytest.raises(InvalidEntryError, match="big"):
        space.write(SpaceDocument("Doc", {"id": 1, "big": 2**70}))
    with pytest.raises(UnknownTypeError):
        space.write(object())
    with pytest.raises(UnknownTypeError):
        space.read("never.Introduced", 1)
    assert space.next_seq == 1  # nothing was logged


def test_closed_space_refuses_operations(space: Space) -> None:
    space.close()
    with pytest.raises(SpaceError):
        space.write(Person(1))
