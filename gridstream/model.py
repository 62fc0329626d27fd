"""Entry types: ``@space_class`` dataclasses and ``SpaceDocument`` property maps.

An entry is turned into ``(TypeDescriptor, id, routing, data)`` before the space stores
it, and back with ``to_entry``. ``data`` holds only values the operation log can store
(str int float bool None bytes datetime date time Decimal UUID and lists, tuples, sets,
dicts of them); nested dataclasses become nested dicts and enums their values, so every
process (and every store) sees the same plain property map.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import types
import typing
import uuid
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any, NamedTuple, TypeVar

from gridstream.errors import InvalidEntryError, UnknownTypeError
from gridstream.kinds import check_data
from gridstream.operations import EntityId, Kind, PropertySpec, TypeDescriptor

__all__ = [
    "DEFAULT_TOPIC_PROPERTY",
    "DocumentType",
    "EntryParts",
    "SpaceDocument",
    "class_for",
    "descriptor_of",
    "document_types",
    "from_entry",
    "from_template",
    "normalize_id",
    "register_document_type",
    "space_class",
    "to_entry",
    "topic_for",
]

DEFAULT_TOPIC_PROPERTY = "kafka.topic"
"""Document property naming an entry's Kafka topic (the seed's default). It stays in the
entry's data like any other property; the Kafka endpoint reads it (under a configurable
name) when the type itself declares no topic."""

PLAIN_TYPES: frozenset[type] = frozenset(
    {str, int, float, bool, type(None), bytes, dt.datetime, dt.date, dt.time, Decimal, uuid.UUID}
)
"""Scalar types stored as they are (the log codec handles each exactly)."""

_C = TypeVar("_C", bound=type)
Loader = Callable[[Any], Any]

_SCALAR_KINDS: dict[Any, Kind] = {
    str: Kind.STR, int: Kind.INT, float: Kind.FLOAT, bool: Kind.BOOL, bytes: Kind.BYTES,
    bytearray: Kind.BYTES, dt.datetime: Kind.DATETIME, dt.date: Kind.DATE,
    Decimal: Kind.DECIMAL, uuid.UUID: Kind.UUID, Any: Kind.ANY, object: Kind.ANY,
}
_LIST_ORIGINS = (list, tuple, typing.Sequence, typing.MutableSequence)
_SET_ORIGINS = (set, frozenset, typing.AbstractSet, typing.MutableSet)
_DICT_ORIGINS = (dict, typing.Mapping, typing.MutableMapping)


class EntryParts(NamedTuple):
    """An entry taken apart: what the space stores and logs."""

    descriptor: TypeDescriptor
    id: EntityId
    routing: Any
    data: dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class _Shape:
    """How to take a dataclass apart and build it back."""

    names: tuple[str, ...]
    init_names: frozenset[str]
    loaders: Mapping[str, Loader]


_CLASSES: dict[type, TypeDescriptor] = {}
_SHAPES: dict[type, _Shape] = {}
_CLASS_BY_NAME: dict[str, type] = {}
_DOCUMENT_TYPES: dict[str, TypeDescriptor] = {}


# ---------------------------------------------------------------- dataclass entries


def space_class(
    cls: _C | None = None,
    *,
    type_name: str | None = None,
    id: str = "id",
    routing: str | None = None,
    indexes: Iterable[str] = (),
    topic: str | None = None,
) -> Any:
    """Declare a dataclass as a space entry type (its ``TypeDescriptor`` is recorded).

    Usable bare (``@space_class``) or with options; apply it above ``@dataclass``.
    """

    def wrap(klass: _C) -> _C:
        _register_class(klass, type_name, id, routing, tuple(indexes), topic)
        return klass

    return wrap(cls) if cls is not None else wrap


def _register_class(
    cls: type, type_name: str | None, id_property: str, routing: str | None,
    indexes: tuple[str, ...], topic: str | None,
) -> TypeDescriptor:
    if not dataclasses.is_dataclass(cls):
        raise InvalidEntryError(f"{cls.__qualname__} is not a dataclass; apply @dataclass first")
    names = tuple(f.name for f in dataclasses.fields(cls))
    for prop in (id_property, routing):
        if prop is not None and prop not in names:
            raise InvalidEntryError(f"{cls.__qualname__} has no field {prop!r}")
    fixed = _class_specs(cls, (cls,))
    descriptor = TypeDescriptor(
        name=type_name or f"{cls.__module__}.{cls.__qualname__}",
        id_property=id_property, routing_property=routing, fixed=fixed,
        indexes=indexes, topic=topic, dynamic_properties=False,
    )
    _CLASSES[cls] = descriptor
    _CLASS_BY_NAME[descriptor.name] = cls
    return descriptor


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except (NameError, TypeError):
        return {}


def _class_specs(cls: type, stack: tuple[type, ...]) -> tuple[PropertySpec, ...]:
    hints = _hints(cls)
    return tuple(_spec(f.name, hints.get(f.name, Any), stack) for f in dataclasses.fields(cls))


def _shape(cls: type) -> _Shape:
    shape = _SHAPES.get(cls)
    if shape is None:
        hints = _hints(cls)
        fields = dataclasses.fields(cls)
        loaders = {f.name: _loader(hints.get(f.name, Any)) for f in fields}
        shape = _SHAPES[cls] = _Shape(
            tuple(f.name for f in fields),
            frozenset(f.name for f in fields if f.init),
            {name: loader for name, loader in loaders.items() if loader is not None},
        )
    return shape


def _build(cls: type, data: Mapping[str, Any]) -> Any:
    """An instance of dataclass ``cls`` from its data (unknown keys are ignored)."""
    shape = _shape(cls)
    kwargs = {}
    for name, value in data.items():
        if name in shape.init_names:
            loader = shape.loaders.get(name)
            kwargs[name] = loader(value) if loader is not None and value is not None else value
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise InvalidEntryError(f"cannot build {cls.__qualname__} from its data: {exc}") from exc


def _strip(ann: Any) -> Any:
    """Drop ``Optional``/``Annotated`` wrappers; ``Any`` for other unions."""
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return _strip(typing.get_args(ann)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        return _strip(args[0]) if len(args) == 1 else Any
    return ann


def _spec(name: str, ann: Any, stack: tuple[type, ...]) -> PropertySpec:
    ann = _strip(ann)
    if isinstance(ann, type) and dataclasses.is_dataclass(ann):
        qual = f"{ann.__module__}.{ann.__qualname__}"
        if ann in stack:  # a cycle: describe the reference, not its content
            return PropertySpec(name, Kind.OBJECT, (), qual)
        nested = _class_specs(ann, (*stack, ann))
        return PropertySpec(name, Kind.OBJECT, nested, qual)
    return PropertySpec(name, _kind(ann))


def _kind(ann: Any) -> Kind:
    if ann in _SCALAR_KINDS:
        return _SCALAR_KINDS[ann]
    origin = typing.get_origin(ann) or ann
    if origin is typing.Literal:
        return _kind(type(typing.get_args(ann)[0]))
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        values = {type(m.value) for m in ann}
        return _kind(values.pop()) if len(values) == 1 else Kind.ANY
    if origin in _LIST_ORIGINS:
        return Kind.LIST
    if origin in _SET_ORIGINS:
        return Kind.SET
    if origin in _DICT_ORIGINS:
        return Kind.DICT
    return Kind.ANY


def _loader(ann: Any) -> Loader | None:
    """A function rebuilding a declared value (nested dataclass, enum) from its data."""
    ann = _strip(ann)
    origin = typing.get_origin(ann)
    if isinstance(ann, type) and dataclasses.is_dataclass(ann):
        klass = ann
        return lambda v: _build(klass, v) if isinstance(v, dict) else v
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return _enum_loader(ann)
    args = typing.get_args(ann)
    if origin in _LIST_ORIGINS + _SET_ORIGINS and args:
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return None
        item = _loader(args[0])
        if item is not None:
            return lambda v: _rebuild(v, item)
    if origin in _DICT_ORIGINS and len(args) == 2:
        inner = _loader(args[1])
        if inner is not None:
            return lambda v: {k: inner(e) for k, e in v.items()} if isinstance(v, dict) else v
    return None


def _rebuild(value: Any, item: Loader) -> Any:
    kind = type(value)
    if kind is list or kind is tuple or kind is set or kind is frozenset:
        return kind(item(e) for e in value)
    return value


def _enum_loader(enum_cls: type[enum.Enum]) -> Loader:
    def load(value: Any) -> Any:
        try:
            return enum_cls(value)
        except ValueError:
            return value

    return load


def _class_descriptor(cls: type) -> TypeDescriptor:
    descriptor = _CLASSES.get(cls)
    if descriptor is not None:
        return descriptor
    if dataclasses.is_dataclass(cls):
        if "id" not in {f.name for f in dataclasses.fields(cls)}:
            raise UnknownTypeError(
                f"{cls.__qualname__} has no 'id' field; declare it with @space_class(id=...)"
            )
        return _register_class(cls, None, "id", None, (), None)
    raise UnknownTypeError(f"{cls.__qualname__} is neither a dataclass nor a SpaceDocument")


# ---------------------------------------------------------------- documents


class SpaceDocument:
    """A schemaless entry: a type name and a property map (nested maps allowed).

    Its fixed properties come from a registered document type; otherwise the id is the
    ``id`` property and everything else is dynamic. A document may name its own Kafka
    topic in the ``kafka.topic`` property (``DEFAULT_TOPIC_PROPERTY``).
    """

    __slots__ = ("properties", "type_name")

    def __init__(self, type_name: str, properties: Mapping[str, Any] | None = None) -> None:
        self.type_name = type_name
        self.properties: dict[str, Any] = dict(properties or {})

    def __getitem__(self, name: str) -> Any:
        return self.properties[name]

    def __setitem__(self, name: str, value: Any) -> None:
        self.properties[name] = value

    def __contains__(self, name: object) -> bool:
        return name in self.properties

    def get(self, name: str, default: Any = None) -> Any:
        return self.properties.get(name, default)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SpaceDocument):
            return NotImplemented
        return self.type_name == other.type_name and self.properties == other.properties

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"SpaceDocument({self.type_name!r}, {self.properties!r})"


@dataclasses.dataclass(frozen=True, slots=True)
class DocumentType:
    """A document type declared up front: id, routing, fixed properties, indexes, topic."""

    name: str
    id: str = "id"
    routing: str | None = None
    fixed: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Fixed property name → kind (``str int ... dict object any``)."""
    indexes: tuple[str, ...] = ()
    topic: str | None = None
    dynamic_properties: bool = True

    def descriptor(self) -> TypeDescriptor:
        fixed = tuple(PropertySpec(n, Kind.of(k, f"{self.name}.{n}"))
                      for n, k in self.fixed.items())
        return TypeDescriptor(
            name=self.name, id_property=self.id, routing_property=self.routing, fixed=fixed,
            indexes=tuple(self.indexes), topic=self.topic,
            dynamic_properties=self.dynamic_properties,
        )


def register_document_type(doc_type: DocumentType | TypeDescriptor) -> TypeDescriptor:
    """Make a document type known to every space of this process; returns its descriptor."""
    descriptor = doc_type.descriptor() if isinstance(doc_type, DocumentType) else doc_type
    _DOCUMENT_TYPES[descriptor.name] = descriptor
    return descriptor


def document_types() -> Mapping[str, TypeDescriptor]:
    """The document types registered in this process."""
    return dict(_DOCUMENT_TYPES)


def _implicit_descriptor(type_name: str) -> TypeDescriptor:
    return TypeDescriptor(name=type_name, id_property="id", dynamic_properties=True)


# ---------------------------------------------------------------- conversions


def descriptor_of(
    target: object, types_: Mapping[str, TypeDescriptor] | None = None
) -> TypeDescriptor:
    """The descriptor of a class, an entry, or a type name (``UnknownTypeError`` if none)."""
    if isinstance(target, str):
        found = _named_descriptor(target, types_)
        if found is None:
            raise UnknownTypeError(f"type {target!r} has not been introduced")
        return found
    if isinstance(target, SpaceDocument):
        return _named_descriptor(target.type_name, types_) or _implicit_descriptor(
            target.type_name
        )
    cls = target if isinstance(target, type) else type(target)
    return _class_descriptor(cls)


def _named_descriptor(
    name: str, types_: Mapping[str, TypeDescriptor] | None
) -> TypeDescriptor | None:
    if types_ is not None and name in types_:
        return types_[name]
    if name in _DOCUMENT_TYPES:
        return _DOCUMENT_TYPES[name]
    cls = _CLASS_BY_NAME.get(name)
    return _CLASSES[cls] if cls is not None else None


def class_for(type_name: str) -> type | None:
    """The ``@space_class`` registered in this process under ``type_name``, if any."""
    return _CLASS_BY_NAME.get(type_name)


def normalize_id(value: Any, type_name: str = "", id_property: str = "id") -> EntityId:
    """An id as the space keys it: str and int stay, other values become ``str``."""
    kind = type(value)
    if kind is str:
        return typing.cast(str, value)
    if kind is int:
        if not -(2**63) <= value < 2**64:
            raise InvalidEntryError(f"{type_name} id {value} is out of the 64-bit range")
        return typing.cast(int, value)
    if value is None:
        raise InvalidEntryError(f"{type_name} entry has no id (property {id_property!r})")
    if kind is bool:
        raise InvalidEntryError(f"{type_name} id {id_property!r} must not be a bool")
    if isinstance(value, enum.Enum):
        return normalize_id(value.value, type_name, id_property)
    if isinstance(value, int):
        return normalize_id(int(value), type_name, id_property)
    return str(value)


def from_entry(entry: object, types_: Mapping[str, TypeDescriptor] | None = None) -> EntryParts:
    """Take an entry apart into ``(descriptor, id, routing, data)``; validates values."""
    if isinstance(entry, SpaceDocument):
        descriptor = descriptor_of(entry, types_)
        data = _document_data(entry, descriptor)
    else:
        descriptor = _class_descriptor(type(entry))  # the class is authoritative
        data = {}
        for name in _shape(type(entry)).names:
            value = getattr(entry, name)
            data[name] = value if type(value) in PLAIN_TYPES else normalize_value(value, name)
    check_data(descriptor, data)  # declared properties hold values of their kind
    ident = normalize_id(data.get(descriptor.id_property), descriptor.name, descriptor.id_property)
    routing = data.get(descriptor.routing_property) if descriptor.routing_property else None
    return EntryParts(descriptor, ident, routing, data)


def from_template(
    template: object, types_: Mapping[str, TypeDescriptor] | None = None
) -> tuple[TypeDescriptor, dict[str, Any]]:
    """A template's type and its non-null properties (the values entries must match)."""
    descriptor = descriptor_of(template, types_)
    if isinstance(template, SpaceDocument):
        items = list(template.properties.items())
    elif dataclasses.is_dataclass(template) and not isinstance(template, type):
        items = [(f.name, getattr(template, f.name)) for f in dataclasses.fields(template)]
    else:
        raise UnknownTypeError(f"{type(template).__qualname__} cannot be used as a template")
    return descriptor, {k: normalize_value(v, k) for k, v in items if v is not None}


def _document_data(doc: SpaceDocument, descriptor: TypeDescriptor) -> dict[str, Any]:
    data = {}
    for name, value in doc.properties.items():
        if not isinstance(name, str):
            raise InvalidEntryError(f"{doc.type_name}: property name {name!r} is not a str")
        data[name] = value if type(value) in PLAIN_TYPES else normalize_value(value, name)
    if not descriptor.dynamic_properties:
        extra = set(data) - descriptor.fixed_names() - {descriptor.id_property}
        if extra:
            raise InvalidEntryError(
                f"{doc.type_name} does not allow dynamic properties: {sorted(extra)}"
            )
    return data


def normalize_value(value: Any, path: str) -> Any:
    """A value in its stored form, or ``InvalidEntryError`` naming the property path."""
    kind = type(value)
    if kind in PLAIN_TYPES:
        return value
    if kind is dict or isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if type(key) not in (str, int):
                raise InvalidEntryError(f"property {path!r}: map key {key!r} is not a str or int")
            out[key] = normalize_value(item, f"{path}.{key}")
        return out
    if kind is list or kind is tuple or kind is set or kind is frozenset:
        items = [normalize_value(item, f"{path}[{i}]") for i, item in enumerate(value)]
        return items if kind is list else kind(items)
    if isinstance(value, SpaceDocument):
        return normalize_value(value.properties, path)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: normalize_value(getattr(value, f.name), f"{path}.{f.name}")
                for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return normalize_value(value.value, path)
    if isinstance(value, str):  # subclasses of plain types keep their plain value
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise InvalidEntryError(
        f"property {path!r}: a {kind.__qualname__} cannot be stored in the operation log"
    )


def to_entry(descriptor: TypeDescriptor, data: Mapping[str, Any], cls: type | None = None) -> Any:
    """Rebuild an entry from its data: an instance of ``cls`` (or of the class registered
    under the type's name), else a ``SpaceDocument``. Unknown keys are ignored and missing
    fields take their defaults, so stored data survives a class gaining or losing fields."""
    klass = cls if cls is not None else _CLASS_BY_NAME.get(descriptor.name)
    if klass is None:
        return SpaceDocument(descriptor.name, data)
    return _build(klass, data)


def topic_for(
    descriptor: TypeDescriptor, data: Mapping[str, Any] | None,
    topic_property: str = DEFAULT_TOPIC_PROPERTY,
) -> str | None:
    """An entry's Kafka topic: the type's declared topic, else the document property."""
    if descriptor.topic:
        return descriptor.topic
    value = data.get(topic_property) if data else None
    return value if isinstance(value, str) and value else None
