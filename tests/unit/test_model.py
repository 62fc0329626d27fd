"""Entry types: descriptors from dataclasses, documents, conversions and their errors."""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Optional

import pytest

from gridstream.errors import InvalidEntryError, UnknownTypeError
from gridstream.model import (
    DEFAULT_TOPIC_PROPERTY,
    DocumentType,
    SpaceDocument,
    descriptor_of,
    from_entry,
    from_template,
    register_document_type,
    space_class,
    to_entry,
    topic_for,
)
from gridstream.operations import PropertySpec, TypeDescriptor


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Street:
    name: str
    number: int = 0


@dataclass
class Address:
    city: str
    street: Street | None = None


@dataclass
class Node:
    id: int
    next: Optional[Node] = None  # noqa: UP045 - a forward reference


@space_class(routing="region", indexes=("name",), topic="people")
@dataclass
class Person:
    id: int
    name: str
    region: str = "eu"
    born: dt.date | None = None
    seen: dt.datetime | None = None
    balance: Decimal = Decimal(0)
    key: uuid.UUID | None = None
    photo: bytes = b""
    active: bool = True
    score: float = 0.0
    tags: list[str] = field(default_factory=list)
    roles: frozenset[str] = frozenset()
    extra: dict[str, Any] = field(default_factory=dict)
    color: Color = Color.RED
    address: Address | None = None
    history: list[Address] = field(default_factory=list)
    anything: Any = None


@space_class(type_name="graph.Node", id="id")
@dataclass
class GraphNode:
    id: int
    node: Node | None = None


def test_descriptor_from_a_dataclass() -> None:
    d = descriptor_of(Person)
    assert d.name == f"{__name__}.Person"
    assert (d.id_property, d.routing_property, d.indexes, d.topic) == (
        "id", "region", ("name",), "people")
    assert not d.dynamic_properties
    kinds = {p.name: p.kind for p in d.fixed}
    assert kinds == {
        "id": "int", "name": "str", "region": "str", "born": "date", "seen": "datetime",
        "balance": "decimal", "key": "uuid", "photo": "bytes", "active": "bool",
        "score": "float", "tags": "list", "roles": "set", "extra": "dict", "color": "str",
        "address": "object", "history": "list", "anything": "any",
    }
    address = next(p for p in d.fixed if p.name == "address")
    assert address.nested_type == f"{__name__}.Address"
    street = next(p for p in address.nested if p.name == "street")
    assert street == PropertySpec("street", "object", (
        PropertySpec("name", "str"), PropertySpec("number", "int")), f"{__name__}.Street")


def test_a_cycle_is_described_once() -> None:
    node = next(p for p in descriptor_of(GraphNode).fixed if p.name == "node")
    inner = next(p for p in node.nested if p.name == "next")
    assert inner.kind == "object" and inner.nested == ()
    assert str(inner.nested_type).endswith(".Node")


def test_round_trip_of_a_dataclass_entry() -> None:
    person = Person(
        7, "Ann", "us", dt.date(1990, 1, 2), dt.datetime(2024, 1, 1, 9), Decimal("1.5"),
        uuid.uuid4(), b"\x00", False, 2.5, ["a"], frozenset({"x"}), {"k": [1, {"z": 2}]},
        Color.BLUE, Address("Oslo", Street("Main", 3)), [Address("Rome")], {"free": 1},
    )
    descriptor, ident, routing, data = from_entry(person)
    assert (descriptor.name, ident, routing) == (f"{__name__}.Person", 7, "us")
    assert data["address"] == {"city": "Oslo", "street": {"name": "Main", "number": 3}}
    assert data["color"] == "blue" and data["history"] == [{"city": "Rome", "street": None}]
    assert to_entry(descriptor, data) == person
    assert to_entry(descriptor, data, Person) == person


def test_documents() -> None:
    doc = SpaceDocument("Product", {"id": "p1", "price": 3, "nested": {"a": [1, 2]},
                                    DEFAULT_TOPIC_PROPERTY: "products"})
    descriptor, ident, routing, data = from_entry(doc)
    assert (descriptor.id_property, descriptor.dynamic_properties, ident, routing) == (
        "id", True, "p1", None)
    assert data[DEFAULT_TOPIC_PROPERTY] == "products"  # kept in the data
    assert topic_for(descriptor, data) == "products"
    assert topic_for(descriptor, data, "other.topic") is None
    assert to_entry(descriptor, data) == doc
    assert doc["price"] == 3 and "nested" in doc and doc.get("missing") is None


def test_registered_document_types() -> None:
    register_document_type(DocumentType(
        "Catalog", id="sku", routing="shop", fixed={"sku": "str", "shop": "str"},
        topic="catalog", dynamic_properties=False))
    d, ident, routing, _ = from_entry(SpaceDocument("Catalog", {"sku": "s1", "shop": "A"}))
    assert (d.id_property, ident, routing, d.topic) == ("sku", "s1", "A", "catalog")
    assert topic_for(d, {DEFAULT_TOPIC_PROPERTY: "ignored"}) == "catalog"
    with pytest.raises(InvalidEntryError, match="dynamic"):
        from_entry(SpaceDocument("Catalog", {"sku": "s1", "other": 1}))
    explicit = TypeDescriptor("Explicit", "key")
    register_document_type(explicit)
    assert descriptor_of("Explicit") is explicit


def test_templates_keep_only_non_null_values() -> None:
    template = Person(None, "Ann", None, tags=None, address=Address("Oslo"))  # type: ignore[arg-type]
    _, data = from_template(template)
    assert data["name"] == "Ann" and "id" not in data and "tags" not in data
    assert data["address"] == {"city": "Oslo", "street": None}


def test_plain_dataclasses_with_an_id_are_inferred() -> None:
    @dataclass
    class Plain:
        id: str
        value: int = 0

    assert from_entry(Plain("a", 1)).descriptor.id_property == "id"

    @dataclass
    class NoId:
        key: str

    with pytest.raises(UnknownTypeError):
        from_entry(NoId("a"))


def test_invalid_entries() -> None:
    with pytest.raises(InvalidEntryError, match="no id"):
        from_entry(SpaceDocument("Doc", {"name": "x"}))
    with pytest.raises(InvalidEntryError, match="extra.bad"):
        from_entry(Person(1, "x", extra={"bad": object()}))
    with pytest.raises(InvalidEntryError, match="map key"):
        from_entry(SpaceDocument("Doc", {"id": 1, "m": {(1, 2): 3}}))
    with pytest.raises(InvalidEntryError, match="64-bit"):
        from_entry(SpaceDocument("Doc", {"id": 2**80}))
    with pytest.raises(InvalidEntryError):
        space_class(type("NotADataclass", (), {}))
    with pytest.raises(InvalidEntryError, match="no field"):
        space_class(routing="nope")(Street)
    with pytest.raises(UnknownTypeError):
        from_entry(42)
    with pytest.raises(UnknownTypeError):
        descriptor_of("never.Introduced.Anywhere")


def test_ids_are_normalised() -> None:
    key = uuid.uuid4()
    assert from_entry(SpaceDocument("Doc", {"id": key})).id == str(key)
    assert from_entry(SpaceDocument("Doc", {"id": Color.RED})).id == "red"
    with pytest.raises(InvalidEntryError):
        from_entry(SpaceDocument("Doc", {"id": True}))


def test_unknown_keys_are_ignored_and_missing_fields_defaulted() -> None:
    d = descriptor_of(Person)
    assert to_entry(d, {"id": 1, "name": "x", "gone": 5}) == Person(1, "x")
