"""Table names: the seed's algorithm, always a valid CQL name, deterministic, distinct."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridstream.errors import ConfigError, StoreError
from gridstream.stores.cassandra.naming import (
    MAX_NAME_LENGTH,
    DefaultTableNameConverter,
    TableNameConverter,
    index_name,
    quote_identifier,
    validate_keyspace,
)

VALID = re.compile(r"[A-Za-z0-9_]{1,48}")
convert = DefaultTableNameConverter().to_table_name

type_names = st.text(min_size=1, max_size=200)
java_names = st.lists(
    st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,30}", fullmatch=True), min_size=1, max_size=12
).map(".".join)


def md5_6(name: str) -> str:
    return hashlib.md5(name.encode()).hexdigest()[:6]


def test_short_names_replace_dots_and_dollars() -> None:
    assert convert("com.example.Person") == "com_example_Person"
    assert convert("com.example.Outer$Inner") == "com_example_Outer_Inner"
    assert convert("Person") == "Person"


def test_long_names_use_last_segment_and_md5() -> None:
    name = "com.example.very.long.package.name.that.goes.on.Person"
    assert len(name) > MAX_NAME_LENGTH
    assert convert(name) == f"Person_{md5_6(name)}"


def test_long_segment_is_cut() -> None:
    name = "com.example." + "A" * 60
    assert convert(name) == "A" * 41 + "_" + md5_6(name)
    assert len(convert(name)) == MAX_NAME_LENGTH


def test_invalid_characters_are_replaced_and_force_a_suffix() -> None:
    assert convert("my-type") == f"my_type_{md5_6('my-type')}"
    assert convert("my-type") != convert("my_type")
    assert VALID.fullmatch(convert("Ünïcode Typ€"))


def test_empty_name_is_refused() -> None:
    with pytest.raises(StoreError):
        convert("")


def test_default_converter_satisfies_the_protocol() -> None:
    assert isinstance(DefaultTableNameConverter(), TableNameConverter)


@given(type_names)
def test_always_a_valid_table_name(name: str) -> None:
    assert VALID.fullmatch(convert(name))


@given(type_names)
def test_deterministic(name: str) -> None:
    assert convert(name) == DefaultTableNameConverter().to_table_name(name)


@given(java_names)
def test_valid_java_names_up_to_48_are_kept(name: str) -> None:
    expected = name.replace(".", "_")
    if len(expected) <= MAX_NAME_LENGTH:
        assert convert(name) == expected


@given(st.text(min_size=1, max_size=60), st.text(min_size=1, max_size=60), java_names)
def test_names_differing_only_before_the_cut_stay_distinct(a: str, b: str, tail: str) -> None:
    """Two long names with the same last segment differ by their MD5 suffix."""
    first, second = f"{a}.{'x' * 48}.{tail}", f"{b}.{'x' * 48}.{tail}"
    if first != second:
        assert convert(first) != convert(second)


@given(st.text(min_size=1, max_size=100))
def test_quoted_identifiers_round_trip_quotes(name: str) -> None:
    quoted = quote_identifier(name)
    assert quoted.startswith('"') and quoted.endswith('"')
    assert quoted[1:-1].replace('""', '"') == name


@given(st.text(min_size=1, max_size=48), st.text(min_size=1, max_size=100))
def test_index_names_are_valid(table: str, column: str) -> None:
    assert VALID.fullmatch(index_name(convert(table), column))


def test_keyspace_validation() -> None:
    assert validate_keyspace("gridstream_1") == "gridstream_1"
    for bad in ("", "a-b", "x" * 49, "é"):
        with pytest.raises(ConfigError):
            validate_keyspace(bad)
