"""What a micro-batch costs beyond its records, in ONE warm Spark session (not a
whole-process timing): the map pipeline's topic read to its end (``available_now``) in
small batches (``--bound`` records each), so that each batch's fixed cost dominates.
For each side, the medians over its batches (the first left out) of the phases Spark's
progress reports (``walCommit``: the offset log entry, ``commitOffsets``: the commit log
entry, ``addBatch``: the batch's job, ``queryPlanning`` …) and the query's wall time.

Sides: ``native`` (Spark's Kafka source and sink, ``upper`` in SQL), ``bare`` (the same
with the map in a hand-written ``mapInArrow`` pass) and ``gridstream-alo`` (the pipeline
API, AT_LEAST_ONCE). ``--conf KEY=VALUE`` (repeatable) sets a session setting;
``--spark-checkpoints`` gives Spark's own checkpoint writer (FileContext,
``SPARK_CHECKPOINT_FILE_MANAGER``) instead of the session's default (FileSystem); the
output names the one used.

Each side runs once to warm up, then ``--repeat`` times in rotating order; one JSON line
per run on stderr, the medians per side as JSON on stdout.

Usage: python benchmarks/_batch_phases.py [--records 200000] [--bound 10000]
  [--partitions 2] [--repeat 2] [--sides native,bare,gridstream-alo]
  [--conf KEY=VALUE ...] [--spark-checkpoints]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._pipeline_bench import (
    check_output,
    create_topics,
    delete_topics,
    fill,
    fresh_topic,
    warm_rounds,
)
from benchmarks._pipeline_breakdown import _bare_python
from benchmarks._pipeline_side import _gridstream, _native

SIDES = ("native", "bare", "gridstream-alo")
_KEPT = 100
"""Batches a query's ``recentProgress`` keeps (Spark's
``spark.sql.streaming.numRecentProgressUpdates``): a run has at most this many."""


def _medians(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each key's median over the runs that have it."""
    names = sorted({k for run in runs for k in run})
    return {k: statistics.median(run[k] for run in runs if k in run) for k in names}


def _phases(query: Any) -> dict[str, float]:
    """The medians of each phase over the batches with records, the first left out."""
    batches = [json.loads(p.json) for p in query.recentProgress if p.numInputRows > 0][1:]
    return _medians([b["durationMs"] for b in batches])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--bound", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--spark-checkpoints", action="store_true",
                        help="Spark's own checkpoint writer (FileContext)")
    args = parser.parse_args()
    sides = args.sides.split(",")
    if not set(sides) <= set(SIDES):
        parser.error(f"--sides: a list of {', '.join(SIDES)}")
    if any("=" not in c for c in args.conf):
        parser.error("--conf: KEY=VALUE")
    if args.bound < 1 or args.repeat < 1 or args.partitions < 1:
        parser.error("--bound, --repeat and --partitions: at least 1")
    if not 2 * args.bound <= args.records <= _KEPT * args.bound:
        parser.error(f"--records: from 2 to {_KEPT} batches of --bound")
    from gridstream.spark import get_spark
    from gridstream.spark.session import CHECKPOINT_FILE_MANAGER, SPARK_CHECKPOINT_FILE_MANAGER

    conf = dict(c.split("=", 1) for c in args.conf)
    if args.spark_checkpoints:
        if conf.get(CHECKPOINT_FILE_MANAGER, SPARK_CHECKPOINT_FILE_MANAGER) != (
                SPARK_CHECKPOINT_FILE_MANAGER):
            parser.error(f"--spark-checkpoints and --conf {CHECKPOINT_FILE_MANAGER}=…")
        conf[CHECKPOINT_FILE_MANAGER] = SPARK_CHECKPOINT_FILE_MANAGER
    spark = get_spark(app_name="bench-batch-phases", conf=conf)
    source = fresh_topic("gs-bench-phases-in")
    topics = [source]
    phases: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    last: dict[str, Any] = {}

    def run(side: str, target: str, checkpoint: str) -> Any:
        job = None
        if side == "native":
            query = _native(spark, source, target, "available_now", checkpoint, args.bound)
        elif side == "bare":
            query = _bare_python(spark, source, target, checkpoint, args.bound)
        else:
            job = _gridstream(side, source, target, "available_now", checkpoint, args.bound)
            query = job.start(spark)
        try:
            query.awaitTermination()
            if job is not None and job.failure is not None:
                raise SystemExit(f"{side}: {job.failure}")
        except BaseException:
            if job is not None:
                job.close()
            raise
        last["phases"] = _phases(query)
        return None if job is None else job.close  # closed once timed, as the siblings

    def after(side: str, target: str, r: int, seconds: float) -> None:
        check_output(target, args.records, exactly_once=False)
        if r >= 0:
            phases[side].append(last["phases"])
        print(json.dumps({"round": r, "side": side, "s": round(seconds, 2),
                          "ms": last["phases"]}), file=sys.stderr, flush=True)

    started = time.perf_counter()
    try:
        manager = spark.conf.get(CHECKPOINT_FILE_MANAGER, SPARK_CHECKPOINT_FILE_MANAGER)
        create_topics([source], args.partitions)
        fill(source, args.records)
        times = warm_rounds(sides, run, repeat=args.repeat, partitions=args.partitions,
                            topics=topics, after=after)
    finally:
        spark.stop()
        delete_topics(topics)
    print(json.dumps({
        "records": args.records, "bound": args.bound, "conf": conf,
        "checkpoint_file_manager": manager.rsplit(".", 1)[-1],
        "seconds": round(time.perf_counter() - started, 1),
        "sides": {side: {"s": round(statistics.median(times[side]), 2),
                         "ms": _medians(phases[side])} for side in sides}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
