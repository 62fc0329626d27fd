"""The Spark type of a declared Avro schema (what a deserializer's values look like)."""

from __future__ import annotations

from typing import Any

from gridstream.errors import ConfigError

__all__ = ["avro_ddl"]

_PRIMITIVE = {"null": "void", "boolean": "boolean", "int": "int", "long": "bigint",
              "float": "float", "double": "double", "bytes": "binary", "string": "string"}
_LOGICAL = {"date": "date", "timestamp-millis": "timestamp", "timestamp-micros": "timestamp",
            "local-timestamp-millis": "timestamp_ntz",
            "local-timestamp-micros": "timestamp_ntz", "uuid": "string"}


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _type(schema: Any, named: dict[str, str]) -> str:
    if isinstance(schema, str):
        if schema in _PRIMITIVE:
            return _PRIMITIVE[schema]
        if schema in named:
            return named[schema]
        raise ConfigError(f"Avro type {schema!r} is not defined before its use")
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise ConfigError("a union of several non-null Avro types has no Spark type; "
                              "declare a schema without it")
        return _type(branches[0], named)
    if not isinstance(schema, dict):
        raise ConfigError(f"not an Avro schema: {schema!r}")
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical == "decimal":
        return f"decimal({int(schema['precision'])},{int(schema.get('scale', 0))})"
    if logical in _LOGICAL:
        return _LOGICAL[str(logical)]
    if kind == "record":
        fields = ", ".join(f"{_quote(f['name'])}: {_type(f['type'], named)}"
                           for f in schema.get("fields", ()))
        ddl = f"struct<{fields}>"
    elif kind == "array":
        ddl = f"array<{_type(schema['items'], named)}>"
    elif kind == "map":
        ddl = f"map<string, {_type(schema['values'], named)}>"
    elif kind == "enum":
        ddl = "string"
    elif kind == "fixed":
        ddl = "binary"
    else:
        return _type(kind, named)
    name = schema.get("name")
    if isinstance(name, str):
        namespace = schema.get("namespace")
        named[name] = ddl
        if namespace:
            named[f"{namespace}.{name}"] = ddl
    return ddl


def avro_ddl(schema: Any, *, extra: bool) -> str:
    """The Spark DDL of values read with ``schema``; a record gets ``_extra
    map<string,string>`` too when ``extra`` (its writer's fields it lacks)."""
    ddl = _type(schema, {})
    if extra and ddl.startswith("struct<"):
        ddl = f"{ddl[:-1]}, _extra: map<string, string>>"
    return ddl
