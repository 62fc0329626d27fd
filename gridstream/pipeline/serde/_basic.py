"""Kafka's own (de)serializers, byte for byte, and gridstream's JSON.

- String: UTF-8 (bytes that are not UTF-8 are a decode error, never replaced);
- ByteArray / Bytes: the bytes as they are;
- Long / Integer / Short: 8 / 4 / 2 bytes, big-endian two's complement (another length
  is a decode error);
- Double / Float: 8 / 4 bytes, big-endian IEEE 754 (Float rounds to single precision);
- Void: always null (a non-null record is a decode error);
- Json: orjson (any JSON value; NaN and infinities have no JSON form: an encode error).

JVM forms (exact, including negatives): String (CAST plus a UTF-8 check), ByteArray,
Long / Integer / Short (``conv`` of the hex digits), Void. Double and Float have no exact
Spark SQL form (no bit reinterpretation): Python decodes them, as it does JSON.
Vectorized forms (``arrow``: a whole Arrow column at once, used when a Python pass follows
the source, which then decodes them itself instead of the JVM, and when the Kafka sink's
Python pass encodes): String (Arrow's cast, which checks UTF-8; encoding, Arrow's
conversion of ``str`` values), ByteArray.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

import orjson

from gridstream.errors import CodecError
from gridstream.grid.values import dumps_value
from gridstream.pipeline.serde._base import Deserializer, Serializer

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column

__all__ = ["BytesDeserializer", "BytesSerializer", "DoubleDeserializer", "DoubleSerializer",
           "FloatDeserializer", "FloatSerializer", "IntegerDeserializer",
           "IntegerSerializer", "JsonDeserializer", "JsonSerializer", "LongDeserializer",
           "LongSerializer", "ShortDeserializer", "ShortSerializer", "StringDeserializer",
           "StringSerializer", "VoidDeserializer", "VoidSerializer"]


_TEXT = frozenset({str, type(None)})
_BYTES = frozenset({bytes, type(None)})


# --------------------------------------------------------------------------- String

class StringDeserializer(Deserializer):
    name = "String"
    ddl = "string"
    vectorized = True

    def arrow(self, column: pa.Array) -> pa.Array:
        import pyarrow as pa

        try:
            return column.cast(pa.string())  # checks UTF-8 (Arrow's own validation)
        except pa.ArrowInvalid as exc:
            raise CodecError(f"{self.side} is not valid UTF-8 (String)") from exc

    def jvm(self, raw: Column) -> tuple[Column, Column | None]:
        from pyspark.sql import functions as F  # noqa: N812
        text = raw.cast("string")
        error = F.when(raw.isNotNull() & ~F.is_valid_utf8(text),
                       F.lit(f"{self.side} is not valid UTF-8 (String)"))
        return F.when(error.isNull(), text), error

    def python(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CodecError(f"{self.side} is not valid UTF-8 (String)") from exc


class StringSerializer(Serializer):
    name = "String"
    jvm_type = "string"
    vectorized = True

    def arrow(self, values: list[Any]) -> pa.Array:
        import pyarrow as pa

        if not set(map(type, values)) <= _TEXT:  # Arrow would take bytes as text
            raise CodecError(f"{self.side}: String writes a str")
        try:
            return pa.array(values, pa.string()).cast(pa.binary())
        except (pa.ArrowException, UnicodeError) as exc:  # a lone surrogate
            raise CodecError(f"{self.side}: not encodable as UTF-8 (String)") from exc

    def jvm(self, col: Column, topic: str | None = None) -> Column:
        return col.cast("binary")

    def python(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise CodecError(f"{self.side}: String writes a str, not a "
                             f"{type(value).__name__}")
        return value.encode("utf-8")


# ------------------------------------------------------------------------ ByteArray

class BytesDeserializer(Deserializer):
    name = "ByteArray"
    ddl = "binary"

    vectorized = True

    def jvm(self, raw: Column) -> tuple[Column, Column | None]:
        return raw, None

    def arrow(self, column: pa.Array) -> pa.Array:
        return column

    def python(self, topic: str, data: bytes | None) -> Any:
        return None if data is None else bytes(data)


class BytesSerializer(Serializer):
    name = "ByteArray"
    jvm_type = "binary"
    vectorized = True

    def arrow(self, values: list[Any]) -> pa.Array:
        import pyarrow as pa

        if not set(map(type, values)) <= _BYTES:  # bytearray, memoryview: by value
            raise CodecError(f"{self.side}: ByteArray writes bytes")
        return pa.array(values, pa.binary())

    def jvm(self, col: Column, topic: str | None = None) -> Column:
        return col

    def python(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if not isinstance(value, bytes | bytearray | memoryview):
            raise CodecError(f"{self.side}: ByteArray writes bytes, not a "
                             f"{type(value).__name__}")
        return bytes(value)


# ----------------------------------------------------------------- fixed-width ints

class _IntDeserializer(Deserializer):
    size = 8
    fmt = ">q"

    def jvm(self, raw: Column) -> tuple[Column, Column | None]:
        from pyspark.sql import functions as F  # noqa: N812
        ok = F.length(raw) == self.size
        if self.size == 8:
            # conv with a negative target base reads the 64 bits as signed
            number = F.conv(F.hex(raw), 16, -10).cast("bigint")
        else:
            unsigned = F.conv(F.hex(raw), 16, 10).cast("bigint")
            half, whole = 1 << (self.size * 8 - 1), 1 << (self.size * 8)
            number = F.when(unsigned >= half, unsigned - F.lit(whole)).otherwise(unsigned)
        error = F.when(raw.isNotNull() & ~ok, F.concat(
            F.lit(f"{self.side}: {self.name} needs {self.size} bytes, not "),
            F.length(raw).cast("string")))
        return F.when(ok, number.cast(str(self.ddl))), error

    def python(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) != self.size:
            raise CodecError(f"{self.side}: {self.name} needs {self.size} bytes, not "
                             f"{len(data)}")
        return struct.unpack(self.fmt, data)[0]


class _IntSerializer(Serializer):
    size = 8
    fmt = ">q"

    def jvm(self, col: Column, topic: str | None = None) -> Column:
        from pyspark.sql import functions as F  # noqa: N812
        # hex of a negative bigint is its 16 two's-complement digits
        digits = F.lpad(F.hex(col.cast("bigint")), 16, "0")
        return F.unhex(F.substring(digits, 17 - 2 * self.size, 2 * self.size))

    def python(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise CodecError(f"{self.side}: {self.name} writes an int, not a "
                             f"{type(value).__name__}")
        try:
            return struct.pack(self.fmt, value)
        except struct.error as exc:
            raise CodecError(f"{self.side}: {value} does not fit {self.name} "
                             f"({self.size} bytes)") from exc


class LongDeserializer(_IntDeserializer):
    name, ddl, size, fmt = "Long", "bigint", 8, ">q"


class IntegerDeserializer(_IntDeserializer):
    name, ddl, size, fmt = "Integer", "int", 4, ">i"


class ShortDeserializer(_IntDeserializer):
    name, ddl, size, fmt = "Short", "smallint", 2, ">h"


class LongSerializer(_IntSerializer):
    name, jvm_type, size, fmt = "Long", "bigint", 8, ">q"


class IntegerSerializer(_IntSerializer):
    name, jvm_type, size, fmt = "Integer", "int", 4, ">i"


class ShortSerializer(_IntSerializer):
    name, jvm_type, size, fmt = "Short", "smallint", 2, ">h"


# ------------------------------------------------------------------- floating point

class _FloatDeserializer(Deserializer):
    size, fmt = 8, ">d"

    def python(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) != self.size:
            raise CodecError(f"{self.side}: {self.name} needs {self.size} bytes, not "
                             f"{len(data)}")
        return struct.unpack(self.fmt, data)[0]


class _FloatSerializer(Serializer):
    size, fmt = 8, ">d"

    def python(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, float | int):
            raise CodecError(f"{self.side}: {self.name} writes a float, not a "
                             f"{type(value).__name__}")
        if isinstance(value, int) and float(value) != value:
            raise CodecError(f"{self.side}: {value} has no exact {self.name} form")
        try:
            return struct.pack(self.fmt, value)
        except (struct.error, OverflowError) as exc:
            raise CodecError(f"{self.side}: {value} does not fit {self.name}") from exc


class DoubleDeserializer(_FloatDeserializer):
    name, ddl, size, fmt = "Double", "double", 8, ">d"


class FloatDeserializer(_FloatDeserializer):
    name, ddl, size, fmt = "Float", "float", 4, ">f"


class DoubleSerializer(_FloatSerializer):
    name, size, fmt = "Double", 8, ">d"


class FloatSerializer(_FloatSerializer):
    name, size, fmt = "Float", 4, ">f"


# --------------------------------------------------------------------------- Void

class VoidDeserializer(Deserializer):
    name = "Void"
    ddl = "void"

    def jvm(self, raw: Column) -> tuple[Column, Column | None]:
        from pyspark.sql import functions as F  # noqa: N812
        error = F.when(raw.isNotNull(),
                       F.lit(f"{self.side}: Void reads only null records"))
        return F.lit(None), error

    def python(self, topic: str, data: bytes | None) -> Any:
        if data is not None:
            raise CodecError(f"{self.side}: Void reads only null records")
        return None


class VoidSerializer(Serializer):
    name = "Void"
    jvm_type = "void"

    def jvm(self, col: Column, topic: str | None = None) -> Column:
        from pyspark.sql import functions as F  # noqa: N812

        return F.lit(None).cast("binary")

    def python(self, topic: str, value: Any) -> bytes | None:
        if value is not None:
            raise CodecError(f"{self.side}: Void writes only None, not a "
                             f"{type(value).__name__}")
        return None


# --------------------------------------------------------------------------- Json

class JsonDeserializer(Deserializer):
    """Any JSON value (no declared schema: ``_shaped.ShapedJsonDeserializer`` has one)."""

    name = "Json"

    def python(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise CodecError(f"{self.side} is not JSON: {exc}") from exc


class JsonSerializer(Serializer):
    name = "Json"

    def python(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        try:  # NaN and infinities refused (orjson would write null), in any container
            return dumps_value(value)
        except CodecError as exc:
            raise CodecError(f"{self.side}: {exc}") from exc
