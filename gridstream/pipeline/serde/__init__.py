"""Serializers and deserializers named by Kafka property (``key.deserializer``, ...).

TEMPORARY minimal implementation (String and ByteArray only) behind the interface the
pipeline core calls; the full set of serializers replaces this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gridstream.errors import CodecError, ConfigError

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["Deserializer", "Serializer", "deserializer", "serializer"]

_STRING = ("string", "stringdeserializer", "stringserializer",
           "org.apache.kafka.common.serialization.stringdeserializer",
           "org.apache.kafka.common.serialization.stringserializer")
_BYTES = ("bytearray", "bytearraydeserializer", "bytearrayserializer", "bytes",
          "org.apache.kafka.common.serialization.bytearraydeserializer",
          "org.apache.kafka.common.serialization.bytearrayserializer")


def _kind(props: Mapping[str, Any], name: str) -> str:
    spelled = str(props.get(name, "ByteArray")).strip()
    lowered = spelled.lower()
    if lowered in _STRING:
        return "string"
    if lowered in _BYTES:
        return "bytes"
    raise ConfigError(f"{name} = {spelled!r}: unknown; known: String, ByteArray")


class Deserializer:
    """Kafka bytes → a Python value (or, in the JVM, a column)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return f"Deserializer({self.kind})"

    def jvm(self, raw: Column) -> tuple[Column, Column | None] | None:
        if self.kind == "string":
            return raw.cast("string"), None
        return raw, None

    def python(self, topic: str, data: bytes | None) -> Any:
        if data is None or self.kind == "bytes":
            return data
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CodecError(f"not UTF-8 text: {exc}") from exc


class Serializer:
    """A Python value → Kafka bytes (or, in the JVM, a column)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return f"Serializer({self.kind})"

    def jvm(self, col: Column) -> Column | None:
        return col.cast("binary")

    def python(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if self.kind == "string":
            if not isinstance(value, str):
                raise CodecError(f"StringSerializer takes str, not {type(value).__name__}")
            return value.encode("utf-8")
        if not isinstance(value, bytes | bytearray):
            raise CodecError(f"ByteArraySerializer takes bytes, not {type(value).__name__}")
        return bytes(value)


def deserializer(props: Mapping[str, Any], *, is_key: bool) -> Deserializer:
    return Deserializer(_kind(props, "key.deserializer" if is_key else "value.deserializer"))


def serializer(props: Mapping[str, Any], *, is_key: bool) -> Serializer:
    return Serializer(_kind(props, "key.serializer" if is_key else "value.serializer"))
