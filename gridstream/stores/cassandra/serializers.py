"""Property value serializers: how non-native values become blob columns and back.

Fixed properties whose kind has no native CQL type, and every dynamic property, are
stored as blobs written by a ``PropertyValueSerializer``. The default, ``msgpack``, tags
every value with its type (datetime, date, time, Decimal, UUID, bytes, set, frozenset,
tuple, big integers, dicts with non-string keys), so a value reads back as the same type.
Serializers are chosen by name from an allow-list registry; a Python caller may also pass
an instance. Nothing here can execute code while decoding (no pickle).
"""

from __future__ import annotations

import datetime as dt
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import msgspec
import orjson

from gridstream.errors import CodecError, ConfigError

__all__ = [
    "JsonSerializer",
    "PropertyValueSerializer",
    "TaggedMsgpackSerializer",
    "available_serializers",
    "register_serializer",
    "resolve_serializer",
]


class PropertyValueSerializer(ABC):
    """Turns a property value into bytes and back; must round-trip what it accepts and
    raise ``CodecError`` for what it does not (never lose a value silently)."""

    name: str = "custom"

    @abstractmethod
    def to_bytes(self, value: Any) -> bytes:
        """Encode ``value``."""

    @abstractmethod
    def from_bytes(self, data: bytes) -> Any:
        """Decode what ``to_bytes`` produced."""


# msgpack extension codes used by the tagged serializer (application range 0..127).
_EXT_DATETIME = 1
_EXT_DATE = 2
_EXT_TIME = 3
_EXT_DECIMAL = 4
_EXT_UUID = 5
_EXT_SET = 6
_EXT_FROZENSET = 7
_EXT_TUPLE = 8
_EXT_BIGINT = 9
_EXT_PAIRS = 10
"""A dict with a key that is not a string: a list of ``[key, value]`` pairs."""

_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1


def _tag_int(value: int) -> Any:
    if _INT_MIN <= value <= _INT_MAX:
        return int(value)
    return msgspec.msgpack.Ext(_EXT_BIGINT, str(int(value)).encode("ascii"))


class TaggedMsgpackSerializer(PropertyValueSerializer):
    """msgpack (msgspec) with explicit extension tags for non-JSON types.

    Type tags: msgpack's own str / int / float / bool / nil / bin (bytes) / array (list)
    / map (dict with string keys), and extension types for the rest. Aware datetimes keep
    their UTC offset (a named zone reads back as a fixed offset, equal in value).
    """

    name = "msgpack"

    def __init__(self) -> None:
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(ext_hook=self._ext_hook)

    def to_bytes(self, value: Any) -> bytes:
        try:
            return self._encoder.encode(self._tag(value))
        except (TypeError, ValueError, OverflowError) as exc:
            raise CodecError(f"msgpack cannot encode a {type(value).__name__}") from exc

    def from_bytes(self, data: bytes) -> Any:
        try:
            return self._decoder.decode(data)
        except (msgspec.DecodeError, ValueError, TypeError) as exc:
            raise CodecError("msgpack cannot decode this column value") from exc

    def _pack(self, code: int, items: Any) -> msgspec.msgpack.Ext:
        return msgspec.msgpack.Ext(code, self._encoder.encode(items))

    def _tag(self, value: Any) -> Any:
        if value is None or isinstance(value, bool | float | str):
            return value
        if isinstance(value, int):
            return _tag_int(value)
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        if isinstance(value, list):
            return [self._tag(v) for v in value]
        if isinstance(value, Mapping):
            return self._tag_mapping(value)
        return self._tag_other(value)

    def _tag_mapping(self, value: Mapping[Any, Any]) -> Any:
        if all(isinstance(k, str) for k in value):
            return {str(k): self._tag(v) for k, v in value.items()}
        pairs = [[self._tag(k), self._tag(v)] for k, v in value.items()]
        return self._pack(_EXT_PAIRS, pairs)

    def _tag_other(self, value: Any) -> Any:
        if isinstance(value, dt.datetime):
            return msgspec.msgpack.Ext(_EXT_DATETIME, value.isoformat().encode("ascii"))
        if isinstance(value, dt.date):
            return msgspec.msgpack.Ext(_EXT_DATE, value.isoformat().encode("ascii"))
        if isinstance(value, dt.time):
            return msgspec.msgpack.Ext(_EXT_TIME, value.isoformat().encode("ascii"))
        if isinstance(value, Decimal):
            return msgspec.msgpack.Ext(_EXT_DECIMAL, str(value).encode("ascii"))
        if isinstance(value, uuid.UUID):
            return msgspec.msgpack.Ext(_EXT_UUID, value.bytes)
        if isinstance(value, tuple):
            return self._pack(_EXT_TUPLE, [self._tag(v) for v in value])
        if isinstance(value, frozenset):
            return self._pack(_EXT_FROZENSET, [self._tag(v) for v in value])
        if isinstance(value, set):
            return self._pack(_EXT_SET, [self._tag(v) for v in value])
        raise CodecError(f"msgpack has no tag for values of type {type(value).__name__}")

    def _ext_hook(self, code: int, data: memoryview) -> Any:
        decode = _EXT_DECODERS.get(code)
        if decode is not None:
            return decode(bytes(data))
        items = self._decoder.decode(data)
        if code == _EXT_TUPLE:
            return tuple(items)
        if code == _EXT_SET:
            return set(items)
        if code == _EXT_FROZENSET:
            return frozenset(items)
        if code == _EXT_PAIRS:
            return {k: v for k, v in items}
        raise CodecError(f"unknown msgpack extension type {code}")


_EXT_DECODERS: dict[int, Callable[[bytes], Any]] = {
    _EXT_DATETIME: lambda b: dt.datetime.fromisoformat(b.decode("ascii")),
    _EXT_DATE: lambda b: dt.date.fromisoformat(b.decode("ascii")),
    _EXT_TIME: lambda b: dt.time.fromisoformat(b.decode("ascii")),
    _EXT_DECIMAL: lambda b: Decimal(b.decode("ascii")),
    _EXT_UUID: lambda b: uuid.UUID(bytes=b),
    _EXT_BIGINT: lambda b: int(b.decode("ascii")),
}


class JsonSerializer(PropertyValueSerializer):
    """Plain JSON (orjson), readable by any client. Accepts only JSON's own types (str,
    int, finite float, bool, None, list, dict with string keys) and raises ``CodecError``
    for anything else instead of changing its type."""

    name = "json"

    def to_bytes(self, value: Any) -> bytes:
        _check_json(value)
        try:
            return orjson.dumps(value)
        except orjson.JSONEncodeError as exc:
            raise CodecError(f"json cannot encode a {type(value).__name__}") from exc

    def from_bytes(self, data: bytes) -> Any:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise CodecError("json cannot decode this column value") from exc


def _check_json(value: Any) -> None:
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise CodecError("json has no encoding for NaN or infinity")
        return
    if isinstance(value, list):
        for item in value:
            _check_json(item)
        return
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        for item in value.values():
            _check_json(item)
        return
    raise CodecError(f"json would not read a {type(value).__name__} back as the same type")


_REGISTRY: dict[str, Callable[[], PropertyValueSerializer]] = {
    TaggedMsgpackSerializer.name: TaggedMsgpackSerializer,
    JsonSerializer.name: JsonSerializer,
}


def register_serializer(name: str, factory: Callable[[], PropertyValueSerializer]) -> None:
    """Add ``factory`` to the allow-list under ``name`` (config may then name it)."""
    if not name:
        raise ConfigError("a serializer needs a name")
    _REGISTRY[name] = factory


def available_serializers() -> tuple[str, ...]:
    """Names a configuration may choose from."""
    return tuple(sorted(_REGISTRY))


def resolve_serializer(spec: str | PropertyValueSerializer) -> PropertyValueSerializer:
    """A serializer from a registered name, or ``spec`` itself if it is an instance."""
    if isinstance(spec, PropertyValueSerializer):
        return spec
    factory = _REGISTRY.get(spec)
    if factory is None:
        raise ConfigError(
            f"unknown property value serializer {spec!r}; choose one of "
            f"{', '.join(available_serializers())} or register it first"
        )
    return factory()
