"""From an operation to a Kafka record (and back): envelope, key, value and headers.

Each part can be replaced: a ``MessageFactory`` builds the envelope and headers, a
``KeyCodec`` the key, a ``Codec`` the value. With none replaced, ``DefaultRecordEncoder``
builds the very same bytes without the intermediate objects (the mirror's hot path).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

import orjson

from gridstream.errors import CodecError, ConfigError
from gridstream.operations import Operation, OpType, TypeDescriptor
from gridstream.protocol.codecs import Codec, JsonCodec, create_codec
from gridstream.protocol.envelope import Envelope, Header, Headers
from gridstream.protocol.keys import IdKeyCodec, KeyCodec, create_key_codec
from gridstream.protocol.values import wire_default

__all__ = [
    "H_CODEC",
    "H_OP",
    "H_PARTITION",
    "H_TXN",
    "H_TYPE",
    "H_VERSION",
    "DefaultRecordEncoder",
    "KafkaMessage",
    "MessageFactory",
    "OperationDecoder",
    "OperationEncoder",
    "header_value",
]

H_OP, H_TYPE, H_VERSION = "gs.op", "gs.type", "gs.version"
H_TXN, H_PARTITION, H_CODEC = "gs.txn", "gs.partition", "gs.codec"
H_TS = "gs.ts"
"""The operation's commit time (ms, decimal): always a header, whatever the record's
timestamp is (the mirror's ``record_timestamp``)."""


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
            (H_TS, str(envelope.ts).encode()),
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
        self._default: DefaultRecordEncoder | None = None

    @property
    def uses_defaults(self) -> bool:
        """True when the codec, key codec and factory are the built-in defaults (exactly
        those classes: a subclass may change any part, so it never qualifies)."""
        return (type(self.codec) is JsonCodec and type(self.key_codec) is IdKeyCodec
                and type(self.factory) is MessageFactory)

    def default_path(self) -> DefaultRecordEncoder | None:
        """The allocation-light encoder of the default record, or None when a part is
        replaced (then only ``encode`` applies). Checked on every call, so replacing a
        part afterwards takes effect at once."""
        if not self.uses_defaults:
            return None
        if self._default is None:
            self._default = DefaultRecordEncoder()
        return self._default

    def encode(self, operation: Operation, descriptor: TypeDescriptor | None,
               topic: str) -> KafkaMessage:
        """``CodecError`` if the entry cannot be serialized. The general path: every
        part goes through the configured factory, key codec and codec."""
        envelope = self.factory.envelope(operation, descriptor)
        return KafkaMessage(
            topic=topic,
            key=self.key_codec.encode(envelope.type, envelope.id),
            value=self.codec.encode_for(envelope, descriptor, topic),
            headers=tuple(self.factory.headers(envelope, self.codec.name)),
            timestamp_ms=envelope.ts,
        )


_OP_TEXT: dict[OpType, tuple[str, Header]] = {op: (op.value, (H_OP, op.value.encode()))
                                              for op in OpType}
_JSON_CODEC_HEADER: Header = (H_CODEC, JsonCodec.name.encode())
_PARTITION_HEADERS: tuple[Header, ...] = tuple((H_PARTITION, str(p).encode())
                                               for p in range(1024))
_MAX_CACHED_TYPES = 4096


class DefaultRecordEncoder:
    """``OperationEncoder`` with its defaults (``MessageFactory``, ``IdKeyCodec``,
    ``JsonCodec``), minus the intermediate ``Envelope`` and ``KafkaMessage``: it builds
    the wire dict directly, reuses the header pairs that repeat (op, type, partition,
    codec) and serializes with orjson's faster string-keys-only mode, whose output is the
    codec's whenever it succeeds. Anything that mode refuses (a key that is not a string,
    a value with no JSON form) goes through ``JsonCodec`` itself, so the bytes, and the
    ``CodecError``, are always those of the general path; the unit tests compare both
    over generated operations."""

    __slots__ = ("_codec", "_types")

    def __init__(self) -> None:
        self._codec = JsonCodec()
        self._types: dict[str, Header] = {}

    def encode(self, operation: Operation) -> tuple[bytes, bytes, list[Header]]:
        """``(key, value, headers)`` of the record (``gs.ts`` holds the operation's
        ``timestamp_ms``); ``CodecError`` if the entry cannot be serialized."""
        entity_id = operation.id
        key = str(entity_id).encode()
        op = operation.op
        known = _OP_TEXT.get(op) if type(op) is OpType else None
        txn = operation.txn_id
        partition = operation.partition
        try:
            data = operation.data
            if data is not None and type(data) is not dict:
                data = dict(data)
            value = orjson.dumps(
                {"op": str(op) if known is None else known[0], "type": operation.type_name,
                 "id": entity_id, "version": operation.version, "txn": txn,
                 "ts": operation.timestamp_ms, "partition": partition, "data": data,
                 "removed": list(operation.removed)},
                default=wire_default)
        except TypeError:  # orjson.JSONEncodeError is one: the codec decides
            value = self._codec.encode(Envelope.from_operation(operation), None)
        type_name = operation.type_name
        type_header = self._types.get(type_name)
        if type_header is None:
            if len(self._types) >= _MAX_CACHED_TYPES:
                self._types.clear()
            type_header = self._types[type_name] = (H_TYPE, type_name.encode())
        headers = [
            (H_OP, str(op).encode()) if known is None else known[1],
            type_header,
            (H_VERSION, str(operation.version).encode()),
            _PARTITION_HEADERS[partition]
            if type(partition) is int and 0 <= partition < len(_PARTITION_HEADERS)
            else (H_PARTITION, str(partition).encode()),
            _JSON_CODEC_HEADER,
            (H_TS, str(operation.timestamp_ms).encode()),
        ]
        if txn is not None:
            headers.append((H_TXN, txn.encode()))
        return key, value, headers


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
