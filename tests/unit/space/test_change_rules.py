"""Change sets on declared nested fields: the space, its log replay and the fold agree."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from gridstream.fold import OpRow, fold
from gridstream.model import SpaceDocument, descriptor_of
from gridstream.operations import Operation
from gridstream.space import Change, Space
from gridstream.space._codec import decode_data

from .models import Address, Person


def _logged(space: Space) -> list[Operation]:
    reader = space.log_reader()
    try:
        return [op for bulk in reader.read(reader.first_seq(), 10_000) for op in bulk.operations]
    finally:
        reader.close()


def _json(data: Any) -> str:
    return orjson.dumps(data, default=sorted, option=orjson.OPT_SORT_KEYS).decode()


def _stored(space: Space, type_name: str, ident: object) -> dict[str, Any]:
    """The entry as the space holds it, in JSON form (sets as sorted lists)."""
    with space._core.lock:
        slot = space._core.store.tables[type_name][ident]
    data: dict[str, Any] = orjson.loads(_json(decode_data(slot.data)))
    return data


def _folded(ops: list[Operation], declared: frozenset[str]) -> dict[str, Any]:
    rows = [OpRow(op.op.value, op.version, op.timestamp_ms,
                  None if op.data is None else _json(dict(op.data)), op.removed)
            for op in ops]
    state = fold(None, rows, declared).state
    assert state is not None and state.data is not None
    data: dict[str, Any] = orjson.loads(state.data)
    return data


@pytest.mark.parametrize("step", [Change.unset("address.city"), Change.set("address.city", None)],
                         ids=["unset", "set-none"])
def test_a_declared_nested_field_unset_reads_back_as_none(
        open_space: Callable[..., Space], step: Change) -> None:
    space = open_space(snapshot_on_close=False)
    space.write(Person(1, "Ann", 30, Address("Paris", "Rue A")))
    space.change(Person, 1, [step])
    expected = Person(1, "Ann", 30, Address(None, "Rue A"))  # type: ignore[arg-type]
    assert space.read(Person, 1) == expected
    declared = descriptor_of(Person).declared_paths()
    assert _folded(_logged(space), declared) == _stored(space, "test.Person", 1)
    space.close()
    reopened = open_space(snapshot_on_close=False)  # the log is replayed
    assert reopened.read(Person, 1) == expected


def test_unsetting_under_a_null_declared_object_leaves_it_null(space: Space) -> None:
    space.write(Person(1, "Ann", 30, None))
    space.change(Person, 1, [Change.unset("address.city")])
    assert space.read(Person, 1) == Person(1, "Ann", 30, None)


def test_the_fold_and_the_space_agree_on_a_tricky_history(
        open_space: Callable[..., Space]) -> None:
    space = open_space(snapshot_on_close=False)
    space.write(Person(1, "Ann", 30, Address("Paris", "Rue A")))
    space.change(Person, 1, [Change.unset("address.street"), Change.set("address.city", "Lyon")])
    space.change(Person, 1, [Change.unset("address")])
    space.change(Person, 1, [Change.set("address.city", "Oslo")])  # under a null object
    space.change(Person, 1, [Change.set("address.street", "Rue B"), Change.unset("address"),
                             Change.set("address.city", "Rome")])
    space.partial_update(Person(1, age=31))  # type: ignore[arg-type]
    space.write(SpaceDocument("Doc", {"id": "d", "kafka.topic": "t", "kafka": 5,
                                      "m": {"a": 1, "b": {"c": 2}}}))
    space.change("Doc", "d", [Change.set("kafka.topic", "u"), Change.unset("m.b.c"),
                              Change.set("m.b.d", 3), Change.unset("m.a")])
    space.change("Doc", "d", [Change.unset("m"), Change.set("m.x.y", 1)])
    ops = _logged(space)
    person = [op for op in ops if op.type_name == "test.Person"]
    doc = [op for op in ops if op.type_name == "Doc"]
    assert _folded(person, descriptor_of(Person).declared_paths()) == \
        _stored(space, "test.Person", 1)
    assert _folded(doc, frozenset({"id"})) == _stored(space, "Doc", "d")
    space.close()
    reopened = open_space(snapshot_on_close=False)
    assert _stored(reopened, "test.Person", 1) == {
        "id": 1, "name": "Ann", "age": 31, "address": {"city": "Rome"}, "tags": []}
    assert reopened.read(Person, 1) == Person(1, "Ann", 31, Address("Rome"))
