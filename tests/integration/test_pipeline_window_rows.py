"""The window's handling of error rows and of ties, on a streaming query in append mode
(a file source stands for the flow: each file one micro-batch).

- With ``timestamp=``, an upstream error row (its visible columns null) keeps its
  record's time and reaches the error policy; a good row whose timestamp is null becomes
  an error row naming the column: neither is dropped by Spark's window.
- A sliding window emits an error row once, not once per window covering it.
- first/last/collect break event-time ties by the Kafka position read as numbers
  (offset 9 before offset 10).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gridstream.pipeline.stateful import compile_window, window_spec

T0 = 1_700_000_000_000  # a multiple of 10 s
_SCHEMA = ("svc string, n long, at long, ts long, where string, error string, "
           "stage string")


def _row(svc: str | None, n: int | None, at: int | None, ts: int, where: str,
         error: str | None = None) -> dict[str, Any]:
    return {"svc": svc, "n": n, "at": at, "ts": ts, "where": where, "error": error,
            "stage": "map" if error else None}


def _run(spark: Any, tmp: Path, batches: list[list[dict[str, Any]]],
         **window: Any) -> list[dict[str, Any]]:
    """The window's output rows over ``batches`` (one file, one micro-batch, each)."""
    import pyspark.sql.functions as F

    src = tmp / "in"
    src.mkdir()
    for i, rows in enumerate(batches):
        file = src / f"{i:03d}.json"
        file.write_text("\n".join(json.dumps(r) for r in rows))
        os.utime(file, (1_000_000 + i, 1_000_000 + i))  # the file source's order: mtime
    raw = (spark.readStream.schema(_SCHEMA).option("maxFilesPerTrigger", 1).json(str(src)))
    df = raw.select(
        "svc", "n", "at", F.timestamp_millis("ts").alias("_gs_ts"),
        F.col("where").alias("_gs_where"), F.col("error").alias("_gs_error"),
        F.col("stage").alias("_gs_stage"), F.col("where").cast("binary").alias("_gs_raw_key"),
        F.lit(None).cast("binary").alias("_gs_raw_value"))
    spec = window_spec(df.schema, "10 seconds", watermark="0 seconds", **window)
    name = f"w_{tmp.name.replace('-', '_')}"
    query = (compile_window(df, spec).writeStream.outputMode("append").format("memory")
             .queryName(name).option("checkpointLocation", str(tmp / "ck"))
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    rows = [r.asDict(recursive=True) for r in spark.table(name).collect()]
    spark.catalog.dropTempView(name)
    return rows


def _later(k: int) -> list[dict[str, Any]]:
    """A batch whose record moves the watermark past the earlier windows."""
    return [_row("z", 0, T0 + k * 100_000, T0 + k * 100_000, f"t[1]@{k}")]


def test_window_rows_on_error_and_null_timestamps_reach_the_error_policy(
        spark: Any, tmp_path: Path) -> None:
    rows = _run(spark, tmp_path, [
        [_row("a", 1, T0 + 1000, T0 + 1000, "t[0]@1"),
         _row("a", 2, None, T0 + 2000, "t[0]@2"),                # null event time
         _row(None, None, None, T0 + 3000, "t[0]@3", "boom")],   # an upstream error row
        _later(1), _later(2)], key="svc", timestamp="at", aggregate={"n": "count"})
    errors = sorted((r["_gs_where"], r["_gs_error"], r["_gs_stage"], r["_gs_raw_key"])
                    for r in rows if r["_gs_error"] is not None)
    assert errors == [("t[0]@2", "timestamp column at is null", "window", b"t[0]@2"),
                      ("t[0]@3", "boom", "map", b"t[0]@3")]
    good = sorted((r["key"], r["n"]) for r in rows if r["_gs_error"] is None)
    assert good == [("a", 1), ("z", 1)]



def test_sliding_window_emits_an_error_row_once(spark: Any, tmp_path: Path) -> None:
    rows = _run(spark, tmp_path, [
        [_row("a", 1, None, T0 + 7000, "t[0]@1"),
         _row(None, None, None, T0 + 7000, "t[0]@2", "boom")],
        _later(1), _later(2)], key="svc", slide="5 seconds", aggregate={"n": "count"})
    errors = [r["_gs_where"] for r in rows if r["_gs_error"] is not None]
    assert errors == ["t[0]@2"]
    good = sorted((r["key"], r["window_start"].timestamp(), r["n"]) for r in rows
                  if r["_gs_error"] is None and r["key"] == "a")
    assert good == [("a", (T0 + 0) / 1000, 1), ("a", (T0 + 5000) / 1000, 1)]


def test_first_last_collect_break_time_ties_by_numeric_offset(
        spark: Any, tmp_path: Path) -> None:
    rows = _run(spark, tmp_path, [
        [_row("a", 10, None, T0 + 1000, "t[0]@10"),
         _row("a", 9, None, T0 + 1000, "t[0]@9"),
         _row("a", 100, None, T0 + 1000, "t[0]@100")],
        _later(1), _later(2)], key="svc",
        aggregate={"first": ("first", "n"), "last": ("last", "n"), "all": ("collect", "n")})
    got = [(r["first"], r["last"], r["all"]) for r in rows if r["key"] == "a"]
    assert got == [(9, 100, [9, 10, 100])]


def test_store_operations_read_positions_of_non_kafka_rows_under_ansi(spark: Any) -> None:
    from gridstream.pipeline.stores import OPERATION_DDL, _operations

    assert spark.conf.get("spark.sql.ansi.enabled") == "true"
    row = {"op": "put", "type": "T", "id": "1", "id_int": False, "version": 1, "txn": None,
           "ts": 1, "partition": 0, "data": "{}", "removed": None}
    df = spark.createDataFrame([(*row.values(), w) for w in ("grid:c/1", "t[2]@30")],
                               f"{OPERATION_DDL}, _gs_where string")
    got = sorted((r["topic"] or "", r["kafka_partition"], r["offset"])
                 for r in _operations(df).collect())
    assert got == [("", None, None), ("t", 2, 30)]
