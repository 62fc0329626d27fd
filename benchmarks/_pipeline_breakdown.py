"""Where the map pipeline's time goes, in ONE warm Spark session (not a whole-process
timing): the same pre-filled topic read to its end (``available_now``) by

- ``native``: Spark's Kafka source and sink, ``upper`` in SQL (Spark's default: the
  whole backlog in one batch);
- ``native-bounded``: the same with ``maxOffsetsPerTrigger`` the pipeline's default
  bound (``MAX_OFFSETS_PER_TRIGGER``): as many batches as the pipeline runs;
- ``bare_python``: the same query with the map in a hand-written ``mapInArrow`` pass (the
  values as Python bytes, ``upper``, back to Arrow: the least a per-row Python map
  costs, without decoding text);
- ``gridstream-alo`` / ``gridstream-eo``: the pipeline API (its default bound per batch);
- ``gridstream-alo-unbounded``: the pipeline, ``max_offsets_per_trigger=None`` (one
  batch, as ``native``).

Each side runs once to warm up, then ``--repeat`` times in rotating order; the medians of
the queries' wall times (start → end) are printed as JSON, with the median CPU seconds
each process role spent in a run (``cpu_s``: Spark's JVM, its Python workers, the
broker; ``benchmarks/_cpu.py``).

Usage: python benchmarks/_pipeline_breakdown.py [--records 500000] [--repeat 2]
  [--sides native,native-bounded,bare_python,gridstream-alo,gridstream-eo,...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _cpu
from benchmarks._pipeline_bench import (
    BOOTSTRAP,
    check_output,
    create_topics,
    delete_topics,
    fill,
    fresh_topic,
    summary,
    warm_rounds,
)
from benchmarks._pipeline_side import _gridstream, _native
from gridstream.spark.kafka_source import MAX_OFFSETS_PER_TRIGGER


def _upper_batches(batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa

    for batch in batches:
        values = [None if v is None else v.upper() for v in batch.column(1).to_pylist()]
        yield pa.RecordBatch.from_arrays([batch.column(0), pa.array(values, pa.binary())],
                                         names=["key", "value"])


def _bare_python(spark: Any, source: str, target: str, checkpoint: str,
                 max_offsets: int | None = None) -> Any:
    """``max_offsets``: Spark's ``maxOffsetsPerTrigger`` (None: Spark's default)."""
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", BOOTSTRAP)
              .option("subscribe", source).option("startingOffsets", "earliest"))
    if max_offsets is not None:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets)
    df = reader.load().select("key", "value")
    out = df.mapInArrow(_upper_batches, "key binary, value binary")
    return (out.writeStream.format("kafka").option("kafka.bootstrap.servers", BOOTSTRAP)
            .option("topic", target).option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).start())


_ROLES = ("spark jvm", "spark python workers", "kafka")
"""The process roles whose CPU the summary gives (``benchmarks/_cpu.py``)."""
SIDES = ("native", "native-bounded", "bare_python", "gridstream-alo", "gridstream-eo",
         "gridstream-alo-unbounded")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--sides", default=",".join(SIDES))
    args = parser.parse_args()
    sides = args.sides.split(",")
    if not set(sides) <= set(SIDES) or "native" not in sides:
        parser.error(f"--sides: a list of {', '.join(SIDES)}, native among them")
    from gridstream.spark import get_spark

    spark = get_spark(app_name="bench-pipeline-breakdown")
    source = fresh_topic("gs-bench-brk-in")
    topics = [source]
    starts: dict[str, Callable[[str, str], Any]] = {
        "native": lambda t, ck: _native(spark, source, t, "available_now", ck),
        "native-bounded": lambda t, ck: _native(spark, source, t, "available_now", ck,
                                                MAX_OFFSETS_PER_TRIGGER),
        "bare_python": lambda t, ck: _bare_python(spark, source, t, ck),
        "gridstream-alo": lambda t, ck: _gridstream("gridstream-alo", source, t,
                                                    "available_now", ck),
        "gridstream-eo": lambda t, ck: _gridstream("gridstream-eo", source, t,
                                                   "available_now", ck),
        "gridstream-alo-unbounded": lambda t, ck: _gridstream(
            "gridstream-alo", source, t, "available_now", ck, bound=None),
    }

    cpu: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    last: dict[str, float] = {}

    def run(side: str, target: str, checkpoint: str) -> Callable[[], Any] | None:
        last.clear()
        last.update(_cpu.snapshot())
        started = starts[side](target, checkpoint)
        job = None if hasattr(started, "awaitTermination") else started
        query = started if job is None else job.start(spark)
        query.awaitTermination()
        spent = _cpu.spent(last, _cpu.snapshot())
        last.clear()
        last.update(spent)
        return None if job is None else job.close  # closed once timed, as before

    def after(side: str, target: str, r: int, seconds: float) -> None:
        check_output(target, args.records, exactly_once=side.endswith("-eo"))
        if r >= 0:
            cpu[side].append(dict(last))
        print(json.dumps({"round": r, "side": side, "s": round(seconds, 2),
                          "cpu_s": {k: v for k, v in last.items() if k in _ROLES}}),
              file=sys.stderr, flush=True)

    try:
        create_topics([source], args.partitions)
        fill(source, args.records)
        times = warm_rounds(sides, run, repeat=args.repeat,
                            partitions=args.partitions, topics=topics, after=after)
    finally:
        spark.stop()
        delete_topics(topics)
    print(json.dumps({"records": args.records, "partitions": args.partitions,
                      **summary(times, args.records, "native"),
                      "cpu_s": {side: {role: round(statistics.median(
                          run.get(role, 0.0) for run in runs), 2) for role in _ROLES}
                          for side, runs in cpu.items() if runs}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
