"""Find what an existing log holds, in sequence order, and where each partition resumes.

A clean log is a set of per-partition files whose bulk records, merged by ``first_seq``,
cover ``start_seq, start_seq + 1, ...`` without a gap. After an unclean shutdown a
partition may end with a torn record, or (power loss under ``fsync="batch"``) lose its
last records while another partition kept later ones: that is a gap. Both are reported
as ``LogCorruptedError`` with the file and byte offset, unless the user chose
``on_corrupt_tail="truncate"``: then everything from the first damaged or missing
sequence number on is cut, with a warning per file. Damage that is not at the tail is
never repaired.
"""

from __future__ import annotations

import heapq
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, NamedTuple

from gridstream.errors import LogCorruptedError
from gridstream.space._files import Layout
from gridstream.space._frames import HEADER_SIZE, Frame, Stop, scan_frames
from gridstream.space._writer import PartitionTail

__all__ = ["CorruptTailPolicy", "LogRecord", "Recovered", "apply_cuts", "recover_log",
           "scan_file", "skip_voids"]

log = logging.getLogger(__name__)

CorruptTailPolicy = Literal["fail", "truncate"]


class LogRecord(NamedTuple):
    """A bulk record located in the log."""

    first_seq: int
    n_ops: int
    partition: int
    part_offset: int
    path: Path
    pos: int
    length: int


class Recovered(NamedTuple):
    records: list[LogRecord]
    """Records from ``start_seq`` on, contiguous (but for voids), in sequence order."""
    tails: list[PartitionTail]
    next_seq: int
    repaired: bool
    seen_end: int
    """One past the highest sequence number of any intact record found, kept or cut."""
    cuts: tuple[tuple[list[tuple[int, Path]], _Cut], ...] = ()
    """The cuts ``apply_cuts`` makes (each with its partition's segments): not made by
    ``recover_log``, so that the caller can first record what the cut leaves unused."""


class _Cut(NamedTuple):
    partition: int
    seg_index: int
    path: Path
    offset: int
    next_offset: int
    why: str


class _Partition(NamedTuple):
    segments: list[tuple[int, Path]]
    records: list[LogRecord]
    ends: list[int]
    torn: _Cut | None
    last_offset: int
    seen_end: int


def scan_file(
    path: Path, min_seq: int = 0, *, keep_payload: bool = False
) -> tuple[list[Frame], int, Stop | None]:
    """All intact records of one file, where they end, and why the scan stopped."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        result = scan_frames(fd, 0, size, keep_payload=keep_payload, min_seq=min_seq)
    finally:
        os.close(fd)
    return result.frames, result.end, result.stop


def recover_log(
    layout: Layout, partitions: int, start_seq: int, on_corrupt_tail: CorruptTailPolicy,
    voids: dict[int, int] | None = None,
) -> Recovered:
    """Check the whole log and list the records to replay from ``start_seq``; the
    ``voids`` (``start -> end``) are ranges an earlier repair left unused."""
    voids = voids or {}
    parts = [_scan_partition(layout, p, start_seq) for p in range(partitions)]
    merged = heapq.merge(*(part.records for part in parts), key=lambda r: r.first_seq)
    records, gap = _contiguous(merged, skip_voids(start_seq, voids), voids)
    cuts = _cuts(parts, gap)
    if cuts and on_corrupt_tail != "truncate":
        first = min(cuts, key=lambda c: (c.why.startswith("gap"), c.partition))
        raise LogCorruptedError(
            f"{first.why} in {first.path} at byte {first.offset} (unclean shutdown?). "
            "Reopen with on_corrupt_tail='truncate' to cut the log's tail there.",
            path=str(first.path), offset=first.offset,
        )
    tails = [_tail(part, next((c for c in cuts if c.partition == i), None))
             for i, part in enumerate(parts)]
    next_seq = records[-1].first_seq + records[-1].n_ops if records else start_seq
    seen_end = max([start_seq, *(part.seen_end for part in parts)])
    return Recovered(records, tails, skip_voids(next_seq, voids), bool(cuts), seen_end,
                     tuple((parts[cut.partition].segments, cut) for cut in cuts))


def apply_cuts(recovered: Recovered) -> None:
    """Cut the log's tail where ``recover_log`` found it damaged."""
    for segments, cut in recovered.cuts:
        _truncate(segments, cut)


def skip_voids(seq: int, voids: dict[int, int]) -> int:
    """``seq``, or the end of the void starting there (voids may follow each other)."""
    while seq in voids:
        seq = voids[seq]
    return seq


def _scan_partition(layout: Layout, partition: int, start_seq: int) -> _Partition:
    segments = layout.segments(partition)
    records: list[LogRecord] = []
    ends: list[int] = []
    torn: _Cut | None = None
    last_offset = -1
    seen_end = 0
    for i, (_, path) in enumerate(segments):
        if i + 1 < len(segments) and segments[i + 1][0] <= start_seq:
            ends.append(0)  # wholly covered by the snapshot: not needed, not scanned
            continue
        frames, end, stop = scan_file(path)
        ends.append(end)
        for f in frames:
            last_offset = f.part_offset
            seen_end = max(seen_end, f.first_seq + f.n_ops)
            if f.first_seq >= start_seq:
                records.append(LogRecord(f.first_seq, f.n_ops, partition, f.part_offset,
                                         path, f.pos, f.length))
        if stop is None:
            continue
        if i != len(segments) - 1 or not stop.torn:
            raise LogCorruptedError(
                f"corrupted record ({stop.reason}) in {path} at byte {stop.offset}; "
                "it is not at the log's tail, so it is not repaired",
                path=str(path), offset=stop.offset,
            )
        torn = _Cut(partition, i, path, stop.offset, last_offset + 1,
                    f"torn record ({stop.reason})")
    return _Partition(segments, records, ends, torn, last_offset, seen_end)


def _contiguous(merged: Iterator[LogRecord], start_seq: int,
                voids: dict[int, int]) -> tuple[list[LogRecord], int | None]:
    """The records forming an unbroken run from ``start_seq`` (jumping over voids), and
    the first missing seq."""
    records: list[LogRecord] = []
    expected = start_seq
    for rec in merged:
        before, expected = expected, skip_voids(expected, voids)
        if rec.first_seq != expected:
            if before <= rec.first_seq < expected:
                # inside a void: left by a repair that recorded the void but stopped
                # before its cut; cut again from here
                return records, rec.first_seq
            if rec.first_seq < expected:
                raise LogCorruptedError(
                    f"seq {rec.first_seq} appears twice (in {rec.path} at byte {rec.pos})",
                    path=str(rec.path), offset=rec.pos,
                )
            return records, expected
        records.append(rec)
        expected += rec.n_ops
    return records, None


def _cuts(parts: list[_Partition], gap: int | None) -> list[_Cut]:
    """Where each partition must be cut: at its first record past a gap, or its torn tail."""
    cuts = []
    for p, part in enumerate(parts):
        after = [r for r in part.records if gap is not None and r.first_seq >= gap]
        if after:
            rec = after[0]
            seg = next(i for i, (_, path) in enumerate(part.segments) if path == rec.path)
            cuts.append(_Cut(p, seg, rec.path, rec.pos, rec.part_offset,
                             f"gap: seq {gap} is missing before seq {rec.first_seq}"))
        elif part.torn is not None:
            cuts.append(part.torn)
    return cuts


def _truncate(segments: list[tuple[int, Path]], cut: _Cut) -> None:
    log.warning("cutting the operation log's tail: %s, from byte %d (%s)",
                cut.path, cut.offset, cut.why)
    if cut.offset == 0:
        cut.path.unlink()  # an empty segment would carry a wrong first seq in its name
    else:
        os.truncate(cut.path, cut.offset)
    for _, path in segments[cut.seg_index + 1 :]:
        log.warning("removing segment %s: it follows the cut", path)
        path.unlink()


def _tail(part: _Partition, cut: _Cut | None) -> PartitionTail:
    if not part.segments:
        return PartitionTail(None, 0, 0)
    if cut is not None:
        index = cut.seg_index if cut.offset > 0 else cut.seg_index - 1
        if index < 0:
            return PartitionTail(None, 0, cut.next_offset)
        size = cut.offset if index == cut.seg_index else part.ends[index]
        return PartitionTail(part.segments[index][0], size, cut.next_offset)
    return PartitionTail(part.segments[-1][0], part.ends[-1], part.last_offset + 1)


def read_payload(fd: int, rec: LogRecord) -> bytes:
    """A record's payload (its header was verified by the scan)."""
    return os.pread(fd, rec.length - HEADER_SIZE, rec.pos + HEADER_SIZE)
