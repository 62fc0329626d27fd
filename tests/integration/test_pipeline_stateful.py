"""Windows and stream–table joins through the pipeline API, on the real broker, Spark,
Hazelcast (and the Space) and Delta.

- A windowed count/sum over records with chosen timestamps equals the expected result
  for every window exactly (every output row compared; the comparison is shown to fail
  on one wrong value); the query is stopped with a window open and started again from
  its checkpoint: the window's state survives; late records are counted in the reports.
- Joins against a grid map and a Delta table enrich each row with the table's values as
  they are when the row's batch runs (the table is changed while the query runs); a
  left join gives nulls for a missing key.
"""

from __future__ import annotations

import calendar
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from gridstream.pipeline import (
    DeltaTables,
    GridTables,
    Guarantee,
    KafkaSinks,
    KafkaSources,
    Pipeline,
    Stage,
    entry,
)
from gridstream.pipeline.run import PipelineJob
from tests.integration.support.grid_drivers import GRIDS, HazelcastDriver
from tests.integration.support.pipeline_flows import produce
from tests.integration.support.pipeline_helpers import out_props, props, read

T0 = 1_700_000_000_000  # a multiple of 10 s: windows [T0 + 10k s, T0 + 10(k+1) s)
S = 1000


def _ms(dt: Any) -> int:
    return calendar.timegm(dt.utctimetuple()) * 1000 + dt.microsecond // 1000


def _window_row(w: dict[str, Any]) -> tuple[str, str]:
    return entry(w["key"], orjson.dumps({
        "start": _ms(w["window_start"]), "end": _ms(w["window_end"]),
        "count": w["count"], "total": w["total"], "first": w["first"],
        "values": w["values"]}).decode())


def _parse(value: str) -> dict[str, Any]:
    return orjson.loads(value)  # type: ignore[no-any-return]


def _windowed(bootstrap: str, source: str, sink: str) -> Pipeline:
    p = Pipeline.create(name="windows")
    stage: Stage = (p.read_from(KafkaSources.kafka(props(bootstrap), source, projection="value"))
                    .map(_parse, schema="svc string, n long"))
    (stage.window("10 seconds", key="svc", watermark="5 seconds",
                  aggregate={"count": "count", "total": ("sum", "n"), "first": ("first", "n"),
                             "values": ("collect", "n")})
     .map(_window_row)
     .write_to(KafkaSinks.kafka(out_props(bootstrap), sink)))
    return p


def _start(pipeline: Pipeline, spark: Any, checkpoint: str | None,
           guarantee: Guarantee = Guarantee.AT_LEAST_ONCE, errors: str = "fail") -> PipelineJob:
    job = pipeline.job(guarantee=guarantee, checkpoint=checkpoint, trigger="1 second",
                       errors=errors)
    job.start(spark)
    return job


def _wait(what: Callable[[], bool], job: PipelineJob, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        query = job.query
        assert query is not None and query.isActive, job.failure
        assert time.monotonic() < deadline, "timed out"
        time.sleep(1)


def _read_offsets(job: PipelineJob) -> int:
    """Records of the source the query has finished (its committed end offsets)."""
    assert job.query is not None
    progress = job.query.lastProgress
    if not progress:
        return 0
    total = 0
    for source in progress["sources"]:
        end = source.get("endOffset")
        end = orjson.loads(end) if isinstance(end, str) else end
        total += sum(sum(parts.values()) for parts in (end or {}).values())
    return total


def _reports(job: PipelineJob) -> list[Any]:
    out = []
    while job.reports:
        out.append(job.reports.popleft())
    return out


def diff_windows(expected: Counter[tuple[Any, ...]], got: Counter[tuple[Any, ...]]) -> list[str]:
    """Every difference between two multisets of output rows."""
    missing = expected - got
    extra = got - expected
    return [f"missing {r}" for r in sorted(missing)] + [f"unexpected {r}" for r in sorted(extra)]


def _window_rows(bootstrap: str, topic: str) -> Counter[tuple[Any, ...]]:
    rows: Counter[tuple[Any, ...]] = Counter()
    for key, value, _ in read(bootstrap, topic):
        v = orjson.loads(value or b"{}")
        rows[(key.decode() if key else None, v["start"], v["end"], v["count"], v["total"],
              v["first"], tuple(v["values"]))] += 1
    return rows


def test_windowed_count_and_sum_are_exact_across_a_restart_and_late_records_counted(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    source, sink = topic_factory(1), topic_factory(1)
    checkpoint = str(tmp_path / "ck")

    def rec(at: int, svc: str, n: int) -> tuple[int, dict[str, Any] | bytes]:
        return T0 + at, {"svc": svc, "n": n}

    # run 1: windows [0,10) and [10,20) complete, [60,70) opened; the record at 66 s
    # moves the watermark to 61 s: the first four rows are emitted, [60,70) stays open
    first = [rec(1 * S, "a", 1), rec(2 * S, "a", 2), rec(9_999, "b", 5), rec(3 * S, "a", 4),
             rec(12 * S, "a", 10), rec(15 * S, "b", 20), rec(61 * S, "a", 100),
             rec(62 * S, "b", 7), (T0 + 4 * S, b"not json"), rec(66 * S, "a", 1000)]
    produce(kafka_bootstrap, source, first)
    pipeline = _windowed(kafka_bootstrap, source, sink)
    # exactly once: the query is stopped wherever it is, a batch cut short is run again
    job = _start(pipeline, spark, checkpoint, Guarantee.EXACTLY_ONCE, "log")
    try:
        _wait(lambda: _read_offsets(job) == len(first)
              and sum(_window_rows(kafka_bootstrap, sink).values()) >= 4, job)
        reports = _reports(job)
    finally:
        job.close()
    # run 2 from the checkpoint: more of the open window, two late records (windows
    # [0,10) key a and [10,20) key b ended long before), then a record at 100 s that
    # closes [60,70)
    second = [rec(64 * S, "a", 10_000), rec(69_999, "c", 3), rec(5 * S, "a", 99_999),
              rec(11 * S, "b", 99_999), rec(100 * S, "b", 1)]
    produce(kafka_bootstrap, source, second)
    job = _start(_windowed(kafka_bootstrap, source, sink), spark, checkpoint,
                 Guarantee.EXACTLY_ONCE, "log")
    try:
        _wait(lambda: sum(_window_rows(kafka_bootstrap, sink).values()) >= 7, job)
        time.sleep(3)  # a further batch would show a wrong extra row
        reports += _reports(job)
        got = _window_rows(kafka_bootstrap, sink)
    finally:
        job.close()

    def w(svc: str, start: int, count: int, total: int, first_n: int,
          values: tuple[int, ...]) -> tuple[Any, ...]:
        return (svc, T0 + start * S, T0 + (start + 10) * S, count, total, first_n, values)

    expected = Counter([
        w("a", 0, 3, 7, 1, (1, 2, 4)), w("b", 0, 1, 5, 5, (5,)),
        w("a", 10, 1, 10, 10, (10,)), w("b", 10, 1, 20, 20, (20,)),
        w("a", 60, 3, 11_100, 100, (100, 10_000, 1000)), w("b", 60, 1, 7, 7, (7,)),
        w("c", 60, 1, 3, 3, (3,)),
    ])
    assert diff_windows(expected, got) == []
    wrong = got.copy()
    row = next(r for r in wrong if r[0] == "a" and r[1] == T0 + 60 * S)
    wrong[row] -= 1
    wrong[(*row[:4], row[4] + 1, *row[5:])] += 1
    assert diff_windows(expected, wrong) != []  # the check sees one wrong sum
    # the input is read once per batch; the record that did not parse went through the
    # window (with its window) to the error policy
    assert sum(r.rows_in for r in reports) == len(first) + len(second)
    assert sum(r.errors for r in reports) == 1
    # the two late records (two keys and windows, one partition, one batch) are counted
    assert sum(r.extra.get("late", 0) for r in reports) == 2
    assert all("late" in r.extra for r in reports)


# ------------------------------------------------------------------ joins


def _enriched(r: dict[str, Any]) -> tuple[str, str]:
    return entry(r["user"], orjson.dumps({"n": r["n"], "name": r["name"],
                                          "tier": r["tier"]}).decode())


def _join_pipeline(bootstrap: str, source: str, sink: str, table: Any, how: str,
                   **join: Any) -> Pipeline:
    p = Pipeline.create(name="joins")
    (p.read_from(KafkaSources.kafka(props(bootstrap), source, projection="value"))
      .map(_parse, schema="user string, n long")
      .join(table, how=how, **join)  # type: ignore[arg-type]
      .map(_enriched)
      .write_to(KafkaSinks.kafka(out_props(bootstrap), sink)))
    return p


def _joined(bootstrap: str, topic: str) -> Counter[tuple[Any, ...]]:
    out: Counter[tuple[Any, ...]] = Counter()
    for key, value, _ in read(bootstrap, topic):
        v = orjson.loads(value or b"{}")
        out[(key.decode() if key else None, v["n"], v["name"], v["tier"])] += 1
    return out


def _expected(how: str) -> tuple[Counter[tuple[Any, ...]], Counter[tuple[Any, ...]]]:
    """Rows after the first records, and after the table changed and more came."""
    first = [("u1", 1, "Ann", 1), ("u2", 2, "Bob", 2), ("u3", 3, None, None)]
    second = [("u1", 4, "Ann", 5), ("u3", 5, "Cy", 3), ("u4", 6, None, None)]
    if how == "inner":
        first, second = first[:2], second[:2]
    return Counter(first), Counter(first + second)


def _join_run(spark: Any, bootstrap: str, source: str, sink: str, pipeline: Pipeline,
              how: str, change: Callable[[], None]) -> None:
    records = lambda *rows: [(T0, {"user": u, "n": n}) for u, n in rows]  # noqa: E731
    produce(bootstrap, source, records(("u1", 1), ("u2", 2), ("u3", 3)))
    before, after = _expected(how)
    job = _start(pipeline, spark, None, Guarantee.NONE)
    try:
        _wait(lambda: sum(_joined(bootstrap, sink).values()) >= sum(before.values()), job)
        assert diff_windows(before, _joined(bootstrap, sink)) == []
        change()  # while the query runs
        produce(bootstrap, source, records(("u1", 4), ("u3", 5), ("u4", 6)))
        _wait(lambda: sum(_joined(bootstrap, sink).values()) >= sum(after.values()), job)
        time.sleep(2)
        assert diff_windows(after, _joined(bootstrap, sink)) == []
    finally:
        job.close()


@pytest.mark.parametrize(("kind", "how"), [("hazelcast", "inner"), ("hazelcast", "left"),
                                         ("space", "left")])
def test_join_with_a_grid_map_sees_the_map_as_each_batch_runs(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        kind: str, how: str) -> None:
    source, sink = topic_factory(2), topic_factory(1)
    with GRIDS[kind](tmp_path) as (driver, _):
        cache = driver.new_cache()
        driver.put(cache, "u1", {"name": "Ann", "tier": 1})
        driver.put(cache, "u2", {"name": "Bob", "tier": 2})
        config: Any = driver.config()  # type: ignore[attr-defined]
        settings: dict[str, Any] = (
            {"kind": "hazelcast", "cluster_name": config.cluster_name,
             "members": list(config.members)} if isinstance(driver, HazelcastDriver)
            else {"kind": "space", "data_dir": config.data_dir,
                  "space_name": config.space_name})

        def change() -> None:
            driver.put(cache, "u1", {"name": "Ann", "tier": 5})
            driver.put(cache, "u3", {"name": "Cy", "tier": 3})

        pipeline = _join_pipeline(kafka_bootstrap, source, sink,
                                  GridTables.map(settings, cache), how, on="user",
                                  fields="name string, tier int")
        _join_run(spark, kafka_bootstrap, source, sink, pipeline, how, change)


@pytest.mark.parametrize("how", ["inner", "left"])
def test_join_with_a_delta_table_reads_it_again_each_micro_batch(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        how: str) -> None:
    source, sink = topic_factory(2), topic_factory(1)
    path = str(tmp_path / "users")
    ddl = "id string, name string, tier int, note string"
    spark.createDataFrame([("u1", "Ann", 1, "x"), ("u2", "Bob", 2, "y")], ddl) \
        .write.format("delta").save(path)

    def change() -> None:
        spark.createDataFrame([("u1", "Ann", 5, "x"), ("u2", "Bob", 2, "y"),
                               ("u3", "Cy", 3, "z")], ddl) \
            .write.format("delta").mode("overwrite").save(path)

    pipeline = _join_pipeline(kafka_bootstrap, source, sink, DeltaTables.path(path), how,
                              on=("user", "id"), fields=["name", "tier"])
    _join_run(spark, kafka_bootstrap, source, sink, pipeline, how, change)
