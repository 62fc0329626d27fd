"""Appends framed records to the per-partition segment files and the types file.

The space calls ``append`` under its lock, in sequence order, one record per bulk, so a
reader in another process never sees seq ``s + 1`` before seq ``s``. Each record is
handed to the OS in one ``write`` (it survives a crash of the process); when it reaches
the disk depends on the fsync policy:

- ``always``: ``fdatasync`` before ``append`` returns;
- ``batch``: a background flusher calls ``sync`` every ``fsync_interval_s``;
- ``never``: the OS decides (data survives a process crash, not a power loss).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Literal, NamedTuple

from gridstream.errors import ConfigError, OperationLogError
from gridstream.space._files import Layout, fsync_dir
from gridstream.space._frames import MAX_PAYLOAD, encode_frame

__all__ = ["FSYNC_POLICIES", "FsyncPolicy", "LogWriter", "PartitionTail"]

FsyncPolicy = Literal["always", "batch", "never"]
FSYNC_POLICIES: tuple[str, ...] = ("always", "batch", "never")
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND


class PartitionTail(NamedTuple):
    """Where a partition's log continues: its active segment, its size, next offset."""

    base_seq: int | None
    size: int
    next_offset: int


class _Active:
    __slots__ = ("base", "fd", "next_offset", "size", "synced")

    def __init__(self, base: int | None, size: int, next_offset: int) -> None:
        self.base = base
        self.fd = -1
        self.size = size
        self.synced = size
        self.next_offset = next_offset


class LogWriter:
    """The only writer of a space's log files (the directory lock guarantees it)."""

    def __init__(
        self, layout: Layout, tails: list[PartitionTail], *, fsync: str, segment_bytes: int
    ) -> None:
        if fsync not in FSYNC_POLICIES:
            raise ConfigError(f"fsync must be one of {FSYNC_POLICIES}, not {fsync!r}")
        self._layout = layout
        self._fsync = fsync
        self._segment_bytes = segment_bytes
        self._files_lock = threading.Lock()
        self._parts = [_Active(t.base_seq, t.size, t.next_offset) for t in tails]
        self._dirs = [layout.partition_dir(i) for i in range(len(tails))]
        for i, part in enumerate(self._parts):
            if part.base is not None:
                part.fd = os.open(layout.segment(i, part.base), _FLAGS, 0o644)
        self._types_fd = os.open(layout.types, _FLAGS, 0o644)
        self._types_count = 0

    @property
    def fsync_policy(self) -> str:
        return self._fsync

    def append(self, partition: int, first_seq: int, n_ops: int, payload: bytes) -> int:
        """Write one bulk record; returns its offset within the partition."""
        if len(payload) > MAX_PAYLOAD:
            raise OperationLogError(f"a bulk of {len(payload)} bytes exceeds the record limit")
        part = self._parts[partition]
        if part.fd < 0 or (part.size >= self._segment_bytes and part.size > 0):
            self._roll(partition, first_seq)
        offset = part.next_offset
        frame = encode_frame(payload, first_seq, offset, n_ops)
        try:
            written = os.write(part.fd, frame)
        except OSError:
            written = 0
        if written != len(frame):  # rare: finish it, or cut it back and raise
            _write_all(part.fd, frame[written:], part.size, self._dirs[partition])
        part.size += len(frame)
        part.next_offset = offset + 1
        if self._fsync == "always":
            os.fdatasync(part.fd)
            part.synced = part.size
        return offset

    def append_type(self, payload: bytes) -> None:
        """Persist a type descriptor (synced unless the policy is ``never``)."""
        frame = encode_frame(payload, 0, self._types_count, 1)
        size = os.fstat(self._types_fd).st_size
        _write_all(self._types_fd, frame, size, self._layout.types)
        self._types_count += 1
        if self._fsync != "never":
            os.fdatasync(self._types_fd)

    def set_types_count(self, count: int) -> None:
        self._types_count = count

    def dirty(self) -> bool:
        return any(p.size != p.synced for p in self._parts)

    def sync(self) -> None:
        """Make everything appended so far durable (thread-safe; called by the flusher)."""
        with self._files_lock:
            for part in self._parts:
                size = part.size
                if part.fd >= 0 and size != part.synced:
                    os.fdatasync(part.fd)
                    part.synced = size

    def close(self) -> None:
        with self._files_lock:
            for part in self._parts:
                if part.fd >= 0:
                    with contextlib.suppress(OSError):
                        if self._fsync != "never":
                            os.fsync(part.fd)
                    os.close(part.fd)
                    part.fd = -1
            if self._types_fd >= 0:
                os.close(self._types_fd)
                self._types_fd = -1

    def _roll(self, partition: int, first_seq: int) -> None:
        """Start a new segment named after ``first_seq`` (the old one is synced first)."""
        part = self._parts[partition]
        folder = self._layout.partition_dir(partition)
        with self._files_lock:
            if part.fd >= 0:
                if self._fsync != "never":
                    os.fsync(part.fd)
                os.close(part.fd)
                part.fd = -1
            folder.mkdir(parents=True, exist_ok=True)
            path = self._layout.segment(partition, first_seq)
            try:
                part.fd = os.open(path, _FLAGS, 0o644)
            except OSError as exc:
                raise OperationLogError(f"cannot create segment {path}: {exc}") from exc
            part.base, part.size, part.synced = first_seq, os.fstat(part.fd).st_size, 0
            if self._fsync != "never":
                fsync_dir(folder)
                fsync_dir(folder.parent)


def _write_all(fd: int, frame: bytes, size_before: int, where: object) -> None:
    """Write the whole frame, or cut the file back so no torn record stays behind."""
    view = memoryview(frame)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size_before)
        raise OperationLogError(f"cannot append to the log in {where}: {exc}") from exc
