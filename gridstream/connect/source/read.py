"""One cache's part of a batch → rows (Arrow record batches) for the connector.

Each record goes through ``cacheFilter``, the transform chain and the converter; what
cannot pass becomes a row whose ``status`` says what the error policy made of it:

- ``ok``: to write (``topic``, ``key``, ``value``, ``headers``);
- ``filtered``: ``cacheFilter`` said no, or a removal without ``shallProcessRemovals``;
- ``skipped``: bad, ``LOG_ONLY`` (counted, logged by the connector);
- ``dead``: bad, ``DEAD_LETTER``: to write to the dead-letter topic with ``gs.error.*``
  headers;
- ``error``: bad, ``STOP_TASK``: the connector stops the query naming it;
- ``gap``: a change made while a ``NONE`` connector was stopped: counted, not written;
- ``event``: one row per event of the batch (``reason`` holds it as JSON).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson
import pyarrow as pa

from gridstream.connect.config import ErrorHandling, SourceConnectorConfig
from gridstream.connect.converters import Converter, JsonConverter
from gridstream.connect.filters import EntryFilter
from gridstream.connect.record import Record
from gridstream.connect.source import snapshots
from gridstream.connect.source.offsets import Work
from gridstream.connect.transforms import IDENTITY
from gridstream.errors import CodecError, GridError, PositionLostError
from gridstream.grid.contract import Change, ChangeBatch, GridAdapter, Key, Position, Value
from gridstream.protocol import H_VERSION
from gridstream.spark.dead_letter import H_CACHE, H_CONNECTOR, H_KEY, H_REASON, H_STAGE

__all__ = ["ROW_SCHEMA", "SCHEMA_DDL", "RecordMaker", "RowBuffer", "Rows", "read_work",
           "shared_works"]

log = logging.getLogger(__name__)

_HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])
ROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary()),
    ("headers", pa.list_(_HEADER)), ("status", pa.string()), ("cache", pa.string()),
    ("where", pa.string()), ("reason", pa.string()),
])
SCHEMA_DDL = ("topic STRING, key BINARY, value BINARY, "
              "headers ARRAY<STRUCT<key: STRING, value: BINARY>>, status STRING, "
              "cache STRING, where STRING, reason STRING")
_READ_CHANGES = 5_000
ROWS_PER_BATCH = 10_000


class Rows(Protocol):
    """Where a partition's rows go: kept as Arrow (``RowBuffer``), or produced as they
    come (the connector's write mode: ``produce.ProducingRows``, whose length stays 0)."""

    def __len__(self) -> int: ...

    def add(self, topic: str | None, key: bytes | None, value: bytes | None,
            headers: Sequence[tuple[str, bytes]] | None, status: str, cache: str,
            where: str = "", reason: str | None = None) -> None: ...

    def take(self) -> pa.RecordBatch: ...


class RowBuffer:
    """Rows gathered column by column, cut into Arrow record batches."""

    def __init__(self) -> None:
        self._cols: list[list[Any]] = [[] for _ in ROW_SCHEMA]

    def __len__(self) -> int:
        return len(self._cols[0])

    def add(self, topic: str | None, key: bytes | None, value: bytes | None,
            headers: Sequence[tuple[str, bytes]] | None, status: str, cache: str,
            where: str = "", reason: str | None = None) -> None:
        row = (topic, key, value, [{"key": k, "value": v} for k, v in headers or ()],
               status, cache, where, reason)
        for col, item in zip(self._cols, row, strict=True):
            col.append(item)

    def take(self) -> pa.RecordBatch:
        batch = pa.RecordBatch.from_arrays(
            [pa.array(col, f.type) for col, f in zip(self._cols, ROW_SCHEMA, strict=True)],
            schema=ROW_SCHEMA)
        self._cols = [[] for _ in ROW_SCHEMA]
        return batch


@dataclass
class RecordMaker:
    """Filter, transforms, converter and error policy of one connector (built where it is
    used: converters hold clients)."""

    config: SourceConnectorConfig
    converter: Converter
    chain: Callable[[Record], Record]
    entry_filter: EntryFilter | None
    time_ms: int

    passes_json: bool = field(init=False, default=False)
    """A change whose value comes as JSON text goes to Kafka as it is: no filter or
    transform reads the value, and the JSON converter would write the same bytes."""

    def __post_init__(self) -> None:
        self.passes_json = (self.entry_filter is None and self.chain is IDENTITY
                            and type(self.converter) is JsonConverter)

    def add_change(self, rows: Rows, cache: str, change: Change) -> None:
        """One change of a stream (``add``, without decoding a value given as JSON text
        when nothing but the JSON converter would read it)."""
        text, key, version = change.text, change.key, change.version
        if text is None or key is None or not self.passes_json:
            try:
                value = change.value
            except GridError as exc:  # a value an adapter handed as text, not an object
                self._bad(rows, cache, key, None, "read", exc)
                return
            self.add(rows, cache, key, value, version)
            return
        try:
            key_bytes = self.converter.encode_key(key)
        except CodecError as exc:
            self._bad(rows, cache, key, change.value, "convert", exc)
            return
        rows.add(self.config.topic_prefix + cache, key_bytes, text.encode(),
                 _version_header(version), "ok", cache, f"{cache}/{key}")

    def add(self, rows: Rows, cache: str, key: Key, value: Value | None,
            version: int | None) -> None:
        c = self.config
        where = f"{cache}/{key}"
        if value is None and not c.shall_process_removals:
            rows.add(None, None, None, None, "filtered", cache, where)
            return
        stage = "filter"
        try:
            if value is not None and self.entry_filter is not None and not self.entry_filter(
                    cache, key, value):
                rows.add(None, None, None, None, "filtered", cache, where)
                return
            stage = "transform"
            record = self.chain(Record(c.topic_prefix + cache, cache, key, value,
                                       _version_header(version), self.time_ms, where))
            stage = "convert"
            key_bytes = (self.converter.encode_key(record.key)
                         if record.key is not None else None)
            value_bytes = self.converter.encode_value(record.topic, cache, record.value)
        except CodecError as exc:
            self._bad(rows, cache, key, value, stage, exc)
            return
        except Exception as exc:  # noqa: BLE001 - the operator's filter may raise anything
            if stage != "filter":
                raise
            self._bad(rows, cache, key, value, stage, exc)
            return
        rows.add(record.topic, key_bytes, value_bytes, record.headers, "ok", cache, where)

    def _bad(self, rows: Rows, cache: str, key: Key, value: Value | None, stage: str,
             exc: BaseException) -> None:
        c = self.config
        where = f"{cache}/{key}"
        reason = f"{type(exc).__name__}: {exc}"
        policy = c.error_handling_policy
        if policy is ErrorHandling.STOP_TASK:
            rows.add(None, None, None, None, "error", cache, where, f"{stage}: {reason}")
        elif policy is ErrorHandling.LOG_ONLY:
            rows.add(None, None, None, None, "skipped", cache, where, f"{stage}: {reason}")
        else:
            key_text = orjson.dumps(key)
            headers = [(H_REASON, reason.encode()), (H_STAGE, stage.encode()),
                       (H_CACHE, cache.encode()), (H_KEY, key_text),
                       (H_CONNECTOR, c.name.encode())]
            rows.add(c.dead_letter_topic, key_text, _raw_value(value), headers, "dead",
                     cache, where, f"{stage}: {reason}")


def _version_header(version: int | None) -> tuple[tuple[str, bytes], ...]:
    """The ``gs.version`` header of a source record (none without a version)."""
    return ((H_VERSION, b"%d" % version),) if version is not None else ()


def _raw_value(value: Value | None) -> bytes | None:
    """The entry as JSON, whatever it holds (a dead letter must carry it)."""
    if value is None:
        return None
    try:
        return orjson.dumps(value)
    except TypeError:  # e.g. an integer beyond 64 bits: Python's json writes it as it is
        return json.dumps(value, default=repr, separators=(",", ":")).encode()


Adapters = Callable[[bool], GridAdapter]
"""This process's adapter (``True``: the previous one failed, a new connection)."""
_ATTEMPTS, _RETRY_S = 3, 2.0


def _read(adapters: Adapters, caches: Sequence[str], position: Position, end: Position
          ) -> ChangeBatch:
    """One read (of several caches: of their shared stream, once), tried again on a new
    connection when the grid fails (a lost position is never retried). Nothing of a
    failed read was used, so nothing is read twice."""
    fresh = False
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            adapter = adapters(fresh)
            if adapter.shared_stream:  # read no further than the batch's end
                return adapter.read_shared(caches, position, _READ_CHANGES, end)
            if len(caches) != 1:
                raise GridError(f"caches {', '.join(caches)} have streams of their own: "
                                "read one at a time")
            return adapter.read_changes(caches[0], position, _READ_CHANGES)
        except PositionLostError:
            raise
        except GridError as exc:
            if attempt == _ATTEMPTS:
                raise
            log.warning("%s: reading changes failed (attempt %d of %d), again in %ss: %s",
                        ", ".join(caches), attempt, _ATTEMPTS, _RETRY_S, exc)
            time.sleep(_RETRY_S)
            fresh = True
    raise AssertionError("unreachable")


def _changes(adapters: Adapters, caches: Sequence[str], start: Position, end: Position
             ) -> Iterator[Change]:
    """Every change from ``start`` up to (not including) ``end``, stream by stream."""
    position = start
    limits = end.next_seqs
    while not all(position.next_seqs.get(s, 0) >= seq for s, seq in limits.items()):
        batch = _read(adapters, caches, position, end)
        for change in batch.changes:
            if change.seq < limits.get(change.stream, 0):
                yield change
        if batch.position.to_json() == position.to_json() and not batch.changes:
            raise_stuck(", ".join(caches), position, end)
        position = batch.position


def raise_stuck(cache: str, position: Position, end: Position) -> None:
    raise GridError(f"cache {cache!r}: the change stream stands at {position.to_json()} "
                    f"and gives nothing more before {end.to_json()}, planned as its end")


def read_work(work: Work | Sequence[Work], adapters: Adapters, maker: RecordMaker,
              snap_dir: Path, rows: Rows | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of one cache's part of a batch, or of several caches' parts that read
    one shared stream over the same span (the stream read once for all: the planner
    groups them, ``shared_works``); into ``rows``: a new ``RowBuffer`` unless given."""
    works = [work] if isinstance(work, Work) else list(work)
    rows = RowBuffer() if rows is None else rows
    first = works[0]
    if first.snap is not None and first.start is None:
        assert len(works) == 1  # snapshots are never grouped
        for key, value, version in snapshots.read_rows(snap_dir, first.snap, first.row_from,
                                                       first.row_to):
            maker.add(rows, first.cache, key, value, version)
            if len(rows) >= ROWS_PER_BATCH:
                yield rows.take()
    elif first.start is not None and first.end is not None:
        by_cache = {w.cache: w for w in works}
        settled = {w.cache: snapshots.versions(snap_dir, w.snap)
                   for w in works if w.snap is not None and w.until is not None}
        for change in _changes(adapters, list(by_cache), first.start, first.end):
            _stream_row(rows, maker, by_cache[change.cache], change,
                        settled.get(change.cache))
            if len(rows) >= ROWS_PER_BATCH:
                yield rows.take()
    if len(rows):
        yield rows.take()


def _stream_row(rows: Rows, maker: RecordMaker, work: Work, change: Change,
                settled: dict[Key, int] | None) -> None:
    """One change of a stream: a gap (``NONE`` skip), nothing (the snapshot already holds
    it or a later one), or a record."""
    cache = work.cache
    if work.skip:
        rows.add(None, None, None, None, "gap", cache, f"{cache}/{change.key}")
    elif (settled and work.until is not None
          and change.seq < work.until.next_seqs.get(change.stream, 0)
          and change.version is not None and change.version <= settled.get(change.key, -1)):
        return  # the snapshot already holds this change (or a later one)
    else:
        maker.add_change(rows, cache, change)


def shared_works(works: Sequence[Work]) -> list[list[Work]]:
    """``works`` grouped for a grid whose caches share one stream: streaming works over
    the same span (and both skipping, or neither) read together; snapshots alone."""
    groups: dict[tuple[str, str, bool], list[Work]] = {}
    out: list[list[Work]] = []
    for work in works:
        if work.start is None or work.end is None:
            out.append([work])
            continue
        key = (work.start.to_json(), work.end.to_json(), work.skip)
        if key not in groups:
            groups[key] = []
            out.append(groups[key])
        groups[key].append(work)
    return out
