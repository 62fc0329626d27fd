"""Snapshots: the whole state of a space at a sequence number, replaced atomically.

Recovery loads the snapshot and replays only the log after it; retention may then drop
segments the snapshot covers (once every consumer has passed them too). The file is a
run of framed records: a header map, chunks of entries (data kept encoded), and an end
record, so a missing end or a bad checksum is detected.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import msgspec

from gridstream.errors import CodecError, LogCorruptedError
from gridstream.space._codec import decoder_for, prep_value
from gridstream.space._files import Layout, fsync_dir
from gridstream.space._frames import HEADER_SIZE, encode_frame, scan_frames, verify
from gridstream.space._recovery import scan_file

__all__ = [
    "SnapshotEntry",
    "SnapshotMeta",
    "SnapshotRecord",
    "load_snapshot",
    "read_snapshot_meta",
    "write_snapshot",
]

_CHUNK = 4096
_FORMAT = 1


class SnapshotMeta(NamedTuple):
    next_seq: int
    """The first sequence number not reflected in the snapshot."""
    name: str
    entries: int
    part_offsets: tuple[int, ...]


class SnapshotEntry(NamedTuple):
    type_name: str
    id: str | int
    version: int
    partition: int
    routing: Any
    data: bytes


class SnapshotRecord(msgspec.Struct, array_like=True):
    """One entry as a snapshot stores it (``data`` stays encoded)."""

    type_name: str
    id: str | int
    version: int
    partition: int
    routing: Any
    data: msgspec.Raw


class _Meta(msgspec.Struct):
    format: int
    name: str
    next_seq: int
    count: int
    part_offsets: tuple[int, ...] = ()
    end: bool = False


_ENTRIES = decoder_for(list[SnapshotRecord])
_META = decoder_for(_Meta)


def write_snapshot(
    layout: Layout, meta: SnapshotMeta, entries: Iterable[SnapshotEntry], durable: bool = True
) -> None:
    """Write the snapshot to a temporary file, then rename it over the old one."""
    tmp = layout.snapshot.with_name(f".{layout.snapshot.name}.tmp")
    seq = meta.next_seq
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        head = _Meta(_FORMAT, meta.name, seq, meta.entries, meta.part_offsets)
        _write(fd, encode_frame(msgspec.msgpack.encode(head), seq, 0, 0))
        for chunk in _chunks(entries):
            _write(fd, encode_frame(msgspec.msgpack.encode(chunk), seq, 0, len(chunk)))
        end = _Meta(_FORMAT, meta.name, seq, meta.entries, meta.part_offsets, end=True)
        _write(fd, encode_frame(msgspec.msgpack.encode(end), seq, 0, 0))
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, layout.snapshot)
    if durable:
        fsync_dir(layout.root)


def _chunks(entries: Iterable[SnapshotEntry]) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for e in entries:
        routing = prep_value(e.routing)
        chunk.append((e.type_name, e.id, e.version, e.partition, routing, msgspec.Raw(e.data)))
        if len(chunk) >= _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_snapshot_meta(layout: Layout) -> SnapshotMeta | None:
    """The snapshot's header only (cheap: for retention decisions in any process)."""
    try:
        fd = os.open(layout.snapshot, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        head = os.pread(fd, 1 << 16, 0)
        fields = verify(head)
        if fields is None:
            size = os.fstat(fd).st_size
            result = scan_frames(fd, 0, size, keep_payload=True)
            if not result.frames or result.frames[0].payload is None:
                raise LogCorruptedError(f"unreadable snapshot {layout.snapshot}",
                                        path=str(layout.snapshot), offset=0)
            payload = result.frames[0].payload
        else:
            payload = head[HEADER_SIZE : HEADER_SIZE + fields[0]]
    finally:
        os.close(fd)
    m = _decode_meta(layout, payload)
    return SnapshotMeta(m.next_seq, m.name, m.count, m.part_offsets)


def load_snapshot(layout: Layout) -> tuple[SnapshotMeta, list[list[SnapshotRecord]]] | None:
    """The snapshot's header and entries (in chunks); ``LogCorruptedError`` if damaged."""
    if not layout.snapshot.exists():
        return None
    path = str(layout.snapshot)
    frames, _, stop = scan_file(layout.snapshot, keep_payload=True)
    if stop is not None:
        raise LogCorruptedError(f"damaged snapshot {path} at byte {stop.offset} ({stop.reason})",
                                path=path, offset=stop.offset)
    if len(frames) < 2:
        raise LogCorruptedError(f"incomplete snapshot {path}", path=path, offset=0)
    head = _decode_meta(layout, frames[0].payload or b"")
    end = _decode_meta(layout, frames[-1].payload or b"")
    if not end.end or end.count != head.count:
        raise LogCorruptedError(f"snapshot {path} has no end record", path=path,
                                offset=frames[-1].pos)
    chunks: list[list[SnapshotRecord]] = []
    for frame in frames[1:-1]:
        try:
            chunks.append(_ENTRIES.decode(frame.payload or b""))
        except msgspec.DecodeError as exc:
            raise LogCorruptedError(f"malformed snapshot chunk in {path}", path=path,
                                    offset=frame.pos) from exc
    if sum(len(c) for c in chunks) != head.count:
        raise LogCorruptedError(f"snapshot {path} misses entries", path=path, offset=0)
    return SnapshotMeta(head.next_seq, head.name, head.count, head.part_offsets), chunks


def _decode_meta(layout: Layout, payload: bytes) -> _Meta:
    try:
        return _META.decode(payload)
    except (msgspec.DecodeError, CodecError) as exc:
        raise LogCorruptedError(f"malformed snapshot header in {layout.snapshot}",
                                path=str(layout.snapshot), offset=0) from exc
