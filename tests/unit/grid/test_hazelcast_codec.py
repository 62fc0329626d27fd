"""The event-journal codecs against byte fixtures written from the protocol definition.

Frame layout (client protocol 2.x): int32 LE frame length (with its 6-byte header),
uint16 LE flags, content. A message's initial frame holds the message type (int32), the
correlation id (int64), the partition id (int32, requests) or the backup-ack count
(one byte, responses), then the fixed-size parameters in declaration order.
Flags: 0xC000 unfragmented, 0x2000 final, 0x1000 begin, 0x0800 end, 0x0400 null.
"""

from __future__ import annotations

import struct

import pytest
from hazelcast.protocol.client_message import Frame, InboundMessage

from gridstream.errors import GridError
from gridstream.grid.hazelcast import _codec


def _frames(wire: bytes) -> InboundMessage:
    """Split wire bytes into frames, as the client's reader does."""
    message: InboundMessage | None = None
    pos = 0
    while pos < len(wire):
        length, flags = struct.unpack_from("<iH", wire, pos)
        frame = Frame(bytearray(wire[pos + 6 : pos + length]), flags)
        if message is None:
            message = InboundMessage(frame)
        else:
            message.add_frame(frame)
        pos += length
    assert message is not None and pos == len(wire)
    return message


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


# Key "a" as the client serializes a str: partition hash 0, type -11, int32 length, UTF-8.
KEY_A = h("00000000 fffffff5 00000001 61")
# HazelcastJsonValue '{"x": 1}': type -130, int32 length, UTF-8 text.
JSON_X1 = h("00000000 ffffff7e 00000008") + b'{"x": 1}'
JSON_X2 = h("00000000 ffffff7e 00000008") + b'{"x": 2}'


def _event(event_type: int, key: bytes | None, new: bytes | None, old: bytes | None,
           class_id: int = 132) -> bytes:
    """Factory -4, identified flag 1, then eventType and three length-prefixed blobs."""
    out = h("00000000 fffffffe 01 fffffffc") + struct.pack(">ii", class_id, event_type)
    for blob in (key, new, old):
        out += struct.pack(">i", -1) if blob is None else struct.pack(">i", len(blob)) + blob
    return out


def test_subscribe_request_bytes() -> None:
    message = _codec.encode_subscribe_request("m")
    assert bytes(message.buf) == h(
        "16000000 00c0"        # initial frame: 22 bytes, unfragmented
        " 00410100"             # message type 0x014100
        " 0000000000000000"     # correlation id (set when sent)
        " ffffffff"             # partition id -1 (set by the invocation)
        " 07000000 0020 6d"     # name "m", final frame
    )
    assert message.retryable


def test_subscribe_response_decodes_oldest_and_newest() -> None:
    wire = h(
        "23000000 00e0"         # 35 bytes, unfragmented + final
        " 01410100"             # response type 0x014101
        " 0700000000000000"     # correlation id
        " 00"                   # backup acks
        " 0300000000000000"     # oldestSequence 3
        " 2a00000000000000"     # newestSequence 42
    )
    assert _codec.decode_subscribe_response(_frames(wire)) == (3, 42)


def test_read_request_bytes() -> None:
    message = _codec.encode_read_request("m", 5, 0, 100)
    assert bytes(message.buf) == h(
        "26000000 00c0 00420100 0000000000000000 ffffffff"
        " 0500000000000000"     # startSequence 5
        " 00000000"             # minSize 0
        " 64000000"             # maxSize 100
        " 07000000 0000 6d"     # name "m"
        " 06000000 0004"        # predicate: null
        " 06000000 0024"        # projection: null, final
    )
    assert message.retryable and message.contains_data


def _read_wire(read_count: int, next_seq: int, items: list[bytes], seqs: bytes) -> bytes:
    head = h("01420100 0900000000000000 00") + struct.pack("<iq", read_count, next_seq)
    wire = struct.pack("<iH", 6 + len(head), 0xC000) + head
    wire += h("06000000 0010")  # list begin
    for item in items:
        wire += struct.pack("<iH", 6 + len(item), 0) + item
    wire += h("06000000 0008")  # list end
    return wire + seqs


def test_read_response_decodes_items_and_sequences() -> None:
    put = _event(1, KEY_A, JSON_X1, None)
    removed = _event(2, KEY_A, None, JSON_X1)
    seqs = h("16000000 0020 0500000000000000 0600000000000000")  # longArray [5, 6], final
    result = _codec.decode_read_response(_frames(_read_wire(2, 7, [put, removed], seqs)))
    assert result == _codec.ReadResult(2, [put, removed], [5, 6], 7)


def test_empty_read_response_has_next_seq_zero() -> None:
    result = _codec.decode_read_response(_frames(_read_wire(0, 0, [], h("06000000 0020"))))
    assert result == _codec.ReadResult(0, [], [], 0)


def test_read_response_without_sequences() -> None:
    result = _codec.decode_read_response(_frames(_read_wire(0, 0, [], h("06000000 0024"))))
    assert result.item_seqs is None


# An UPDATED event of key "a" as a 5.6 member answered it (recorded bytes).
RECORDED_UPDATE = h(
    "00000000fffffffe01fffffffc00000084000000040000000d00000000fffffff5000000016100000014"
    "00000000ffffff7e000000087b2278223a20327d0000001400000000ffffff7e000000087b2278223a20"
    "317d"
)


def test_decode_recorded_update() -> None:
    event = _codec.decode_event(RECORDED_UPDATE)
    assert event.event_type == 4
    assert event.key is not None and bytes(event.key.buffer) == KEY_A
    assert event.new_value is not None and bytes(event.new_value.buffer) == JSON_X2
    assert event.old_value is not None and bytes(event.old_value.buffer) == JSON_X1
    assert _event(4, KEY_A, JSON_X2, JSON_X1) == RECORDED_UPDATE


@pytest.mark.parametrize("class_id", [132, 133])
def test_decode_removal_has_no_new_value(class_id: int) -> None:
    event = _codec.decode_event(_event(2, KEY_A, None, JSON_X1, class_id))
    assert (event.event_type, event.new_value) == (2, None)
    assert event.old_value is not None and bytes(event.old_value.buffer) == JSON_X1


def test_decode_skips_the_version_bytes_of_a_versioned_object() -> None:
    plain = _event(1, KEY_A, JSON_X1, None)
    versioned = plain[:8] + b"\x03" + plain[9:17] + b"\x05\x06" + plain[17:]
    event = _codec.decode_event(versioned)
    assert event.key is not None and bytes(event.key.buffer) == KEY_A
    assert event.new_value is not None and bytes(event.new_value.buffer) == JSON_X1


@pytest.mark.parametrize(
    "item",
    [
        h("00000000 fffffff5 00000001 61"),                              # a string, not IDS
        _event(1, KEY_A, JSON_X1, None)[:9] + h("fffffff6")
        + _event(1, KEY_A, JSON_X1, None)[13:],                          # another factory
        _event(1, KEY_A, JSON_X1, None, class_id=134),                   # another class
        _event(1, KEY_A, JSON_X1, None)[:-3],                            # truncated blob
        _event(1, KEY_A, JSON_X1, None)[:20],                            # truncated length
        _event(1, KEY_A, JSON_X1, None) + b"\x00",                       # trailing byte
        h("0000"),                                                       # no header
    ],
)
def test_decode_refuses_what_is_not_a_journal_event(item: bytes) -> None:
    with pytest.raises(GridError):
        _codec.decode_event(item)


@pytest.mark.parametrize(
    ("item", "key"),
    [
        (KEY_A, "a"),
        (h("00000000 fffffff5 00000002 c3a9"), "é"),                # UTF-8, length in bytes
        (h("00000000 fffffff8 ffffffffffffff85"), -123),            # Java long
        (h("00000000 fffffff9 00000007"), 7),                       # Java int
        (h("00000000 fffffff5 00000003 61"), None),                 # length disagrees
        (h("00000000 fffffff8 0000"), None),                        # short long
        (h("00000000 fffffffe 01"), None),                          # another type
        (h("0000"), None),
    ],
)
def test_plain_key(item: bytes, key: str | int | None) -> None:
    assert _codec.plain_key(item) == key


def test_json_text() -> None:
    assert _codec.json_text(JSON_X1) == b'{"x": 1}'
    assert _codec.json_text(KEY_A) is None
    assert _codec.json_text(JSON_X1[:-1]) is None
