"""Value codecs for the envelope, chosen by name from an allow-list.

Built in: ``json`` (default, orjson), ``msgpack`` and ``avro`` (Confluent wire format).
Applications may register their own codec under a new name; nothing selects a class by
path and no code-executing format (pickle) is offered. The ``Codec`` interface lives in
``codec_base`` (re-exported here), which the implementations import, so this registry
depends on ``avro`` and never the other way round.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from gridstream._optional import require
from gridstream.errors import CodecError, ConfigError
from gridstream.operations import TypeDescriptor
from gridstream.protocol.avro import AvroCodec
from gridstream.protocol.codec_base import Codec
from gridstream.protocol.envelope import Envelope
from gridstream.protocol.values import restore, wire_default

__all__ = [
    "Codec",
    "JsonCodec",
    "MsgpackCodec",
    "codec_names",
    "create_codec",
    "register_codec",
]


def restored(envelope: Envelope, types: Mapping[str, TypeDescriptor]) -> Envelope:
    """``envelope`` with ``data`` restored per its type's descriptor, if known."""
    descriptor = types.get(envelope.type)
    if descriptor is None or envelope.data is None or not descriptor.fixed:
        return envelope
    return envelope._replace(data=restore(envelope.data, descriptor.fixed))


class JsonCodec(Codec):
    """UTF-8 JSON (orjson); the default, and what Spark's ``from_json`` reads."""

    name = "json"
    _OPTIONS = orjson.OPT_NON_STR_KEYS

    def encode(self, envelope: Envelope, descriptor: TypeDescriptor | None) -> bytes:
        try:
            return orjson.dumps(envelope.to_wire(), default=wire_default, option=self._OPTIONS)
        except (orjson.JSONEncodeError, TypeError) as exc:
            raise CodecError(f"{envelope.type} {envelope.id!r}: not JSON-serializable: {exc}") \
                from exc

    def decode(self, payload: bytes, types: Mapping[str, TypeDescriptor]) -> Envelope:
        try:
            raw = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise CodecError(f"not valid JSON: {exc}") from exc
        return restored(Envelope.from_wire(raw), types)


class MsgpackCodec(Codec):
    """MessagePack: like JSON on the wire, but bytes stay raw binary."""

    name = "msgpack"

    def __init__(self) -> None:
        self._msgpack: Any = require("msgpack", "the msgpack codec")
        self._default = functools.partial(wire_default, binary=True)

    def encode(self, envelope: Envelope, descriptor: TypeDescriptor | None) -> bytes:
        try:
            packed: bytes = self._msgpack.packb(
                envelope.to_wire(), default=self._default, use_bin_type=True, datetime=False
            )
        except (TypeError, ValueError, OverflowError) as exc:
            raise CodecError(f"{envelope.type} {envelope.id!r}: not MessagePack-serializable: "
                             f"{exc}") from exc
        return packed

    def decode(self, payload: bytes, types: Mapping[str, TypeDescriptor]) -> Envelope:
        try:
            raw = self._msgpack.unpackb(payload, raw=False, strict_map_key=False)
        except (ValueError, TypeError, self._msgpack.UnpackException) as exc:
            raise CodecError(f"not valid MessagePack: {exc}") from exc
        return restored(Envelope.from_wire(raw), types)


CodecFactory = Callable[..., Codec]
_REGISTRY: dict[str, CodecFactory] = {
    "json": JsonCodec,
    "msgpack": MsgpackCodec,
    "avro": AvroCodec,
}


def register_codec(name: str, factory: CodecFactory, *, replace: bool = False) -> None:
    """Allow a custom codec under ``name`` (``factory(**options)`` builds it)."""
    if name in _REGISTRY and not replace:
        raise ConfigError(f"a codec named {name!r} is already registered")
    _REGISTRY[name] = factory


def codec_names() -> tuple[str, ...]:
    """The allowed codec names."""
    return tuple(sorted(_REGISTRY))


def create_codec(name: str, **options: Any) -> Codec:
    """A codec by allowed name; ``ConfigError`` for any other name."""
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ConfigError(f"unknown codec {name!r}; allowed: {', '.join(codec_names())}")
    return factory(**options)
