"""Converters: grid keys and values ↔ Kafka bytes.

``build_converter(ConverterConfig)`` gives one ``Converter`` per task (they hold caches
and registry clients: build them where they are used, never pickle them). Every failure
to encode or decode raises ``CodecError`` (the caller names the record and applies the
error policy).

- keys: ``json`` — a JSON scalar (``"k-1"``, ``12``); ``string`` — UTF-8 text.
- values: ``json`` — a JSON object; ``json_schema`` — Kafka Connect's envelope
  ``{"schema": ..., "payload": ...}`` (``gridstream.connect._json_schema``); ``avro`` —
  Confluent wire format (magic byte 0, 4-byte schema id, Avro body) with schemas in the
  registry (``gridstream.connect._avro``).
- a registry that cannot be reached or fails is a ``ConnectorError`` (not the record's
  fault: the connector stops rather than dead-lettering every record).
- a removal (``None``) is a tombstone (no value bytes) in every format.
- a float JSON cannot hold (NaN, infinities) is a ``CodecError`` in both JSON formats
  (never written as ``null``).
- an integer beyond 64 bits is a ``CodecError`` both ways, in keys and values (orjson
  alone read one as a rounded float).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import orjson

from gridstream.connect.config import ConverterConfig
from gridstream.errors import CodecError
from gridstream.grid.contract import Key, Value
from gridstream.grid.values import decode_key, dumps_value, encode_key, loads

__all__ = ["Converter", "JsonConverter", "build_converter"]

class Converter(ABC):
    """Values of one connector (keys: ``encode_key`` / ``decode_key`` with ``key_kind``)."""

    def __init__(self, config: ConverterConfig) -> None:
        self.config = config
        self.key_kind = config.key

    def encode_key(self, key: Key) -> bytes:
        return encode_key(key, self.key_kind)

    def decode_key(self, data: bytes | None) -> Key | None:
        return decode_key(data, self.key_kind)

    @abstractmethod
    def encode_value(self, topic: str, cache: str, value: Value | None) -> bytes | None:
        """The value's bytes (None for a removal)."""

    @abstractmethod
    def decode_value(self, topic: str, data: bytes | None) -> Value | None:
        """The value (None for a tombstone); ``CodecError`` if it is not one."""

    def close(self) -> None:
        """Release clients (the registry's)."""
        return None


class JsonConverter(Converter):
    """A JSON object per value."""

    def encode_value(self, topic: str, cache: str, value: Value | None) -> bytes | None:
        if value is None:
            return None
        return dumps_value(value)

    def decode_value(self, topic: str, data: bytes | None) -> Value | None:
        if data is None:
            return None
        try:
            value = loads(data)
        except orjson.JSONDecodeError as exc:
            raise CodecError(f"value is not JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise CodecError(f"value must be a JSON object, not {type(value).__name__}")
        return value


def build_converter(config: ConverterConfig) -> Converter:
    """The converter ``config`` names (no network call: the Avro converter reaches the
    registry on its first record). ``ConfigError`` for a declared Avro schema that cannot
    be read."""
    if config.value == "json_schema":
        from gridstream.connect._json_schema import JsonSchemaConverter

        return JsonSchemaConverter(config)
    if config.value == "avro":
        from gridstream.connect._avro import AvroConverter

        return AvroConverter(config)
    return JsonConverter(config)
