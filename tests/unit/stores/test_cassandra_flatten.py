"""Flattening: flatten → unflatten is the identity (canonical form), depth limit, filter."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridstream.errors import InvalidEntryError, StoreError
from gridstream.operations import PropertySpec, TypeDescriptor
from gridstream.stores.cassandra._paths import REMOVE, edit_path
from gridstream.stores.cassandra.columns import Encoding, column_name, split_column_name
from gridstream.stores.cassandra.flatten import (
    DefaultFlattenFilter,
    Location,
    PropertyContext,
    TypeLayout,
)
from gridstream.stores.cassandra.mapping import CassandraMapping
from tests.unit.stores.cassandra_strategies import entry_for, spec_trees

FILTER = DefaultFlattenFilter()


def descriptor(specs: tuple[PropertySpec, ...]) -> TypeDescriptor:
    return TypeDescriptor("com.example.T", "id", fixed=(PropertySpec("id", "int"), *specs))


def canonical(specs: tuple[PropertySpec, ...], data: dict[str, Any], level: int = 1) -> Any:
    """What a row reads back as, computed independently of the flattener."""
    out: dict[str, Any] = {}
    fixed = {s.name for s in specs}
    for spec in specs:
        value = data.get(spec.name)
        flattened = spec.kind == "object" and spec.nested and level <= 10
        if flattened and value is not None:
            nested = canonical(spec.nested, value, level + 1)
            value = None if all(v is None for v in nested.values()) else nested
        out[spec.name] = value
    out.update((k, v) for k, v in data.items() if k not in fixed and v is not None)
    return out


@settings(max_examples=300)
@given(st.data(), spec_trees())
def test_flatten_unflatten_identity(data: st.DataObject, specs: tuple[PropertySpec, ...]) -> None:
    entry = data.draw(entry_for(specs))
    layout = TypeLayout(descriptor(specs), FILTER)
    flat = layout.flatten(entry)
    row = {name: value for name, value in flat.items() if value is not None}
    assert layout.unflatten(row) == canonical(specs, entry)


@settings(max_examples=150)
@given(st.data(), spec_trees())
def test_encode_decode_identity(data: st.DataObject, specs: tuple[PropertySpec, ...]) -> None:
    """Through the serializers too (blob columns become bytes and come back)."""
    entry = data.draw(entry_for(specs))
    mapping = CassandraMapping()
    layout = mapping.layout(descriptor(specs))
    encoded = mapping.encode_row(layout, layout.flatten(entry))
    for name, value in encoded.items():
        if value is not None and layout.column(name).encoding is not Encoding.NATIVE:
            assert isinstance(value, bytes)
    decoded = {n: mapping.decode(layout.column(n), v) for n, v in encoded.items() if v is not None}
    assert layout.unflatten(decoded) == canonical(specs, entry)


@given(st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=5))
def test_column_names_split_back_into_paths(path: list[str]) -> None:
    assert split_column_name(column_name(tuple(path))) == tuple(path)


def chain(depth: int) -> tuple[PropertySpec, ...]:
    specs: tuple[PropertySpec, ...] = (PropertySpec("v", "str"),)
    for _ in range(depth):
        specs = (PropertySpec("v", "str"), PropertySpec("n", "object", specs))
    return specs


@given(st.integers(min_value=0, max_value=14))
def test_depth_limit(depth: int) -> None:
    """Objects are flattened up to nesting level 10; deeper ones are one blob column."""
    layout = TypeLayout(descriptor(chain(depth)), FILTER)
    paths = [c.path for c in layout.columns.values()]
    assert max(len(p) for p in paths) == min(depth, 10) + 1
    blobs = [c for c in layout.columns.values() if c.kind == "object"]
    if depth > 10:
        assert [len(c.path) for c in blobs] == [11]
        assert blobs[0].encoding is Encoding.FIXED
    else:
        assert blobs == []


def test_seed_example() -> None:
    address = PropertySpec(
        "address",
        "object",
        (PropertySpec("streetName", "str"), PropertySpec("streetNumber", "int")),
    )
    person = TypeDescriptor(
        "com.example.Person",
        "id",
        fixed=(PropertySpec("id", "int"), PropertySpec("name", "str"), address),
    )
    layout = TypeLayout(person, FILTER)
    assert {n: c.cql_type for n, c in layout.columns.items()} == {
        "name": "text",
        "address.streetName": "text",
        "address.streetNumber": "bigint",
    }
    flat = layout.flatten({"id": 1, "name": "x", "newName": "y", "newAddress": {"a": 1}})
    assert layout.column("newName").encoding is Encoding.DYNAMIC
    assert layout.column("newAddress").cql_type == "blob"
    assert flat == {"name": "x", "newName": "y", "newAddress": {"a": 1}}
    assert layout.flatten({"address": None}) == {
        "address.streetName": None,
        "address.streetNumber": None,
    }


def test_dotted_dynamic_names_do_not_collide_with_paths() -> None:
    layout = TypeLayout(
        descriptor((PropertySpec("kafka", "object", (PropertySpec("topic", "str"),)),)), FILTER
    )
    flat = layout.flatten({"kafka": {"topic": "a"}, "kafka.topic": "b"})
    assert flat == {"kafka.topic": "a", "kafka\\.topic": "b"}
    assert layout.unflatten(flat) == {"kafka": {"topic": "a"}, "kafka.topic": "b"}


def test_reserved_and_mistyped_values_are_errors() -> None:
    layout = TypeLayout(
        descriptor((PropertySpec("o", "object", (PropertySpec("x", "int"),)),)), FILTER
    )
    with pytest.raises(StoreError):
        layout.flatten({"_version": 1})
    with pytest.raises(StoreError):
        layout.flatten({"o": "not an object"})
    with pytest.raises(StoreError):
        TypeLayout(descriptor((PropertySpec("_version", "int"),)), FILTER)


def test_filter_sees_contexts_and_may_flatten_dynamic_maps() -> None:
    seen: list[PropertyContext] = []

    class FlattenAll:
        def should_flatten(self, ctx: PropertyContext) -> bool:
            seen.append(ctx)
            return True

    specs = (
        PropertySpec("o", "object", (PropertySpec("p", "object", (PropertySpec("x", "int"),)),)),
    )
    layout = TypeLayout(descriptor(specs), FlattenAll())
    assert [(c.path, c.nesting_level, c.is_dynamic) for c in seen] == [
        ("o", 1, False),
        ("o.p", 2, False),
    ]
    flat = layout.flatten({"o": {"p": {"x": 1}}, "d": {"a": {"b": 2}}})
    assert flat == {"o.p.x": 1, "d.a.b": 2}
    assert seen[-1] == PropertyContext("d.a", "a", "dict", True, 2)
    assert layout.unflatten(flat) == {"o": {"p": {"x": 1}}, "d": {"a": {"b": 2}}}


def test_no_flattening_when_filter_refuses() -> None:
    class Never:
        def should_flatten(self, ctx: PropertyContext) -> bool:
            return False

    specs = (PropertySpec("o", "object", (PropertySpec("x", "int"),)),)
    layout = TypeLayout(descriptor(specs), Never())
    assert list(layout.columns) == ["o"]
    assert layout.columns["o"].encoding is Encoding.FIXED


def test_change_paths_are_located() -> None:
    specs = (
        PropertySpec("address", "object", (PropertySpec("street", "str"),)),
        PropertySpec("attrs", "dict"),
    )
    layout = TypeLayout(descriptor(specs), FILTER)
    known = {"id", "_version", "address.street", "address.zip", "extra", "kafka\\.topic"}
    assert layout.locate("address", known) == Location(("address",))
    assert layout.locate("address.street", known) == Location(("address", "street"))
    assert layout.locate("address.zip", known) == Location(("address", "zip"))
    assert layout.locate("address.zip.code", known) == Location(("address", "zip"), ("code",))
    assert layout.locate("address.street.x", known) == Location(("address", "street"), ("x",))
    assert layout.locate("attrs.k", known) == Location(("attrs",), ("k",))
    assert layout.locate("extra.a.b", known) == Location(("extra",), ("a", "b"))
    assert layout.locate("kafka.topic", known) == Location(("kafka.topic",))  # a top-level name
    assert layout.locate("new.path", known) == Location(("new",), ("path",))
    assert layout.flatten_at(("address",), {"street": "s", "zip": "z"}) == {
        "address.street": "s",
        "address.zip": "z",
    }
    assert layout.flatten_at(("address", "zip"), "z") == {"address.zip": "z"}


@given(
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=4),
    st.lists(st.text(max_size=3), min_size=1, max_size=4),
    st.integers(),
)
def test_edit_path_sets_and_removes(base: dict[str, Any], path: list[str], value: int) -> None:
    node: Any = base
    for segment in path[:-1]:
        node = node.get(segment) if isinstance(node, dict) else None
        if node is not None and not isinstance(node, dict):  # the space refuses this path
            with pytest.raises(InvalidEntryError, match="is not a map"):
                edit_path(base, tuple(path), value)
            return
    edited = edit_path(base, tuple(path), value)
    node = edited
    for segment in path:
        node = node[segment]
    assert node == value
    removed = edit_path(edited, tuple(path), REMOVE)
    parent: Any = removed
    for segment in path[:-1]:
        parent = parent[segment]
    assert path[-1] not in parent
    nulled = edit_path(edited, tuple(path), REMOVE, declared=True)
    parent = nulled
    for segment in path[:-1]:
        parent = parent[segment]
    assert parent[path[-1]] is None
    assert edit_path("not a map", ("a",), REMOVE) == "not a map"
