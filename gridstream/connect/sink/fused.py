"""The sink's one-pass write on Hazelcast: decode and apply in the same task.

When ``tasks.max`` does not exceed the batch's input partitions (Kafka topic-partitions:
the sink's source sets no ``minPartitions``, so none is split), no shuffle is needed: the
input is coalesced to at most ``tasks.max`` tasks, and each task decodes its Kafka
records (``decode``), folds its valid ones per key in Kafka order and applies them with
its worker's adapter (``put_all``), then returns its counts. One Python pass, one Spark
job, no shuffle or sort.

Used only where a key's records all come from one Kafka partition — the key is the
Kafka key (``keyPolicy`` key), no transform re-keys or re-routes, one topic per cache —
so a key's writes stay in one task and in order. Under ``STOP_TASK`` a task that meets a bad record
fails before applying anything of its own records; other tasks of the batch may have
applied theirs (applying again changes nothing: the batch's offsets are not committed,
and the restart reads the same records and stops on the same one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from gridstream.connect.sink.decode import (
    BAD,
    FILTERED,
    OK,
    SKIPPED,
    DecodeSpec,
    decode_entries,
)
from gridstream.spark import worker
from gridstream.spark.grid_apply import Entry, apply_in_task, fold_entries

if TYPE_CHECKING:
    import pyarrow as pa

    from gridstream.grid.hazelcast import HazelcastGridConfig

__all__ = ["COUNTS_SCHEMA", "decode_and_apply"]

COUNTS_SCHEMA = "records long, ok long, filtered long, bad long, skipped long, writes long"


def decode_and_apply(spec: DecodeSpec, config: HazelcastGridConfig, *, updates: bool,
                     stop_on_bad: bool) -> Callable[
        [Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of the one-pass write (``COUNTS_SCHEMA``, one row a
    task)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        worker.prepare()
        entries: list[Entry] = []
        counts = {FILTERED: 0, BAD: 0, SKIPPED: 0}
        records = 0
        for batch in batches:
            records += batch.num_rows
            for out in decode_entries(spec, batch, stop_on_bad=stop_on_bad):
                if isinstance(out, Entry):
                    entries.append(out)
                else:
                    counts[out] += 1
        counts[OK] = len(entries)
        writes = 0
        if entries:
            writes = apply_in_task(config, fold_entries(entries, updates=updates),
                                   updates=updates)
        yield pa.RecordBatch.from_pydict({
            "records": pa.array([records], pa.int64()), "ok": pa.array([counts[OK]], pa.int64()),
            "filtered": pa.array([counts[FILTERED]], pa.int64()),
            "bad": pa.array([counts[BAD]], pa.int64()),
            "skipped": pa.array([counts[SKIPPED]], pa.int64()),
            "writes": pa.array([writes], pa.int64())})

    return run
