"""Kafka Connect's JSON envelope with schemas: ``{"schema": ..., "payload": ...}``.

The same bytes Kafka Connect's ``JsonConverter`` writes and reads with
``schemas.enable=true``: a JSON object with exactly two members, ``schema`` (a Connect
schema: ``type``, ``optional``, ``field`` for struct fields, ``items`` for arrays,
``keys``/``values`` for maps, optional ``name``/``version``/``doc``/``parameters``/
``default``) and ``payload`` (the value in its JSON form).

Encoding infers the schema from the value:

- the value is a ``struct`` named after the cache, not optional; every field of it (and
  of nested structs) is ``optional: true``;
- ``str`` → ``string``, ``bool`` → ``boolean``, ``int`` → ``int64`` (outside the int64
  range: ``CodecError``), ``float`` → ``double`` (NaN and infinities: ``CodecError``, JSON
  has none), ``dict`` → ``struct`` (string keys), ``list`` → ``array`` whose ``items``
  schema fits every element;
- a ``None`` field (or a list of nothing but ``None``, or an empty list's items) has no
  type to infer: it is written as an optional ``string`` — any optional type would do
  for Connect, and ``string`` maps to a column of any sink;
- array elements must share one type (``None`` elements make ``items`` optional; structs
  merge their fields, all optional); mixed types, and values with no Connect schema
  (bytes, dates, decimals, sets, ...), are ``CodecError``s.

Decoding requires the envelope and checks the payload against its schema: every Connect
type (``int8`` ... ``int64`` with their ranges, ``float``/``double``, ``bytes`` as
base64 text, ``map`` as a JSON object — string keys — or an array of ``[key, value]``
pairs, logical types in their JSON form), required fields present and not null, no
payload field the schema does not declare (Connect would drop it silently; this
converter refuses it). It returns the payload with schema defaults filled in for
missing or null fields: logical types stay in their JSON form (a Timestamp is its
epoch milliseconds, bytes their base64 text). The value must be a ``struct`` (or a
``map`` with string keys); an envelope with ``"schema": null`` carries schemaless JSON,
accepted when the payload is an object; a null payload is a ``CodecError`` (a removal is
a record without value bytes).
"""

from __future__ import annotations

import binascii
import math
from typing import Any

import orjson

from gridstream.connect.converters import Converter
from gridstream.errors import CodecError
from gridstream.grid.contract import Value
from gridstream.grid.values import loads

__all__ = ["JsonSchemaConverter", "check_payload", "infer_schema"]

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_INT64_MIN, _INT64_MAX = _INT_RANGES["int64"]
_DECIMAL = "org.apache.kafka.connect.data.Decimal"

# ------------------------------------------------------------------------- encoding


def _where(path: str) -> str:
    return f"field {path!r}" if path else "the value"


_UNKNOWN = "?"
"""The type of a ``None`` (written as an optional ``string`` unless merged with a type)."""


def _infer(value: Any, path: str) -> dict[str, Any]:
    """The Connect schema of ``value`` (``optional`` left to the caller)."""
    if value is None:
        return {"type": _UNKNOWN}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise CodecError(f"{_where(path)}: {value} does not fit Connect's int64")
        return {"type": "int64"}
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CodecError(f"{_where(path)}: {value} has no JSON form")
        return {"type": "double"}
    if isinstance(value, dict):
        return {"type": "struct", "fields": _fields(value, path)}
    if isinstance(value, list):
        return {"type": "array", "items": _items(value, path)}
    raise CodecError(f"{_where(path)}: a {type(value).__name__} has no Connect schema")


def _fields(value: dict[Any, Any], path: str) -> list[dict[str, Any]]:
    fields = []
    for name, item in value.items():
        if not isinstance(name, str):
            raise CodecError(f"{_where(path)}: key {name!r} is not a string")
        field = _infer(item, f"{path}.{name}" if path else name)
        field["optional"] = True
        field["field"] = name
        fields.append(field)
    return fields


def _items(value: list[Any], path: str) -> dict[str, Any]:
    merged: dict[str, Any] = {"type": _UNKNOWN}
    if not value:
        return merged  # no element: the items' type comes from another list, or string
    nullable = False
    for index, element in enumerate(value):
        if element is None:
            nullable = True
        else:
            merged = _merge(merged, _infer(element, f"{path}[{index}]"), f"{path}[{index}]")
    merged["optional"] = nullable
    return merged


def _merge(a: dict[str, Any], b: dict[str, Any], path: str) -> dict[str, Any]:
    """One schema for two array elements: an unknown type takes the other's, struct
    fields are merged (all optional), anything else must be equal."""
    if a["type"] == _UNKNOWN:
        merged = dict(b)
    elif b["type"] == _UNKNOWN:
        merged = dict(a)
    elif a["type"] != b["type"]:
        raise CodecError(f"{_where(path)}: array elements mix {a['type']} and {b['type']}")
    else:
        merged = dict(a)
        if a["type"] == "struct":
            fields = {f["field"]: f for f in a["fields"]}
            for field in b["fields"]:
                name = field["field"]
                fields[name] = field if name not in fields else \
                    _merge(fields[name], field, f"{path}.{name}")
            merged["fields"] = list(fields.values())
        elif a["type"] == "array":
            merged["items"] = _merge(a["items"], b["items"], f"{path}[]")
    if "optional" in a or "optional" in b:
        merged["optional"] = bool(a.get("optional") or b.get("optional"))
    return merged


def _finalize(schema: dict[str, Any]) -> dict[str, Any]:
    """Unknown types (nothing but ``None`` seen) become optional strings."""
    kind = schema["type"]
    if kind == _UNKNOWN:
        schema["type"] = "string"
        schema["optional"] = True
    elif kind == "struct":
        for field in schema["fields"]:
            _finalize(field)
    elif kind == "array":
        _finalize(schema["items"])
    return schema


def infer_schema(cache: str, value: Value) -> dict[str, Any]:
    """The Connect schema of one grid value (a struct named after ``cache``)."""
    return _finalize({"type": "struct", "fields": _fields(value, ""), "optional": False,
                      "name": cache})


# ------------------------------------------------------------------------- decoding


def _schema_error(path: str, detail: str) -> CodecError:
    return CodecError(f"schema of {_where(path)}: {detail}")


def _type_error(path: str, kind: str, value: Any) -> CodecError:
    return CodecError(f"{_where(path)}: expected {kind}, found {type(value).__name__}")


def _check(schema: Any, value: Any, path: str) -> Any:
    """``value`` checked against ``schema`` (defaults filled in place)."""
    if not isinstance(schema, dict):
        raise _schema_error(path, "not a JSON object")
    kind = schema.get("type")
    if not isinstance(kind, str):
        raise _schema_error(path, f"unknown type {kind!r}")
    if value is None:
        default = schema.get("default")
        if default is not None:
            return _check({k: v for k, v in schema.items() if k != "default"}, default, path)
        if schema.get("optional") is True:
            return None
        raise CodecError(f"{_where(path)}: null for a required {kind}")
    if kind in _INT_RANGES:
        low, high = _INT_RANGES[kind]
        if not isinstance(value, int) or isinstance(value, bool):
            raise _type_error(path, kind, value)
        if not low <= value <= high:
            raise CodecError(f"{_where(path)}: {value} is out of {kind}'s range")
    elif kind in ("float", "double"):
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise _type_error(path, kind, value)
        value = float(value)  # 1 for a double is 1.0, as Kafka Connect reads it
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise _type_error(path, kind, value)
    elif kind == "string":
        if not isinstance(value, str):
            raise _type_error(path, kind, value)
    elif kind == "bytes":
        _check_bytes(schema, value, path)
    elif kind == "array":
        if not isinstance(value, list):
            raise _type_error(path, kind, value)
        items = schema.get("items")
        if items is None:
            raise _schema_error(path, "an array without 'items'")
        for index, element in enumerate(value):
            value[index] = _check(items, element, f"{path}[{index}]")
    elif kind == "map":
        _check_map(schema, value, path)
    elif kind == "struct":
        _check_struct(schema, value, path)
    else:
        raise _schema_error(path, f"unknown type {kind!r}")
    return value


def _check_bytes(schema: dict[str, Any], value: Any, path: str) -> None:
    if schema.get("name") == _DECIMAL and isinstance(value, int | float) \
            and not isinstance(value, bool):
        return  # decimal.format=NUMERIC
    if not isinstance(value, str):
        raise _type_error(path, "bytes (base64 text)", value)
    try:
        binascii.a2b_base64(value, strict_mode=True)
    except binascii.Error as exc:
        raise CodecError(f"{_where(path)}: bytes that are not base64: {exc}") from exc


def _check_map(schema: dict[str, Any], value: Any, path: str) -> None:
    keys, values = schema.get("keys"), schema.get("values")
    if keys is None or values is None:
        raise _schema_error(path, "a map without 'keys' and 'values'")
    if isinstance(keys, dict) and keys.get("type") == "string":
        if not isinstance(value, dict):
            raise _type_error(path, "map (a JSON object)", value)
        for name, item in value.items():
            value[name] = _check(values, item, f"{path}.{name}")
        return
    if not isinstance(value, list):
        raise _type_error(path, "map (an array of [key, value] pairs)", value)
    for index, pair in enumerate(value):
        if not isinstance(pair, list) or len(pair) != 2:
            raise CodecError(f"{_where(path)}[{index}]: a map entry must be a [key, value] pair")
        pair[0] = _check(keys, pair[0], f"{path}[{index}].key")
        pair[1] = _check(values, pair[1], f"{path}[{index}].value")


def _check_struct(schema: dict[str, Any], value: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise _type_error(path, "struct (a JSON object)", value)
    fields = schema.get("fields")
    if not isinstance(fields, list):
        raise _schema_error(path, "a struct whose 'fields' is not an array")
    declared = set()
    for field in fields:
        name = field.get("field") if isinstance(field, dict) else None
        if not isinstance(name, str):
            raise _schema_error(path, "a struct field without a 'field' name")
        declared.add(name)
        inner = f"{path}.{name}" if path else name
        checked = _check(field, value.get(name), inner)
        if checked is not None or name in value:
            value[name] = checked
    if not declared.issuperset(value):
        extra = sorted(set(value) - declared)
        raise CodecError(f"{_where(path)}: fields {extra} are not in the schema")


def check_payload(envelope: Any) -> Value:
    """The payload of a Connect envelope, checked against its schema."""
    if not isinstance(envelope, dict) or set(envelope) != {"schema", "payload"}:
        raise CodecError('value is not a Kafka Connect envelope: a JSON object with exactly '
                         '"schema" and "payload" is expected')
    schema, payload = envelope["schema"], envelope["payload"]
    if payload is None:
        raise CodecError("the envelope's payload is null (a removal is a record without "
                         "value bytes)")
    if schema is None:
        if not isinstance(payload, dict):
            raise _type_error("", "a JSON object", payload)
        return payload
    kind = schema.get("type") if isinstance(schema, dict) else None
    string_map = kind == "map" and isinstance(schema.get("keys"), dict) \
        and schema["keys"].get("type") == "string"
    if kind != "struct" and not string_map:
        raise CodecError(f"the envelope's schema is a {kind!r}: a grid value needs a struct "
                         "(or a map with string keys)")
    checked: Value = _check(schema, payload, "")
    return checked


class JsonSchemaConverter(Converter):
    """Values as Connect envelopes (see the module docstring)."""

    def encode_value(self, topic: str, cache: str, value: Value | None) -> bytes | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise CodecError(f"value must be a dict, not {type(value).__name__}")
        envelope = {"schema": infer_schema(cache, value), "payload": value}
        try:
            return orjson.dumps(envelope)
        except TypeError as exc:  # pragma: no cover - inference refuses such values first
            raise CodecError(f"value cannot be written as JSON: {exc}") from exc

    def decode_value(self, topic: str, data: bytes | None) -> Value | None:
        if data is None:
            return None
        try:
            envelope = loads(data)
        except orjson.JSONDecodeError as exc:
            raise CodecError(f"value is not JSON: {exc}") from exc
        return check_payload(envelope)
