"""Where store feeds get their ``TypeDescriptor`` from: the pipeline config.

Kafka records carry the operation and the entry, not the type's description, so a Spark
pipeline learns types in one of two ways:

- **declared** (recommended): the config declares each type (id property, fixed
  properties and their kinds, nested objects, indexes), exactly what the space knows.
  Stores then get native columns for fixed properties, flattened nested objects and
  typed values (datetimes, decimals, uuids restored from their JSON text).
- **dynamic**: a type that is not declared is described as "id property only, every
  other property dynamic" (``unknown_types = "dynamic"``). Every property is stored the
  dynamic way (type-tagged blobs in Cassandra, JSON in SQL and the lake); values keep
  their JSON types. ``unknown_types = "fail"`` makes an undeclared type an error instead.

Declared types win; a type must not be declared differently by two writers of the same
store (Cassandra refuses a column whose kind changes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from gridstream.errors import ConfigError, StoreError
from gridstream.operations import Kind, PropertySpec, TypeDescriptor

__all__ = [
    "PROPERTY_KINDS",
    "TypeRegistry",
    "UnknownTypes",
    "descriptor_from_table",
    "descriptor_to_table",
]

PROPERTY_KINDS = frozenset(Kind)
"""Kinds a declared property may have (see ``Kind``)."""

UnknownTypes = Literal["dynamic", "fail"]


def _spec(name: str, value: Any, where: str) -> PropertySpec:
    if isinstance(value, str):
        if value not in PROPERTY_KINDS:
            kinds = ", ".join(sorted(PROPERTY_KINDS))
            raise ConfigError(f"{where}.{name}: unknown kind {value!r}; one of {kinds}")
        return PropertySpec(name, Kind(value))
    if isinstance(value, Mapping):
        nested = tuple(_spec(k, v, f"{where}.{name}") for k, v in value.items())
        if not nested:
            raise ConfigError(f"{where}.{name}: a nested object needs at least one property")
        return PropertySpec(name, Kind.OBJECT, nested)
    raise ConfigError(f"{where}.{name}: a property is a kind name or a table of properties")


def descriptor_from_table(name: str, table: Mapping[str, Any]) -> TypeDescriptor:
    """A descriptor from its config table::

        [types."com.example.Person"]
        id_property = "id"
        indexes = ["name"]
        dynamic_properties = true
        properties = { id = "str", name = "str", address = { city = "str" } }
    """
    where = f"types.{name}"
    unknown = set(table) - {"id_property", "routing_property", "properties", "indexes",
                            "dynamic_properties", "topic"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {', '.join(sorted(unknown))}")
    id_property = table.get("id_property", "id")
    properties = table.get("properties", {})
    if not isinstance(id_property, str) or not id_property:
        raise ConfigError(f"{where}.id_property must be a non-empty string")
    if not isinstance(properties, Mapping):
        raise ConfigError(f"{where}.properties must be a table of name = kind")
    indexes = table.get("indexes", [])
    if not isinstance(indexes, list) or not all(isinstance(i, str) for i in indexes):
        raise ConfigError(f"{where}.indexes must be a list of property paths")
    return TypeDescriptor(
        name=name,
        id_property=id_property,
        routing_property=table.get("routing_property"),
        fixed=tuple(_spec(k, v, f"{where}.properties") for k, v in properties.items()),
        indexes=tuple(indexes),
        topic=table.get("topic"),
        dynamic_properties=bool(table.get("dynamic_properties", True)),
    )


def _spec_value(spec: PropertySpec) -> Any:
    if spec.kind == "object" and spec.nested:
        return {s.name: _spec_value(s) for s in spec.nested}
    return spec.kind


def descriptor_to_table(descriptor: TypeDescriptor) -> dict[str, Any]:
    """The config table of ``descriptor`` (inverse of ``descriptor_from_table``), e.g. to
    write a pipeline config from the space's own descriptors."""
    table: dict[str, Any] = {
        "id_property": descriptor.id_property,
        "properties": {s.name: _spec_value(s) for s in descriptor.fixed},
        "dynamic_properties": descriptor.dynamic_properties,
    }
    if descriptor.indexes:
        table["indexes"] = list(descriptor.indexes)
    if descriptor.routing_property:
        table["routing_property"] = descriptor.routing_property
    if descriptor.topic:
        table["topic"] = descriptor.topic
    return table


@dataclass(frozen=True)
class TypeRegistry:
    """Declared descriptors plus the rule for types that are not declared."""

    declared: Mapping[str, TypeDescriptor] = field(default_factory=dict)
    unknown_types: UnknownTypes = "dynamic"
    default_id_property: str = "id"

    @classmethod
    def from_tables(cls, tables: Mapping[str, Mapping[str, Any]], *,
                    unknown_types: UnknownTypes = "dynamic",
                    default_id_property: str = "id") -> TypeRegistry:
        """From the config's ``[types.NAME]`` tables."""
        declared = {name: descriptor_from_table(name, t) for name, t in tables.items()}
        return cls(declared, unknown_types, default_id_property)

    @classmethod
    def of(cls, descriptors: Iterable[TypeDescriptor], **options: Any) -> TypeRegistry:
        """From descriptors in Python (e.g. the space's own)."""
        return cls({d.name: d for d in descriptors}, **options)

    def get(self, type_name: str) -> TypeDescriptor:
        """The declared descriptor, or the dynamic one; ``StoreError`` under ``fail``."""
        found = self.declared.get(type_name)
        if found is not None:
            return found
        if self.unknown_types == "fail":
            raise StoreError(
                f"type {type_name!r} is not declared in the pipeline config "
                "(declare it under [types] or set unknown_types = \"dynamic\")"
            )
        return TypeDescriptor(name=type_name, id_property=self.default_id_property)

    def resolve(self, type_names: Iterable[str]) -> dict[str, TypeDescriptor]:
        """Descriptors of every name in ``type_names``."""
        return {name: self.get(name) for name in set(type_names)}

    def fixed_names(self, type_name: str) -> frozenset[str]:
        """The declared property names of a type (empty when dynamic)."""
        found = self.declared.get(type_name)
        return found.fixed_names() if found is not None else frozenset()

    def declared_paths(self, type_name: str) -> frozenset[str]:
        """The declared property paths of a type, nested ones included (empty when
        dynamic): see ``TypeDescriptor.declared_paths``."""
        found = self.declared.get(type_name)
        return found.declared_paths() if found is not None else frozenset()

    def to_payload(self) -> dict[str, Any]:
        """A JSON-able form, to ship the registry to Spark's Python workers."""
        return {
            "declared": {n: descriptor_to_table(d) for n, d in self.declared.items()},
            "unknown_types": self.unknown_types,
            "default_id_property": self.default_id_property,
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> TypeRegistry:
        """Inverse of ``to_payload``."""
        return cls.from_tables(
            payload["declared"], unknown_types=payload["unknown_types"],
            default_id_property=payload["default_id_property"],
        )
