"""Framing of log records: a fixed header, then the payload.

Header (little endian, 28 bytes): payload length u32, CRC-32 u32, first_seq u64,
partition offset u64, operation count u32. The CRC covers everything after itself
(the three numbers and the payload), so a torn or damaged record is always detected.
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import NamedTuple

__all__ = ["HEADER", "Frame", "ScanResult", "Stop", "encode_frame", "scan_frames", "verify"]

HEADER = struct.Struct("<IIQQI")
HEADER_SIZE = HEADER.size
_PREFIX = struct.Struct("<II")
_FIELDS = struct.Struct("<QQI")
MAX_PAYLOAD = 0xFFFFFFFF
_CHUNK = 1 << 20


class Frame(NamedTuple):
    """One record found in a file: where it is, what it covers, maybe its payload."""

    pos: int
    length: int
    first_seq: int
    part_offset: int
    n_ops: int
    payload: bytes | None


class Stop(NamedTuple):
    """Why a scan stopped before the end of the file.

    ``torn`` is true when the damage looks like an interrupted append: the record
    runs past the end of the file, or it is the last one and its CRC fails, or only
    zero bytes follow. Anything else is corruption in the middle of the file.
    """

    offset: int
    reason: str
    torn: bool


class ScanResult(NamedTuple):
    frames: list[Frame]
    end: int
    """Byte offset just after the last good record."""
    stop: Stop | None


def encode_frame(payload: bytes, first_seq: int, part_offset: int, n_ops: int) -> bytes:
    """The framed record (header + payload)."""
    fields = _FIELDS.pack(first_seq, part_offset, n_ops)
    crc = zlib.crc32(payload, zlib.crc32(fields))
    return b"".join((_PREFIX.pack(len(payload), crc), fields, payload))


def verify(buf: bytes | memoryview, offset: int = 0) -> tuple[int, int, int, int, int] | None:
    """Header fields of the complete, intact record at ``offset``, else ``None``."""
    if len(buf) - offset < HEADER_SIZE:
        return None
    size, crc, first_seq, part_offset, n_ops = HEADER.unpack_from(buf, offset)
    end = offset + HEADER_SIZE + size
    if end > len(buf) or zlib.crc32(memoryview(buf)[offset + 8 : end]) != crc:
        return None
    return size, crc, first_seq, part_offset, n_ops


def scan_frames(
    fd: int, start: int, file_size: int, *, keep_payload: bool = False, min_seq: int = 0
) -> ScanResult:
    """Every intact record from ``start`` to ``file_size`` (payloads kept on request,
    only for records ending after ``min_seq``)."""
    frames: list[Frame] = []
    pos = start
    while pos < file_size:
        want = max(_CHUNK, HEADER_SIZE)
        buf = os.pread(fd, min(want, file_size - pos), pos)
        if len(buf) < HEADER_SIZE:
            return ScanResult(frames, pos, _stop(fd, pos, file_size, "truncated header", True))
        size = HEADER.unpack_from(buf, 0)[0]
        if HEADER_SIZE + size > len(buf):  # one record larger than the chunk
            if pos + HEADER_SIZE + size > file_size:
                return ScanResult(frames, pos, _stop(fd, pos, file_size, "incomplete record", True))
            buf = os.pread(fd, HEADER_SIZE + size, pos)
        used, stop = _parse(buf, pos, file_size, frames, keep_payload, min_seq)
        pos += used
        if stop is not None:
            return ScanResult(frames, pos, _stop(fd, pos, file_size, stop, False))
    return ScanResult(frames, pos, None)


def _parse(
    buf: bytes, base: int, file_size: int, frames: list[Frame], keep: bool, min_seq: int
) -> tuple[int, str | None]:
    """Parse whole records from ``buf``; returns bytes consumed and a stop reason."""
    view = memoryview(buf)
    off, n = 0, len(buf)
    unpack, crc32, new, append = HEADER.unpack_from, zlib.crc32, tuple.__new__, frames.append
    while off + HEADER_SIZE <= n:
        size, crc, first_seq, part_offset, n_ops = unpack(buf, off)
        end = off + HEADER_SIZE + size
        if end > n:
            if base + end > file_size:
                return off, "incomplete record"
            break
        if crc32(view[off + 8 : end]) != crc:
            return off, "checksum mismatch"
        payload = buf[off + HEADER_SIZE : end] if keep and first_seq + n_ops > min_seq else None
        append(new(Frame, (base + off, end - off, first_seq, part_offset, n_ops, payload)))
        off = end
    if off + HEADER_SIZE > n and base + n >= file_size and off < n:
        return off, "truncated header"
    return off, None


def _stop(fd: int, pos: int, file_size: int, reason: str, torn: bool) -> Stop:
    """Classify a scan stop: torn tail (interrupted append) or corruption."""
    if not torn and reason == "checksum mismatch":
        size = HEADER.unpack_from(os.pread(fd, HEADER_SIZE, pos), 0)[0]
        torn = pos + HEADER_SIZE + size == file_size
    if not torn:
        torn = _zeros_to_end(fd, pos, file_size)
    if reason in ("incomplete record", "truncated header"):
        torn = True
    return Stop(pos, reason, torn)


def _zeros_to_end(fd: int, pos: int, file_size: int) -> bool:
    while pos < file_size:
        chunk = os.pread(fd, min(_CHUNK, file_size - pos), pos)
        if not chunk or chunk.count(0) != len(chunk):
            return False
        pos += len(chunk)
    return True
