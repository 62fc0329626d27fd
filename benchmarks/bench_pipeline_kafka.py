"""A map pipeline Kafka → Kafka: gridstream's pipeline API against Spark's native Kafka →
Kafka query and against Quix Streams, in the same run.

The workload: ``--records`` string records of 100 bytes in a pre-filled topic of
``--partitions`` partitions; the map uppercases the value, the key is unchanged. Sides,
each a process of its own started fresh for every run, reading the whole topic and
stopping (``available_now``; Quix: stop after that many outputs):

- ``native``: Spark's Kafka source and sink, the map in SQL (``upper``), no Python;
- ``native-bounded``: the same in batches of the pipeline's bound
  (``maxOffsetsPerTrigger`` = ``MAX_OFFSETS_PER_TRIGGER``): as many batches as the
  pipeline runs;
- ``gridstream-alo`` / ``gridstream-eo``: ``Pipeline`` … ``.map(upper)`` …
  ``KafkaSinks.kafka`` with ``AT_LEAST_ONCE`` / ``EXACTLY_ONCE``;
- ``quix-alo`` / ``quix-eo``: Quix Streams 3.28 (``benchmarks/_quix_pipeline.py``, in a
  virtualenv of its own created on first use under ``~/.gridstream/bench/quix-venv``:
  Quix pins an older confluent-kafka) at-least-once / exactly-once.

Every run writes a fresh topic, which is then read back and checked (every record
there, each value its input uppercased; no duplicates under exactly-once): a side that
writes nothing fails the benchmark (the other sides still run and are reported; the
exit status is 1 and ``failed`` names the side and its error). Two timings per run:
``process_s``, the whole process from its start to its exit (Spark's session start,
~8–12 s here, included), and ``drain_s``, from the first record processed to the end
(Spark: the batches' execution from the query's progress; Quix: its first record to the
end of ``run``). A Spark side's first batch holds its Python workers' start and the
JIT's warm-up: ``first_batch_s`` is reported apart, and ``steady`` is the rate of the
batches after it (sides of more than one batch). Rounds rotate the order of the sides;
medians are reported, and the ratios of rates:

- ``gridstream-alo / native`` (goal ≥ 0.9×), ``gridstream-alo / quix-alo`` (goal ≥ 2×
  of the whole process), ``gridstream-alo / native-bounded`` (the same batches; also
  at the steady state),
- ``gridstream-eo / gridstream-alo`` time (the cost of exactly-once, goal ≤ 1.3×).

Prints JSON. Usage: python benchmarks/bench_pipeline_kafka.py [--records 500000]
[--partitions 2] [--repeat 3] [--sides native,gridstream-alo,...] [--smoke]

``--smoke``: 300 records, one round, the Spark sides only (Quix's virtualenv comes from
the package index on first use; ``--smoke --sides ...`` adds its sides back): a Spark
start per side, and the figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _smoke
from benchmarks._pipeline_bench import (
    RECORD_BYTES,
    check_output,
    create_topics,
    delete_topics,
    fill,
    fresh_topic,
    quix_python,
    run_process,
    spark_env,
)

SIDES = ("native", "native-bounded", "gridstream-alo", "gridstream-eo", "quix-alo", "quix-eo")
QUIX_GUARANTEE = {"quix-alo": "at-least-once", "quix-eo": "exactly-once"}


def run_side(side: str, source: str, target: str, records: int) -> dict[str, Any]:
    if side in QUIX_GUARANTEE:
        argv = [str(quix_python()), "benchmarks/_quix_pipeline.py", source, target,
                str(records), QUIX_GUARANTEE[side]]
        result = run_process(argv)
    else:
        argv = [sys.executable, "benchmarks/_pipeline_side.py", side, source, target,
                "available_now"]
        result = run_process(argv, env=spark_env())
        if result["input_rows"] != records:
            raise AssertionError(f"{side} read {result['input_rows']} of {records} records")
    result["output"] = check_output(target, records, exactly_once=side.endswith("-eo"))
    return result


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def _steady(run: dict[str, Any]) -> float | None:
    """The seconds of a Spark run's batches after its first (None: one batch)."""
    if run.get("batches", 0) < 2 or "first_batch_s" not in run:
        return None
    return float(run["drain_s"] - run["first_batch_s"])


def _rate_ratio(runs: dict[str, list[dict[str, Any]]], side: str, base: str,
                key: str) -> float | None:
    """``side``'s rate over ``base``'s (of the median times)."""
    if not runs.get(side) or not runs.get(base) or any(
            key not in r for r in (*runs[side], *runs[base])):
        return None
    return round(_median(runs[base], key) / _median(runs[side], key), 3)


def _time_ratio(runs: dict[str, list[dict[str, Any]]], side: str, base: str,
                key: str) -> float | None:
    if not runs.get(side) or not runs.get(base) or any(
            key not in r for r in (*runs[side], *runs[base])):
        return None
    return round(_median(runs[side], key) / _median(runs[base], key), 3)


def figures(runs: dict[str, list[dict[str, Any]]], records: int) -> dict[str, Any]:
    sides: dict[str, Any] = {}
    for side, done in runs.items():
        if not done:
            continue
        sides[side] = {
            "records_per_s_process": round(records / _median(done, "process_s")),
            "records_per_s_drain": round(records / _median(done, "drain_s")),
            "process_s": [round(r["process_s"], 2) for r in done],
            "drain_s": [round(r["drain_s"], 2) for r in done],
            "startup_s": [round(r.get("session_s", r.get("setup_s", 0.0))
                                + r.get("startup_s", 0.0), 2) for r in done],
            "duplicates": [r["output"]["duplicates"] for r in done],
        }
        if all(r.get("first_batch_s") is not None for r in done):
            sides[side]["first_batch_s"] = [round(r["first_batch_s"], 2) for r in done]
        if all(_steady(r) is not None for r in done):
            for r in done:
                r["steady_s"] = _steady(r)
            sides[side]["records_per_s_steady"] = round(statistics.median(
                (records - r["first_batch_rows"]) / r["steady_s"] for r in done))
    ratios: dict[str, Any] = {}
    for key in ("process_s", "drain_s", "steady_s"):
        ratios[key.removesuffix("_s")] = {
            "alo_vs_native_bounded": _rate_ratio(runs, "gridstream-alo", "native-bounded",
                                                 key),
            "alo_vs_native": _rate_ratio(runs, "gridstream-alo", "native", key),
            "alo_vs_quix_alo": _rate_ratio(runs, "gridstream-alo", "quix-alo", key),
            "eo_vs_quix_eo": _rate_ratio(runs, "gridstream-eo", "quix-eo", key),
            "eo_cost_vs_alo": _time_ratio(runs, "gridstream-eo", "gridstream-alo", key),
            "quix_eo_cost_vs_alo": _time_ratio(runs, "quix-eo", "quix-alo", key),
        }
    return {"sides": sides, "ratios": ratios}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sides", default=",".join(SIDES))
    args = _smoke.parse_args(parser, argv, records=300, repeat=1,
                             sides=",".join(s for s in SIDES if s not in QUIX_GUARANTEE))
    sides = [s for s in args.sides.split(",") if s]
    unknown = set(sides) - set(SIDES)
    if unknown:
        parser.error(f"unknown sides {sorted(unknown)}; known: {', '.join(SIDES)}")
    if any(s in QUIX_GUARANTEE for s in sides):
        quix_python()  # the virtualenv first, outside any timing
    source = fresh_topic("gs-bench-pipe-in")
    topics = [source]
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
    failures: dict[str, str] = {}
    try:
        create_topics([source], args.partitions)
        fill_s = fill(source, args.records)
        for r in range(args.repeat):
            shift = r % len(sides)
            for side in sides[shift:] + sides[:shift]:
                target = fresh_topic("gs-bench-pipe-out")
                topics.append(target)
                create_topics([target], args.partitions)
                try:
                    result = run_side(side, source, target, args.records)
                except (AssertionError, subprocess.TimeoutExpired) as exc:
                    # the other sides still run; the benchmark fails at the end
                    failures.setdefault(side, str(exc)[-3000:])
                    print(f"{side} failed: {exc}", file=sys.stderr, flush=True)
                    continue
                runs[side].append(result)
                print(json.dumps({"round": r, **{k: (round(v, 2) if isinstance(v, float)
                                                     else v) for k, v in result.items()}}),
                      file=sys.stderr, flush=True)
    finally:
        delete_topics(topics)
    result = {"benchmark": "pipeline_kafka_map", "records": args.records,
              "record_bytes": RECORD_BYTES, "partitions": args.partitions,
              "repeat": args.repeat, "spark_master": "local[2]",
              "fill_s": round(fill_s, 2), **figures(runs, args.records)}
    if failures:
        result["failed"] = failures
    print(json.dumps(result, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
