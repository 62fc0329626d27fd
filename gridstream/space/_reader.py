"""Reading a space's log from any process, while its writer appends.

The reader scans each partition's files for new records (headers only, CRC checked),
queues them per partition, and moves them into an in-memory index as soon as they
continue the contiguous run of sequence numbers: bulk ``s`` is indexed only after every
bulk before it. Because the writer appends in sequence order, a seq that is missing
now is one not yet visible, never one skipped. The index (``first_seq`` → file,
position) keeps reads proportional to what is read, not to the log's size; consecutive
records of one file are read with one ``pread``.

A record cut short at the end of a partition's newest file is "not yet visible" while a
writer holds the space's lock; once no writer does, it is a torn tail and ``read``
raises ``LogCorruptedError`` naming the file and offset when it reaches that point.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import threading
import time
import zlib
from array import array
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from gridstream.errors import CodecError, LogCorruptedError, OperationLogError
from gridstream.operations import Bulk, Operation, OpType, TypeDescriptor
from gridstream.space import _retention
from gridstream.space._codec import decode_bulk, decode_data, decode_descriptor
from gridstream.space._files import Layout, writer_alive
from gridstream.space._frames import HEADER, HEADER_SIZE, scan_frames
from gridstream.space._recovery import skip_voids
from gridstream.space._snapshot import load_snapshot
from gridstream.space.contract import LogReader, StateSnapshot

__all__ = ["BulkRecord", "EmbeddedLogReader", "open_log_reader"]

_MAX_FDS = 32
_RELIST_S = 0.5
_READ_AHEAD_BYTES = 1 << 20
_READ_AHEAD_RECORDS = 4096


class BulkRecord(NamedTuple):
    """A bulk with where it sits: its partition and its offset within that partition."""

    bulk: Bulk
    partition: int
    offset: int


_Queued = tuple[int, int, int, int, int, int]
"""A record found but not yet indexed: (first_seq, n_ops, seg, pos, length, part_offset)."""


class _Part:
    """Scan state of one partition."""

    def __init__(self) -> None:
        self.segments: list[tuple[int, Path]] = []
        self.index = -1
        self.pos = 0
        self.fd = -1
        self.listed = 0.0
        self.queue: deque[_Queued] = deque()
        self.torn: tuple[Path, int, str] | None = None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def open_log_reader(data_dir: str | os.PathLike[str]) -> EmbeddedLogReader:
    """A reader of the operation log in ``data_dir`` (written by this or another process)."""
    return EmbeddedLogReader(data_dir)


class EmbeddedLogReader(LogReader):
    """``LogReader`` over an embedded space's directory."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self._layout = Layout(data_dir)
        meta = self._layout.read_meta()
        if meta is None:
            raise OperationLogError(f"{self._layout.root} holds no space (no space.json)")
        self._partitions = meta.partitions
        self._segment_bytes = meta.segment_bytes
        self._epoch = meta.epoch
        self._log_id = meta.log_id
        self._voids = meta.void_ends()
        self._meta_stat = self._stat_meta()
        self._lock = threading.RLock()
        self._fds: dict[int, int] = {}
        self._types: dict[str, TypeDescriptor] = {}
        self._types_pos = 0
        self._reset()

    # ------------------------------------------------------------ contract

    def first_seq(self) -> int:
        with self._lock:
            self._reload_start()
            return self._log_start

    def end_seq(self) -> int:
        with self._lock:
            self._refresh()
            return self._next

    def read(self, from_seq: int, max_operations: int) -> Sequence[Bulk]:
        return self._read(from_seq, max_operations, False)

    def read_records(self, from_seq: int, max_operations: int) -> list[BulkRecord]:
        """Like ``read``, with each bulk's partition and partition offset."""
        return self._read(from_seq, max_operations, True)

    def bulk_start(self, seq: int) -> tuple[int, int]:
        """The bulk (transaction) holding ``seq``: its first sequence number and the next
        bulk's (``seq`` itself twice when it starts a bulk or lies at or past the end)."""
        with self._lock:
            self._check_epoch()
            if seq >= self._next:
                self._refresh()
            seqs = self._seqs
            j = bisect.bisect_right(seqs, seq) - 1
            if j < 0:  # before the first indexed bulk (a void, or not retained): its start
                first = int(seqs[0]) if len(seqs) else seq
                return first, first
            if seq >= self._next or seqs[j] == seq:
                return seq, seq
            following = seqs[j + 1] if j + 1 < len(seqs) else self._next
            return int(seqs[j]), int(following)

    def resume_seq(self, seq: int) -> int:
        with self._lock:
            self._check_epoch()
            return skip_voids(seq, self._voids)

    def _read(self, from_seq: int, max_operations: int, records: bool) -> list[Any]:
        if max_operations < 1:
            raise OperationLogError("max_operations must be at least 1")
        with self._lock:
            from_seq = skip_voids(from_seq, self._voids)
            if from_seq < self._log_start or not self._seqs or from_seq < self._seqs[0]:
                self._reload_start()
                if from_seq < self._log_start:
                    raise OperationLogError(
                        f"seq {from_seq} is no longer retained (the log starts at "
                        f"{self._log_start})"
                    )
            i = self._locate(from_seq)
            if i is None:
                self._refresh()
                from_seq = skip_voids(from_seq, self._voids)  # a repair may have cut here
                i = self._locate(from_seq)
                if i is None:
                    self._check_stuck()
                    return []
            return self._collect(i, max_operations, records)

    def acknowledge(self, consumer: str, next_seq: int) -> None:
        with self._lock:
            if _retention.acknowledge(self._layout, consumer, next_seq):
                _retention.apply_retention(self._layout, self._partitions)
                self._reload_start()

    def log_id(self) -> str | None:
        return self._log_id or None

    def register(self, consumer: str) -> int:
        with self._lock:
            return _retention.register(self._layout, consumer)

    def unregister(self, consumer: str) -> None:
        """Forget a consumer: the log no longer waits for it."""
        with self._lock:
            _retention.unregister(self._layout, consumer)

    def types(self) -> Mapping[str, TypeDescriptor]:
        with self._lock:
            self._scan_types()
            return dict(self._types)

    def state_snapshot(self, type_names: Collection[str] | None = None) -> StateSnapshot | None:
        loaded = load_snapshot(self._layout)
        if loaded is None:
            return None
        meta, chunks = loaded
        wanted = None if type_names is None else frozenset(type_names)
        entries = [
            Operation(OpType.WRITE, r.type_name, r.id, r.version, decode_data(bytes(r.data)),
                      r.partition, 0, routing=r.routing)
            for chunk in chunks for r in chunk if wanted is None or r.type_name in wanted
        ]
        return StateSnapshot(meta.next_seq, entries)

    def close(self) -> None:
        with self._lock:
            for part in self._parts:
                part.close()
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()

    # ------------------------------------------------------------ index

    def _reset(self) -> None:
        """Forget everything scanned (at start, and after the writer cut the log)."""
        for part in getattr(self, "_parts", []):
            part.close()
        for fd in getattr(self, "_fds", {}).values():
            os.close(fd)
        self._fds = {}
        self._bufs: dict[int, tuple[int, bytes]] = {}
        self._parts = [_Part() for _ in range(self._partitions)]
        self._segs: list[Path] = []
        self._seg_ids: dict[Path, int] = {}
        self._seqs = array("q")
        self._nops = array("l")
        self._segid = array("l")
        self._pos = array("q")
        self._len = array("l")
        self._poff = array("q")
        self._part = array("l")
        self._cursor = 0
        self._log_start = _retention.load(self._layout).log_start
        self._next = self._log_start

    def _locate(self, seq: int) -> int | None:
        seqs = self._seqs
        c = self._cursor
        if c < len(seqs) and seqs[c] == seq:
            return c
        j = bisect.bisect_left(seqs, seq)
        if j < len(seqs) and seqs[j] == seq:
            return j
        if seq < self._next:
            raise OperationLogError(f"seq {seq} is not the start of a bulk")
        return None

    def _refresh(self) -> None:
        self._check_epoch()
        for p, part in enumerate(self._parts):
            self._scan_part(p, part)
        self._merge()

    def _merge(self) -> None:
        """Index queued records while they continue the contiguous run."""
        heads: dict[int, int] = {}
        for p, part in enumerate(self._parts):
            queue = part.queue
            while queue and queue[0][0] < self._next:
                queue.popleft()
            if queue:
                heads[queue[0][0]] = p
        nxt = self._next
        add_seq, add_nops, add_seg = self._seqs.append, self._nops.append, self._segid.append
        add_pos, add_len, add_poff = self._pos.append, self._len.append, self._poff.append
        add_part = self._part.append
        voids = self._voids
        while True:
            if nxt not in heads:
                if nxt not in voids:
                    break
                nxt = skip_voids(nxt, voids)
                continue
            p = heads.pop(nxt)
            queue = self._parts[p].queue
            first_seq, n_ops, seg, pos, length, part_offset = queue.popleft()
            add_seq(first_seq)
            add_nops(n_ops)
            add_seg(seg)
            add_pos(pos)
            add_len(length)
            add_poff(part_offset)
            add_part(p)
            nxt += n_ops
            if queue:
                heads[queue[0][0]] = p
        self._next = nxt

    def _scan_part(self, p: int, part: _Part) -> None:
        """Queue the records appended to partition ``p`` since the last scan."""
        while True:
            if part.fd < 0 and not self._open_next(p, part):
                return
            size = os.fstat(part.fd).st_size
            if size > part.pos:
                result = scan_frames(part.fd, part.pos, size)
                seg = self._seg_id(part.segments[part.index][1])
                part.queue.extend([(f[2], f[4], seg, f[0], f[1], f[3]) for f in result.frames])
                part.pos = result.end
                if result.stop is not None:
                    part.torn = (part.segments[part.index][1], result.stop.offset,
                                 result.stop.reason)
                    if not result.stop.torn or self._has_next_segment(p, part, force=True):
                        if not self._stop_persists(p, part, result.stop.offset):
                            continue  # an append raced the read: scan again
                        path, offset, reason = part.torn
                        raise LogCorruptedError(
                            f"corrupted record ({reason}) in {path} at byte {offset}",
                            path=str(path), offset=offset,
                        )
                    return
            part.torn = None
            if not self._has_next_segment(p, part, force=size >= self._segment_bytes):
                return
            part.close()
            part.index += 1
            part.pos = 0

    def _stop_persists(self, p: int, part: _Part, offset: int) -> bool:
        """Whether a scan stop at ``offset`` is still there when read again.

        A read racing an append can see the file's new size before its bytes (zeros),
        or a record cut short just before the writer finished it and opened the next
        segment. Both are gone on a second read; damage is not. Only a stop seen twice
        at the same offset is reported as corruption."""
        again = scan_frames(part.fd, offset, os.fstat(part.fd).st_size)
        if again.stop is None or again.stop.offset != offset:
            return False
        return not again.stop.torn or self._has_next_segment(p, part, force=True)

    def _open_next(self, p: int, part: _Part) -> bool:
        if part.index < 0 or part.index >= len(part.segments):
            part.segments = self._layout.segments(p)
            part.listed = time.monotonic()
            if not part.segments:
                return False
            if part.index < 0:  # start at the first segment that may hold log_start
                part.index = max(0, bisect.bisect_right(
                    [b for b, _ in part.segments], self._log_start) - 1)
        try:
            part.fd = os.open(part.segments[part.index][1], os.O_RDONLY)
        except FileNotFoundError:  # removed by retention meanwhile
            part.segments, part.index = [], -1
            return False
        return True

    def _has_next_segment(self, p: int, part: _Part, force: bool) -> bool:
        if part.index + 1 < len(part.segments):
            return True
        now = time.monotonic()
        if not force and now - part.listed < _RELIST_S:
            return False
        part.listed = now
        current = part.segments[part.index]
        listed = self._layout.segments(p)
        if current in listed:
            part.segments, part.index = listed, listed.index(current)
        else:  # retention removed it while it was read: the segments after it follow
            part.segments = [current, *(s for s in listed if s[0] > current[0])]
            part.index = 0
        return part.index + 1 < len(part.segments)

    def _seg_id(self, path: Path) -> int:
        seg = self._seg_ids.get(path)
        if seg is None:
            seg = self._seg_ids[path] = len(self._segs)
            self._segs.append(path)
        return seg

    # ------------------------------------------------------------ reading

    def _collect(self, i: int, max_ops: int, records: bool) -> list[Any]:
        """Whole bulks (or ``BulkRecord``s) from index ``i``, at most ``max_ops`` operations
        (at least one bulk)."""
        n, total, j = len(self._seqs), 0, i
        while j < n:
            k = self._nops[j]
            if j > i and total + k > max_ops:
                break
            total += k
            j += 1
        out: list[Any] = []
        bufs, segid, pos_, len_, seqs = self._bufs, self._segid, self._pos, self._len, self._seqs
        part, poff, decode, new = self._part, self._poff, self._decode, tuple.__new__
        for x in range(i, j):
            seg, pos, length = segid[x], pos_[x], len_[x]
            cached = bufs.get(seg)
            if cached is None or not cached[0] <= pos <= pos + length <= cached[0] + len(cached[1]):
                cached = self._fill(x, j)
            bulk = decode(cached[1], pos - cached[0], length, seqs[x], seg, pos)
            out.append(new(BulkRecord, (bulk, part[x], poff[x])) if records else bulk)
        self._cursor = j
        return out

    def _fill(self, x: int, j: int) -> tuple[int, bytes]:
        """Read record ``x`` and the records after it in the same file (up to a limit)."""
        seg, start = self._segid[x], self._pos[x]
        end = start + self._len[x]
        for y in range(x + 1, min(j, x + _READ_AHEAD_RECORDS)):
            if self._segid[y] == seg:
                stop = self._pos[y] + self._len[y]
                if stop - start > _READ_AHEAD_BYTES:
                    break
                end = max(end, stop)
        try:
            buf = os.pread(self._fd(seg), end - start, start)
        except FileNotFoundError as exc:
            self._reload_start()
            raise OperationLogError(f"{self._segs[seg]} was removed (the log now starts at "
                                    f"{self._log_start})") from exc
        if len(self._bufs) >= 2 * self._partitions:
            del self._bufs[next(iter(self._bufs))]
        self._bufs[seg] = (start, buf)
        return start, buf

    def _decode(self, buf: bytes, off: int, length: int, seq: int, seg: int, pos: int) -> Bulk:
        intact = len(buf) >= off + length >= off + HEADER_SIZE
        if intact:
            size, crc, first_seq, _, _ = HEADER.unpack_from(buf, off)
            view = memoryview(buf)[off + 8 : off + length]
            intact = first_seq == seq and HEADER_SIZE + size == length and zlib.crc32(view) == crc
        if not intact:
            path = self._segs[seg]
            raise LogCorruptedError(f"record at {path} byte {pos} changed or is damaged",
                                    path=str(path), offset=pos)
        try:
            return decode_bulk(seq, memoryview(buf)[off + HEADER_SIZE : off + HEADER_SIZE + size])
        except CodecError as exc:
            path = self._segs[seg]
            raise LogCorruptedError(f"undecodable record at {path} byte {pos}: {exc}",
                                    path=str(path), offset=pos) from exc

    def _fd(self, seg: int) -> int:
        fd = self._fds.get(seg)
        if fd is None:
            if len(self._fds) >= _MAX_FDS:
                oldest = next(iter(self._fds))
                os.close(self._fds.pop(oldest))
            fd = self._fds[seg] = os.open(self._segs[seg], os.O_RDONLY)
        return fd

    # ------------------------------------------------------------ state of the directory

    def _check_stuck(self) -> None:
        """Nothing new is visible: fine while a writer lives; a torn tail or a gap left
        by a dead writer is reported, not waited on forever."""
        if not any(p.torn or p.queue for p in self._parts):
            return
        if writer_alive(self._layout):
            return
        self._refresh()  # the writer may have finished the record, then exited
        for part in self._parts:
            if part.torn is not None:
                path, offset, reason = part.torn
                raise LogCorruptedError(
                    f"torn record ({reason}) at the tail of {path}, byte {offset}; "
                    "reopen the space with on_corrupt_tail='truncate' to cut it",
                    path=str(path), offset=offset,
                )
        waiting = [p.queue[0] for p in self._parts if p.queue]
        if waiting:
            first_seq, _, seg, pos, _, _ = min(waiting)
            path = self._segs[seg]
            raise LogCorruptedError(
                f"seq {self._next} is missing; seq {first_seq} follows in {path} "
                f"at byte {pos}", path=str(path), offset=pos,
            )

    def _reload_start(self) -> None:
        start = _retention.load(self._layout).log_start
        if start <= self._log_start:
            return
        self._log_start = start
        self._next = max(self._next, start)
        cut = bisect.bisect_left(self._seqs, start)
        if cut:
            for arr in (self._seqs, self._nops, self._segid, self._pos, self._len,
                        self._poff, self._part):
                del arr[:cut]
            self._cursor = max(0, self._cursor - cut)

    def _stat_meta(self) -> tuple[int, int]:
        try:
            st = os.stat(self._layout.meta)
        except FileNotFoundError:
            return (0, 0)
        return (st.st_mtime_ns, st.st_ino)

    def _check_epoch(self) -> None:
        stat = self._stat_meta()
        if stat == self._meta_stat:
            return
        self._meta_stat = stat
        meta = self._layout.read_meta()
        if meta is None:
            return
        self._segment_bytes = meta.segment_bytes
        self._voids = meta.void_ends()
        if meta.epoch != self._epoch:  # the writer cut a damaged tail: scan again
            self._epoch = meta.epoch
            self._reset()

    def _scan_types(self) -> None:
        try:
            fd = os.open(self._layout.types, os.O_RDONLY)
        except FileNotFoundError:
            return
        with contextlib.ExitStack() as stack:
            stack.callback(os.close, fd)
            size = os.fstat(fd).st_size
            if size < self._types_pos:  # the types file was cut: read it again
                self._types_pos = 0
            result = scan_frames(fd, self._types_pos, size, keep_payload=True)
            for frame in result.frames:
                descriptor = decode_descriptor(frame.payload or b"")
                self._types[descriptor.name] = descriptor
            self._types_pos = result.end
