"""The shared type → table allocator: injective, stable across reloads, seed name kept."""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridstream.errors import StoreError
from gridstream.stores.cassandra.naming import MAX_NAME_LENGTH, DefaultTableNameConverter
from gridstream.stores.naming import (
    HASH_CHARS,
    TableNames,
    TableNameTakenError,
    TableRegistry,
    allocate,
)
from tests.unit.stores.memory_registry import MemoryRegistry

seed = DefaultTableNameConverter().to_table_name


def sql_seed(type_name: str) -> str:
    """The SQL consumer's rule: lower case, any non-identifier character to ``_``."""
    cleaned = "".join(c if c.isalnum() else "_" for c in type_name.lower())
    return ("gs_" + cleaned)[:63]


def variants(base: str) -> list[str]:
    """Names the seed's rule (and case folding) merge with ``base``."""
    return [base, base.replace(".", "_"), base.replace(".", "$"), base.upper(), base.lower(),
            base.swapcase(), base.replace(".", "_").upper()]


segments = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,20}", fullmatch=True)
java_names = st.lists(segments, min_size=1, max_size=4).map(".".join)
name_sets = st.lists(java_names, min_size=1, max_size=6).map(
    lambda bases: sorted({v for b in bases for v in variants(b)})
)
long_names = st.lists(segments, min_size=3, max_size=6).map(".".join)


def test_the_three_colliding_names_get_three_tables() -> None:
    names = TableNames(MemoryRegistry(), seed, max_length=MAX_NAME_LENGTH)
    tables = [names.table_for(n) for n in ("shop.Order", "shop_Order", "shop$Order")]
    assert tables[0] == "shop_Order"
    assert len(set(tables)) == 3
    assert all(t.startswith("shop_Order_") and len(t) == len("shop_Order") + 1 + HASH_CHARS
               for t in tables[1:])


def test_case_insensitive_store_keeps_case_variants_apart() -> None:
    names = TableNames(MemoryRegistry(case_sensitive=False), sql_seed, max_length=63,
                       case_sensitive=False)
    tables = [names.table_for(n) for n in ("shop.Order", "shop_order", "Shop.ORDER")]
    assert tables[0] == "gs_shop_order"
    assert len({t.casefold() for t in tables}) == 3


def test_reserved_names_are_never_given() -> None:
    table = allocate("gs.tables", seed, {}, max_length=48, reserved=("gs_tables",))
    assert table != "gs_tables" and table.startswith("gs_tables_")


def test_recorded_table_wins_over_the_seed() -> None:
    assert allocate("a.B", seed, {"a.B": "custom"}, max_length=48) == "custom"


def test_a_converter_name_too_long_is_an_error() -> None:
    with pytest.raises(StoreError, match="not a name of 1 to 10 bytes"):
        allocate("abcdefghijkl", lambda n: n, {}, max_length=10)


def test_a_limit_without_room_for_the_suffix_is_an_error() -> None:
    with pytest.raises(StoreError, match="no room"):
        allocate("a", lambda n: n, {}, max_length=HASH_CHARS + 1)


def test_suffix_respects_a_byte_limit() -> None:
    taken = {"other": "é" * 10}
    table = allocate("x", lambda n: "é" * 10, taken, max_length=20)
    assert len(table.encode()) <= 20 and table != "é" * 10


@settings(max_examples=200, deadline=None)
@given(name_sets, st.booleans(), st.randoms(use_true_random=False))
def test_injective_stable_and_seed_kept(names: list[str], case_sensitive: bool,
                                        rnd: random.Random) -> None:
    order = list(names)
    rnd.shuffle(order)
    registry = MemoryRegistry(case_sensitive=case_sensitive)
    convert = seed if case_sensitive else sql_seed
    limit = MAX_NAME_LENGTH if case_sensitive else 63
    fold = (lambda t: t) if case_sensitive else str.casefold
    first = TableNames(registry, convert, max_length=limit, case_sensitive=case_sensitive)
    tables = {n: first.table_for(n) for n in order}
    # injective, as the store compares names, and within the limit
    assert len({fold(t) for t in tables.values()}) == len(tables)
    assert all(len(t.encode()) <= limit for t in tables.values())
    # the seed name is kept by the first type that wants it; unique seeds are all kept
    seen: set[str] = set()
    for n in order:
        wanted = fold(convert(n))
        if wanted not in seen:
            assert tables[n] == convert(n)
        seen.add(fold(tables[n]))
    # a new process (new objects, same store) maps every type the same way
    again = TableNames(registry, convert, max_length=limit, case_sensitive=case_sensitive)
    assert {n: again.lookup(n) for n in reversed(order)} == tables
    assert {n: again.table_for(n) for n in order} == tables


@settings(max_examples=100, deadline=None)
@given(st.lists(long_names, min_size=2, max_size=8, unique=True))
def test_long_names_stay_distinct_and_valid(names: list[str]) -> None:
    registry = MemoryRegistry()
    names_ = TableNames(registry, seed, max_length=MAX_NAME_LENGTH)
    tables = [names_.table_for(n) for n in names]
    assert len(set(tables)) == len(tables)
    assert all(1 <= len(t) <= MAX_NAME_LENGTH for t in tables)


def test_a_claim_lost_to_another_writer_allocates_again() -> None:
    registry = MemoryRegistry()
    mine = TableNames(registry, seed, max_length=48)
    mine.recorded()  # loaded before the other writer records
    TableNames(registry, seed, max_length=48).table_for("shop_Order")
    table = mine.table_for("shop.Order")
    assert table != "shop_Order" and registry.rows == {
        "shop_Order": "shop_Order", "shop.Order": table,
    }


def test_a_lagging_reload_still_moves_on() -> None:
    class Lagging(MemoryRegistry):
        def load(self) -> Mapping[str, str]:
            return {}  # never sees what others recorded (a stale replica)

    registry = Lagging()
    registry.rows["shop_Order"] = "shop_Order"
    table = TableNames(registry, seed, max_length=48).table_for("shop.Order")
    assert table.startswith("shop_Order_") and registry.rows["shop.Order"] == table


def test_two_writers_of_one_type_agree() -> None:
    registry = MemoryRegistry()
    a = TableNames(registry, seed, max_length=48)
    b = TableNames(registry, seed, max_length=48)
    a.recorded()
    b.recorded()
    assert a.table_for("shop.Order") == b.table_for("shop.Order") == "shop_Order"


def test_lookup_records_nothing() -> None:
    registry = MemoryRegistry()
    registry.rows["shop_Order"] = "shop_Order"
    table = TableNames(registry, seed, max_length=48).lookup("shop.Order")
    assert table != "shop_Order" and "shop.Order" not in registry.rows


def test_a_registry_refusing_forever_fails_clearly() -> None:
    class Refusing(MemoryRegistry):
        def record(self, type_name: str, table: str) -> str:
            raise TableNameTakenError("taken", table=table, owner="someone")

    with pytest.raises(StoreError, match="no table could be recorded"):
        TableNames(Refusing(), seed, max_length=48).table_for("a.B")


def test_memory_registry_is_a_registry() -> None:
    assert isinstance(MemoryRegistry(), TableRegistry)
