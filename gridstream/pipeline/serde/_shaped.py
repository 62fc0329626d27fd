"""JSON records mapped onto a declared schema (heterogeneous messages).

``key.schema`` / ``value.schema`` declare the record (Spark DDL such as
``"id bigint, name string, tags array<string>"``, a ``StructType``, or its JSON form).
Each record must be a JSON object; a declared field it lacks reads as null; a field it
has that the schema does not declare goes to ``_extra`` (a ``map<string,string>`` of
the field's path → its JSON text; nested fields as ``address.zip``) or is dropped with
``unknown.fields=drop``; a value of the wrong type (text for a number, a number out of
range, a list for a record, null for a NOT NULL field) is a decode error naming the
field: the error policy takes the record. Nothing is converted loosely: a number is not
read as text, nor text as a number.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

import orjson

from gridstream.errors import CodecError, ConfigError
from gridstream.pipeline.serde._base import Deserializer
from gridstream.pipeline.serde._basic import JsonDeserializer

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

__all__ = ["ShapedJsonDeserializer", "json_deserializer"]

_RANGES = {"long": 63, "integer": 31, "short": 15, "byte": 7}


def json_deserializer(props: Mapping[str, Any], *, is_key: bool) -> Deserializer:
    """Json: any JSON value, or records mapped onto ``key.schema`` / ``value.schema``."""
    declared = props.get("key.schema" if is_key else "value.schema")
    if declared is None:
        return JsonDeserializer(is_key=is_key)
    unknown = str(props.get("unknown.fields", "extra"))
    if unknown not in ("extra", "drop"):
        raise ConfigError(f"unknown.fields must be extra or drop, not {unknown!r}")
    return ShapedJsonDeserializer(declared, is_key=is_key, extra=unknown == "extra")


class _Unmappable(Exception):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"field {path!r}: {reason}" if path else reason)


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


class ShapedJsonDeserializer(Deserializer):
    name = "Json"

    def __init__(self, declared: Any, *, is_key: bool, extra: bool) -> None:
        super().__init__(is_key=is_key)
        self.extra = extra
        self._declared = declared
        self._struct: StructType | None = None
        self.prepare(required=False)

    def __repr__(self) -> str:
        return f"ShapedJsonDeserializer({self.side}, extra={self.extra})"

    @property
    def ddl(self) -> str | None:  # type: ignore[override]
        if self._struct is not None:
            fields = self._struct.simpleString()[len("struct<"):-1]
            return f"struct<{fields}{', _extra:map<string,string>' if self.extra else ''}>"
        return None

    def prepare(self, *, required: bool = True) -> None:
        """Parse the declared schema (Spark DDL needs the Spark session's parser: on the
        driver, before the query starts; ``decode_columns`` calls this)."""
        if self._struct is not None:
            return
        from pyspark import SparkContext
        from pyspark.sql.types import StructType, _parse_datatype_string

        declared = self._declared
        prop = f"{self.side}.schema"
        try:
            if isinstance(declared, StructType):
                parsed: Any = declared
            elif isinstance(declared, Mapping) or str(declared).lstrip().startswith("{"):
                raw = declared if isinstance(declared, Mapping) else orjson.loads(declared)
                parsed = StructType.fromJson(dict(raw))
            elif SparkContext._active_spark_context is None:
                if required:
                    raise ConfigError(f"{prop}: Spark DDL is parsed by the Spark session: "
                                      "start it first (or give a StructType)")
                return
            else:
                parsed = _parse_datatype_string(str(declared))
        except ConfigError:
            raise
        except Exception as exc:  # the parsers raise several kinds
            raise ConfigError(f"{prop} is not a Spark schema: {exc}") from exc
        if not isinstance(parsed, StructType):
            raise ConfigError(f"{prop} must declare fields (a struct), not {parsed}")
        self._struct = parsed

    def python(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        if self._struct is None:
            self.prepare()
        assert self._struct is not None
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise CodecError(f"{self.side} is not JSON: {exc}") from exc
        extra: dict[str, str] | None = {} if self.extra else None
        try:
            if not isinstance(value, dict):
                raise _Unmappable("", f"{self.side} is {_kind(value)}, not an object")
            row = _record(value, self._struct, "", extra)
        except _Unmappable as exc:
            raise CodecError(f"{self.side} does not fit {self.side}.schema: {exc}") from None
        if extra is not None:
            row["_extra"] = extra
        return row


def _record(value: dict[str, Any], struct: StructType, path: str,
            extra: dict[str, str] | None) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for field in struct.fields:
        inner = f"{path}.{field.name}" if path else field.name
        item = value.get(field.name)
        if item is None and not field.nullable:
            raise _Unmappable(inner, "null or missing, but declared NOT NULL")
        row[field.name] = _convert(item, field.dataType, inner, extra)
    if extra is not None:
        for name, item in value.items():
            if name not in row:
                extra[f"{path}.{name}" if path else name] = orjson.dumps(item).decode()
    return row


def _convert(value: Any, dtype: DataType, path: str, extra: dict[str, str] | None) -> Any:
    from pyspark.sql import types as T  # noqa: N812

    if value is None:
        return None
    kind = dtype.typeName()
    if isinstance(dtype, T.StructType):
        if not isinstance(value, dict):
            raise _Unmappable(path, f"{_kind(value)}, not an object")
        return _record(value, dtype, path, extra)
    if isinstance(dtype, T.ArrayType):
        if not isinstance(value, list):
            raise _Unmappable(path, f"{_kind(value)}, not a list")
        return [_convert(v, dtype.elementType, f"{path}[{i}]", extra)
                for i, v in enumerate(value)]
    if isinstance(dtype, T.MapType):
        if not isinstance(value, dict) or not isinstance(dtype.keyType, T.StringType):
            raise _Unmappable(path, f"{_kind(value)}, not an object with text keys")
        return {k: _convert(v, dtype.valueType, f"{path}.{k}", extra)
                for k, v in value.items()}
    if kind in _RANGES:
        if type(value) is not int:
            raise _Unmappable(path, f"{_kind(value)}, not a whole number")
        if not -(1 << _RANGES[kind]) <= value < (1 << _RANGES[kind]):
            raise _Unmappable(path, f"{value} is out of range for {dtype.simpleString()}")
        return value
    if kind in ("double", "float"):
        if type(value) not in (int, float):
            raise _Unmappable(path, f"{_kind(value)}, not a number")
        return float(value)
    if kind == "string":
        if type(value) is not str:
            raise _Unmappable(path, f"{_kind(value)}, not text")
        return value
    if kind == "boolean":
        if type(value) is not bool:
            raise _Unmappable(path, f"{_kind(value)}, not a boolean")
        return value
    return _convert_text(value, dtype, path)


def _convert_text(value: Any, dtype: DataType, path: str) -> Any:
    """Types JSON writes as text (or numbers, for decimals)."""
    from pyspark.sql import types as T  # noqa: N812

    try:
        if isinstance(dtype, T.DecimalType):
            if type(value) not in (int, str):  # a float is already rounded by the parser
                raise _Unmappable(path, f"{_kind(value)}: a decimal is written as text or "
                                  "a whole number")
            number = Decimal(value)
            exponent = number.as_tuple().exponent
            if not isinstance(exponent, int) or exponent < -dtype.scale or \
                    number.adjusted() >= dtype.precision - dtype.scale:
                raise _Unmappable(path, f"{value} does not fit {dtype.simpleString()}")
            return number
        if type(value) is not str:
            raise _Unmappable(path, f"{_kind(value)}, not text ({dtype.simpleString()})")
        if isinstance(dtype, T.TimestampType | T.TimestampNTZType):
            return dt.datetime.fromisoformat(value)
        if isinstance(dtype, T.DateType):
            return dt.date.fromisoformat(value)
        if isinstance(dtype, T.BinaryType):
            return base64.b64decode(value, validate=True)
    except (ValueError, InvalidOperation, binascii.Error) as exc:
        raise _Unmappable(path, f"{value!r} is not a {dtype.simpleString()}: {exc}") from exc
    raise _Unmappable(path, f"the declared type {dtype.simpleString()} is not supported")
