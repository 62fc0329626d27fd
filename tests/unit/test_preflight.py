"""The checks before a flow starts: Kafka answers, the topics it reads exist (or another
flow of the file creates them: it waits), a Hazelcast member answers, a Space it reads
exists. Unreachable services are real closed ports; the topic list is a fake admin."""

from __future__ import annotations

import io
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from gridstream.errors import ConfigError, GridError, StackError
from gridstream.ops.failures import Failure, NotYet
from gridstream.ops.preflight import Preflight
from gridstream.spark.runnable import Runnable


class Grid:
    def __init__(self, kind: str, **values: Any) -> None:
        self.kind = kind
        self.__dict__.update(values)


class Config:
    def __init__(self, kind: str, grid: Grid) -> None:
        self.kind, self.grid = kind, grid


class Flow(Runnable):
    kind = "fake"
    name = ""  # an attribute of each fake (not the contract's property)

    def __init__(self, name: str, reads: list[str], writes: list[str], *,
                 bootstrap: str | None = "127.0.0.1:9092", config: Config | None = None) -> None:
        self.name = name
        self._endpoints = (reads, writes)
        if bootstrap is not None:
            self.bootstrap_servers = bootstrap
            self.kafka_properties: dict[str, Any] = {}
        if config is not None:
            self.config = config
        self.reports: deque[Any] = deque()
        self.failure = None

    def endpoints(self) -> tuple[list[str], list[str]]:
        return self._endpoints

    def describe(self) -> str:
        return self.name

    def start(self, spark: Any) -> Any:
        raise AssertionError("only checked here, never started")


class FakeAdmin:
    topics: set[str] = set()

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    def list_topics(self, timeout: float) -> Any:
        return type("Metadata", (), {"topics": {t: None for t in FakeAdmin.topics}})()


@pytest.fixture()
def admin(monkeypatch: pytest.MonkeyPatch) -> type[FakeAdmin]:
    import confluent_kafka.admin

    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", FakeAdmin)
    FakeAdmin.topics = set()
    return FakeAdmin


def test_a_topic_another_flow_of_the_file_creates_is_waited_for(admin: type[FakeAdmin]) -> None:
    source = Flow("space-to-kafka", ["space:people"], ["kafka:space.people", "kafka:space.orders"],
                  config=None)
    sink = Flow("kafka-to-hazelcast", ["kafka:space.people", "kafka:space.orders"],
                ["hazelcast:copy"])
    check = Preflight([source, sink]).check
    with pytest.raises(NotYet) as waiting:
        check(sink)
    assert str(waiting.value) == ("waiting for topics space.orders, space.people at "
                                  "127.0.0.1:9092: space-to-kafka (this file) creates them")
    failure = Failure(sink.name, waiting.value, "")
    assert failure.transient and failure.waiting and failure.line == str(waiting.value)
    assert waiting.value.created_here  # so the sink waits as long as it takes
    admin.topics = {"space.people", "space.orders"}
    check(sink)  # present now


def test_a_topic_nobody_in_the_file_writes_is_said_so(admin: type[FakeAdmin]) -> None:
    flow = Flow("p", ["kafka:orders"], ["store:sql"])
    with pytest.raises(NotYet, match="waiting for topic orders at 127.0.0.1:9092: no flow of "
                       "this file writes it"):
        Preflight([flow]).check(flow)


def test_kafka_that_does_not_answer_is_a_transient_failure_saying_what_to_do() -> None:
    flow = Flow("p", ["kafka:orders"], [], bootstrap="127.0.0.1:1")
    with pytest.raises(StackError, match=r"Kafka at 127.0.0.1:1 does not answer .*start it "
                       r"\(gridstream stack up --services kafka\) or fix bootstrap_servers"):
        Preflight([flow], timeout_s=1.0).check(flow)


def test_a_hazelcast_member_that_does_not_answer_is_a_grid_error() -> None:
    grid = Grid("hazelcast", members=("127.0.0.1:1", "127.0.0.1:2"))
    flow = Flow("hz", ["hazelcast:people"], [], bootstrap=None, config=Config("source", grid))
    with pytest.raises(GridError, match=r"no Hazelcast member answers at 127.0.0.1:1, "
                       r"127.0.0.1:2: start one \(gridstream stack up --services hazelcast\)"):
        Preflight([flow]).check(flow)


def test_a_space_source_without_a_space_is_a_permanent_config_error(tmp_path: Path) -> None:
    grid = Grid("space", data_dir=str(tmp_path / "nothing"), space_name="demo")
    flow = Flow("sp", ["space:people"], [], bootstrap=None, config=Config("source", grid))
    with pytest.raises(ConfigError, match="no Space in .*nothing \\(no space.json\\)"):
        Preflight([flow]).check(flow)
    (tmp_path / "nothing").mkdir()
    (tmp_path / "nothing" / "space.json").write_text("{}")
    Preflight([flow]).check(flow)
    sink = Flow("sp", [], ["space:people"], bootstrap=None,
                config=Config("sink", Grid("space", data_dir=str(tmp_path / "new"))))
    Preflight([sink]).check(sink)  # a sink creates the Space it writes


class Finished:
    isActive = False
    lastProgress = None

    def exception(self) -> None:
        return None

    def stop(self) -> None:
        return None


class Startable(Flow):
    """A flow the runner can start: its query finishes at once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.starts = 0

    def describe(self) -> str:
        return self.name

    def start(self, spark: Any) -> Finished:
        self.starts += 1
        return Finished()

    def close(self) -> None:
        return None


class Spark:
    def stop(self) -> None:
        return None


def test_the_runner_waits_for_a_topic_then_starts(admin: type[FakeAdmin]) -> None:
    from gridstream.spark.runner import PipelineRunner, RestartPolicy

    sink = Startable("sink", ["kafka:t"], [])
    preflight = Preflight([sink])
    checks: list[int] = []

    def check(flow: Any) -> None:
        checks.append(1)
        if len(checks) == 3:
            admin.topics = {"t"}
        preflight.check(flow)

    out = io.StringIO()
    # no restarts allowed: waiting for an input is not a restart and has a budget of its own
    runner = PipelineRunner([sink], Spark, out=out, poll_s=0.01,  # type: ignore[list-item, arg-type]
                            restarts={"sink": RestartPolicy(0, 0.0)}, preflight=check)
    assert runner.run() == 0
    assert sink.starts == 1 and len(checks) == 3
    lines = out.getvalue().splitlines()
    assert [line.split(" (waited")[0] for line in lines[1:-1]] == [
        "sink: waiting for topic t at 127.0.0.1:9092: no flow of this file writes it: "
        "create it, or start what does; checking every 0s"]  # a line at first, then each 30 s
    assert lines[-1] == "all pipelines finished"
    status = runner.monitor.status()["flows"][0]
    assert status["restarts"] == 0 and status["state"] == "finished"


def test_a_flow_stops_waiting_after_its_budget(admin: type[FakeAdmin]) -> None:
    from gridstream.spark.runner import PipelineRunner, RestartPolicy

    sink = Startable("sink", ["kafka:t"], [])
    out = io.StringIO()
    runner = PipelineRunner([sink], Spark, out=out, poll_s=0.01,  # type: ignore[list-item, arg-type]
                            restarts={"sink": RestartPolicy(10, 0.0, wait_s=0.05)},
                            preflight=Preflight([sink]).check)
    assert runner.run() == 1
    assert sink.starts == 0
    failed = [line for line in out.getvalue().splitlines() if line.startswith("sink: FAILED")]
    assert failed == ["sink: FAILED: waiting for topic t at 127.0.0.1:9092: no flow of this "
                      "file writes it: create it, or start what does; gave up waiting "
                      "after 0.05s"], out.getvalue()


def test_a_source_connector_s_secret_kafka_properties_reach_the_check() -> None:
    """Its properties are a ``KafkaProperties``, whose items hide secrets as ``***``: the
    check must use what the clients get."""
    from gridstream.kafka import KafkaProperties
    from gridstream.ops.preflight import kafka_of

    flow = Flow("src", [], ["kafka:t"])
    flow.kafka_properties = KafkaProperties(  # type: ignore[assignment]
        {"sasl.password": "s3cret", "security.protocol": "SASL_SSL"})
    assert kafka_of(flow) == ("127.0.0.1:9092", {"sasl.password": "s3cret",
                                                 "security.protocol": "SASL_SSL"})


def test_a_routed_or_pattern_topic_names_its_writer(admin: type[FakeAdmin]) -> None:
    source = Flow("src", ["space:orders.*"], ["kafka:space.orders.*", "kafka:space.all"])
    sink = Flow("snk", ["kafka:space.orders_2024", "kafka:space.all"], [])
    with pytest.raises(NotYet, match="space.all, space.orders_2024 at .*: src \\(this file\\)"):
        Preflight([source, sink]).check(sink)
