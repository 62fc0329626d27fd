"""Operating ``gridstream run``: its ``/metrics`` and ``/status`` say what the flows wrote
(checked against the topics themselves), ``gridstream status`` shows a failed flow and
exits 1, a failed flow is one line on the terminal with its traces in the log file, and
the other flows of the file go on."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.support.child_output import await_line, start_piped
from tests.integration.support.ops_steps import WORKER_NOTE
from tests.integration.support.run_files import GRIDSTREAM, ROOT
from tests.integration.support.run_files import await_flows as _await
from tests.integration.support.run_files import get as _get
from tests.integration.support.run_files import start_run as _start
from tests.integration.support.run_files import stop_run as _stop
from tests.integration.support.run_files import toml_value as _toml

ENTRIES = 100


def _run_section(tmp: Path, bootstrap: str) -> str:
    return (f"[kafka]\nbootstrap_servers = {_toml(bootstrap)}\n\n[run]\nstatus_port = 0\n"
            f"progress_interval_s = 0.5\nheartbeat_s = 5\nlog_dir = {_toml(str(tmp / 'logs'))}\n"
            'allowed_modules = ["tests.integration.support.ops_steps"]\n')


def _evens(name: str, tmp: Path, source: str, sink: str) -> str:
    return f"""
[[pipeline]]
name = "{name}"
checkpoint = {_toml(str(tmp / ('ck-' + name)))}
guarantee = "EXACTLY_ONCE"
trigger = "200 milliseconds"
[pipeline.source]
kind = "kafka"
topics = [{_toml(source)}]
properties = {_toml({"key.deserializer": "StringDeserializer",
                     "value.deserializer": "StringDeserializer",
                     "auto.offset.reset": "earliest"})}
[[pipeline.steps]]
filter = "tests.integration.support.ops_steps:even"
[pipeline.sink]
kind = "kafka"
topic = {_toml(sink)}
properties = {{ "key.serializer" = "StringSerializer", "value.serializer" = "StringSerializer" }}
"""


def _metric(text: str, name: str, flow: str) -> float:
    found = re.search(rf'^{name}{{flow="{re.escape(flow)}"}} (\S+)$', text, re.M)
    assert found is not None, (name, flow, text[:2000])
    return float(found.group(1))


def _committed(bootstrap: str, topic: str, expected: int) -> list[bytes | None]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ops-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes | None] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and len(values) < expected:
            for msg in consumer.consume(500, timeout=0.5):
                if msg.error() is None:
                    values.append(msg.value())
        end = time.monotonic() + 2  # nothing more than expected arrives
        while time.monotonic() < end:
            values += [m.value() for m in consumer.consume(500, timeout=0.2)
                       if m.error() is None]
    finally:
        consumer.close()
    return values


@dataclass
class OpsRun:
    """One ``gridstream run`` of three flows, watched until each did its part, then
    stopped: a Hazelcast source connector, ``evens`` (Kafka → Kafka, its input the
    connector's topic) and ``bad`` (a record that is not JSON fails it)."""

    cache: str
    source_topic: str
    evens_topic: str
    bad_in: str
    flows: dict[str, dict[str, Any]]
    metrics: str
    healthy_status: subprocess.CompletedProcess[str]
    """``gridstream status`` while every flow ran, before ``bad`` met its bad record."""
    healthy_healthz: int
    status: subprocess.CompletedProcess[str]
    healthz: int
    code: int
    seen: list[str]
    in_source: list[bytes | None]
    in_evens: list[bytes | None]


@pytest.fixture(scope="module")
def ops_run(kafka_bootstrap: str, hazelcast_service: Any,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpsRun]:
    """The flows of both tests below run in one driver process: a ``gridstream run``
    starts Spark, and each run took 20-45 s of the default suite."""
    from hazelcast.client import HazelcastClient
    from hazelcast.core import HazelcastJsonValue

    tmp_path = tmp_path_factory.mktemp("ops")
    tag = uuid.uuid4().hex[:8]
    cache = f"ops{tag}"
    source_topic, evens_topic = f"{cache}.{cache}", f"{cache}-evens"
    bad_in, bad_out = f"{cache}-bad-in", f"{cache}-bad-out"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    topics = [source_topic, evens_topic, bad_in, bad_out]
    for future in admin.create_topics([NewTopic(t, num_partitions=2 if t in topics[:2] else 1,
                                                replication_factor=1)
                                       for t in topics]).values():
        future.result(timeout=30)
    try:
        cluster = hazelcast_service.settings.cluster_name
        client = HazelcastClient(cluster_members=[hazelcast_service.address],
                                 cluster_name=cluster)
        try:
            values: dict[Any, Any] = {f"k{i}": HazelcastJsonValue(json.dumps({"n": i}))
                                      for i in range(ENTRIES)}
            client.get_map(cache).blocking().put_all(values)
        finally:
            client.shutdown()
        producer = Producer({"bootstrap.servers": kafka_bootstrap})
        producer.produce(bad_in, json.dumps({"n": 2}).encode())  # the bad one comes later
        producer.flush(30)
        path = tmp_path / "ops.toml"
        path.write_text(_run_section(tmp_path, kafka_bootstrap) + f"""
[[connector]]
name = "hz-source"
kind = "source"
checkpoint = {_toml(str(tmp_path / 'ck-source'))}
grid = {_toml({"kind": "hazelcast", "cluster_name": cluster,
               "members": [hazelcast_service.address]})}
topicPrefix = "{cache}."
cacheWhitelist = ["{cache}"]
shallLoadInitialData = true
""" + _evens("evens", tmp_path, source_topic, evens_topic)
                        + _evens("bad", tmp_path, bad_in, bad_out))
        process, lines, seen, url = _start(path)
        try:
            _await(url, lambda f: f["hz-source"]["written"] >= ENTRIES
                   and f["evens"]["read"] >= ENTRIES and f["evens"]["lag_records"] == 0
                   and f["hz-source"]["lag_by_source"] == {cache: 0}
                   and f["bad"]["read"] >= 1, process, seen, lines)
            healthy_status, healthy_healthz = _status(url), _healthz(url)
            producer.produce(bad_in, b"not json at all")
            producer.flush(30)
            await_line(process, lines, seen, lambda line: line.startswith("bad: FAILED"))
            flows = _await(url, lambda f: f["bad"]["state"] == "failed", process, seen, lines,
                           may_fail=("bad",))
            metrics = _get(url + "/metrics").decode()
            in_source = _committed(kafka_bootstrap, source_topic, ENTRIES)
            in_evens = _committed(kafka_bootstrap, evens_topic, ENTRIES // 2)
            shown, healthz = _status(url), _healthz(url)
        finally:
            code = _stop(process, lines, seen) if process.poll() is None else process.returncode
        yield OpsRun(cache, source_topic, evens_topic, bad_in, flows, metrics, healthy_status,
                     healthy_healthz, shown, healthz, code, seen, in_source, in_evens)
    finally:
        for future in admin.delete_topics(topics).values():
            future.result(timeout=30)


def _status(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GRIDSTREAM, "status", "--url", url], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)


def _healthz(url: str) -> int:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=10) as answer:  # noqa: S310
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_metrics_and_status_say_what_the_flows_wrote(ops_run: OpsRun) -> None:
    run, flows, metrics = ops_run, ops_run.flows, ops_run.metrics
    in_source, in_evens = run.in_source, run.in_evens
    assert len(in_source) == ENTRIES and len(in_evens) == ENTRIES // 2
    assert sorted(orjson.loads(v or b"")["n"] for v in in_evens) == list(range(0, ENTRIES, 2))
    assert (flows["hz-source"]["written"], flows["hz-source"]["read"]) == (ENTRIES, ENTRIES)
    assert (flows["evens"]["read"], flows["evens"]["written"],
            flows["evens"]["filtered"]) == (ENTRIES, ENTRIES // 2, ENTRIES // 2)
    assert _metric(metrics, "gridstream_flow_records_written_total", "hz-source") == len(
        in_source)
    assert _metric(metrics, "gridstream_flow_records_read_total", "evens") == len(in_source)
    assert _metric(metrics, "gridstream_flow_records_written_total", "evens") == len(in_evens)
    assert _metric(metrics, "gridstream_flow_records_filtered_total", "evens") == (
        ENTRIES - len(in_evens))
    assert 'gridstream_flow_state{flow="evens",state="failed"} 0.0' in metrics
    assert 'gridstream_flow_state{flow="bad",state="failed"} 1.0' in metrics
    assert flows["evens"]["lag_records"] == 0
    # the grid source's lag: the map's journal events after its position
    assert (f'gridstream_flow_lag_records{{flow="hz-source",source="{run.cache}"}} 0.0'
            in metrics)
    assert flows["hz-source"]["reads"] == [f"hazelcast:{run.cache}"]
    assert flows["evens"]["reads"] == [f"kafka:{run.source_topic}"]
    shown = run.healthy_status  # while every flow ran: exit 0, /healthz 200
    assert shown.returncode == 0 and run.healthy_healthz == 200, shown.stdout + shown.stderr
    table = {line.split()[0]: line.split() for line in shown.stdout.splitlines()[2:]
             if line.strip()}
    # flow, kind (two words for a connector), state, batches, read, written, ...
    assert table["hz-source"][3] in ("running", "idle"), shown.stdout
    assert table["hz-source"][5:7] == [str(ENTRIES), str(ENTRIES)], shown.stdout
    assert table["evens"][2] in ("running", "idle"), shown.stdout
    assert table["evens"][4:6] == [str(ENTRIES), str(ENTRIES // 2)], shown.stdout


def test_a_failed_flow_is_one_line_and_the_others_go_on(ops_run: OpsRun) -> None:
    run = ops_run
    assert run.flows["bad"]["state"] == "failed"
    assert run.flows["evens"]["state"] in ("running", "idle")
    assert run.status.returncode == 1, run.status.stdout + run.status.stderr
    assert "bad: FAILED: RecordError" in run.status.stdout
    assert run.healthz == 503  # /healthz with a failed flow
    terminal = "".join(run.seen)
    assert run.code == 1, terminal
    failed = [line for line in run.seen if line.startswith("bad: FAILED")]
    assert len(failed) == 1, terminal
    assert f"{run.bad_in}[0]@1" in failed[0] and "to get past it" in failed[0], failed
    log = re.search(r"\(traces: (\S+)\)", failed[0])
    assert log is not None, failed
    for noise in ("Traceback", "\tat ", "PYTHON_EXCEPTION", "FOREACH_BATCH", "Py4J"):
        assert noise not in terminal, (noise, terminal)
    # Spark's log (log4j: "12:00:01 WARN Something: ...") is in the log file, not here
    assert not re.search(r"\d\d:\d\d:\d\d (WARN|ERROR) ", terminal), terminal
    traces = Path(log.group(1)).read_text()
    assert "Traceback" in traces and "not json at all" not in failed[0], traces[-3000:]
    assert "RecordError" in traces
    # what the JVM and its Python workers write to stderr is in the log file too
    for jvm_stderr in ("Using incubator modules", WORKER_NOTE):
        assert jvm_stderr not in terminal, terminal
        assert jvm_stderr in traces, traces[-3000:]


def test_the_mirror_serves_the_same_metrics(kafka_bootstrap: str, topic_factory: Any,
                                           tmp_path: Path) -> None:
    """``gridstream mirror --status-port 0``: /status and /metrics count the operations
    the mirror wrote, as many as the topic holds."""
    from gridstream.model import SpaceDocument
    from gridstream.space import Space

    topic = topic_factory(1)
    data_dir = tmp_path / "space"
    name = f"ops-mirror-{uuid.uuid4().hex[:8]}"
    with Space.embedded("ops", data_dir=str(data_dir)) as space:
        for i in range(40):
            space.write(SpaceDocument("people", {"id": f"p{i}", "n": i}))
    process, lines = start_piped(
        [sys.executable, "-m", "gridstream.mirror", "--data-dir", str(data_dir),
         "--bootstrap", kafka_bootstrap, "--name", name, "--default-topic", topic,
         "--metrics-interval", "0", "--status-port", "0"], ROOT)
    seen: list[str] = []
    try:
        await_line(process, lines, seen, lambda line: line.startswith("status: http://"))
        found = re.search(r"status: (http://[\d.:]+)/", seen[-1])
        assert found is not None, seen
        url = found.group(1)
        flows = _await(url, lambda f: f[name]["written"] >= 40 and f[name]["lag_records"] == 0,
                       process, seen, lines)
        in_topic = _committed(kafka_bootstrap, topic, 40)
        metrics = _get(url + "/metrics").decode()
        assert len(in_topic) == 40 == flows[name]["written"]
        assert _metric(metrics, "gridstream_flow_records_written_total", name) == len(in_topic)
        assert f'gridstream_flow_lag_records{{flow="{name}",source="log"}} 0.0' in metrics
        assert flows[name]["state"] == "running" and flows[name]["kind"] == "mirror"
    finally:
        code = _stop(process, lines, seen) if process.poll() is None else process.returncode
    assert code == 0, "".join(seen[-40:])
