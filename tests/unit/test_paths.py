"""Property paths and applying a logged operation: the one implementation the space, the
state fold and Cassandra share."""

from __future__ import annotations

from typing import Any

import pytest

from gridstream.errors import InvalidEntryError
from gridstream.paths import apply_logged, set_in, set_path, unset_in, unset_path


def test_a_top_level_name_with_dots_wins_over_the_nested_path() -> None:
    data = {"kafka.topic": "a"}
    set_path(data, "kafka.topic", "b")
    assert data == {"kafka.topic": "b"}
    unset_path(data, "kafka.topic", ())
    assert data == {}


def test_maps_are_created_on_the_way_and_nulls_replaced() -> None:
    data: dict[str, object] = {"a": None}
    set_path(data, "a.b.c", 1)
    assert data == {"a": {"b": {"c": 1}}}


def test_a_scalar_on_the_way_is_an_error() -> None:
    data: dict[str, object] = {"a": 5}
    with pytest.raises(InvalidEntryError, match="'a' is not a map"):
        set_path(data, "a.b", 1)
    with pytest.raises(InvalidEntryError, match="'a' is not a map"):
        set_in(data, ("a", "b"), 1)
    assert data == {"a": 5}


def test_unset_nulls_a_declared_property_and_removes_others() -> None:
    data: dict[str, object] = {"name": "x", "m": {"k": 1, "j": 2}}
    unset_path(data, "name", {"name"})
    unset_path(data, "m.k", {"name"})
    unset_path(data, "m.absent.deeper", {"name"})
    unset_in(data, ("nothing", "here"), declared=False)
    assert data == {"name": None, "m": {"j": 2}}


def test_unset_nulls_a_declared_nested_property_but_not_under_a_null_object() -> None:
    declared = {"address", "address.city", "address.geo", "address.geo.lat", "other",
                "other.city"}
    data: dict[str, Any] = {"address": {"city": "Oslo", "geo": {"lat": 1.0}, "extra": 1},
                            "other": None}
    for path in ("address.city", "address.geo.lat", "address.extra", "other.city"):
        unset_path(data, path, declared)
    assert data == {"address": {"city": None, "geo": {"lat": None}}, "other": None}


def test_apply_logged_partial_update_and_change() -> None:
    data: dict[str, Any] = {"id": 1, "name": "a", "address": {"city": "Oslo", "zip": "1"},
                            "nick": "n"}
    apply_logged(data, "PARTIAL_UPDATE", {"name": "b", "nick": None}, (), ())
    assert data == {"id": 1, "name": "b", "address": {"city": "Oslo", "zip": "1"}, "nick": "n"}
    apply_logged(data, "CHANGE", {"address.zip": "2"}, ("address.city", "nick"),
                 {"id", "name", "address", "address.city", "address.zip"})
    assert data == {"id": 1, "name": "b", "address": {"city": None, "zip": "2"}}
    with pytest.raises(InvalidEntryError, match="WRITE"):
        apply_logged(data, "WRITE", {}, (), ())
