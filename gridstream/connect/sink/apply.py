"""Applying a micro-batch's decoded rows to the grid.

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
  the batch, one Space transaction per cache.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import orjson

from gridstream.grid.contract import GridAdapter, Key, Write

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig

__all__ = ["APPLY_COLUMNS", "apply_on_driver", "apply_tasks", "fold_writes"]

APPLY_COLUMNS = ("topic", "partition", "offset", "cache", "key", "value")
ORDER = ("topic", "partition", "offset")

Row = tuple[str, str, str | bytes | None]
"""(cache, key as JSON text, value as JSON text or bytes, None for a tombstone)."""


def fold_writes(rows: Iterable[Row], *, updates: bool,
                version: int | None = None) -> dict[str, list[Write]]:
    """Each cache's writes, one per key, from rows in Kafka order (see the module
    docstring), each with ``version`` (None: unversioned)."""
    if version is not None and (type(version) is not int or version < 0):
        raise ValueError(f"a write version must be a non-negative integer: {version!r}")
    out: dict[str, dict[str, str | bytes | None]] = {}
    for cache, key, value in rows:
        held = out.setdefault(cache, {})
        if updates:
            held[key] = value  # the last write of a key wins
        elif value is not None and key not in held:
            held[key] = value
    return {cache: [Write(_key(k), None if v is None else orjson.loads(v), version)
                    for k, v in held.items()] for cache, held in out.items()}


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


def _columns(order: Sequence[str]) -> list[str]:
    return [*APPLY_COLUMNS, *(c for c in order if c not in APPLY_COLUMNS)]


# ------------------------------------------------------------------ Hazelcast: tasks

_ADAPTERS: dict[HazelcastGridConfig, HazelcastAdapter] = {}
"""Per Python worker (reused across tasks): one open adapter per cluster."""


def _adapter(config: HazelcastGridConfig) -> HazelcastAdapter:
    found = _ADAPTERS.get(config)
    if found is None:
        from gridstream.grid.hazelcast import HazelcastAdapter

        found = HazelcastAdapter(config)
        found.open()
        _ADAPTERS[config] = found
    return found


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

        rows: list[Row] = []
        for batch in batches:
            rows.extend(zip(batch.column("cache").to_pylist(), batch.column("key").to_pylist(),
                            batch.column("value").to_pylist(), strict=True))
        done = 0
        if rows:
            done = apply_all(_adapter(config), fold_writes(rows, updates=updates,
                                                           version=version),
                             updates=updates)
        yield pa.RecordBatch.from_pydict({"writes": pa.array([done], pa.int64())})

    return run
