"""The pipeline API on the real broker and Spark: Kafka → steps → Kafka under each
guarantee, map_batch, the error policies, real-time mode's refusals, a TOML run."""

from __future__ import annotations

import base64
import contextlib
import random
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException

from gridstream.errors import ConfigError
from gridstream.pipeline import Guarantee, KafkaSinks, KafkaSources, Pipeline, entry
from tests.integration.support.pipeline_helpers import out_props, produce, props, read


def _run(pipeline: Pipeline, spark: Any, **options: Any) -> Any:
    job = pipeline.job(trigger="available_now", **options)
    try:
        query = job.start(spark)
        with contextlib.suppress(StreamingQueryException):  # the job's failure, checked below
            query.awaitTermination(300)
        assert not query.isActive
        failure = job.failure
        reports = []
        while job.reports:
            reports.append(job.reports.popleft())
        return failure, reports
    finally:
        job.close()


@pytest.mark.parametrize("guarantee", list(Guarantee))
def test_map_filter_flat_map_kafka_to_kafka(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        guarantee: Guarantee) -> None:
    source, sink = topic_factory(3), topic_factory(2)
    produce(kafka_bootstrap, source, ((f"k{i}".encode(), str(i).encode())
                                      for i in range(2000)))
    p = Pipeline.create(name=f"t-{guarantee.lower()}")
    (p.read_from(KafkaSources.kafka(props(kafka_bootstrap), source))
      .map(lambda kv: (kv[0], int(kv[1])))
      .filter(lambda kv: kv[1] % 2 == 0)
      .flat_map(lambda kv: [kv, (kv[0], kv[1] + 1)])
      .map(lambda kv: entry(kv[0], str(kv[1] * 10)))
      .write_to(KafkaSinks.kafka(out_props(kafka_bootstrap), sink)))
    failure, reports = _run(p, spark, guarantee=guarantee,
                            checkpoint=None if guarantee == Guarantee.NONE
                            else str(tmp_path / "ck"))
    assert failure is None
    got = Counter((k, v) for k, v, _ in read(kafka_bootstrap, sink))
    expected = Counter((f"k{i}".encode(), str(j * 10).encode())
                       for i in range(0, 2000, 2) for j in (i, i + 1))
    assert got == expected
    assert sum(r.rows_in for r in reports) == 2000
    assert sum(r.rows_out for r in reports) == 2000


def _numbers(kv: tuple[str, str]) -> tuple[str, str]:
    if kv[1] == "bad":
        raise ValueError(f"not a number: {kv[1]}")
    return entry(kv[0], str(int(kv[1]) * 2))


def _with_bad(bootstrap: str, topic: str, n: int, bad: set[int]) -> None:
    produce(bootstrap, topic, ((f"k{i}".encode(), b"bad" if i in bad else str(i).encode())
                               for i in range(n)))


def _number_pipeline(bootstrap: str, source: str, sink: str, name: str,
                     **sink_options: Any) -> Pipeline:
    p = Pipeline.create(name=name)
    (p.read_from(KafkaSources.kafka(props(bootstrap), source))
      .map(_numbers)
      .write_to(KafkaSinks.kafka(out_props(bootstrap), sink, **sink_options)))
    return p


@pytest.mark.parametrize("guarantee", list(Guarantee))
def test_a_failing_step_fails_the_query_with_a_record_error(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        guarantee: Guarantee) -> None:
    source, sink = topic_factory(1), topic_factory(1)
    _with_bad(kafka_bootstrap, source, 50, {7})
    p = _number_pipeline(kafka_bootstrap, source, sink, "fail")
    failure, _ = _run(p, spark, guarantee=guarantee, checkpoint=str(tmp_path / "ck"))
    assert failure is not None
    text = str(failure)
    assert "RecordError" in text and f"{source}[0]@7" in text and "map#1" in text, text
    if guarantee == Guarantee.EXACTLY_ONCE:
        assert read(kafka_bootstrap, sink) == []


@pytest.mark.parametrize("as_one_string", [False, True])
def test_a_failing_row_of_a_source_reading_two_topics_is_named_by_its_own_topic(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], as_one_string: bool) -> None:
    """The pass is given the origin's parts, the topic among them (a source of two
    topics, also when given as one comma-separated string, which Spark's ``subscribe``
    splits), and names the row in error as the JVM's text would."""
    first, second, sink = topic_factory(1), topic_factory(1), topic_factory(1)
    _with_bad(kafka_bootstrap, first, 5, set())
    _with_bad(kafka_bootstrap, second, 5, {3})
    p = Pipeline.create(name="fail-two-topics")
    topics: str | list[str] = f"{first}, {second}" if as_one_string else [first, second]
    (p.read_from(KafkaSources.kafka(props(kafka_bootstrap), topics))
      .map(_numbers)
      .write_to(KafkaSinks.kafka(out_props(kafka_bootstrap), sink)))
    job = p.job(trigger="available_now", guarantee=Guarantee.AT_LEAST_ONCE,
                checkpoint=str(tmp_path / "ck"))
    with contextlib.suppress(Exception):  # the query's failure: job.failure says it
        _explained(job, spark, capsys)
    assert job.failure is not None
    text = str(job.failure)
    assert "RecordError" in text and f"{second}[0]@3" in text and "map#1" in text, text


@pytest.mark.parametrize("guarantee", list(Guarantee))
def test_log_skips_and_counts_the_failing_rows(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        guarantee: Guarantee) -> None:
    """Counted after the pass in the JVM (``NONE``: Spark's Kafka sink), or above it by
    the writer's tasks, which run the pass themselves."""
    source, sink = topic_factory(2), topic_factory(1)
    _with_bad(kafka_bootstrap, source, 100, {3, 50, 99})
    p = _number_pipeline(kafka_bootstrap, source, sink, f"log-{guarantee.lower()}")
    failure, reports = _run(p, spark, guarantee=guarantee,
                            checkpoint=str(tmp_path / "ck"), errors="log")
    assert failure is None
    got = sorted(int(v) for _, v, _ in read(kafka_bootstrap, sink))
    assert got == sorted(2 * i for i in range(100) if i not in {3, 50, 99})
    assert sum(r.errors for r in reports) == 3
    assert sum(r.rows_out for r in reports) == 97


def _same(kv: tuple[str, str]) -> tuple[str, str]:
    return entry(kv[0], kv[1])


def test_at_least_once_a_record_the_broker_refuses_fails_the_batch_which_a_restart_writes(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    """``AT_LEAST_ONCE``'s tasks produce: a record the broker refuses (larger than the
    sink topic's ``max.message.bytes``) fails its task and so the query, with the
    broker's error, and the batch's offsets are not committed — the restart from the
    same checkpoint, the topic's limit raised, writes every record of it (none was
    skipped: at least once)."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    source, sink = topic_factory(1), topic_factory(1, max_message_bytes=2048)
    # incompressible (the producer compresses): 5 336 characters of base64
    big = base64.b64encode(random.Random(5).randbytes(4000)).decode()
    produce(kafka_bootstrap, source, ((f"k{i}".encode(), (big if i == 5 else str(i)).encode())
                                      for i in range(20)))

    def pipeline() -> Pipeline:
        p = Pipeline.create(name="alo-refused")
        (p.read_from(KafkaSources.kafka(props(kafka_bootstrap), source))
          .map(_same)
          .write_to(KafkaSinks.kafka(out_props(kafka_bootstrap), sink)))
        return p

    checkpoint = str(tmp_path / "ck")
    failure, reports = _run(pipeline(), spark, guarantee=Guarantee.AT_LEAST_ONCE,
                            checkpoint=checkpoint)
    assert failure is not None and "Message size too large" in str(failure), failure
    assert "still queued" not in str(failure), failure  # none waited: the broker refused
    assert reports == []
    assert all(v != big.encode() for _, v, _ in read(kafka_bootstrap, sink))
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    limit = ConfigEntry("max.message.bytes", "1048576",
                        incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, sink, incremental_configs=[limit])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, sink)])
    for future in described.values():
        assert future.result(timeout=30)["max.message.bytes"].value == "1048576"
    failure, reports = _run(pipeline(), spark, guarantee=Guarantee.AT_LEAST_ONCE,
                            checkpoint=checkpoint)
    assert failure is None
    got = {(k, v) for k, v, _ in read(kafka_bootstrap, sink)}
    assert got == {(f"k{i}".encode(), (big if i == 5 else str(i)).encode()) for i in range(20)}
    assert sum(r.rows_out for r in reports) == 20, reports


@pytest.mark.parametrize("guarantee", [Guarantee.AT_LEAST_ONCE, Guarantee.EXACTLY_ONCE])
def test_dead_letters_carry_the_raw_bytes_and_the_error_headers(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        guarantee: Guarantee) -> None:
    source, sink, dead = topic_factory(1), topic_factory(1), topic_factory(1)
    _with_bad(kafka_bootstrap, source, 30, {4, 20})
    p = _number_pipeline(kafka_bootstrap, source, sink, "dlq")
    failure, reports = _run(p, spark, guarantee=guarantee, checkpoint=str(tmp_path / "ck"),
                            errors="dead_letter", dead_letter_topic=dead)
    assert failure is None
    assert sorted(int(v) for _, v, _ in read(kafka_bootstrap, sink)) == sorted(
        2 * i for i in range(30) if i not in {4, 20})
    letters = read(kafka_bootstrap, dead)
    assert sorted((k, v) for k, v, _ in letters) == [(b"k20", b"bad"), (b"k4", b"bad")]
    for key, _, headers in letters:
        assert headers["gs.error.stage"] == b"map#1"
        assert headers["gs.error.topic"] == source.encode()
        assert headers["gs.error.partition"] == b"0"
        assert headers["gs.error.offset"] == key[1:]
        assert headers["gs.error.reason"] == b"ValueError: not a number: bad"
        assert headers["gs.error.pipeline"] == b"dlq"
    assert sum(r.errors for r in reports) == 2


def test_a_decode_error_goes_to_the_dead_letter_topic(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        ) -> None:
    source, sink, dead = topic_factory(1), topic_factory(1), topic_factory(1)
    produce(kafka_bootstrap, source, [(b"a", (5).to_bytes(4, "big")), (b"b", b"\x01\x02"),
                                      (b"c", (7).to_bytes(4, "big"))])
    p = Pipeline.create(name="decode")
    (p.read_from(KafkaSources.kafka(props(kafka_bootstrap,
                                          **{"value.deserializer": "IntegerDeserializer"}),
                                    source))
      .map(lambda kv: entry(kv[0], str(kv[1] + 1)))
      .write_to(KafkaSinks.kafka(out_props(kafka_bootstrap), sink)))
    failure, _ = _run(p, spark, guarantee=Guarantee.AT_LEAST_ONCE,
                      checkpoint=str(tmp_path / "ck"), errors="dead_letter",
                      dead_letter_topic=dead)
    assert failure is None
    assert sorted(v for _, v, _ in read(kafka_bootstrap, sink)) == [b"6", b"8"]
    letters = read(kafka_bootstrap, dead)
    assert [(k, v) for k, v, _ in letters] == [(b"b", b"\x01\x02")]
    assert letters[0][2]["gs.error.stage"] == b"value.deserializer"
    assert letters[0][2]["gs.error.offset"] == b"1"


def _explained(job: Any, spark: Any, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """Run ``job`` to its end: its ``describe()`` and its query's physical plan."""
    try:
        query = job.start(spark)
        query.awaitTermination(300)
        described = job.describe()
        capsys.readouterr()
        query.explain()
        return described, capsys.readouterr().out
    finally:
        job.close()


@pytest.mark.parametrize("projection", ["entry", "value"])
def test_strings_decoded_by_the_first_pass_send_bytes_that_are_not_utf8_to_dead_letters(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], projection: str) -> None:
    """String key and value with a map first: the pass decodes them (no JVM decode in
    the plan), and a key or value that is not UTF-8 is a dead letter with its raw bytes
    and the side's stage, the other rows of its batch written — the key checked also
    when the steps see the value alone, as the JVM's decode does."""
    source, sink, dead = topic_factory(1), topic_factory(1), topic_factory(1)
    produce(kafka_bootstrap, source, [(b"a", b"x"), (b"b", b"\xff\xfe"), (b"\xc3", b"y"),
                                      (b"d", "é".encode())])
    p = Pipeline.create(name=f"utf8-{projection}")
    source_props = props(kafka_bootstrap)
    step = (lambda kv: entry(kv[0], kv[1].upper())) if projection == "entry" else (
        lambda v: entry(v.lower(), v.upper()))
    (p.read_from(KafkaSources.kafka(source_props, source,
                                    projection=projection))  # type: ignore[arg-type]
      .map(step)
      .write_to(KafkaSinks.kafka(out_props(kafka_bootstrap), sink)))
    job = p.job(trigger="available_now", guarantee=Guarantee.AT_LEAST_ONCE,
                checkpoint=str(tmp_path / "ck"), errors="dead_letter", dead_letter_topic=dead)
    described, plan = _explained(job, spark, capsys)
    assert job.failure is None
    assert "value: String in the Python pass (Arrow)" in described
    assert "python pass 1: decode, map#1, encode" in described
    assert "MapInArrow" in plan and "isValid" not in plan, plan  # no JVM check first
    keys = [b"a", b"d"] if projection == "entry" else [b"x", "é".encode()]
    assert sorted(read(kafka_bootstrap, sink)) == sorted([
        (keys[0], b"X", {}), (keys[1], "É".encode(), {})])
    letters = {k: (v, h["gs.error.stage"], h["gs.error.reason"])
               for k, v, h in read(kafka_bootstrap, dead)}
    assert letters == {
        b"b": (b"\xff\xfe", b"value.deserializer", b"value is not valid UTF-8 (String)"),
        b"\xc3": (b"y", b"key.deserializer", b"key is not valid UTF-8 (String)")}


def _pass_output(plan: str) -> list[str]:
    """The columns the Python pass gives back, from ``explain``'s physical plan."""
    line = next(x for x in plan.splitlines() if "MapInArrow" in x)
    found = re.search(r"\[([^\]]*)\], (?:true|false)", line)
    assert found is not None, line
    return [name.split("#")[0].strip() for name in found.group(1).split(",")]


def _pass_input(plan: str) -> list[str]:
    """The columns the Python pass is given, from ``explain``'s physical plan."""
    line = next(x for x in plan.splitlines() if "MapInArrow" in x)
    found = re.search(r"MapInArrow \w+\(([^)]*)\)", line)
    assert found is not None, line
    return [name.split("#")[0].strip() for name in found.group(1).split(",")]


@pytest.mark.parametrize("errors", ["fail", "log", "dead_letter"])
def test_the_sinks_pass_gives_back_only_the_columns_read_after_it(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], errors: str) -> None:
    """Under ``errors="fail"`` the Kafka sink's pass raises for every error row, and the
    sink reads no origin: it gives back the key and value alone (the hidden columns are
    null literals after it, not carried through Arrow); under ``log`` the error rows are
    left out and counted after it (their reason and stage); dead letters need the
    error, the stage, the origin and the raw bytes, which it then gives back. The pass
    reads the origin only for its error rows: it is given the origin's text only for
    dead letters, and otherwise its parts (partition and offset: the source reads one
    topic). (``NONE``: Spark's Kafka sink writes, so the pass is a node of the plan;
    above it the writer's tasks run the pass themselves, except for dead letters:
    ``test_the_writers_tasks_run_the_sinks_pass``.)"""
    source, sink, dead = topic_factory(1), topic_factory(1), topic_factory(1)
    produce(kafka_bootstrap, source, [(b"a", b"1"), (b"b", b"2")])
    p = _number_pipeline(kafka_bootstrap, source, sink, f"lean-{errors.replace('_', '-')}")
    job = p.job(trigger="available_now", guarantee=Guarantee.NONE,
                checkpoint=str(tmp_path / "ck"), errors=errors,
                **({"dead_letter_topic": dead} if errors == "dead_letter" else {}))
    _, plan = _explained(job, spark, capsys)
    assert job.failure is None
    assert sorted(read(kafka_bootstrap, sink)) == [(b"a", b"2", {}), (b"b", b"4", {})]
    expected = {"fail": ["key", "value"],
                "log": ["key", "value", "_gs_error", "_gs_stage"],
                "dead_letter": ["key", "value", "_gs_where", "_gs_error", "_gs_stage",
                                "_gs_raw_key", "_gs_raw_value"]}[errors]
    assert _pass_output(plan) == expected, plan
    # the origin's text is built in the JVM only when something after the pass reads it
    # (dead letters); otherwise the pass takes its parts, the source's one topic left out
    given = _pass_input(plan)
    assert given[:2] == ["key", "value"], plan
    if errors == "dead_letter":
        assert "_gs_where" in given and not any("origin" in c for c in given), plan
    else:
        assert given[-2:] == ["_gs_origin_partition", "_gs_origin_offset"], plan
        assert "_gs_where" not in given, plan


@pytest.mark.parametrize(("guarantee", "topics"), [
    (Guarantee.EXACTLY_ONCE, 1), (Guarantee.EXACTLY_ONCE, 2), (Guarantee.AT_LEAST_ONCE, 1)])
def test_the_writers_tasks_run_the_sinks_pass(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], guarantee: Guarantee, topics: int) -> None:
    """Above ``NONE`` the sink's pass straight over a Kafka source runs inside the
    writer's tasks (one Python pass a task; they produce from Python: the exactly-once
    writer's transactions, or the worker's idempotent producer): under ``EXACTLY_ONCE``
    the streaming query's plan has no Python node (the writer's ``foreachBatch`` job
    runs it), only the source's rows and the origin's parts (the topic among them for a
    source of two topics); under ``AT_LEAST_ONCE`` the query's own tasks run it, with no
    ``foreachBatch``: its one Python node gives back the tasks' counts, not the rows;
    every record comes out once, each batch is reported."""
    sources, sink = [topic_factory(2) for _ in range(topics)], topic_factory(2)
    for n, source in enumerate(sources):
        produce(kafka_bootstrap, source, ((f"k{n}-{i}".encode(), str(i).encode())
                                          for i in range(300)))
    p = Pipeline.create(name=f"fused-{guarantee.lower()}-{topics}")
    (p.read_from(KafkaSources.kafka(props(kafka_bootstrap), sources,
                                    max_offsets_per_trigger=250))
      .map(_numbers)
      .write_to(KafkaSinks.kafka(out_props(kafka_bootstrap), sink)))
    job = p.job(trigger="available_now", guarantee=guarantee,
                checkpoint=str(tmp_path / "ck"))
    described, plan = _explained(job, spark, capsys)
    assert job.failure is None
    assert "encode, the writer's produce (in the same task)" in described, described
    assert "PythonUDF" not in plan, plan
    if guarantee == Guarantee.EXACTLY_ONCE:
        assert "MapInArrow" not in plan, plan
    else:
        assert plan.count("MapInArrow") == 1 and _pass_output(plan) == ["records", "dropped"]
    # nothing the pass does not read: no event time, no raw bytes, no origin text
    assert "_gs_ts" not in plan and "_gs_raw" not in plan and "_gs_where" not in plan, plan
    parts = ["_gs_origin_partition", "_gs_origin_offset"]
    assert all(part in plan for part in parts) and (
        ("_gs_origin_topic" in plan) == (topics > 1)), plan
    got = Counter((k, v) for k, v, _ in read(kafka_bootstrap, sink))
    assert got == Counter((f"k{n}-{i}".encode(), str(2 * i).encode())
                          for n in range(topics) for i in range(300))
    reports = []
    while job.reports:
        reports.append(job.reports.popleft())
    assert len(reports) >= 2 and sum(r.rows_out for r in reports) == 300 * topics, reports


def _double(batch: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pa.RecordBatch.from_arrays([batch.column("k"), pc.multiply(batch.column("n"), 2)],
                                      names=["k", "n"])


def _triple(frame: Any) -> Any:
    frame["n"] = frame["n"] * 3
    return frame[frame["n"] % 2 == 0]


@pytest.mark.parametrize("kind", ["arrow", "pandas"])
def test_map_batch_between_structured_steps(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        kind: str) -> None:
    source, sink = topic_factory(2), topic_factory(1)
    produce(kafka_bootstrap, source, ((f"k{i}".encode(), str(i).encode()) for i in range(200)))
    p = Pipeline.create(name=f"batch-{kind}")
    (p.read_from(KafkaSources.kafka(props(kafka_bootstrap), source))
      .map(lambda kv: {"k": kv[0], "n": int(kv[1])}, schema="k string, n long")
      .map_batch(_double if kind == "arrow" else _triple, kind=kind)  # type: ignore[arg-type]
      .map(lambda row: entry(row["k"], str(row["n"])))
      .write_to(KafkaSinks.kafka(out_props(kafka_bootstrap), sink)))
    failure, _ = _run(p, spark, guarantee=Guarantee.AT_LEAST_ONCE,
                      checkpoint=str(tmp_path / "ck"))
    assert failure is None
    got = sorted((k, int(v)) for k, v, _ in read(kafka_bootstrap, sink))
    if kind == "arrow":
        expected = sorted((f"k{i}".encode(), 2 * i) for i in range(200))
    else:
        expected = sorted((f"k{i}".encode(), 3 * i) for i in range(200) if (3 * i) % 2 == 0)
    assert got == expected


def test_a_pipeline_without_python_steps_runs_no_python(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    source, sink = topic_factory(2), topic_factory(1)
    produce(kafka_bootstrap, source, ((f"k{i}".encode(), f"v{i}".encode()) for i in range(100)))
    p = Pipeline.create(name="jvm-only")
    (p.read_from(KafkaSources.kafka(props(kafka_bootstrap), source))
      .write_to(KafkaSinks.kafka(out_props(kafka_bootstrap), sink)))
    job = p.job(Guarantee.AT_LEAST_ONCE, str(tmp_path / "ck"), "available_now")
    try:
        query = job.start(spark)
        query.awaitTermination(120)
        assert job.failure is None
        capsys.readouterr()
        query.explain()
        plan = capsys.readouterr().out
        assert "KafkaTable" in plan or "Kafka" in plan, plan
        assert "Python" not in plan and "Arrow" not in plan, plan
        assert "python pass" not in job.describe()
        assert "value: String in the JVM" in job.describe()
    finally:
        job.close()
    got = sorted((k, v) for k, v, _ in read(kafka_bootstrap, sink))
    assert got == sorted((f"k{i}".encode(), f"v{i}".encode()) for i in range(100))


def test_real_time_python_refuses_a_session_built_with_the_allow_list_check_on(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        ) -> None:
    """Spark 4.2 checks its real-time allow-list, which does not list MapInArrowExec,
    against the configuration the session was built with, at every batch: turned off on
    a running session the query still failed at its first batch. The job refuses before
    it starts; a session built with ``REAL_TIME_PYTHON_CONF`` runs it
    (``test_pipeline_bench_smoke``'s real-time side, in its own process)."""
    source, sink = topic_factory(1), topic_factory(1)
    p = Pipeline.create(name="real-time")
    (p.read_from(KafkaSources.kafka(props(kafka_bootstrap), source))
      .map(lambda kv: entry(kv[0], kv[1].upper()))
      .write_to(KafkaSinks.kafka(out_props(kafka_bootstrap), sink)))
    job = p.job(Guarantee.AT_LEAST_ONCE, str(tmp_path / "ck"), "real_time",
                real_time_python=True)
    try:
        with pytest.raises(ConfigError, match="built with .*allowlistCheck=false"):
            job.start(spark)
        assert job._query is None
    finally:
        job.close()


def test_real_time_mode_runs_a_jvm_only_pipeline_without_opt_in(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        ) -> None:
    import time

    source, sink = topic_factory(1), topic_factory(1)
    produce(kafka_bootstrap, source, ((f"k{i}".encode(), f"v{i}".encode())
                                      for i in range(50)))
    p = Pipeline.create(name="real-time-jvm")
    (p.read_from(KafkaSources.kafka(props(kafka_bootstrap), source))
      .write_to(KafkaSinks.kafka(out_props(kafka_bootstrap), sink)))
    job = p.job(Guarantee.AT_LEAST_ONCE, str(tmp_path / "ck"), "real_time")
    got: list[Any] = []
    try:
        query = job.start(spark)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and query.isActive and len(got) < 50:
            time.sleep(2)
            got = read(kafka_bootstrap, sink)
        assert job.failure is None, job.failure
    finally:
        job.close()
    assert sorted((k, v) for k, v, _ in got) == sorted(
        (f"k{i}".encode(), f"v{i}".encode()) for i in range(50))


def test_a_run_file_runs_an_api_pipeline(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        ) -> None:
    from gridstream.run.config import run_config

    source, sink = topic_factory(2), topic_factory(1)
    produce(kafka_bootstrap, source, [(b"a", b"hello"), (b"b", b"x"), (b"c", b"world")])
    run_file = tmp_path / "run.toml"
    run_file.write_text(f"""
[kafka]
bootstrap_servers = "{kafka_bootstrap}"

[run]
allowed_modules = ["tests.integration.support.pipeline_helpers"]

[[pipeline]]
name = "toml"
guarantee = "EXACTLY_ONCE"
checkpoint = "{tmp_path / 'ck'}"
trigger = "available_now"
[pipeline.source]
kind = "kafka"
topics = ["{source}"]
properties."auto.offset.reset" = "earliest"
properties."key.deserializer" = "StringDeserializer"
properties."value.deserializer" = "StringDeserializer"
[[pipeline.steps]]
filter = "tests.integration.support.pipeline_helpers:no_x"
[[pipeline.steps]]
map = "tests.integration.support.pipeline_helpers:shout"
[pipeline.sink]
kind = "kafka"
topic = "{sink}"
properties = {{ "key.serializer" = "StringSerializer", "value.serializer" = "StringSerializer" }}
""")
    assert run_config(run_file) == 0
    assert sorted((k, v) for k, v, _ in read(kafka_bootstrap, sink)) == [
        (b"a", b"HELLO"), (b"c", b"WORLD")]


def test_none_with_group_commits_resumes_from_the_groups_offsets(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    import uuid

    source, sink = topic_factory(2), topic_factory(1)
    group = f"gs-test-{uuid.uuid4().hex[:8]}"
    in_props = props(kafka_bootstrap, **{"group.id": group, "enable.auto.commit": "true"})

    def once(first: int, count: int) -> None:
        produce(kafka_bootstrap, source, ((b"k", str(i).encode())
                                          for i in range(first, first + count)))
        p = Pipeline.create(name="group")
        (p.read_from(KafkaSources.kafka(in_props, source))
          .write_to(KafkaSinks.kafka(out_props(kafka_bootstrap), sink)))
        failure, _ = _run(p, spark)  # NONE: a new temporary checkpoint each run
        assert failure is None

    once(0, 10)
    once(10, 5)
    assert sorted(int(v) for _, v, _ in read(kafka_bootstrap, sink)) == list(range(15))
