"""Open a space directory: lock it, load types and snapshot, replay the log after it."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path

from gridstream.errors import ConfigError, LogCorruptedError, OperationLogError
from gridstream.operations import OpType, TypeDescriptor
from gridstream.paths import apply_logged
from gridstream.space import _retention
from gridstream.space._codec import (
    RawOp,
    decode_data,
    decode_descriptor,
    decode_raw_ops,
    encode_data,
)
from gridstream.space._core import Core, SpaceOptions
from gridstream.space._files import Layout, SpaceMeta, WriterLock
from gridstream.space._recovery import (
    LogRecord,
    Recovered,
    apply_cuts,
    read_payload,
    recover_log,
    scan_file,
)
from gridstream.space._snapshot import load_snapshot
from gridstream.space._store import Slot, Store
from gridstream.space._writer import LogWriter

__all__ = ["open_core"]

log = logging.getLogger(__name__)


def open_core(name: str, data_dir: str | os.PathLike[str], options: SpaceOptions) -> Core:
    """Recover the space stored in ``data_dir`` (or create it) and start its engine."""
    _check_options(options)
    layout = Layout(data_dir)
    layout.root.mkdir(parents=True, exist_ok=True)
    lock = WriterLock(layout)
    try:
        meta = layout.open_meta(name, options.partitions, options.segment_bytes)
        types, type_count = _load_types(layout, options.on_corrupt_tail)
        store = Store()
        start_seq = _load_snapshot(layout, store)
        recovered = recover_log(layout, options.partitions, start_seq,
                                "truncate" if options.on_corrupt_tail == "truncate" else "fail",
                                meta.void_ends())
        next_seq = recovered.next_seq
        if recovered.repaired:  # tells live readers to re-scan
            next_seq, voids = _renumber(layout, meta, recovered)
            # the void is recorded before the cut: a crash in between leaves a log whose
            # next open cuts again, never one whose cut numbers could be given again
            layout.write_meta(replace(meta, epoch=meta.epoch + 1, voids=voids))
            apply_cuts(recovered)
        for type_name, descriptor in types.items():
            store.set_indexes(type_name, descriptor.indexes)
        _replay(recovered.records, store, types)
        writer = LogWriter(layout, recovered.tails, fsync=options.fsync,
                           segment_bytes=options.segment_bytes)
        writer.set_types_count(type_count)
    except BaseException:
        lock.release()
        raise
    return Core(name, layout, options, store, types, writer, next_seq, lock)


def _renumber(layout: Layout, meta: SpaceMeta,
              recovered: Recovered) -> tuple[int, tuple[tuple[int, int], ...]]:
    """After a cut: numbering goes on above every sequence number ever used — by a
    record found in the files (kept or cut), or acknowledged by a consumer (which
    delivered it) — so no number is given twice and versions keep growing; the unused
    range becomes a void."""
    acked = _retention.load(layout).acks.values()
    floor = max([recovered.next_seq, recovered.seen_end, *acked])
    if floor <= recovered.next_seq:
        return recovered.next_seq, meta.voids
    log.warning("the cut operation log goes on at seq %d: seqs %d to %d were used before "
                "the cut and are never reused", floor, recovered.next_seq, floor - 1)
    return floor, (*meta.voids, (recovered.next_seq, floor))


def _check_options(options: SpaceOptions) -> None:
    if options.partitions < 1:
        raise ConfigError("partitions must be at least 1")
    if options.on_corrupt_tail not in ("fail", "truncate"):
        raise ConfigError("on_corrupt_tail must be 'fail' or 'truncate'")
    if options.segment_bytes < 4096:
        raise ConfigError("segment_bytes must be at least 4096")
    if options.max_entry_bytes < 1:
        raise ConfigError("max_entry_bytes must be positive")


def _load_types(layout: Layout, on_corrupt_tail: str) -> tuple[dict[str, TypeDescriptor], int]:
    """Every type introduced so far (later records describe a type's newer version)."""
    if not layout.types.exists():
        return {}, 0
    frames, end, stop = scan_file(layout.types, keep_payload=True)
    if stop is not None:
        if not stop.torn or on_corrupt_tail != "truncate":
            raise LogCorruptedError(
                f"damaged type record ({stop.reason}) in {layout.types} at byte {stop.offset}",
                path=str(layout.types), offset=stop.offset,
            )
        log.warning("cutting the types file's tail: %s, from byte %d", layout.types, end)
        os.truncate(layout.types, end)
    types = {}
    for frame in frames:
        descriptor = decode_descriptor(frame.payload or b"")
        types[descriptor.name] = descriptor
    return types, len(frames)


def _load_snapshot(layout: Layout, store: Store) -> int:
    loaded = load_snapshot(layout)
    if loaded is None:
        return 1
    meta, chunks = loaded
    tables = store.tables
    for chunk in chunks:
        for e in chunk:
            table = tables.get(e.type_name)
            if table is None:
                table = tables[e.type_name] = {}
            table[e.id] = Slot(e.version, bytes(e.data), e.partition, e.routing)
    return meta.next_seq


def _replay(records: list[LogRecord], store: Store, types: dict[str, TypeDescriptor]) -> None:
    fds: dict[Path, int] = {}
    try:
        for rec in records:
            fd = fds.get(rec.path)
            if fd is None:
                fd = fds[rec.path] = os.open(rec.path, os.O_RDONLY)
            try:
                ops = decode_raw_ops(rec.first_seq, read_payload(fd, rec))
            except Exception as exc:
                raise LogCorruptedError(f"unreadable record in {rec.path} at byte {rec.pos}",
                                        path=str(rec.path), offset=rec.pos) from exc
            for i, op in enumerate(ops):
                _apply(store, types, rec.first_seq + i, op)
    finally:
        for fd in fds.values():
            os.close(fd)


def _apply(store: Store, types: dict[str, TypeDescriptor], seq: int, op: RawOp) -> None:
    """Apply one logged operation exactly as the live space did."""
    old = store.get(op.type_name, op.id)
    if op.op.is_delete:
        store.put(op.type_name, op.id, None, old)
        return
    if op.data is None:
        raise OperationLogError(f"{op.op} at seq {seq} carries no data")
    if op.op in (OpType.WRITE, OpType.UPDATE):
        raw = op.data
    else:
        data = decode_data(old.data) if old is not None else {}
        descriptor = types.get(op.type_name) or TypeDescriptor(op.type_name, "id")
        apply_logged(data, op.op.value, decode_data(op.data), op.removed,
                     descriptor.declared_paths())
        raw = encode_data(data)
    store.put(op.type_name, op.id, Slot(seq, raw, op.partition, op.routing), old)
