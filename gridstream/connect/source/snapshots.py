"""Materialised snapshots: a cache's entries scanned once into an immutable Arrow IPC
file under the checkpoint, so every batch reading a range of its rows (again, after a
crash) reads the same records.

A file holds ``key`` (the key as JSON text: strings and integers stay apart), ``value``
(the value as JSON bytes) and ``version`` (the entry's version, null where the grid keeps
none). Files are written to a temporary name, synced and renamed: a file that exists is
complete. Files no offset refers to any more are deleted by ``remove_unused``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
import uuid
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.ipc as ipc

from gridstream.errors import ConfigError, GridError
from gridstream.grid.contract import GridAdapter, Key, Value

__all__ = ["SCHEMA", "local_dir", "read_rows", "remove_unused", "snapshot_dir",
           "versions", "write_snapshot"]

SCHEMA = pa.schema([("key", pa.string()), ("value", pa.binary()), ("version", pa.int64())])
_SCAN_BATCH = 5_000


def local_dir(location: str) -> Path:
    """The local directory of a checkpoint location (``file:`` URIs accepted)."""
    if location.startswith("file://"):
        location = location[len("file://"):]
    elif location.startswith("file:"):
        location = location[len("file:"):]
    elif re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", location):
        raise ConfigError(f"the source connector keeps its snapshots under the checkpoint, "
                          f"which must be a local (or mounted) directory, not {location!r}")
    return Path(location)


def snapshot_dir(checkpoint: str) -> Path:
    return local_dir(checkpoint) / "gridstream-source" / "snapshots"


def _file_name(cache: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", cache)[:60]
    digest = hashlib.blake2b(cache.encode(), digest_size=4).hexdigest()
    return f"{safe}-{digest}-{time.time_ns()}-{uuid.uuid4().hex[:8]}.arrow"


def write_snapshot(adapter: GridAdapter, cache: str, directory: Path
                   ) -> tuple[str, int, bool]:
    """Scan ``cache`` into a new file of ``directory``: its name, its row count, and
    whether every entry carries a version."""
    directory.mkdir(parents=True, exist_ok=True)
    name = _file_name(cache)
    final = directory / name
    temp = directory / f".{name}.tmp"
    rows = 0
    versioned = True
    try:
        with pa.OSFile(str(temp), "wb") as sink, ipc.new_file(sink, SCHEMA) as writer:
            for entries in adapter.snapshot(cache, _SCAN_BATCH):
                keys = [orjson.dumps(e.key).decode() for e in entries]
                values = [orjson.dumps(e.value) for e in entries]
                versions_ = [e.version for e in entries]
                writer.write_batch(pa.RecordBatch.from_arrays(
                    [pa.array(keys, pa.string()), pa.array(values, pa.binary()),
                     pa.array(versions_, pa.int64())], schema=SCHEMA))
                rows += len(entries)
                versioned = versioned and all(v is not None for v in versions_)
        with open(temp, "rb") as done:
            os.fsync(done.fileno())
        os.replace(temp, final)
        _sync_dir(directory)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        raise
    return name, rows, versioned


def _sync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open(directory: Path, name: str) -> Any:
    path = directory / name
    try:
        return ipc.open_file(pa.memory_map(str(path), "r"))
    except (OSError, pa.ArrowException) as exc:
        raise GridError(f"the snapshot file {path} cannot be read ({exc}); the checkpoint "
                        "refers to it: restore it or start the connector with a new "
                        "checkpoint") from exc


def read_rows(directory: Path, name: str, start: int, stop: int
              ) -> Iterator[tuple[Key, Value, int | None]]:
    """Rows ``[start, stop)`` of a snapshot file: ``(key, value, version)``."""
    reader = _open(directory, name)
    seen = 0
    for i in range(reader.num_record_batches):
        if seen >= stop:
            break
        batch = reader.get_batch(i)
        n = batch.num_rows
        if seen + n > start:
            lo, hi = max(0, start - seen), min(n, stop - seen)
            part = batch.slice(lo, hi - lo)
            keys, values = part.column(0).to_pylist(), part.column(1).to_pylist()
            vers = part.column(2).to_pylist()
            for key, value, version in zip(keys, values, vers, strict=True):
                yield orjson.loads(key), orjson.loads(value), version
        seen += n
    if seen < stop:
        raise GridError(f"the snapshot file {name} has {seen} rows, the offsets say at "
                        f"least {stop}")


def versions(directory: Path, name: str) -> dict[Key, int]:
    """Each key's version in a snapshot file (keys without a version left out)."""
    reader = _open(directory, name)
    out: dict[Key, int] = {}
    for i in range(reader.num_record_batches):
        batch = reader.get_batch(i)
        for key, version in zip(batch.column(0).to_pylist(), batch.column(2).to_pylist(),
                                strict=True):
            if version is not None:
                out[orjson.loads(key)] = version
    return out


def remove_unused(directory: Path, keep: Collection[str]) -> list[str]:
    """Delete the snapshot files (and leftover temporary files) not in ``keep``."""
    removed: list[str] = []
    if not directory.is_dir():
        return removed
    for path in directory.iterdir():
        if path.name in keep:
            continue
        if path.suffix == ".arrow" or path.name.endswith(".tmp"):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            removed.append(path.name)
    return removed
