"""From an operation to a Kafka record (and back): envelope, key, value and headers.

Each part can be replaced: a ``MessageFactory`` builds the envelope and headers, a
``KeyCodec`` the key, a ``Codec`` the value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from gridstream.errors import CodecError, ConfigError
from gridstream.operations import Operation, TypeDescriptor
from gridstream.protocol.codecs import Codec, create_codec
from gridstream.protocol.envelope import Envelope, Header, Headers
from gridstream.protocol.keys import KeyCodec, create_key_codec

__all__ = [
    "H_CODEC",
    "H_OP",
    "H_PARTITION",
    "H_TXN",
    "H_TYPE",
    "H_VERSION",
    "KafkaMessage",
    "MessageFactory",
    "OperationDecoder",
    "OperationEncoder",
    "header_value",
]

H_OP, H_TYPE, H_VERSION = "gs.op", "gs.type", "gs.version"
H_TXN, H_PARTITION, H_CODEC = "gs.txn", "gs.partition", "gs.codec"


class KafkaMessage(NamedTuple):
    """One record ready to produce (a named tuple: one is built per operation)."""

    topic: str
    key: bytes
    value: bytes
    headers: Headers
    timestamp_ms: int

    @property
    def size(self) -> int:
        """Bytes of key, value and headers (what counts against size limits)."""
        return len(self.key) + len(self.value) + sum(len(k) + len(v) for k, v in self.headers)


class MessageFactory:
    """Builds the envelope and headers of an operation. The default gives the flat
    envelope and every ``gs.*`` header; subclass to change either."""

    def envelope(self, operation: Operation, descriptor: TypeDescriptor | None) -> Envelope:
        return Envelope.from_operation(operation)

    def headers(self, envelope: Envelope, codec_name: str) -> list[Header]:
        headers = [
            (H_OP, str(envelope.op).encode()),
            (H_TYPE, envelope.type.encode()),
            (H_VERSION, str(envelope.version).encode()),
            (H_PARTITION, str(envelope.partition).encode()),
            (H_CODEC, codec_name.encode()),
        ]
        if envelope.txn is not None:
            headers.append((H_TXN, envelope.txn.encode()))
        return headers


class OperationEncoder:
    """Operation + descriptor + topic → ``KafkaMessage``."""

    def __init__(self, codec: Codec | str = "json", key_codec: KeyCodec | str = "id",
                 factory: MessageFactory | None = None) -> None:
        self.codec = create_codec(codec) if isinstance(codec, str) else codec
        self.key_codec = create_key_codec(key_codec) if isinstance(key_codec, str) else key_codec
        self.factory = factory or MessageFactory()

    def encode(self, operation: Operation, descriptor: TypeDescriptor | None,
               topic: str) -> KafkaMessage:
        """``CodecError`` if the entry cannot be serialized."""
        envelope = self.factory.envelope(operation, descriptor)
        return KafkaMessage(
            topic=topic,
            key=self.key_codec.encode(envelope.type, envelope.id),
            value=self.codec.encode(envelope, descriptor),
            headers=tuple(self.factory.headers(envelope, self.codec.name)),
            timestamp_ms=envelope.ts,
        )


def header_value(headers: Iterable[tuple[str, bytes | None]] | None, name: str) -> str | None:
    """The last value of header ``name`` as text (None if absent)."""
    found: str | None = None
    for key, value in headers or ():
        if key == name and value is not None:
            found = value.decode(errors="replace")
    return found


class OperationDecoder:
    """Record value (+ headers) → ``Envelope``; the codec is chosen by the ``gs.codec``
    header among ``allowed`` codecs (``default_codec`` when the header is absent)."""

    def __init__(self, types: Mapping[str, TypeDescriptor] | None = None, *,
                 allowed: Sequence[str | Codec] = ("json", "msgpack", "avro"),
                 default_codec: str = "json") -> None:
        self.types: Mapping[str, TypeDescriptor] = types or {}
        self._codecs: dict[str, Codec | None] = {}
        for item in allowed:
            if isinstance(item, Codec):
                self._codecs[item.name] = item
            else:
                self._codecs[item] = None
        if default_codec not in self._codecs:
            raise ConfigError(f"default codec {default_codec!r} is not among the allowed ones")
        self.default_codec = default_codec

    def codec(self, name: str) -> Codec:
        if name not in self._codecs:
            raise CodecError(f"record codec {name!r} is not allowed here "
                             f"(allowed: {', '.join(sorted(self._codecs))})")
        codec = self._codecs[name]
        if codec is None:
            codec = self._codecs[name] = create_codec(name)
        return codec

    def decode(self, value: bytes | None,
               headers: Iterable[tuple[str, bytes | None]] | None = None) -> Envelope:
        """``CodecError`` for anything that is not a valid envelope."""
        if value is None:
            raise CodecError("record has no value (a tombstone), not an operation")
        name = header_value(headers, H_CODEC) or self.default_codec
        return self.codec(name).decode(value, self.types)
