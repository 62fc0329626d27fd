"""Declared properties accept values of their kind only (plus the lossless int coercions)."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridstream.errors import InvalidEntryError
from gridstream.kinds import check_data, check_path_value, kind_accepts
from gridstream.operations import PropertySpec, TypeDescriptor

_EXACT_INTS = st.integers(-(2**53), 2**53)
_ACCEPTED: dict[str, st.SearchStrategy[Any]] = {
    "str": st.text(max_size=5),
    "int": st.integers(),
    "float": st.one_of(st.floats(allow_nan=False), _EXACT_INTS),
    "bool": st.booleans(),
    "bytes": st.binary(max_size=5),
    "datetime": st.datetimes(),
    "date": st.dates(),
    "decimal": st.one_of(st.decimals(allow_nan=False), st.integers()),
    "uuid": st.uuids(),
    "list": st.one_of(st.lists(st.integers(), max_size=3),
                      st.lists(st.integers(), max_size=3).map(tuple)),
    "set": st.one_of(st.sets(st.integers(), max_size=3), st.frozensets(st.integers(), max_size=3)),
    "dict": st.dictionaries(st.text(max_size=3), st.integers(), max_size=3),
    "object": st.dictionaries(st.text(max_size=3), st.integers(), max_size=3),
}
_ANY_VALUE = st.one_of(
    st.text(max_size=3), st.integers(), st.floats(allow_nan=False), st.booleans(),
    st.binary(max_size=3), st.datetimes(), st.dates(), st.decimals(allow_nan=False),
    st.uuids(), st.lists(st.integers(), max_size=2), st.sets(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
_KINDS = sorted(_ACCEPTED)


def _is_kind(kind: str, value: Any) -> bool:
    """The rule written out independently, for the property tests."""
    if kind == "float":
        return type(value) is float or (type(value) is int and -(2**53) <= value <= 2**53)
    if kind == "decimal":
        return type(value) in (Decimal, int)
    if kind == "date":
        return type(value) is dt.date
    types = {"str": (str,), "int": (int,), "bool": (bool,), "bytes": (bytes,),
             "datetime": (dt.datetime,), "uuid": (uuid.UUID,), "list": (list, tuple),
             "set": (set, frozenset), "dict": (dict,), "object": (dict,)}[kind]
    return type(value) in types


@given(st.sampled_from(_KINDS).flatmap(lambda k: st.tuples(st.just(k), _ACCEPTED[k])))
def test_each_kind_accepts_its_values_and_null(case: tuple[str, Any]) -> None:
    kind, value = case
    assert kind_accepts(kind, value)
    assert kind_accepts(kind, None)


@given(st.sampled_from(_KINDS), _ANY_VALUE)
def test_each_kind_rejects_values_of_other_kinds(kind: str, value: Any) -> None:
    assert kind_accepts(kind, value) == _is_kind(kind, value)


@given(_ANY_VALUE)
def test_any_accepts_everything(value: Any) -> None:
    assert kind_accepts("any", value)


def test_lossy_or_confusable_values_are_rejected() -> None:
    assert not kind_accepts("float", 2**53 + 1)
    assert not kind_accepts("float", True)
    assert not kind_accepts("int", True)
    assert not kind_accepts("int", 1.0)
    assert not kind_accepts("decimal", 0.1)
    assert not kind_accepts("date", dt.datetime(2024, 1, 1))
    assert not kind_accepts("set", [1, 1])


PERSON = TypeDescriptor("t.Person", "id", fixed=(
    PropertySpec("id", "int"),
    PropertySpec("tags", "set"),
    PropertySpec("meta", "dict"),
    PropertySpec("address", "object", (
        PropertySpec("city", "str"), PropertySpec("geo", "object", (PropertySpec("lat", "float"),)),
    )),
), dynamic_properties=False)


def test_nested_declared_properties_are_checked_at_any_depth() -> None:
    check_data(PERSON, {"id": 1, "address": {"city": "x", "geo": {"lat": 1}, "more": [1]}})
    with pytest.raises(InvalidEntryError,
                       match=r"t\.Person: property 'address\.geo\.lat' is declared float; "
                             r"a value of type str"):
        check_data(PERSON, {"id": 1, "address": {"geo": {"lat": "north"}}})
    with pytest.raises(InvalidEntryError, match="'tags' is declared set; a value of type int"):
        check_data(PERSON, {"id": 1, "tags": 5})


def test_a_change_path_is_checked_against_the_spec_it_reaches() -> None:
    check_path_value(PERSON, "address.geo.lat", 2.5, top_level=False)
    check_path_value(PERSON, "meta.any.thing", object(), top_level=False)
    with pytest.raises(InvalidEntryError, match="'address.city' is declared str; a value of"):
        check_path_value(PERSON, "address.city", 5, top_level=False)
    with pytest.raises(InvalidEntryError, match="'address' is declared object; a value of"):
        check_path_value(PERSON, "address", [1], top_level=False)
    with pytest.raises(InvalidEntryError, match="'tags' is declared set; 'tags.x' cannot"):
        check_path_value(PERSON, "tags.x", 1, top_level=False)
