"""The Space adapter's write rule, its pure parts: bookkeeping ids, values, id checks."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from gridstream.errors import GridError
from gridstream.grid._space_writes import _entry_data, mark_id, wire
from gridstream.operations import PropertySpec, TypeDescriptor


def test_bookkeeping_ids_tell_int_and_str_keys_and_sources_apart() -> None:
    ids = {mark_id("s", "C", 1), mark_id("s", "C", "1"), mark_id("t", "C", 1),
           mark_id("s", "C|1", 1), mark_id("s", "C", '1"')}
    assert len(ids) == 5


def test_wire_form_is_json_values() -> None:
    assert wire({"at": dt.date(2024, 1, 2), "d": Decimal("1.50"), "s": {3}, "b": b"\x01",
                 1: (1, 2)}) == {"at": "2024-01-02", "d": "1.50", "s": [3], "b": "AQ==",
                                 "1": [1, 2]}


DESCRIPTOR = TypeDescriptor("C", "key", fixed=(PropertySpec("key", "int"),
                                                PropertySpec("at", "date"),
                                                PropertySpec("tags", "set")))


def test_a_value_gets_its_key_and_declared_properties_back_in_their_types() -> None:
    assert _entry_data("C", DESCRIPTOR, 7, {"at": "2024-01-02", "tags": ["a"], "x": "y"}) \
        == {"key": 7, "at": dt.date(2024, 1, 2), "tags": {"a"}, "x": "y"}
    assert _entry_data("C", DESCRIPTOR, 7, {"key": 7})["key"] == 7


@pytest.mark.parametrize("value", [{"key": 8}, {"key": "7"}, {"key": None}])
def test_a_value_naming_another_id_is_refused(value: dict[str, object]) -> None:
    with pytest.raises(GridError, match="another id"):
        _entry_data("C", DESCRIPTOR, 7, value)


def test_a_declared_property_without_a_python_form_is_refused_without_its_value() -> None:
    with pytest.raises(GridError, match="declared property does not hold") as caught:
        _entry_data("C", DESCRIPTOR, 7, {"at": "secret-not-a-date"})
    assert "secret" not in str(caught.value)
