"""Property paths: the one implementation the space, the state fold and Cassandra share."""

from __future__ import annotations

import pytest

from gridstream.errors import InvalidEntryError
from gridstream.paths import remove_in, set_in, set_path, unset_path


def test_a_top_level_name_with_dots_wins_over_the_nested_path() -> None:
    data = {"kafka.topic": "a"}
    set_path(data, "kafka.topic", "b", replace_scalars=False)
    assert data == {"kafka.topic": "b"}
    unset_path(data, "kafka.topic", ())
    assert data == {}


def test_maps_are_created_on_the_way_and_nulls_replaced() -> None:
    data: dict[str, object] = {"a": None}
    set_path(data, "a.b.c", 1, replace_scalars=False)
    assert data == {"a": {"b": {"c": 1}}}


def test_a_scalar_on_the_way_is_an_error_unless_replaced() -> None:
    data: dict[str, object] = {"a": 5}
    with pytest.raises(InvalidEntryError, match="'a' is not a map"):
        set_path(data, "a.b", 1, replace_scalars=False)
    set_in(data, ("a", "b"), 1, replace_scalars=True)
    assert data == {"a": {"b": 1}}


def test_unset_nulls_a_declared_property_and_removes_others() -> None:
    data: dict[str, object] = {"name": "x", "m": {"k": 1, "j": 2}}
    unset_path(data, "name", {"name"})
    unset_path(data, "m.k", {"name"})
    unset_path(data, "m.absent.deeper", {"name"})
    remove_in(data, ("nothing", "here"))
    assert data == {"name": None, "m": {"j": 2}}
