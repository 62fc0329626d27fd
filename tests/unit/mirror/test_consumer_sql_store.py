"""The SQL store: idempotent by version, tombstones, schema from descriptor or data."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gridstream.consumer_sql import SqlOperationStore, table_name
from gridstream.operations import OpType, PropertySpec, TypeDescriptor
from gridstream.protocol import Envelope

ITEM = TypeDescriptor(name="shop.Item", id_property="id",
                      fixed=(PropertySpec("id", "str"), PropertySpec("qty", "int"),
                             PropertySpec("price", "decimal"), PropertySpec("at", "datetime"),
                             PropertySpec("tags", "set")))


def _env(op: OpType, version: int, data: dict[str, Any] | None, entity: str = "a",
         removed: tuple[str, ...] = ()) -> Envelope:
    return Envelope(op=op, type="shop.Item", id=entity, version=version, ts=version,
                    partition=0, data=data, removed=removed)


def _store() -> SqlOperationStore:
    return SqlOperationStore("sqlite:///:memory:", types={ITEM.name: ITEM})


def test_write_update_partial_change_remove() -> None:
    store = _store()
    at = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    store.apply([_env(OpType.WRITE, 1, {"id": "a", "qty": 1, "price": "2.50", "at": at.isoformat(),
                                        "tags": ["x"]})])
    row = store.get("shop.Item", "a")
    assert row is not None
    assert (row["qty"], row["price"], row["at"], row["tags"]) == (1, "2.50", at.isoformat(),
                                                                  '["x"]')
    store.apply([_env(OpType.PARTIAL_UPDATE, 2, {"qty": 5, "price": None})])
    row = store.get("shop.Item", "a")
    assert row is not None and (row["qty"], row["price"], row["_version"]) == (5, "2.50", 2)
    store.apply([_env(OpType.CHANGE, 3, {"color": "red"}, removed=("price",))])
    row = store.get("shop.Item", "a")
    assert row is not None and (row["color"], row["price"]) == ("red", None)
    store.apply([_env(OpType.UPDATE, 4, {"id": "a", "qty": 9, "price": Decimal("1")})])
    row = store.get("shop.Item", "a")
    assert row is not None and (row["qty"], row["color"], row["price"]) == (9, None, "1")
    store.apply([_env(OpType.REMOVE, 5, None)])
    assert store.get("shop.Item", "a") is None
    tomb = store.get("shop.Item", "a", include_deleted=True)
    assert tomb is not None and tomb["_version"] == 5 and tomb["_deleted"] == 1


def test_a_late_replay_cannot_resurrect_a_deleted_row() -> None:
    store = _store()
    store.apply([_env(OpType.WRITE, 1, {"qty": 1}), _env(OpType.TAKE, 2, {"qty": 1})])
    assert store.apply([_env(OpType.WRITE, 1, {"qty": 1})]) == 0
    assert store.get("shop.Item", "a") is None
    store.apply([_env(OpType.WRITE, 3, {"qty": 3})])
    row = store.get("shop.Item", "a")
    assert row is not None and row["qty"] == 3
    assert store.purge_tombstones("shop.Item", 10) == 0


def test_table_names_are_portable() -> None:
    assert table_name("shop.Item") == "gs_shop_item"
    long = table_name("x" * 100)
    assert len(long) <= 63 and long != table_name("x" * 101)


def test_unknown_type_gets_a_table_from_its_first_data() -> None:
    store = SqlOperationStore("sqlite:///:memory:")
    env = Envelope(op=OpType.WRITE, type="Doc", id=7, version=1, ts=1, partition=0,
                   data={"n": 1, "f": 1.5, "ok": True, "nested": {"a": [1]}})
    store.apply([env])
    row = store.get("Doc", 7)
    assert row is not None and (row["n"], row["f"], row["ok"], row["nested"]) == \
        (1, 1.5, 1, '{"a":[1]}')


ops = st.lists(st.tuples(st.sampled_from([OpType.WRITE, OpType.UPDATE, OpType.PARTIAL_UPDATE,
                                          OpType.REMOVE]),
                         st.sampled_from(["a", "b"]), st.integers(0, 100)), max_size=25)


@settings(max_examples=60, deadline=None)
@given(ops, st.randoms())
def test_replays_in_any_order_converge_to_the_in_order_state(
        history: list[tuple[OpType, str, int]], rnd: Any) -> None:
    envelopes = [_env(op, v + 1, None if op.is_delete else {"qty": q}, entity)
                 for v, (op, entity, q) in enumerate(history)]
    in_order, replayed = _store(), _store()
    in_order.apply(envelopes)
    # redeliver: the same records again, in any order, some several times
    shuffled = envelopes + rnd.sample(envelopes, len(envelopes))
    replayed.apply(envelopes)
    replayed.apply(shuffled)
    for entity in ("a", "b"):
        assert in_order.get("shop.Item", entity, include_deleted=True) == \
            replayed.get("shop.Item", entity, include_deleted=True)
