"""Applying a micro-batch's decoded rows to the grid (the sink connector's and the
pipeline API's grid sinks share it).

Rows come in Kafka order per partition (topic, partition, offset). Each key's writes of
the batch fold into one (``fold_writes``): with ``shallProcessUpdates`` the last
(a put, or a remove for a tombstone), without it the first put (an update or a removal of
an entry the cache holds is never applied: ``GridAdapter.apply(overwrite=False)``).
Applying the folded writes again leaves the grid as the first application did, so a
re-run batch (a crash before Spark committed its offsets) changes nothing.

``version`` (the pipeline API's exactly-once grid sink: the batch id) gives every folded
write that version: the grid then skips a key it already holds at that version for the
adapter's ``source``, so a re-run batch writes only what its first run did not
(``GridAdapter.apply``). ``order`` names the columns rows are ordered by (default
``ORDER``; the pipeline sink adds a tie-break for several items of one record).

- Hazelcast: the rows are spread over ``tasks.max`` Spark tasks by (cache, key), so each
  key is written by one task; each task applies its share with the adapter (``put_all``
  for puts, removes in parallel), one adapter per Python worker process.
- The Space (embedded, only its owner writes): the driver, which owns the Space, applies
  the batch. The sink connector collects it (``apply_on_driver``: one Space transaction
  per cache). The pipeline API's grid sink streams a batch of more than ``DRIVER_CHUNK``
  rows (``apply_streamed``): each key's rows together, read one Spark partition at a
  time, applied in chunks of at most ``DRIVER_CHUNK`` keys (one transaction per cache and
  chunk), so the driver never holds the whole batch; a key is never split between
  chunks, so a versioned re-run still skips exactly the keys its first run wrote.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from gridstream.errors import GridError
from gridstream.grid.contract import GridAdapter, Key, Value, Write
from gridstream.spark import worker

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig

__all__ = ["APPLY_COLUMNS", "DRIVER_CHUNK", "Entry", "apply_in_chunks", "apply_on_driver",
           "apply_in_task", "apply_streamed", "apply_tasks", "fold_entries", "fold_sorted",
           "fold_writes",
           "worker_adapter"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Entry:
    """A valid record's write, as Python objects (the one-pass write's decode)."""

    cache: str
    key: Key
    value: Value | None
    """None: a tombstone (removes the key)."""


APPLY_COLUMNS = ("topic", "partition", "offset", "cache", "key", "value")
ORDER = ("topic", "partition", "offset")
DRIVER_CHUNK = 10_000
"""``apply_streamed``: the most folded writes the driver holds and hands the grid at once
(the rows of about one chunk are read from Spark at a time)."""

Row = tuple[str, str, str | bytes | None]
"""(cache, key as JSON text, value as JSON text or bytes, None for a tombstone)."""


def fold_writes(rows: Iterable[Row], *, updates: bool,
                version: int | None = None) -> dict[str, list[Write]]:
    """Each cache's writes, one per key, from rows in Kafka order (see the module
    docstring), each with ``version`` (None: unversioned)."""
    if version is not None and (type(version) is not int or version < 0):
        raise ValueError(f"a write version must be a non-negative integer: {version!r}")
    return {cache: [Write(_key(k), None if v is None else orjson.loads(v), version)
                    for k, v in held.items()]
            for cache, held in _fold(rows, updates).items()}


def fold_entries(entries: Iterable[Entry], *, updates: bool) -> dict[str, list[Write]]:
    """``fold_writes`` of decoded entries (Python keys and values: no JSON text)."""
    return {cache: [Write(k, v) for k, v in held.items()]
            for cache, held in _fold(((e.cache, e.key, e.value) for e in entries),
                                     updates).items()}


def _fold(rows: Iterable[tuple[str, Any, Any]], updates: bool
          ) -> dict[str, dict[Any, Any]]:
    """Each cache's one write per key (the module docstring's rule), in first-seen key
    order."""
    out: dict[str, dict[Any, Any]] = {}
    for cache, key, value in rows:
        held = out.setdefault(cache, {})
        if updates:
            held[key] = value  # the last write of a key wins
        elif value is not None and key not in held:
            held[key] = value
    return out


def _key(text: str) -> Key:
    key = orjson.loads(text)
    if type(key) not in (str, int):  # the decode wrote it; anything else is a bug
        raise TypeError(f"a decoded key must be a string or an integer: {text!r}")
    return key  # type: ignore[no-any-return]


def apply_all(adapter: GridAdapter, writes: dict[str, list[Write]], *, updates: bool) -> int:
    """Apply each cache's writes; how many writes (folded) were handed to the grid."""
    for cache, batch in sorted(writes.items()):
        adapter.apply(cache, batch, overwrite=updates)
    return sum(len(batch) for batch in writes.values())


# ------------------------------------------------------------------ the Space: driver


def apply_on_driver(adapter: GridAdapter, ok: DataFrame, *, updates: bool,
                    version: int | None = None, order: Sequence[str] = ORDER) -> int:
    """Collect the batch's valid rows on the driver and apply them in Kafka order."""
    table = ok.select(*_columns(order)).toArrow()
    table = table.sort_by([(c, "ascending") for c in order])
    rows = zip(table.column("cache").to_pylist(), table.column("key").to_pylist(),
               table.column("value").to_pylist(), strict=True)
    return apply_all(adapter, fold_writes(rows, updates=updates, version=version),
                     updates=updates)


def apply_streamed(adapter: GridAdapter, ok: DataFrame, *, count: int, updates: bool,
                   version: int | None = None, order: Sequence[str] = ORDER,
                   chunk: int | None = None) -> int:
    """Apply the batch's ``count`` valid rows from the driver, holding at most about
    ``chunk`` of them (default ``DRIVER_CHUNK``) at once: a batch that small is collected
    (``apply_on_driver``); a larger one is spread by (cache, key) over Spark partitions
    of about ``chunk`` rows, sorted within each by key and then ``order``, read one
    partition at a time and applied in chunks (``apply_in_chunks``). How many writes
    (folded)."""
    size = chunk if chunk is not None else DRIVER_CHUNK
    if size < 1:
        raise ValueError(f"a chunk holds at least one write: {size!r}")
    if count <= 0:
        return 0
    if count <= size:  # one chunk: no shuffle
        return apply_on_driver(adapter, ok, updates=updates, version=version, order=order)
    spread = (ok.select(*_columns(order)).repartition(-(-count // size), "cache", "key")
              .sortWithinPartitions("cache", "key", *order))
    stream = ((r["cache"], r["key"], r["value"]) for r in spread.toLocalIterator())
    return apply_in_chunks(adapter, stream, updates=updates, version=version, chunk=size)


def fold_sorted(rows: Iterable[Row], *, updates: bool) -> Iterator[Row]:
    """Rows that hold each (cache, key)'s rows together, in Kafka order → each key's one
    row (``fold_writes``' rule: the last, or without ``updates`` the first put; a key
    with no put gives none), in a single pass that holds one key at a time."""
    current: tuple[str, str] | None = None
    held: Row | None = None
    for cache, key, value in rows:
        if (cache, key) != current:
            if held is not None:
                yield held
            current, held = (cache, key), None
        if updates or (held is None and value is not None):
            held = (cache, key, value)
    if held is not None:
        yield held


def apply_in_chunks(adapter: GridAdapter, rows: Iterable[Row], *, updates: bool,
                    version: int | None = None, chunk: int = DRIVER_CHUNK) -> int:
    """Apply rows that hold each key's rows together (``fold_sorted``) in chunks of at
    most ``chunk`` keys, in order, one ``apply`` per cache and chunk; how many writes."""
    done = 0
    pending: list[Row] = []
    for row in fold_sorted(rows, updates=updates):
        pending.append(row)
        if len(pending) >= chunk:
            done += apply_all(adapter, fold_writes(pending, updates=updates, version=version),
                              updates=updates)
            pending = []
    if pending:
        done += apply_all(adapter, fold_writes(pending, updates=updates, version=version),
                          updates=updates)
    return done


def _columns(order: Sequence[str]) -> list[str]:
    return [*APPLY_COLUMNS, *(c for c in order if c not in APPLY_COLUMNS)]


# ------------------------------------------------------------------ Hazelcast: tasks

_ADAPTERS: dict[HazelcastGridConfig, HazelcastAdapter] = {}
"""Per Python worker (reused across tasks): one open adapter per cluster."""


def worker_adapter(config: HazelcastGridConfig, fresh: bool = False) -> HazelcastAdapter:
    """This Python worker's open adapter of the cluster (one per worker and cluster;
    ``fresh``: the kept one failed, close it and connect again)."""
    found = _ADAPTERS.pop(config, None) if fresh else _ADAPTERS.get(config)
    if fresh and found is not None:
        with contextlib.suppress(Exception):  # closing a client that already failed
            found.close()
        found = None
    if found is None:
        from gridstream.grid.hazelcast import HazelcastAdapter

        found = HazelcastAdapter(config)
        found.open()
        _ADAPTERS[config] = found
    return found


_ATTEMPTS, _RETRY_S = 3, 2.0
"""How often a task's apply is tried when the grid fails (a lost connection: applying a
batch again leaves the grid as once would), and the pause."""


def apply_in_task(config: HazelcastGridConfig, writes: dict[str, list[Write]], *,
                  updates: bool) -> int:
    """``apply_all`` with this worker's adapter, tried again on a new connection when the
    grid fails (the kept client's connection may have died while the worker was idle)."""
    fresh = False
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            return apply_all(worker_adapter(config, fresh), writes, updates=updates)
        except GridError as exc:
            if attempt == _ATTEMPTS:
                raise
            log.warning("applying to the grid failed (attempt %d of %d), again in %ss on a "
                        "new connection: %s", attempt, _ATTEMPTS, _RETRY_S, exc)
            time.sleep(_RETRY_S)
            fresh = True
    raise AssertionError("unreachable")


def apply_tasks(ok: DataFrame, config: HazelcastGridConfig, *, tasks: int,
                updates: bool, version: int | None = None,
                order: Sequence[str] = ORDER) -> int:
    """Spread the valid rows over ``tasks`` tasks by (cache, key), keep Kafka order
    within each, apply each task's share; how many writes (folded) were applied."""
    spread = (ok.select(*_columns(order)).repartition(tasks, "cache", "key")
              .sortWithinPartitions(*order))
    counts = spread.mapInArrow(_task(config, updates, version), "writes long").collect()
    return sum(int(row["writes"]) for row in counts)


def _task(config: HazelcastGridConfig, updates: bool, version: int | None = None
          ) -> Callable[
        [Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        worker.prepare()
        rows: list[Row] = []
        for batch in batches:
            rows.extend(zip(batch.column("cache").to_pylist(), batch.column("key").to_pylist(),
                            batch.column("value").to_pylist(), strict=True))
        done = 0
        if rows:
            done = apply_in_task(config, fold_writes(rows, updates=updates, version=version),
                                 updates=updates)
        yield pa.RecordBatch.from_pydict({"writes": pa.array([done], pa.int64())})

    return run
