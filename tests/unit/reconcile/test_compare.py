"""The comparison: counts, the first difference with its path and both values, the hash."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson

from gridstream.fold import OpRow
from gridstream.operations import PropertySpec, TypeDescriptor
from gridstream.reconcile import CASSANDRA, Entity, Holding, compare, state_hash
from gridstream.reconcile.readers import fold_operations

CUSTOMER = TypeDescriptor(
    "demo.Customer", "id",
    fixed=(PropertySpec("id", "str"), PropertySpec("balance", "decimal"),
           PropertySpec("tags", "set"),
           PropertySpec("address", "object", (PropertySpec("street", "str"),
                                               PropertySpec("city", "str")))),
)
TYPES = {CUSTOMER.name: CUSTOMER}


def customer(cid: str, city: str = "Oslo", **extra: Any) -> dict[str, Any]:
    return {"id": cid, "balance": Decimal("10.50"), "tags": {"a", "b", "c"},
            "address": {"street": "1 Main St", "city": city}, **extra}


def holding(place: str, entities: dict[str, dict[str, Any]], version: int = 1,
            **options: Any) -> Holding:
    return Holding(place, {(CUSTOMER.name, k): Entity(version, v) for k, v in entities.items()},
                   TYPES, **options)


def test_the_same_data_matches_with_the_same_hash() -> None:
    grid = holding("grid", {"c-1": customer("c-1"), "c-2": customer("c-2")})
    place = holding("sql", {"c-2": customer("c-2"), "c-1": customer("c-1")})
    result = compare(grid, place)
    assert result.matches and result.first is None
    assert (result.missing, result.extra, result.different) == (0, 0, 0)
    assert result.state_hash == state_hash(grid.state())


def test_one_value_differing_at_a_nested_path() -> None:
    grid = holding("grid", {"c-1": customer("c-1"), "c-2": customer("c-2")})
    place = holding("sql", {"c-1": customer("c-1"), "c-2": customer("c-2", city="Lyon")})
    result = compare(grid, place)
    assert not result.matches
    assert (result.missing, result.extra, result.different) == (0, 0, 1)
    assert result.first is not None
    assert (result.first.type_name, result.first.id, result.first.path) == \
        (CUSTOMER.name, "c-2", "address.city")
    assert (result.first.grid, result.first.place) == ('"Oslo"', '"Lyon"')
    assert result.first.line() == 'demo.Customer c-2 address.city: grid "Oslo", place "Lyon"'
    assert result.state_hash != state_hash(grid.state())  # same ids and versions


def test_a_set_in_another_order_is_equal() -> None:
    grid = holding("grid", {"c-1": customer("c-1")})
    place = holding("lake", {"c-1": {**customer("c-1"), "tags": ["c", "a", "b"]}})
    assert compare(grid, place).matches


def test_a_decimal_and_a_float_differ() -> None:
    grid = holding("grid", {"c-1": customer("c-1")})
    place = holding("lake", {"c-1": {**customer("c-1"), "balance": 10.5}})
    result = compare(grid, place)
    assert result.different == 1 and result.first is not None
    assert (result.first.path, result.first.grid, result.first.place) == \
        ("balance", "decimal(10.5)", "10.5")


def test_missing_and_extra_entities() -> None:
    grid = holding("grid", {"c-1": customer("c-1"), "c-2": customer("c-2"),
                            "c-3": customer("c-3")})
    place = holding("kafka", {"c-2": customer("c-2"), "c-3": customer("c-3", city="Rome"),
                              "c-4": customer("c-4"), "c-5": customer("c-5")})
    result = compare(grid, place)
    assert (result.missing, result.extra, result.different) == (1, 2, 1)
    assert result.first is not None
    assert (result.first.id, result.first.path, result.first.grid, result.first.place) == \
        ("c-1", "", "present (version 1)", "absent")
    assert result.summary() == "1 missing, 2 extra, 1 different"


def test_a_top_level_name_with_a_dot_is_not_the_nested_path() -> None:
    grid = holding("grid", {"c-1": customer("c-1")})
    place = holding("sql", {"c-1": customer("c-1", **{"address.city": "Lyon"})})
    result = compare(grid, place)
    assert result.first is not None
    assert (result.first.path, result.first.grid, result.first.place) == \
        ('["address.city"]', "absent", '"Lyon"')
    nested = {"c-1": {**customer("c-1"), "attrs": {"a.b": {"c": 1}}}}
    other = {"c-1": {**customer("c-1"), "attrs": {"a.b": {"c": 2}}}}
    found = compare(holding("grid", nested), holding("sql", other)).first
    assert found is not None and found.path == 'attrs["a.b"].c'


def test_a_version_difference_alone_is_a_difference() -> None:
    grid = holding("grid", {"c-1": customer("c-1")})
    result = compare(grid, holding("sql", {"c-1": customer("c-1")}, version=2))
    assert result.different == 1 and result.first is not None
    assert (result.first.path, result.first.grid, result.first.place) == ("(version)", "1", "2")


def test_a_property_only_one_side_has() -> None:
    grid = holding("grid", {"c-1": customer("c-1", nick="x")})
    result = compare(grid, holding("sql", {"c-1": customer("c-1")}))
    assert result.first is not None
    assert (result.first.path, result.first.grid, result.first.place) == \
        ("nick", '"x"', "absent")


def test_a_null_equals_an_absent_property_only_for_places_that_cannot_tell() -> None:
    grid = holding("grid", {"c-1": customer("c-1", nick=None)})
    stored = {"c-1": customer("c-1")}
    assert not compare(grid, holding("lake", stored)).matches
    assert compare(grid, holding("cassandra", stored, rules=CASSANDRA)).matches
    changed = {"c-1": customer("c-1", city="Lima")}
    assert not compare(grid, holding("cassandra", changed, rules=CASSANDRA)).matches


def test_notes_make_a_place_not_match() -> None:
    grid = holding("grid", {"c-1": customer("c-1")})
    place = holding("kafka", {"c-1": customer("c-1")}, notes=["1 operations out of order"])
    assert not compare(grid, place).matches


def test_the_kafka_fold_applies_nested_changes_and_deletes() -> None:
    def row(op: str, version: int, data: dict[str, Any] | None,
            removed: tuple[str, ...] = ()) -> OpRow:
        text = None if data is None else orjson.dumps(data).decode()
        return OpRow(op, version, version, text, removed)

    ops = {
        (CUSTOMER.name, "c-1"): [
            row("WRITE", 1, {"id": "c-1", "balance": "1.5", "tags": ["a"],
                             "address": {"street": "s", "city": "Oslo"}, "nick": "n"}),
            row("CHANGE", 4, {"address.city": "Lima"}, removed=("nick",)),
            row("PARTIAL_UPDATE", 5, {"balance": "2.5", "tags": None}),
        ],
        (CUSTOMER.name, "c-2"): [row("WRITE", 2, {"id": "c-2"}), row("REMOVE", 3, None)],
    }
    entities = fold_operations(ops, TYPES)
    assert list(entities) == [(CUSTOMER.name, "c-1")]
    assert entities[(CUSTOMER.name, "c-1")] == Entity(5, {
        "id": "c-1", "balance": Decimal("2.5"), "tags": {"a"},
        "address": {"street": "s", "city": "Lima"}})
