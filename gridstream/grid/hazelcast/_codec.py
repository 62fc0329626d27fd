"""Client-protocol codecs for a map's event journal (the Python client has none).

Built like the client's own codecs (``hazelcast/protocol/codec/*.py``): one
``encode_request`` / ``decode_response`` pair per message, from the public message
definitions (``Map.yaml``: ``eventJournalSubscribe`` and ``eventJournalRead``). Fixed-size
parameters sit in the initial frame after the header, in declaration order; the others
follow as frames of their own.

A journal item is a member-side object (identified-data-serializable, factory -4, class
132 or 133: ``InternalEventJournalMapEvent`` and its deserializing subclass, same fields):
``decode_event`` reads its serialized form, an event type and three nested serialized
objects (key, new value, old value) that the client's serialization service turns into
Python objects.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from hazelcast.protocol.builtin import (
    CodecUtil,
    DataCodec,
    FixSizedTypesCodec,
    ListMultiFrameCodec,
    LongArrayCodec,
    StringCodec,
)
from hazelcast.protocol.client_message import (
    REQUEST_HEADER_SIZE,
    RESPONSE_HEADER_SIZE,
    OutboundMessage,
    create_initial_buffer,
)
from hazelcast.serialization.data import Data

from gridstream.errors import GridError

__all__ = [
    "READ_REQUEST_TYPE",
    "SUBSCRIBE_REQUEST_TYPE",
    "JournalEvent",
    "ReadResult",
    "decode_event",
    "json_text",
    "plain_key",
    "decode_read_response",
    "decode_subscribe_response",
    "encode_read_request",
    "encode_subscribe_request",
]

_LONG = 8
_INT = 4

# Map service (0x01), method 65 (0x41): eventJournalSubscribe; request 0x..00, response 0x..01.
SUBSCRIBE_REQUEST_TYPE = 0x014100
SUBSCRIBE_RESPONSE_TYPE = 0x014101
_SUB_OLDEST = RESPONSE_HEADER_SIZE
_SUB_NEWEST = _SUB_OLDEST + _LONG

# Map service, method 66 (0x42): eventJournalRead.
READ_REQUEST_TYPE = 0x014200
READ_RESPONSE_TYPE = 0x014201
_READ_START = REQUEST_HEADER_SIZE
_READ_MIN = _READ_START + _LONG
_READ_MAX = _READ_MIN + _INT
_READ_FRAME_SIZE = _READ_MAX + _INT
_READ_COUNT = RESPONSE_HEADER_SIZE
_READ_NEXT = _READ_COUNT + _INT

# The journal item, serialized by the member (big-endian, Hazelcast's default byte order).
IDENTIFIED_TYPE = -2
"""Serializer type id of identified-data-serializable objects."""
MAP_FACTORY = -4
"""Factory id of the map service's serializable classes."""
EVENT_CLASSES = frozenset({132, 133})
"""Deserializing and internal journal map events: both write the same fields."""
_HEADER = struct.Struct(">ii")  # partition hash, serializer type id
_IDENTIFIED = struct.Struct(">bii")  # flags (bit 0: identified), factory id, class id
_BE_INT = struct.Struct(">i")
_BE_LONG = struct.Struct(">q")

# Serializer type ids of the objects a cache holds (the same in every Hazelcast client).
INTEGER_TYPE = -7
LONG_TYPE = -8
STRING_TYPE = -11
JSON_TYPE = -130


def encode_subscribe_request(name: str) -> OutboundMessage:
    """Ask a partition's owner for the oldest and newest sequence of ``name``'s journal."""
    buf = create_initial_buffer(REQUEST_HEADER_SIZE, SUBSCRIBE_REQUEST_TYPE)
    StringCodec.encode(buf, name, True)
    return OutboundMessage(buf, True)


def decode_subscribe_response(msg: Any) -> tuple[int, int]:
    """``(oldest, newest)``; an empty journal answers ``(0, -1)``."""
    frame = msg.next_frame()
    return (
        FixSizedTypesCodec.decode_long(frame.buf, _SUB_OLDEST),
        FixSizedTypesCodec.decode_long(frame.buf, _SUB_NEWEST),
    )


def encode_read_request(name: str, start: int, min_size: int, max_size: int) -> OutboundMessage:
    """Read up to ``max_size`` journal events from ``start`` (no predicate, no projection)."""
    buf = create_initial_buffer(_READ_FRAME_SIZE, READ_REQUEST_TYPE)
    FixSizedTypesCodec.encode_long(buf, _READ_START, start)
    FixSizedTypesCodec.encode_int(buf, _READ_MIN, min_size)
    FixSizedTypesCodec.encode_int(buf, _READ_MAX, max_size)
    StringCodec.encode(buf, name)
    CodecUtil.encode_nullable(buf, None, DataCodec.encode)  # predicate
    CodecUtil.encode_nullable(buf, None, DataCodec.encode, True)  # projection
    return OutboundMessage(buf, True, True)


@dataclass(frozen=True, slots=True)
class ReadResult:
    """A read's answer. ``next_seq`` is 0 when nothing was read: callers track the last
    sequence themselves. ``item_seqs`` is ``None`` only if the member sent none."""

    read_count: int
    items: list[bytes]
    item_seqs: list[int] | None
    next_seq: int


def decode_read_response(msg: Any) -> ReadResult:
    frame = msg.next_frame()
    read_count = FixSizedTypesCodec.decode_int(frame.buf, _READ_COUNT)
    next_seq = FixSizedTypesCodec.decode_long(frame.buf, _READ_NEXT)
    items = ListMultiFrameCodec.decode(msg, DataCodec.decode)
    seqs = CodecUtil.decode_nullable(msg, LongArrayCodec.decode)
    return ReadResult(read_count, [bytes(d.buffer) for d in items], seqs, next_seq)


@dataclass(frozen=True, slots=True)
class JournalEvent:
    """One journal event: Hazelcast's ``EntryEventType`` number and the serialized key,
    new value and old value (``None`` when absent)."""

    event_type: int
    key: Data | None
    new_value: Data | None
    old_value: Data | None


def decode_event(item: bytes) -> JournalEvent:
    """Decode one serialized journal item; ``GridError`` when it is not one."""
    try:
        _, type_id = _HEADER.unpack_from(item, 0)
        if type_id != IDENTIFIED_TYPE:
            raise GridError(f"journal item has serializer type {type_id}, not {IDENTIFIED_TYPE}")
        flags, factory, class_id = _IDENTIFIED.unpack_from(item, _HEADER.size)
        if not flags & 1 or factory != MAP_FACTORY or class_id not in EVENT_CLASSES:
            raise GridError(
                f"journal item is class {factory}/{class_id} (flags {flags}), "
                f"not a map journal event ({MAP_FACTORY}/{sorted(EVENT_CLASSES)})"
            )
        pos = _HEADER.size + _IDENTIFIED.size
        if flags & 2:  # versioned: a major and a minor version byte follow
            pos += 2
        (event_type,) = _BE_INT.unpack_from(item, pos)
        pos += _INT
        fields: list[Data | None] = []
        for _ in range(3):
            (size,) = _BE_INT.unpack_from(item, pos)
            pos += _INT
            if size < 0:
                fields.append(None)
                continue
            if pos + size > len(item):
                raise GridError("journal item is truncated")
            fields.append(Data(item[pos : pos + size]))
            pos += size
    except struct.error as exc:
        raise GridError(f"journal item is truncated: {exc}") from exc
    if pos != len(item):
        raise GridError(f"journal item has {len(item) - pos} bytes after its fields")
    return JournalEvent(event_type, fields[0], fields[1], fields[2])


def _text(item: bytes, type_id: int) -> bytes | None:
    if len(item) < 12 or _HEADER.unpack_from(item, 0)[1] != type_id:
        return None
    (size,) = _BE_INT.unpack_from(item, 8)
    return item[12:] if size == len(item) - 12 else None


def plain_key(item: bytes) -> str | int | None:
    """A serialized string, Java ``int`` or ``long`` read directly (the journal's hot
    path); ``None`` for anything else, which the client's serializer then reads."""
    if len(item) < 8:
        return None
    type_id = _HEADER.unpack_from(item, 0)[1]
    if type_id == STRING_TYPE:
        text = _text(item, STRING_TYPE)
        return None if text is None else text.decode("utf-8")
    if type_id == LONG_TYPE and len(item) == 16:
        return int(_BE_LONG.unpack_from(item, 8)[0])
    if type_id == INTEGER_TYPE and len(item) == 12:
        return int(_BE_INT.unpack_from(item, 8)[0])
    return None


def json_text(item: bytes) -> bytes | None:
    """The UTF-8 text of a serialized ``HazelcastJsonValue``; ``None`` for another type."""
    return _text(item, JSON_TYPE)
