"""The SQL store on SQLite and on a real PostgreSQL: values keep their JSON type, nested
changes follow the grid, a failed batch leaves nothing behind, distinct types keep
distinct tables across restarts, tombstones are purged on request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gridstream.errors import CodecError
from gridstream.fold import OpRow
from gridstream.model import SpaceDocument, to_entry
from gridstream.operations import OpType
from gridstream.protocol import Envelope
from gridstream.protocol.values import restore
from gridstream.space import Space
from gridstream.space._change import Change
from gridstream.stores.sql import SqlStore
from tests.unit.space.models import Address, Person


def _env(op: OpType, version: int, data: dict[str, Any] | None, entity: str = "a",
         removed: tuple[str, ...] = (), type_name: str = "T") -> Envelope:
    return Envelope(op=op, type=type_name, id=entity, version=version, ts=version,
                    partition=0, data=data, removed=removed)


def test_a_property_changing_type_round_trips_exactly(sql_url: str) -> None:
    values = [3, 3.5, 2**63 - 1, "text", -(2**63), 0.1, True, None, {"x": [1, 2.5]}]
    with SqlStore(sql_url) as store:
        for version, value in enumerate(values, start=1):
            store.apply([_env(OpType.PARTIAL_UPDATE if version % 2 else OpType.WRITE,
                              version, {"n": value, "k": version})])
            row = store.get("T", "a")
            assert row is not None and row.data is not None
            if value is not None:  # a partial update skips nulls: the WRITE carries it
                assert row.data["n"] == value and type(row.data["n"]) is type(value)


def test_nested_changes_match_the_grid(sql_url: str, tmp_path: Path) -> None:
    space = Space.embedded("sql", data_dir=tmp_path / "space", fsync="never")
    try:
        space.write(Person(1, "Ann", 30, Address("Paris", "Rue A"), {"x"}))
        space.change(Person, 1, [Change.set("address.city", "Lyon")])
        space.change(Person, 1, [Change.unset("address.street"), Change.unset("tags")])
        space.write(SpaceDocument("Doc", {"id": "d", "a": {"b": 1, "c": {"x": 1, "y": 2}}}))
        space.change("Doc", "d", [Change.set("a.c.x", 5), Change.unset("a.c.y")])
        reader = space.log_reader()
        ops = [Envelope.from_operation(op) for bulk in reader.read(1, 100)
               for op in bulk.operations]
        reader.close()
        types = space.types()
        with SqlStore(sql_url, types=types) as store:
            for op in ops:
                store.apply([op])
            person, doc = store.get("test.Person", 1), store.get("Doc", "d")
        assert person is not None and person.data is not None and doc is not None
        descriptor = types["test.Person"]
        assert person.data["address"] == {"city": "Lyon", "street": None}  # declared: null
        assert person.data["tags"] is None
        assert to_entry(descriptor, restore(person.data, descriptor.fixed)) == \
            space.read(Person, 1)
        assert doc.data == space.read("Doc", "d").properties
    finally:
        space.close()


def test_a_failed_batch_leaves_nothing_and_the_next_applies(sql_url: str) -> None:
    with SqlStore(sql_url) as store:
        with pytest.raises(CodecError):  # the fold fails after New's table was created
            store.apply_rows({"New": {"a": [OpRow("WRITE", 1, 1, '{"n": 1}')],
                                      "b": [OpRow("CHANGE", 2, 2, "not json")]}})
        assert store.tables() == {} and list(store.read("New", include_deleted=True)) == []
        store.apply_rows({"New": {"c": [OpRow("WRITE", 3, 3, '{"n": 3}')]}})
        row = store.get("New", "c")
        assert row is not None and row.data == {"n": 3}


def test_distinct_type_names_keep_distinct_tables_across_restarts(sql_url: str) -> None:
    names = ["shop.Order", "shop_order", "Shop.ORDER"]
    with SqlStore(sql_url) as store:
        for version, name in enumerate(names, start=1):
            store.apply([_env(OpType.WRITE, version, {"type": name}, type_name=name)])
        tables = store.tables()
    assert len({t.casefold() for t in tables.values()}) == 3
    with SqlStore(sql_url) as again:
        for name in reversed(names):
            row = again.get(name, "a")
            assert again.table_name(name) == tables[name]
            assert row is not None and row.data == {"type": name}


def test_tombstones_guard_and_purge(sql_url: str) -> None:
    with SqlStore(sql_url) as store:
        store.apply([_env(OpType.WRITE, 1, {"n": 1}), _env(OpType.REMOVE, 2, None),
                     _env(OpType.WRITE, 3, {"n": 3}, "b")])
        assert store.apply([_env(OpType.WRITE, 1, {"n": 1})]).stale == 1
        assert store.get("T", "a") is None
        assert [r.id for r in store.read("T")] == ["b"]
        assert store.purge_tombstones("T", 3) == 1
        assert [r.id for r in store.read("T", include_deleted=True)] == ["b"]


@pytest.mark.parametrize("sql_url", ["postgres"], indirect=True)
def test_two_writers_starting_at_once_on_postgresql_both_apply(sql_url: str) -> None:
    """The first writer creates gs_tables and, before it commits, the second looks for it:
    the second must wait for the first rather than fail creating it too."""
    import threading

    import sqlalchemy as sa

    first, second = SqlStore(sql_url), SqlStore(sql_url)
    with second._engine.connect():  # the dialect's own first queries, out of the way
        pass
    created, looked = threading.Event(), threading.Event()

    @sa.event.listens_for(first._engine, "after_cursor_execute")
    def _hold(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().startswith("CREATE TABLE gs_tables"):
            created.set()
            looked.wait(3)  # the second writer's look (or its wait, with the fix)

    @sa.event.listens_for(second._engine, "after_cursor_execute")
    def _look(*_: Any) -> None:
        looked.set()

    failures: list[BaseException] = []

    def apply(store: SqlStore, type_name: str) -> None:
        try:
            store.apply([_env(OpType.WRITE, 1, {"by": type_name}, type_name=type_name)])
        except BaseException as exc:  # reported below
            failures.append(exc)

    one = threading.Thread(target=apply, args=(first, "A"))
    one.start()
    assert created.wait(30)
    apply(second, "B")
    one.join(30)
    assert failures == []
    with SqlStore(sql_url) as store:
        assert store.tables() == {"A": "A", "B": "B"}
        assert [store.get(t, "a").data for t in "AB"] == [{"by": "A"}, {"by": "B"}]  # type: ignore[union-attr]
    first.close()
    second.close()
