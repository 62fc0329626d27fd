"""The SQL store on SQLite: the fold's semantics, version guard, tombstones, names,
rollback; the same checks run on PostgreSQL in tests/integration/test_sql_store.py."""

from __future__ import annotations

import datetime as dt
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gridstream.errors import CodecError, ConfigError, StoreError
from gridstream.fold import OpRow
from gridstream.model import SpaceDocument, to_entry
from gridstream.operations import OpType, PropertySpec, TypeDescriptor
from gridstream.protocol import Envelope
from gridstream.protocol.values import restore
from gridstream.space import Space
from gridstream.space._change import Change
from gridstream.stores.sql import SqlStore, SqlStoreConfig
from tests.unit.space.models import Address, Person

ITEM = TypeDescriptor(name="shop.Item", id_property="id",
                      fixed=(PropertySpec("id", "str"), PropertySpec("qty", "int"),
                             PropertySpec("price", "decimal"), PropertySpec("at", "datetime"),
                             PropertySpec("tags", "set")))


def _env(op: OpType, version: int, data: dict[str, Any] | None, entity: str = "a",
         removed: tuple[str, ...] = (), type_name: str = "shop.Item") -> Envelope:
    return Envelope(op=op, type=type_name, id=entity, version=version, ts=version,
                    partition=0, data=data, removed=removed)


def _store(path: Path | None = None) -> SqlStore:
    url = f"sqlite:///{path}" if path is not None else "sqlite:///:memory:"
    return SqlStore(url, types={ITEM.name: ITEM})


def _data(store: SqlStore, entity: str = "a", type_name: str = "shop.Item") -> Any:
    row = store.get(type_name, entity)
    assert row is not None
    return row.data


def test_write_partial_change_update_remove() -> None:
    store = _store()
    at = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    store.apply([_env(OpType.WRITE, 1, {"id": "a", "qty": 1, "price": Decimal("2.50"),
                                        "at": at, "tags": {"y", "x"}})])
    assert _data(store) == {"id": "a", "qty": 1, "price": "2.50", "at": at.isoformat(),
                            "tags": ["x", "y"]}
    store.apply([_env(OpType.PARTIAL_UPDATE, 2, {"qty": 5, "price": None})])
    assert _data(store)["qty"] == 5 and _data(store)["price"] == "2.50"
    store.apply([_env(OpType.CHANGE, 3, {"color": "red"}, removed=("price", "tags"))])
    assert _data(store) == {"id": "a", "qty": 5, "price": None, "at": at.isoformat(),
                            "tags": None, "color": "red"}  # declared: null, not gone
    store.apply([_env(OpType.UPDATE, 4, {"id": "a", "qty": 9})])
    assert _data(store) == {"id": "a", "qty": 9}
    assert store.apply([_env(OpType.REMOVE, 5, None)]).applied == 1
    assert store.get("shop.Item", "a") is None
    tomb = store.get("shop.Item", "a", include_deleted=True)
    assert tomb is not None and (tomb.version, tomb.deleted, tomb.op, tomb.data) == \
        (5, True, "REMOVE", None)
    assert [r.id for r in store.read("shop.Item", include_deleted=True)] == ["a"]
    assert list(store.read("shop.Item")) == []


def test_a_late_replay_cannot_resurrect_a_deleted_row_until_purged() -> None:
    store = _store()
    store.apply([_env(OpType.WRITE, 1, {"qty": 1}), _env(OpType.TAKE, 2, None)])
    result = store.apply([_env(OpType.WRITE, 1, {"qty": 1})])
    assert (result.applied, result.stale) == (0, 1)
    assert store.get("shop.Item", "a") is None
    assert store.purge_tombstones("shop.Item", 2) == 0  # version 2 is not below 2
    assert store.purge_tombstones("shop.Item", 3) == 1
    assert store.get("shop.Item", "a", include_deleted=True) is None
    assert store.purge_tombstones("never.Seen", 3) == 0


def test_unknown_type_keeps_json_values() -> None:
    store = SqlStore("sqlite:///:memory:")
    store.apply([Envelope(op=OpType.WRITE, type="Doc", id=7, version=1, ts=1, partition=0,
                          data={"n": 1, "f": 1.5, "ok": True, "nested": {"a": [1]}})])
    row = store.get("Doc", 7)
    assert row is not None and row.id == "7"
    assert row.data == {"n": 1, "f": 1.5, "ok": True, "nested": {"a": [1]}}


def test_a_value_changing_type_round_trips_exactly() -> None:
    store = _store()
    for version, value in enumerate([3, 3.5, 2**63 - 1, "text", {"x": [1.25]}], start=1):
        store.apply([_env(OpType.PARTIAL_UPDATE, version, {"qty": value})])
        assert _data(store)["qty"] == value and type(_data(store)["qty"]) is type(value)


def _grid_ops(space: Space) -> list[Envelope]:
    reader = space.log_reader()
    try:
        return [Envelope.from_operation(op) for bulk in reader.read(1, 1000)
                for op in bulk.operations]
    finally:
        reader.close()


@pytest.mark.parametrize("batched", [True, False])
def test_nested_changes_match_the_grid(tmp_path: Path, batched: bool) -> None:
    space = Space.embedded("sql", data_dir=tmp_path / "space", fsync="never")
    try:
        space.write(Person(1, "Ann", 30, Address("Paris", "Rue A"), {"x"}))
        space.change(Person, 1, [Change.set("address.city", "Lyon")])
        space.change(Person, 1, [Change.unset("address.street"), Change.increment("age")])
        space.write(SpaceDocument("Doc", {"id": "d", "a": {"b": 1, "c": {"x": 1, "y": 2}}}))
        space.change("Doc", "d", [Change.set("a.c.x", 5), Change.unset("a.c.y"),
                                  Change.set("z.q", [1, 2])])
        space.change("Doc", "d", [Change.unset("a.b"), Change.set("a.c.w", {"k": None})])
        ops, types = _grid_ops(space), space.types()
        store = SqlStore("sqlite:///:memory:", types=types)
        for batch in [ops] if batched else [[op] for op in ops]:
            store.apply(batch)
        person = types["test.Person"]
        stored = _data(store, "1", "test.Person")
        assert stored["address"] == {"city": "Lyon", "street": None}  # declared: unset is null
        assert to_entry(person, restore(stored, person.fixed)) == space.read(Person, 1)
        assert _data(store, "d", "Doc") == space.read("Doc", "d").properties
    finally:
        space.close()


def test_a_failed_batch_leaves_nothing_and_the_next_batch_applies() -> None:
    store = _store()
    with pytest.raises(CodecError):  # the second operation cannot be applied
        store.apply([_env(OpType.WRITE, 1, {"n": 1}, type_name="Doc"),
                     _env(OpType.WRITE, 2, {"extra": object()}, "b", type_name="Doc")])
    store.apply([_env(OpType.WRITE, 3, {"extra": "fine"}, "c", type_name="Doc")])
    assert _data(store, "c", "Doc") == {"extra": "fine"}
    assert store.get("Doc", "a") is None


def test_a_batch_failing_inside_the_transaction_drops_the_caches(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db")
    bad = {"New": {"a": [OpRow("WRITE", 1, 1, '{"n":1}')],
                   "b": [OpRow("CHANGE", 2, 2, "not json")]}}
    with pytest.raises(CodecError):  # raised by the fold, after New's table was created
        store.apply_rows(bad)
    with sqlite3.connect(tmp_path / "s.db") as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert "New" not in tables  # the creation was rolled back with the batch
    assert store.tables() == {}
    store.apply_rows({"New": {"c": [OpRow("WRITE", 3, 3, '{"n":3}')]}})
    assert _data(store, "c", "New") == {"n": 3}
    assert store.tables() == {"New": "New"}


def test_a_database_error_is_a_store_error_and_the_store_recovers(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = _store(path)
    store.apply([_env(OpType.WRITE, 1, {"qty": 1})])
    with sqlite3.connect(path) as conn:
        conn.execute('DROP TABLE "shop_Item"')  # behind the store's back
    with pytest.raises(StoreError, match="no such table"):
        store.apply([_env(OpType.WRITE, 2, {"qty": 2})])
    store.apply([_env(OpType.WRITE, 3, {"qty": 3})])  # the table is created again
    assert _data(store)["qty"] == 3


def test_distinct_type_names_get_distinct_tables_across_restarts(tmp_path: Path) -> None:
    names = ["shop.Order", "shop_order", "Shop.ORDER"]
    first = _store(tmp_path / "s.db")
    for i, name in enumerate(names):
        first.apply([_env(OpType.WRITE, i + 1, {"type": name}, type_name=name)])
    tables = first.tables()
    assert len({t.casefold() for t in tables.values()}) == 3
    first.close()
    again = _store(tmp_path / "s.db")
    for name in reversed(names):  # a different order of first sight changes nothing
        assert again.table_name(name) == tables[name]
        assert _data(again, type_name=name) == {"type": name}
    again.apply([_env(OpType.WRITE, 10, {"type": "x"}, type_name="shop_ORDER")])
    assert len(set(again.tables().values())) == 4


def test_stores_with_other_table_prefixes_never_share_a_table(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    first = SqlStore(SqlStoreConfig(url=url, table_prefix="a_"))
    first.apply([_env(OpType.WRITE, 5, {"by": "a"})])
    second = SqlStore(SqlStoreConfig(url=url, table_prefix="b_"))
    assert second.apply([_env(OpType.WRITE, 3, {"by": "b"})]).applied == 1
    assert second.table_name("shop.Item") == "b_shop_Item"
    assert (_data(first), _data(second)) == ({"by": "a"}, {"by": "b"})
    # a prefix and a type that spell another store's table ("a_" + "b.x", "a_b_" + "x")
    first.apply([_env(OpType.WRITE, 1, {"by": "a"}, type_name="b.x")])
    third = SqlStore(SqlStoreConfig(url=url, table_prefix="a_b_"))
    third.apply([_env(OpType.WRITE, 1, {"by": "a_b"}, type_name="x")])
    assert third.table_name("x") != first.table_name("b.x")
    assert (_data(first, type_name="b.x"), _data(third, type_name="x")) == \
        ({"by": "a"}, {"by": "a_b"})
    plain = SqlStore(url)
    assert plain.tables() == {} and plain.get("shop.Item", "a") is None
    assert first.tables() == {"shop.Item": "a_shop_Item", "b.x": "a_b_x"}
    again = SqlStore(SqlStoreConfig(url=url, table_prefix="b_"))  # across restarts
    assert again.tables() == {"shop.Item": "b_shop_Item"} and _data(again) == {"by": "b"}


def test_a_table_of_another_layout_is_refused(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute('CREATE TABLE "shop_Item" (_id TEXT PRIMARY KEY, _version BIGINT)')
    with pytest.raises(StoreError, match="not the store's layout"):
        _store(tmp_path / "s.db").apply([_env(OpType.WRITE, 1, {"qty": 1})])


def test_create_tables_off_needs_the_table() -> None:
    store = SqlStore(SqlStoreConfig(url="sqlite:///:memory:", create_tables=False))
    with pytest.raises(StoreError, match="create_tables is off"):
        store.apply([_env(OpType.WRITE, 1, {"qty": 1})])


def test_errors_name_no_password() -> None:
    store = SqlStore("postgresql://app:s3cret@127.0.0.1:1/db")
    with pytest.raises(StoreError) as failed:
        store.apply([_env(OpType.WRITE, 1, {"qty": 1})])
    assert "s3cret" not in str(failed.value) and "s3cret" not in store.describe()
    assert "s3cret" not in repr(store._url)


@pytest.mark.parametrize("url", ["postgresql://app:s3cret@127.0.0.1:port/db",
                                 "postgresql://app:s3cret@[::1/db"])
def test_a_malformed_url_is_a_config_error_without_the_password(url: str) -> None:
    with pytest.raises(ConfigError, match="malformed SQL URL") as failed:
        SqlStore(url)
    assert "s3cret" not in str(failed.value)


ops = st.lists(st.tuples(st.sampled_from([OpType.WRITE, OpType.UPDATE, OpType.PARTIAL_UPDATE,
                                          OpType.CHANGE, OpType.REMOVE]),
                         st.sampled_from(["a", "b"]), st.integers(0, 100)), max_size=25)


@settings(max_examples=60, deadline=None)
@given(ops, st.randoms())
def test_replays_in_any_order_converge_to_the_in_order_state(
        history: list[tuple[OpType, str, int]], rnd: Any) -> None:
    envelopes = [_env(op, v + 1, None if op.is_delete else
                      ({"m.n": q} if op is OpType.CHANGE else {"qty": q}), entity)
                 for v, (op, entity, q) in enumerate(history)]
    in_order, replayed = _store(), _store()
    for envelope in envelopes:
        in_order.apply([envelope])
    shuffled = envelopes + rnd.sample(envelopes, len(envelopes))
    replayed.apply(shuffled)
    replayed.apply(rnd.sample(envelopes, len(envelopes)))
    for entity in ("a", "b"):
        assert in_order.get("shop.Item", entity, include_deleted=True) == \
            replayed.get("shop.Item", entity, include_deleted=True)


def test_the_stored_data_is_wire_json_text(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db")
    store.apply([_env(OpType.WRITE, 1, {"qty": 1, "at": dt.date(2024, 1, 2)})])
    with sqlite3.connect(tmp_path / "s.db") as conn:
        (text,) = conn.execute('SELECT data FROM "shop_Item"').fetchone()
    assert orjson.loads(text) == {"qty": 1, "at": "2024-01-02"}


def test_the_stores_options_are_checked_without_showing_the_url() -> None:
    with pytest.raises(ValidationError, match="U\\+001F"):
        SqlStoreConfig.model_validate({"url": "sqlite:///:memory:", "table_prefix": "a\x1fb"})
    with pytest.raises(ConfigError, match="sqlite:/// or postgresql://") as failed:
        SqlStore("mysql://app:s3cret@127.0.0.1/db")
    assert "s3cret" not in str(failed.value)
    store = SqlStore(SqlStoreConfig.model_validate({"url": "sqlite:///:memory:",
                                                    "table_prefix": "p_"}))
    assert (store.table_prefix, store.create_tables) == ("p_", True)
