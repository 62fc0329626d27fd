"""The layout of a space's data directory, its metadata file and its writer lock.

::

    data_dir/
      space.json        name, partitions, segment size, epoch (bumped by tail repairs), voids
      LOCK              held (flock) by the one process writing the space
      types.log         framed type descriptors, in introduction order
      snapshot.bin      the latest snapshot (replaced atomically)
      consumers.json    registered consumers' acknowledged positions, retained log start
      p000/00000000000000000001.seg   partition 0's segments, named by their first seq
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from gridstream.errors import ConfigError, OperationLogError

__all__ = ["Layout", "SpaceMeta", "WriterLock", "atomic_write", "writer_alive"]

FORMAT = 1
_SEGMENT_SUFFIX = ".seg"


@dataclass(frozen=True, slots=True)
class SpaceMeta:
    """What never changes for a space directory (except ``epoch``)."""

    name: str
    partitions: int
    segment_bytes: int
    epoch: int = 0
    format: int = FORMAT
    log_id: str = ""
    """Unique per directory: tells a mirror that a stored position belongs to this log."""
    voids: tuple[tuple[int, int], ...] = ()
    """``(start, end)`` ranges of sequence numbers no operation will ever have: a tail
    repair that cut operations continues numbering above every number already used, so
    a number is never given to two operations."""

    def void_ends(self) -> dict[int, int]:
        """``start -> end`` of each void."""
        return dict(self.voids)


class Layout:
    """Paths inside one space directory."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.meta = self.root / "space.json"
        self.lock = self.root / "LOCK"
        self.types = self.root / "types.log"
        self.snapshot = self.root / "snapshot.bin"
        self.consumers = self.root / "consumers.json"
        self.consumers_lock = self.root / "consumers.lock"

    def partition_dir(self, partition: int) -> Path:
        return self.root / f"p{partition:03d}"

    def segment(self, partition: int, base_seq: int) -> Path:
        return self.partition_dir(partition) / f"{base_seq:020d}{_SEGMENT_SUFFIX}"

    def segments(self, partition: int) -> list[tuple[int, Path]]:
        """``(base_seq, path)`` of a partition's segments, oldest first."""
        folder = self.partition_dir(partition)
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return []
        found = [
            (int(n[: -len(_SEGMENT_SUFFIX)]), folder / n)
            for n in names
            if n.endswith(_SEGMENT_SUFFIX) and n[: -len(_SEGMENT_SUFFIX)].isdigit()
        ]
        return sorted(found)

    def read_meta(self) -> SpaceMeta | None:
        try:
            raw = json.loads(self.meta.read_text("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise OperationLogError(f"cannot read {self.meta}: {exc}") from exc
        if raw.get("format") != FORMAT:
            raise OperationLogError(f"{self.meta}: unsupported format {raw.get('format')!r}")
        try:
            raw["voids"] = tuple((int(a), int(b)) for a, b in raw.get("voids", ()))
            return SpaceMeta(**raw)
        except (TypeError, ValueError) as exc:
            raise OperationLogError(f"cannot read {self.meta}: {exc}") from exc

    def write_meta(self, meta: SpaceMeta) -> None:
        atomic_write(self.meta, json.dumps(asdict(meta), indent=1).encode())

    def open_meta(self, name: str, partitions: int, segment_bytes: int) -> SpaceMeta:
        """The directory's metadata, created on first use; refuses a changed layout."""
        self.root.mkdir(parents=True, exist_ok=True)
        meta = self.read_meta()
        if meta is None:
            meta = SpaceMeta(name=name, partitions=partitions, segment_bytes=segment_bytes,
                             log_id=uuid.uuid4().hex)
            self.write_meta(meta)
            return meta
        if meta.name != name:
            raise ConfigError(f"{self.root} holds space {meta.name!r}, not {name!r}")
        if meta.partitions != partitions:
            raise ConfigError(
                f"{self.root} was created with {meta.partitions} partitions, not {partitions}: "
                "routing would change"
            )
        if meta.segment_bytes != segment_bytes or not meta.log_id:
            meta = replace(meta, segment_bytes=segment_bytes,
                           log_id=meta.log_id or uuid.uuid4().hex)
            self.write_meta(meta)
        return meta


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so readers see the old or the new file, whole."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise OperationLogError(f"cannot read {path}: {exc}") from exc
    return value if isinstance(value, dict) else None


class WriterLock:
    """The exclusive lock of the one process writing a space directory."""

    def __init__(self, layout: Layout, wait_s: float = 0.5) -> None:
        self._fd = os.open(layout.lock, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    os.close(self._fd)
                    raise OperationLogError(f"cannot lock {layout.lock}: {exc}") from exc
                if time.monotonic() > deadline:
                    os.close(self._fd)
                    raise OperationLogError(
                        f"{layout.root} is in use by another process writing this space"
                    ) from exc
                time.sleep(0.01)
        os.ftruncate(self._fd, 0)
        os.write(self._fd, f"{os.getpid()}\n".encode())

    def release(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


def writer_alive(layout: Layout) -> bool:
    """Whether a process holds the space's writer lock right now."""
    try:
        fd = os.open(layout.lock, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return True
        raise OperationLogError(f"cannot probe {layout.lock}: {exc}") from exc
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
