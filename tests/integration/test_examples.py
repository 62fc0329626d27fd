"""Every example and run file of ``examples/`` runs as its header says, against the stack.

Run files are run as shipped but for ``/tmp/gridstream``, the root of their paths, which
becomes the test's own directory. The examples that start Spark are in the slow suite;
the pipeline API's examples are ``test_pipeline_examples``.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gridstream.demo.hazelcast import hz_config, read_map
from gridstream.grid.hazelcast import HazelcastAdapter
from tests.integration import test_pipeline_examples
from tests.integration.support.run_files import (
    GRIDSTREAM,
    ROOT,
    await_flows,
    start_run,
    stop_run,
)

EXAMPLES = ROOT / "examples"

RUN_BY = {
    "cassandra_mirror.py": "test_cassandra_mirror_loads_a_space_back_from_the_tables",
    "mirror_quickstart.py": "test_mirror_quickstart_reads_back_every_operation",
    "seed_topics.py": "test_seed_topics_then_the_sql_consumer_stores_every_person",
    "sql_consumer.py": "test_seed_topics_then_the_sql_consumer_stores_every_person",
    "seed_space.py": "test_connectors_toml_then_properties_copy_the_space_into_hazelcast",
    "connectors.toml": "test_connectors_toml_then_properties_copy_the_space_into_hazelcast",
    "connectors.properties":
        "test_connectors_toml_then_properties_copy_the_space_into_hazelcast",
    "connect_source.py": "test_connect_source_reads_every_change_once",
    "connect_sink.py": "test_connect_sink_fills_each_cache_with_the_last_value",
    "spark_kafka_exactly_once.py": "test_spark_kafka_exactly_once_writes_every_record_once",
    "feeds.toml": "test_feeds_toml_and_the_sqlite_catch_up_store_the_mirrored_people",
    "feeds-sqlite-once.toml":
        "test_feeds_toml_and_the_sqlite_catch_up_store_the_mirrored_people",
    "pipeline_api.toml": "test_pipeline_api_toml_writes_the_entries_exactly_once",
    "pipeline_print.py": "test_pipeline_examples.test_pipeline_print_prints_each_record",
    "pipeline_logs.py": "test_pipeline_examples.test_pipeline_logs_writes_the_entries_exactly_once",
    "pipeline_kafka_to_hazelcast.py":
        "test_pipeline_examples.test_pipeline_kafka_to_hazelcast_fills_the_map_as_expected",
    "pipeline_window.py": "test_pipeline_examples."
                          "test_pipeline_window_writes_every_window_once_and_counts_the_late_record",
}
"""Each file of ``examples/`` and the test that runs it."""


def test_every_example_is_run_by_a_test() -> None:
    files = {p.name for p in EXAMPLES.iterdir() if p.is_file()}
    assert files == set(RUN_BY), "examples without a test, or tests of no example: " + \
        str(files ^ set(RUN_BY))
    for test in RUN_BY.values():
        module, _, name = test.rpartition(".")
        owner = test_pipeline_examples if module else sys.modules[__name__]
        assert callable(getattr(owner, name, None)), f"no test {test}"


def _python(script: str, *args: str, timeout: float = 600) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


def _shipped(name: str, root: Path) -> Path:
    """The run file as shipped, its ``/tmp/gridstream`` paths under ``root``."""
    text = (EXAMPLES / name).read_text().replace("/tmp/gridstream", str(root))
    path = root / name
    path.write_text(text)
    return path


def _run_until(path: Path, done: Any, timeout: float = 300) -> dict[str, dict[str, Any]]:
    """``gridstream run path`` until its status satisfies ``done``, then SIGTERM: it must
    exit 0 (every flow stopped cleanly)."""
    process, lines, seen, url = start_run(path)
    try:
        flows = await_flows(url, done, process, seen, lines, timeout)
    finally:
        code = stop_run(process, lines, seen)
    assert code == 0, "".join(seen[-40:])
    assert "Traceback" not in "".join(seen), "".join(seen)
    return flows


def _count(flows: dict[str, dict[str, Any]], name: str, what: str) -> int:
    """A flow's count (0 before the run has listed its flows)."""
    return int(flows.get(name, {}).get(what, 0))


@pytest.fixture
def hazelcast(hazelcast_service: Any) -> Iterator[HazelcastAdapter]:
    adapter = HazelcastAdapter(hz_config())
    adapter.open()
    yield adapter
    adapter.close()


def test_mirror_quickstart_reads_back_every_operation(kafka_service: Any) -> None:
    out = _python("mirror_quickstart.py")
    ops = [line.split()[1] for line in out.splitlines() if line[:1].isdigit() and "@" in line]
    assert ops == ["WRITE", "WRITE", "UPDATE", "PARTIAL_UPDATE", "REMOVE", "WRITE"], out
    assert "lag_operations=0" in out, out


def test_cassandra_mirror_loads_a_space_back_from_the_tables(cassandra_service: Any) -> None:
    out = _python("cassandra_mirror.py")
    assert "loaded 2 com.example.Customer:" in out, out
    assert "'address': {'street': '1 Main St', 'city': 'Bergen'}" in out, out
    assert "loaded 1 Note:" in out and "'tags': {" in out, out


def test_seed_topics_then_the_sql_consumer_stores_every_person(
        kafka_service: Any, tmp_path: Path) -> None:
    space = tmp_path / "people-space"
    out = _python("seed_topics.py", "--data-dir", str(space), "--people", "50")
    assert "wrote 100 operations" in out, out
    db = tmp_path / "people.db"
    _python("sql_consumer.py", "--topic", "people", "--db", f"sqlite:///{db}",
            "--data-dir", str(space), "--idle-timeout", "5")
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        person = next(t for t in tables if "Person" in t)
        ids = {r[0] for r in conn.execute(f'SELECT id FROM "{person}" WHERE deleted = 0')}  # noqa: S608
    assert {f"p-{i}" for i in range(50)} <= ids


@pytest.mark.slow
def test_connectors_toml_then_properties_copy_the_space_into_hazelcast(
        kafka_service: Any, hazelcast: HazelcastAdapter, tmp_path: Path) -> None:
    out = _python("seed_space.py", "--data-dir", str(tmp_path / "space"), "--people", "100")
    assert "wrote 200 entries" in out, out
    _run_until(_shipped("connectors.toml", tmp_path),
               lambda flows: _count(flows, "kafka-to-hazelcast", "written") >= 200)
    people = read_map(hazelcast, "copy_space.people")
    assert {f"p-{i}" for i in range(100)} <= set(people)
    assert people["p-7"]["name"] == "person 7" and people["p-7"]["ssn"] == ""  # masked
    _run_until(_shipped("connectors.properties", tmp_path),
               lambda flows: _count(flows, "kafka-to-hazelcast-props", "written") >= 200)
    copied = read_map(hazelcast, "props_space.people")
    assert copied["p-7"]["name"] == "person 7" and "loaded_at" in copied["p-7"]


@pytest.mark.slow
def test_connect_source_reads_every_change_once(kafka_service: Any) -> None:
    out = _python("connect_source.py", "--caches", "2", "--keys", "500", "--rounds", "2")
    assert "keys with a counter missing, repeated or out of order: 0" in out, out


@pytest.mark.slow
def test_connect_sink_fills_each_cache_with_the_last_value(
        kafka_service: Any, hazelcast_service: Any) -> None:
    for grid in ("space", "hazelcast"):
        out = _python("connect_sink.py", "--grid", grid, "--records", "3000")
        assert out.count("equal to the last value sent per key: True") == 3, out


@pytest.mark.slow
def test_spark_kafka_exactly_once_writes_every_record_once(kafka_service: Any) -> None:
    out = _python("spark_kafka_exactly_once.py", "--records", "2000")
    assert "2000 of 2000 records in" in out, out


@pytest.mark.slow
def test_feeds_toml_and_the_sqlite_catch_up_store_the_mirrored_people(
        kafka_service: Any, cassandra_service: Any, tmp_path: Path) -> None:
    _python("seed_topics.py", "--data-dir", str(tmp_path / "people-space"), "--people", "50")
    names = ("people-to-cassandra", "people-to-sql", "people-change-log",
             "people-current-state")
    _run_until(_shipped("feeds.toml", tmp_path),
               lambda flows: all(_count(flows, n, "read") >= 100 for n in names))
    done = subprocess.run([*GRIDSTREAM, "run", str(_shipped("feeds-sqlite-once.toml",
                                                            tmp_path))],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "all pipelines finished" in done.stdout, done.stdout
    for db in ("people.db", "catch-up.db"):
        with sqlite3.connect(tmp_path / db) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")]
            person = next(t for t in tables if "Person" in t)
            live = conn.execute(f'SELECT count(*) FROM "{person}" WHERE deleted = 0')  # noqa: S608
            assert live.fetchone()[0] >= 50, db


@pytest.mark.slow
def test_pipeline_api_toml_writes_the_entries_exactly_once(
        kafka_service: Any, tmp_path: Path) -> None:
    _python("pipeline_logs.py", "--seed", "logs")
    flows = _run_until(_shipped("pipeline_api.toml", tmp_path),
                       lambda flows: _count(flows, "logs", "written") >= 3)
    assert flows["logs"]["filtered"] >= 2  # the DEBUG lines
