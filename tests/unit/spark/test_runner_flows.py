"""The runner's supervision of several flows: one failed flow does not stop the others,
a transient failure restarts with a doubling, bounded delay, a permanent one stays
failed, each failure is one line on the terminal with the whole trace in the log file,
an idle flow prints a heartbeat, and the monitor's counts are the reports' counts.
Fakes stand in for Spark: only the supervision is under test."""

from __future__ import annotations

import io
import re
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from gridstream.connect.base import ConnectorReport
from gridstream.errors import GridError, KafkaClientError, RecordError, SparkError
from gridstream.ops.failures import Failure, LogFile, describe, is_transient
from gridstream.ops.status import Monitor
from gridstream.spark.runnable import Runnable
from gridstream.spark.runner import PipelineRunner, RestartPolicy

JAVA_TIMEOUT = ("[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: "
                "org.apache.kafka.common.errors.TimeoutException: Timed out waiting\n"
                "\tat org.apache.kafka.clients.Foo.bar(Foo.java:1)\n" * 3)


class Query:
    def __init__(self, *, active: bool = True, error: str | None = None) -> None:
        self.isActive = active
        self._error = error
        self.lastProgress: dict[str, Any] | None = None

    def exception(self) -> str | None:
        return self._error

    def stop(self) -> None:
        self.isActive = False


class Flow(Runnable):
    """A flow whose ``start`` hands out the queries of ``plan`` in turn (the last one
    again when the plan runs out); each start and stop is recorded."""

    kind = "fake"
    name = ""  # an attribute of each fake (not the contract's property)
    restartable = True  # the same: a test sets it

    def __init__(self, name: str, plan: list[Query], failure: BaseException | None = None,
                 batches: int = 0) -> None:
        self.name = name
        self.plan = plan
        self.starts = 0
        self.failure: BaseException | None = None
        self._failure = failure
        self.reports: deque[Any] = deque(
            ConnectorReport(name, i, 10, 7, 1, 1, 1, 0.5) for i in range(batches))

    def describe(self) -> str:
        return f"flow {self.name}"

    def start(self, spark: Any) -> Query:
        self.starts += 1
        query = self.plan[min(self.starts, len(self.plan)) - 1]
        self.failure = self._failure if query.exception() is not None else None
        return query

    def close(self) -> None:
        return None


class Spark:
    def stop(self) -> None:
        return None


def _raised(error: BaseException) -> BaseException:
    """``error`` as a flow holds it: raised and caught (with its traceback)."""
    try:
        raise error
    except BaseException as caught:  # noqa: BLE001 - handed back
        return caught


def _runner(flows: list[Flow], tmp_path: Path, **kwargs: Any) -> tuple[PipelineRunner, io.StringIO]:
    out = io.StringIO()
    runner = PipelineRunner(flows, Spark, out=out, poll_s=0.01,  # type: ignore[arg-type]
                            log=LogFile(tmp_path / "run.log"), **kwargs)
    return runner, out


def test_a_permanent_failure_fails_its_flow_alone_in_one_line(tmp_path: Path) -> None:
    bad = Flow("bad", [Query(active=False, error="java.lang.RuntimeException: boom\n\tat x")],
               failure=_raised(RecordError("value is not JSON", where="t[0]@250",
                                           stage="convert")))
    good = Flow("good", [Query(active=False)], batches=2)
    runner, out = _runner([bad, good], tmp_path,
                          restarts={"bad": RestartPolicy(5, 0.0)})
    assert runner.run() == 1
    lines = out.getvalue().splitlines()
    failed = [line for line in lines if line.startswith("bad: FAILED")]
    assert failed == [f"bad: FAILED: RecordError: t[0]@250: convert: value is not JSON; to get "
                      "past it: errors = \"dead_letter\" with dead_letter_topic keeps bad "
                      "records in a topic, errors = \"log\" skips and logs them; see "
                      "docs/operating.md#a-record-that-stops-a-flow "
                      f"(traces: {tmp_path / 'run.log'})"]
    assert bad.starts == 1  # a record error is not retried
    assert not any("Traceback" in line or "\tat " in line for line in lines)
    log = (tmp_path / "run.log").read_text()
    assert "Traceback" in log and "RecordError" in log and "RuntimeException: boom" in log
    assert sum("good  batch" in line for line in lines) == 2  # the other flow went on
    status = {f["name"]: f for f in runner.monitor.status()["flows"]}
    assert status["bad"]["state"] == "failed" and status["good"]["state"] == "finished"
    assert runner.monitor.status()["failed"] == ["bad"]


def test_a_transient_failure_restarts_with_a_doubling_bounded_delay(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failing = [Query(active=False, error=JAVA_TIMEOUT) for _ in range(4)]
    flow = Flow("hz", [*failing, Query(active=False)])
    runner, out = _runner([flow], tmp_path, restarts={"hz": RestartPolicy(5, 0.0, 0.0)})
    policy = RestartPolicy(10, 2.0, 10.0)
    assert [policy.delay(n) for n in range(1, 6)] == [2.0, 4.0, 8.0, 10.0, 10.0]
    assert runner.run() == 0  # the fifth start finished
    assert flow.starts == 5
    lines = out.getvalue().splitlines()
    restarts = [line for line in lines if "restart" in line]
    assert len(restarts) == 4 and restarts[0].startswith(
        "hz: failed: org.apache.kafka.common.errors.TimeoutException: Timed out waiting; "
        "restart 1/5 from the checkpoint in 0s")
    assert runner.monitor.status()["flows"][0]["restarts"] == 4


def test_restarts_stop_after_max_restarts_in_a_row(tmp_path: Path) -> None:
    flow = Flow("hz", [Query(active=False, error=JAVA_TIMEOUT)])
    runner, out = _runner([flow], tmp_path, restarts={"hz": RestartPolicy(2, 0.0)})
    assert runner.run() == 1
    assert flow.starts == 3
    assert "hz: FAILED (gave up after 2 restarts): org.apache.kafka" in out.getvalue()


def test_a_flow_whose_start_raises_fails_alone(tmp_path: Path) -> None:
    class Unreachable(Flow):
        def start(self, spark: Any) -> Query:
            self.starts += 1
            raise GridError("cannot reach Hazelcast at 127.0.0.1:5799")

    down = Unreachable("down", [])
    good = Flow("good", [Query(active=False)], batches=1)
    runner, out = _runner([down, good], tmp_path, restarts={"down": RestartPolicy(1, 0.0)})
    assert runner.run() == 1
    assert down.starts == 2  # transient: one restart, then failed
    assert "down: FAILED (gave up after 1 restarts): GridError: cannot reach" in out.getvalue()
    assert "good  batch 0" in out.getvalue()


def test_an_idle_flow_prints_a_heartbeat(tmp_path: Path) -> None:
    runner, out = _runner([Flow("quiet", [Query()])], tmp_path, heartbeat_s=0.02)
    flow = runner._flows["quiet"]
    flow.query, flow.state, flow.last_said = Query(), "running", 0.0  # type: ignore[assignment]
    runner._report()
    assert re.search(r"^quiet  idle: no batch for \d+s; 0 batches, 0 records read so far, "
                     r"last batch none yet$", out.getvalue(), re.M), out.getvalue()
    assert runner.monitor.status()["flows"][0]["state"] == "idle"
    runner.heartbeat_s = 3600.0
    runner._report()  # not again before heartbeat_s
    assert out.getvalue().count("idle:") == 1


def test_the_monitor_counts_what_the_reports_say(tmp_path: Path) -> None:
    flow = Flow("c", [Query(active=False)], batches=3)
    monitor = Monitor()
    runner, _ = _runner([flow], tmp_path, monitor=monitor)
    assert runner.run() == 0
    status = monitor.status()["flows"][0]
    assert (status["batches"], status["read"], status["written"], status["filtered"],
            status["skipped"], status["dead_lettered"]) == (3, 30, 21, 3, 3, 3)
    text = monitor.metrics.text().decode()
    assert 'gridstream_flow_records_read_total{flow="c"} 30.0' in text
    assert 'gridstream_flow_records_written_total{flow="c"} 21.0' in text
    assert 'gridstream_flow_batch_duration_seconds_count{flow="c"} 3.0' in text
    assert 'gridstream_flow_state{flow="c",state="finished"} 1.0' in text


TASK = ("[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided "
        "function in foreach batch sink. Reason: An exception was raised by the Python Proxy. "
        "Return Message: Traceback (most recent call last):\n  File \"x.py\", line 1\n"
        "{}\n\tat org.apache.spark.Foo(Foo.scala:1)")


@pytest.mark.parametrize(("error", "java", "transient"), [
    (None, JAVA_TIMEOUT, True),
    (None, "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: no", True),
    (None, "java.lang.IllegalStateException: checkpoint of another query", False),
    (GridError("hazelcast: cannot reach cluster 'gridstream' at 127.0.0.1:5701"), "", True),
    (GridError("snapshot file s-1 is gone: start with a new checkpoint"), "", False),
    (KafkaClientError("authorization failed", code="TOPIC_AUTHORIZATION_FAILED"), "", False),
    (KafkaClientError("broker away", code="_TRANSPORT", retriable=True), "", True),
    (RecordError("bad", where="t[0]@1", stage="convert"), JAVA_TIMEOUT, False),
    (ValueError("a bug"), "", False),
    # raised in a Spark task: the driver sees Spark's wrapper, naming the error in text
    (RuntimeError("wrapped"), TASK.format("gridstream.errors.GridError: hazelcast: cannot "
                                          "reach cluster 'gridstream': Unable to connect"), True),
    (RuntimeError("wrapped"), TASK.format("gridstream.errors.GridError: map 'm': a value of "
                                          "type int where str is declared"), False),
    (None, TASK.format("gridstream.errors.StoreError: Cassandra write failed"), True),
    (None, TASK.format("gridstream.errors.PositionLostError: stream 67 now starts at 7009 "
                       "(timed out)"), False),
    (None, TASK.format("hazelcast.errors.TargetDisconnectedError: member left"), True),
    # a pipeline's own error wraps what failed: what it wraps decides
    (SparkError("pipeline 'p' failed: [STREAM_FAILED] Query terminated"), JAVA_TIMEOUT, True),
    (SparkError("pipeline 'p' failed: bad"), "java.lang.IllegalStateException: no", False),
    # words in a trace's frames or source lines are not the failure's
    (None, TASK.format('  File "grid/hazelcast/_writes.py", line 106, in write\n'
                       "    applied += _transaction(tx, timeout_s, overwrite)\n"
                       "gridstream.errors.GridError: map 'm': a value of type int"), False),
    (None, TASK.format("gridstream.errors.KafkaClientError: produce: _ALL_BROKERS_DOWN: "
                       "all broker connections are down"), True),
    (None, TASK.format("gridstream.errors.GridError: the Hazelcast client is not connected "
                       "to a cluster"), True),
])
def test_transient_or_permanent(error: BaseException | None, java: str, transient: bool) -> None:
    assert is_transient(error, java) is transient


def test_one_line_of_a_task_s_failure_is_its_gridstream_error() -> None:
    text = TASK.format("gridstream.errors.StoreError: Cassandra write failed: NoHostAvailable")
    assert describe(RuntimeError(text), text) == (
        "StoreError: Cassandra write failed: NoHostAvailable")


def test_one_line_of_a_chained_failure_is_the_outermost_error_with_its_advice() -> None:
    """A sink under STOP_TASK: the task's record error, then the connector's own raised
    from it, which says how to get past it."""
    text = TASK.format(
        "gridstream.errors.RecordError: t[0]@5: decode: value is not JSON\n\n"
        "The above exception was the direct cause of the following exception:\n\n"
        "gridstream.errors.RecordError: t[0]@5: decode: value is not JSON (sink connector "
        "'s', errorHandlingPolicy STOP_TASK; to get past it: errorHandlingPolicy LOG_ONLY)")
    failure = Failure("s", RuntimeError("wrapped"), text)
    assert failure.line.startswith("RecordError: t[0]@5: decode: value is not JSON (sink")
    assert "to get past it" in failure.line and failure.hint() == ""
    assert not failure.transient


def test_one_line_of_a_py4j_failure_is_its_root_cause() -> None:
    java = ("[STREAM_FAILED] Query [id = 1] terminated with exception: Job aborted due to "
            "stage failure: Task 0 in stage 3.0 failed 1 times, most recent failure: Lost "
            "task 0.0 in stage 3.0 (TID 3) (localhost executor driver): "
            "org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms expired\n"
            "\tat org.apache.kafka.Foo(Foo.java:1)\n"
            "Caused by: org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms "
            "expired before the position for partition t-0 could be determined\n\tat x")
    assert describe(RuntimeError("An error occurred while calling o87.collectToPython"),
                    java) == ("org.apache.kafka.common.errors.TimeoutException: Timeout of "
                              "60000ms expired before the position for partition t-0 could "
                              "be determined")


def test_a_flow_without_a_checkpoint_of_its_own_is_not_restarted(tmp_path: Path) -> None:
    flow = Flow("tmp", [Query(active=False, error=JAVA_TIMEOUT), Query(active=False)])
    flow.restartable = False  # type: ignore[attr-defined]
    runner, out = _runner([flow], tmp_path, restarts={"tmp": RestartPolicy(5, 0.0)})
    assert runner.run() == 1
    assert flow.starts == 1
    assert "not restarted: it has no checkpoint to resume from" in out.getvalue()


def test_attempts_count_again_once_a_restarted_query_got_through_a_trigger(
        tmp_path: Path) -> None:
    """Not on a timer: a failure that takes a minute to surface (a client's timeout)
    would otherwise restart for ever at attempt 1."""
    runner, _ = _runner([Flow("hz", [Query()])], tmp_path,
                        restarts={"hz": RestartPolicy(3, 1.0, 30.0)})
    flow = runner._flows["hz"]
    query = Query()
    flow.query = query  # type: ignore[assignment]
    flow.state, flow.attempts, flow.started_at = "running", 2, 0.0
    runner._report()
    assert flow.attempts == 2  # running for ages, but no trigger done
    query.lastProgress = {"batchId": 7, "sources": []}
    runner._report()
    assert flow.attempts == 0


def test_one_line_of_a_java_failure_is_its_first_meaningful_line() -> None:
    assert describe(None, JAVA_TIMEOUT) == (
        "org.apache.kafka.common.errors.TimeoutException: Timed out waiting")
    assert describe(None, "") == "unknown error"
    assert describe(GridError("a\nb"), "ignored") == "GridError: a"


def test_a_stop_during_a_pass_judges_no_query(tmp_path: Path) -> None:
    """A SIGTERM to the process group stops Spark's JVM too: a query found ended by it
    is no failure of its flow (no FAILED line, no restart, exit 0)."""

    class StoppedUnder(Query):
        def exception(self) -> str:
            runner.stop()  # the signal arrives while the runner looks at the query
            return "org.apache.spark.SparkException: SparkContext was shut down"

    flow = Flow("hz", [StoppedUnder(active=False)])
    runner, out = _runner([flow], tmp_path, restarts={"hz": RestartPolicy(5, 0.0)})
    assert runner.run() == 0
    assert flow.starts == 1
    assert "FAILED" not in out.getvalue() and "restart" not in out.getvalue()
    assert "stopping (Ctrl-C)" in out.getvalue()


JAVA_NEW_SCHEMA = ("[STREAM_FAILED] Query terminated with exception: [USER_RAISED_EXCEPTION] "
                   "gridstream.errors.NewSchemaError: value: schema id {id} is not in the "
                   "plan the query started with (ids 1 of t-value): re-planning reads it "
                   "SQLSTATE: P0001\n\tat org.apache.spark.Foo(Foo.java:1)\n")


class Replanning(Flow):
    """A flow that learns the schema ids a failure names (``PipelineJob.replan``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.learned: set[int] = set()

    def replan(self, failure: str) -> bool:
        from gridstream.pipeline.serde._avro_jvm import learned_ids

        new = learned_ids(failure, "value") - self.learned
        self.learned |= new
        return bool(new)


def test_a_new_schema_id_re_plans_at_once_without_a_restart_policy(tmp_path: Path) -> None:
    """A ``NewSchemaError`` restarts the flow at once, counted as no restart and with
    no policy; the same id named again (the plan could not take it) fails the flow."""
    flow = Replanning("avro", [Query(active=False, error=JAVA_NEW_SCHEMA.format(id=7)),
                               Query(active=False, error=JAVA_NEW_SCHEMA.format(id=9)),
                               Query(active=False)])
    runner, out = _runner([flow], tmp_path)
    assert Failure("avro", None, JAVA_NEW_SCHEMA.format(id=7)).replan
    assert not Failure("avro", None, JAVA_TIMEOUT).replan
    assert runner.run() == 0
    assert flow.starts == 3 and flow.learned == {7, 9}
    lines = [line for line in out.getvalue().splitlines() if "re-planning" in line]
    assert len(lines) == 2 and lines[0].startswith(
        "avro: NewSchemaError: value: schema id 7 is not in the plan")
    assert lines[0].endswith("; re-planning from the checkpoint")
    assert runner.monitor.status()["flows"][0]["restarts"] == 0

    again = Replanning("avro", [Query(active=False, error=JAVA_NEW_SCHEMA.format(id=7))])
    again.learned = {7}
    runner, out = _runner([again], tmp_path)
    assert runner.run() == 1 and again.starts == 1
    assert "avro: FAILED: NewSchemaError: value: schema id 7" in out.getvalue()


def test_re_plans_stop_after_max_replans_in_a_row(tmp_path: Path) -> None:
    """Ever new ids without a batch between (bytes that are not the topic's Avro) fail
    the flow after ``MAX_REPLANS`` re-plans instead of restarting it without end."""
    from gridstream.spark.runner import MAX_REPLANS

    plan = [Query(active=False, error=JAVA_NEW_SCHEMA.format(id=100 + i))
            for i in range(MAX_REPLANS + 5)]
    flow = Replanning("avro", plan)
    runner, out = _runner([flow], tmp_path)
    assert runner.run() == 1
    assert flow.starts == MAX_REPLANS + 1
    assert f"avro: re-planned {MAX_REPLANS} times without a batch between" in out.getvalue()
    assert "avro: FAILED: NewSchemaError: value: schema id 120" in out.getvalue()


def test_a_batch_between_re_plans_starts_their_count_again(tmp_path: Path) -> None:
    from gridstream.spark.runner import MAX_REPLANS

    class Batching(Replanning):
        """Reports a batch on its start number ``at``."""

        at = MAX_REPLANS + 1

        def start(self, spark: Any) -> Query:
            query = super().start(spark)
            if self.starts == self.at:
                self.reports.append(ConnectorReport(self.name, 0, 10, 7, 1, 1, 1, 0.5))
            return query

    plan = [Query(active=False, error=JAVA_NEW_SCHEMA.format(id=100 + i))
            for i in range(MAX_REPLANS + 2)]
    flow = Batching("avro", [*plan, Query(active=False)])
    runner, out = _runner([flow], tmp_path)
    assert runner.run() == 0, out.getvalue()
    assert flow.starts == MAX_REPLANS + 3
    assert "giving up" not in out.getvalue()
