"""Avro schemas for grid values: inferred from a value, or declared in an ``.avsc`` file.

Inference (a cache without a declared schema):

- the value is a record named after the cache (characters outside ``[A-Za-z0-9_]``
  become ``_``), namespace ``gridstream.connect``; its fields are the value's keys in
  sorted order, each ``["null", T]`` with default ``null``;
- ``str`` → ``string``, ``bool`` → ``boolean``, ``int`` → ``long`` (outside the long
  range: ``CodecError``), ``float`` → ``double``, ``bytes`` → ``bytes``, ``dict`` → a
  nested record named after its field in the namespace of its parent's full name
  (``gridstream.connect.people.address``; a record in an array: ``item`` in the array
  field's), ``list`` → ``array`` whose items are ``["null", T]`` too;
- a ``None`` field (an empty list's items, a list of nothing but ``None``) has no type of
  its own: the value is written with the subject's **earliest** registered version that
  fits it (the same record and fields, any type holding ``null`` where the value has
  ``None``); with none, its schema is registered with the types the subject's latest
  version gives those fields (else the type ``"null"``: widening ``"null"`` to
  ``["null", T]`` later is a BACKWARD-compatible change; under FORWARD or FULL
  compatibility the registry refuses it: declare a schema for such a cache). Registered
  versions never change and new ones come later, so a value's schema (and bytes) depend
  on the value and the registry only, never on what a worker saw before: a batch re-run
  in a fresh worker writes the same bytes;
- array elements must share one type (records in one array: the same fields); mixed
  types, field names that are not Avro names, and values with no Avro type (dates,
  decimals, sets, ...) are ``CodecError``s — declare a schema for them.

A value always decodes to the dict it was encoded from (no field is added or dropped;
``bytes`` come back as base64 text, the grid's wire form).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from gridstream.errors import CodecError, ConfigError
from gridstream.grid.contract import Value

__all__ = ["NAMESPACE", "Form", "Memory", "Shape", "fields_key", "fits", "form_of",
           "full_name", "has_holes", "load_declared", "record_name", "remember", "schema_of",
           "shape_of"]

NAMESPACE = "gridstream.connect"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1

Shape = Any
"""A hashable type signature: a primitive name, ``"null"``, ``("array", item shape)`` or
``("record", ((name, shape), ...))``."""

Memory = dict[tuple[str, ...], Any]
"""The non-null Avro type of each field path (``"[]"`` = items) in a schema."""

Form = Any
"""A parsed schema in a form that compares equal however the same type is spelled: a
primitive name, ``("union", branches)``, ``("array", items)``, ``("record", full name,
((field, form, default), ...))``, ``("named", full name)`` (a reference), or
``("other", canonical JSON)`` (enums, maps, fixed, logical types)."""


def record_name(cache: str) -> str:
    """The Avro name of a cache's record."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", cache)
    return name if _NAME.match(name) else f"_{name}"


def full_name(schema: Mapping[str, Any]) -> str:
    name = str(schema.get("name", ""))
    namespace = schema.get("namespace")
    return f"{namespace}.{name}" if namespace and "." not in name else name


def _where(path: tuple[str, ...]) -> str:
    return f"field {'.'.join(path)!r}" if path else "the value"


_PRIMITIVES: dict[type, str] = {str: "string", bool: "boolean", float: "double",
                                bytes: "bytes", type(None): "null"}
_CHECKED_NAMES: set[str] = set()
"""Field names already checked against the Avro name rule (bounded)."""


def shape_of(value: Any, path: tuple[str, ...] = ()) -> Shape:
    """The type signature of ``value`` (``CodecError`` for what Avro inference refuses)."""
    kind = type(value)
    primitive = _PRIMITIVES.get(kind)
    if primitive is not None:
        return primitive
    if kind is dict:
        return ("record", tuple([(name, shape_of(value[name], (*path, name)))
                                 for name in _field_names(value, path)]))
    if kind is int:
        if not _LONG_MIN <= value <= _LONG_MAX:
            raise CodecError(f"{_where(path)}: {value} does not fit Avro's long")
        return "long"
    if kind is list:
        item: Shape = "null"
        for index, element in enumerate(value):
            item = _unify(item, shape_of(element, (*path, str(index))), path)
        return ("array", item)
    bases: tuple[type[Any], ...] = (bool, str, float, bytes, int, dict, list)
    for base in bases:  # subclasses (enums, ordered dicts, ...)
        if isinstance(value, base):
            return shape_of(base(value), path)
    raise CodecError(f"{_where(path)}: a {type(value).__name__} has no inferred Avro type; "
                     "declare a schema (avro.schemas) for this cache")


def _field_names(value: dict[Any, Any], path: tuple[str, ...]) -> list[str]:
    try:
        names = sorted(value)
    except TypeError:
        names = list(value)
    for name in names:
        if name in _CHECKED_NAMES:
            continue
        if not isinstance(name, str):
            raise CodecError(f"{_where(path)}: key {name!r} is not a string")
        if not _NAME.match(name):
            raise CodecError(f"{_where(path)}: {name!r} is not an Avro field name "
                             "([A-Za-z_][A-Za-z0-9_]*); rename it or declare a schema")
        if len(_CHECKED_NAMES) < 100_000:
            _CHECKED_NAMES.add(name)
    return names


def _unify(a: Shape, b: Shape, path: tuple[str, ...]) -> Shape:
    """One shape for two array elements (``"null"`` takes the other's)."""
    if a == b or b == "null":
        return a
    if a == "null":
        return b
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0]:
        if a[0] == "array":
            return ("array", _unify(a[1], b[1], path))
        if [n for n, _ in a[1]] == [n for n, _ in b[1]]:
            return ("record", tuple((n, _unify(x, y, (*path, n)))
                                    for (n, x), (_, y) in zip(a[1], b[1], strict=True)))
        raise CodecError(f"{_where(path)}: the records of one array must have the same "
                         f"fields ({[n for n, _ in a[1]]} vs {[n for n, _ in b[1]]})")
    raise CodecError(f"{_where(path)}: array elements mix {_label(a)} and {_label(b)}")


def _label(shape: Shape) -> str:
    return shape if isinstance(shape, str) else str(shape[0])


def schema_of(cache: str, shape: Shape, memory: Memory) -> dict[str, Any]:
    """The record schema of a value's shape; ``memory`` fills ``None`` fields' types."""
    name = record_name(cache)
    return {"type": "record", "name": name, "namespace": NAMESPACE,
            "fields": _fields(shape, f"{NAMESPACE}.{name}", (), memory)}


def _fields(shape: Shape, scope: str, path: tuple[str, ...], memory: Memory
            ) -> list[dict[str, Any]]:
    return [{"name": field, "type": _nullable(inner, scope, field, (*path, field), memory),
             "default": None} for field, inner in shape[1]]


def _nullable(shape: Shape, scope: str, name: str, path: tuple[str, ...],
              memory: Memory) -> Any:
    """``["null", T]`` for a field ``name`` of the record whose full name is ``scope``: a
    nested record is named ``name`` in the namespace ``scope`` (array items: ``item`` in
    ``scope.name``), so every record's full name is its path, unique in the schema
    (``<parent>_<field>`` names collided: fields ``a_b`` and ``a.b``)."""
    if shape == "null":
        known = memory.get(path)
        return "null" if known is None else ["null", known]
    if isinstance(shape, str):
        return ["null", shape]
    if shape[0] == "array":
        items = _nullable(shape[1], f"{scope}.{name}", "item", (*path, "[]"), memory)
        return ["null", {"type": "array", "items": items}]
    return ["null", {"type": "record", "name": name, "namespace": scope,
                     "fields": _fields(shape, f"{scope}.{name}", path, memory)}]


def has_holes(shape: Shape) -> bool:
    """Whether a shape has a ``None`` field or items (a type the value alone cannot give)."""
    if shape == "null":
        return True
    if isinstance(shape, str):
        return False
    if shape[0] == "array":
        return has_holes(shape[1])
    return any(has_holes(inner) for _, inner in shape[1])


_AVRO_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes",
                              "string"})
_NO_DEFAULT = b""


def form_of(schema: Any, namespace: str = "") -> Form:
    """``schema`` (parsed JSON) as a ``Form``; ``namespace``: the enclosing one."""
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES:
            return schema
        return ("named", schema if "." in schema or not namespace else f"{namespace}.{schema}")
    if isinstance(schema, list):
        return ("union", tuple(form_of(branch, namespace) for branch in schema))
    if isinstance(schema, Mapping):
        kind = schema.get("type")
        if kind == "record" and isinstance(schema.get("fields"), list):
            name = str(schema.get("name", ""))
            own = schema.get("namespace", namespace)
            full = name if "." in name or not own else f"{own}.{name}"
            inner = full.rpartition(".")[0]
            return ("record", full, tuple(
                (str(f.get("name")), form_of(f.get("type"), inner),
                 orjson.dumps(f["default"]) if "default" in f else _NO_DEFAULT)
                for f in schema["fields"] if isinstance(f, Mapping)))
        if kind == "array" and len(schema) == 2 and "items" in schema:
            return ("array", form_of(schema["items"], namespace))
        if kind in _AVRO_PRIMITIVES and len(schema) == 1:
            return kind
    try:
        return ("other", orjson.dumps(schema, option=orjson.OPT_SORT_KEYS))
    except TypeError:
        return ("other", repr(schema))


def fields_key(form: Form) -> tuple[str, tuple[str, ...]] | None:
    """A record form's full name and field names: a version fits a value only if equal."""
    if not isinstance(form, tuple) or form[0] != "record":
        return None
    return form[1], tuple(name for name, _, _ in form[2])


def fits(pattern: Form, form: Form) -> bool:
    """Whether a registered schema (``form``) writes the values of ``pattern`` (the form
    of the schema inferred with ``"null"`` for ``None``): the same type everywhere but
    where the pattern has ``"null"``, there any type holding ``null``."""
    if pattern == "null":
        return form == "null" or (isinstance(form, tuple) and form[0] == "union"
                                  and "null" in form[1])
    if isinstance(pattern, str) or not isinstance(form, tuple) or pattern[0] != form[0]:
        return bool(pattern == form)
    if pattern[0] == "union":
        return len(pattern[1]) == len(form[1]) and all(map(fits, pattern[1], form[1]))
    if pattern[0] == "array":
        return fits(pattern[1], form[1])
    if pattern[0] == "record":
        return pattern[1] == form[1] and len(pattern[2]) == len(form[2]) and all(
            name == other and default == other_default and fits(inner, other_inner)
            for (name, inner, default), (other, other_inner, other_default)
            in zip(pattern[2], form[2], strict=True))
    return bool(pattern == form)


def remember(schema: Mapping[str, Any], memory: Memory, path: tuple[str, ...] = ()) -> None:
    """Record in ``memory`` the non-null type of every field path of a record schema."""
    for field in schema.get("fields", ()):
        _remember_type(field.get("type"), memory, (*path, str(field.get("name"))))


def _remember_type(avro_type: Any, memory: Memory, path: tuple[str, ...]) -> None:
    if isinstance(avro_type, list):
        branches = [t for t in avro_type if t != "null"]
        if len(branches) != 1:
            return
        avro_type = branches[0]
    if avro_type == "null" or avro_type is None:
        return
    memory[path] = avro_type
    if isinstance(avro_type, dict):
        if avro_type.get("type") == "record":
            remember(avro_type, memory, path)
        elif avro_type.get("type") == "array":
            _remember_type(avro_type.get("items"), memory, (*path, "[]"))


def load_declared(paths: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """cache → its declared record schema (``ConfigError`` naming the file otherwise)."""
    declared = {}
    for cache, path in paths.items():
        try:
            schema = orjson.loads(Path(path).read_bytes())
        except OSError as exc:
            raise ConfigError(f"avro.schemas: cannot read {path!r} for cache {cache!r}: "
                              f"{exc.strerror}") from exc
        except orjson.JSONDecodeError as exc:
            raise ConfigError(f"avro.schemas: {path!r} (cache {cache!r}) is not JSON: "
                              f"{exc}") from exc
        if not isinstance(schema, dict) or schema.get("type") != "record":
            raise ConfigError(f"avro.schemas: {path!r} (cache {cache!r}) must declare a "
                              "record: a grid value is a record")
        declared[cache] = schema
    return declared


def check_value(value: Value) -> None:
    """A grid value must be a dict (a record)."""
    if not isinstance(value, dict):
        raise CodecError(f"value must be a dict, not {type(value).__name__}")
