"""Mirror batching, resume, acknowledge-after-success and retries, with fakes."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from gridstream._stopping import stop_on_signals
from gridstream.errors import EndpointError, KafkaClientError, MirrorError, OperationLogError
from gridstream.mirror import Mirror, RetryPolicy, UndeliverableError
from gridstream.mirror.endpoint import SyncEndpoint
from gridstream.mirror.policy import Reason
from gridstream.mirror.testing import InMemoryLog
from gridstream.operations import Bulk, Operation, OpType, TypeDescriptor
from tests.unit.test_stopping import lock_calls

T = TypeDescriptor(name="T", id_property="id", topic="t")
FAST = RetryPolicy(max_attempts=4, initial_backoff_ms=1, max_backoff_ms=2)


class FakeEndpoint(SyncEndpoint):
    """Records batches; can fail on demand; optionally stores its position."""

    def __init__(self, *, keeps_position: bool = False) -> None:
        self.batches: list[list[Bulk]] = []
        self.failures: list[Exception] = []
        self.keeps_position = keeps_position
        self.stored: int | None = None
        self.log: InMemoryLog | None = None
        self.acked_during_write: list[int] = []
        self.opened = self.closed = 0
        self.commit_then_fail = False

    def open(self, mirror_name: str) -> None:
        self.opened += 1

    def position(self) -> int | None:
        return self.stored if self.keeps_position else None

    def write_batch(self, bulks: Sequence[Bulk], types: Mapping[str, TypeDescriptor]) -> None:
        assert "T" in types
        if self.log is not None:
            self.acked_during_write.append(self.log.acks.get("m", -1))
        if self.commit_then_fail:
            self.commit_then_fail = False
            self._store(bulks)
            raise EndpointError("commit outcome unknown")
        if self.failures:
            raise self.failures.pop(0)
        self._store(bulks)

    def _store(self, bulks: Sequence[Bulk]) -> None:
        self.batches.append(list(bulks))
        self.stored = bulks[-1].next_seq

    def close(self) -> None:
        self.closed += 1

    def delivered(self) -> list[int]:
        return [op.version for batch in self.batches for b in batch for op in b.operations]


def _log(bulk_sizes: Sequence[int]) -> InMemoryLog:
    log = InMemoryLog([T])
    for n, size in enumerate(bulk_sizes):
        log.append([Operation(OpType.WRITE, "T", f"{n}-{i}", 0, {"i": i}, 0, 0)
                    for i in range(size)])
    return log


def _drain(mirror: Mirror) -> None:
    while mirror.run_once():
        pass


def test_batches_respect_the_limit_and_never_split_a_bulk() -> None:
    log = _log([3, 3, 3, 10, 1, 1])
    endpoint = FakeEndpoint()
    mirror = Mirror(log, endpoint, name="m", ack_interval_ms=0, max_batch_operations=5,
                    max_batch_ms=0)
    _drain(mirror)
    sizes = [[len(b.operations) for b in batch] for batch in endpoint.batches]
    assert sizes == [[3], [3], [3], [10], [1, 1]]
    assert endpoint.delivered() == list(range(21))
    assert log.acks["m"] == 21 and mirror.position == 21


class GreedyLog(InMemoryLog):
    """A reader that hands out more than asked for."""

    def read(self, from_seq: int, max_operations: int) -> Sequence[Bulk]:
        return super().read(from_seq, 1_000)


def test_bulks_beyond_the_limit_wait_for_the_next_batch() -> None:
    log = GreedyLog([T])
    for n, size in enumerate([2, 2, 3, 1, 4]):
        log.append([Operation(OpType.WRITE, "T", f"{n}-{i}", 0, {}, 0, 0) for i in range(size)])
    endpoint = FakeEndpoint()
    mirror = Mirror(log, endpoint, name="m", max_batch_operations=5, max_batch_ms=0)
    _drain(mirror)
    sizes = [[len(b.operations) for b in batch] for batch in endpoint.batches]
    assert sizes[0] == [2, 2] and sum(map(len, sizes)) == 5
    assert endpoint.delivered() == list(range(12))
    metrics = mirror.metrics()
    assert metrics.operations_total == 12 and metrics.bulks_total == 5
    assert metrics.last_batch_operations == sum(sizes[-1])


def test_acknowledges_only_after_the_endpoint_returned() -> None:
    log = _log([2, 2, 2])
    endpoint = FakeEndpoint()
    endpoint.log = log
    mirror = Mirror(log, endpoint, name="m", ack_interval_ms=0, max_batch_operations=2,
                    max_batch_ms=0)
    _drain(mirror)
    assert endpoint.acked_during_write == [0, 2, 4]


def test_retries_with_backoff_then_succeeds() -> None:
    log = _log([1, 1])
    endpoint = FakeEndpoint()
    endpoint.failures = [EndpointError("boom"), KafkaClientError("x", code="_TRANSPORT",
                                                                  retriable=True)]
    mirror = Mirror(log, endpoint, name="m", ack_interval_ms=0, retry=FAST, max_batch_ms=0)
    _drain(mirror)
    assert endpoint.delivered() == [0, 1]
    metrics = mirror.metrics()
    assert metrics.retries_total == 2 and metrics.lag_operations == 0
    assert metrics.last_error == "KafkaClientError: x"


def test_bounded_retries_then_fails_loudly_without_advancing() -> None:
    log = _log([1])
    endpoint = FakeEndpoint()
    endpoint.failures = [EndpointError(f"boom {i}") for i in range(10)]
    mirror = Mirror(log, endpoint, name="m", ack_interval_ms=0, retry=FAST)
    with pytest.raises(MirrorError, match="failed 4 times"):
        mirror.run_once()
    assert log.acks["m"] == 0 and mirror.position == 0


@pytest.mark.parametrize("error", [
    KafkaClientError("fenced", code="_FENCED", retriable=False),
    UndeliverableError(Reason.NO_TOPIC, Operation(OpType.WRITE, "T", 1, 0, {}, 0, 0), "x"),
])
def test_non_retriable_errors_stop_at_once(error: Exception) -> None:
    log = _log([1])
    endpoint = FakeEndpoint()
    endpoint.failures = [error]
    mirror = Mirror(log, endpoint, name="m", ack_interval_ms=0, retry=FAST)
    with pytest.raises(type(error)):
        mirror.run_once()
    assert endpoint.batches == [] and log.acks["m"] == 0


def test_resumes_from_the_endpoint_position_and_acknowledges_the_log() -> None:
    log = _log([1, 1, 1, 1])
    endpoint = FakeEndpoint(keeps_position=True)
    endpoint.stored = 2
    mirror = Mirror(log, endpoint, name="m")
    assert mirror.open() == 2
    assert log.acks["m"] == 2
    _drain(mirror)
    assert endpoint.delivered() == [2, 3]


def test_resumes_from_the_log_when_the_endpoint_keeps_no_position() -> None:
    log = _log([1, 1, 1])
    log.acknowledge("m", 1)
    endpoint = FakeEndpoint()
    mirror = Mirror(log, endpoint, name="m")
    _drain(mirror)
    assert endpoint.delivered() == [1, 2]


def test_a_batch_stored_before_a_failure_is_not_sent_twice() -> None:
    log = _log([1, 1])
    endpoint = FakeEndpoint(keeps_position=True)
    endpoint.commit_then_fail = True
    mirror = Mirror(log, endpoint, name="m", ack_interval_ms=0, retry=FAST, max_batch_ms=0)
    _drain(mirror)
    assert endpoint.delivered() == [0, 1]
    assert log.acks["m"] == 2


def test_endpoint_ahead_of_the_batch_is_an_error() -> None:
    log = _log([1, 1])
    endpoint = FakeEndpoint(keeps_position=True)

    def jump(bulks: Sequence[Bulk], types: Mapping[str, TypeDescriptor]) -> None:
        endpoint.stored = 99
        raise EndpointError("lost")

    endpoint.write_batch = jump  # type: ignore[method-assign]
    mirror = Mirror(log, endpoint, name="m", ack_interval_ms=0, retry=FAST)
    with pytest.raises(MirrorError, match="another mirror"):
        mirror.run_once()


def test_start_stop_lifecycle_and_metrics() -> None:
    log = _log([])
    endpoint = FakeEndpoint()
    mirror = Mirror(log, endpoint, name="m", ack_interval_ms=0, poll_interval_ms=1, max_batch_ms=1)
    mirror.start()
    for i in range(50):
        log.write("T", i, {"i": i})
    assert mirror.wait_for(50, timeout_s=5)
    mirror.stop()
    assert endpoint.closed == 1
    metrics = mirror.metrics()
    assert metrics.state == "stopped" and metrics.operations_total == 50
    assert metrics.lag_operations == 0 and metrics.batches_total >= 1


def test_background_failure_is_raised_by_stop() -> None:
    log = _log([1])
    endpoint = FakeEndpoint()
    endpoint.failures = [KafkaClientError("fenced", code="_FENCED")]
    mirror = Mirror(log, endpoint, name="m")
    mirror.start()
    assert not mirror.wait_for(1, timeout_s=2)
    with pytest.raises(MirrorError, match="fenced") as raised:
        mirror.stop()
    cause = raised.value.__cause__
    assert isinstance(cause, KafkaClientError) and cause.code == "_FENCED"
    assert mirror.metrics().state == "failed"


def test_log_retention_gap_fails_loudly() -> None:
    log = _log([1, 1, 1])
    log.acknowledge("m", 3)
    log.trim()
    endpoint = FakeEndpoint(keeps_position=True)
    endpoint.stored = 1  # behind what the log retains
    mirror = Mirror(log, endpoint, name="m")
    with pytest.raises(OperationLogError):
        mirror.run_once()


def test_accepts_an_object_with_a_log_reader() -> None:
    log = _log([1])

    class SpaceLike:
        def log_reader(self) -> InMemoryLog:
            return log

    endpoint = FakeEndpoint()
    _drain(Mirror(SpaceLike(), endpoint, name="m"))
    assert endpoint.delivered() == [0]


def test_log_acks_are_throttled_and_flushed_on_close() -> None:
    log = _log([1, 1, 1, 1])
    endpoint = FakeEndpoint()
    mirror = Mirror(log, endpoint, name="m", max_batch_operations=1, max_batch_ms=0,
                    ack_interval_ms=60_000)
    mirror.open()
    first_ack = log.acks["m"]
    _drain(mirror)
    assert mirror.position == 4
    assert log.acks["m"] in (first_ack, 1)  # at most the first batch within the interval
    mirror.stop()
    assert log.acks["m"] == 4  # closing acknowledges everything delivered


def test_a_stop_signal_cannot_deadlock_the_mirror_loop() -> None:
    """SIGTERM arriving while the main thread is inside a lock it then needs (an event's
    condition lock, in a poll or a backoff wait) would block the handler forever: the
    stop request takes no lock, and a signal during a wait in the main thread ends it."""
    mirror = Mirror(InMemoryLog([T]), FakeEndpoint(), name="m")
    assert lock_calls(mirror.request_stop) == []
    assert mirror._stop.wait(0)
    mirror = Mirror(InMemoryLog([T]), FakeEndpoint(), name="m")
    with stop_on_signals(mirror.request_stop, (signal.SIGUSR1,)):
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        started = time.monotonic()
        assert mirror._stop.wait(30.0)
        assert time.monotonic() - started < 5.0


def test_the_batch_window_counts_from_the_commit_not_from_the_read() -> None:
    log = _log([1, 1])
    log._bulks = [dataclasses.replace(b, timestamp_ms=b.timestamp_ms - 60_000)
                  for b in log._bulks]  # committed a minute ago: they waited enough
    mirror = Mirror(log, FakeEndpoint(), name="m", max_batch_ms=10_000)
    started = time.monotonic()
    assert mirror.run_once() == 2
    assert time.monotonic() - started < 5.0
    # the clock starts before the bulk is committed, so a delay in the test itself
    # cannot make the mirror's wait look shorter than it was
    started = time.monotonic()
    mirror = Mirror(_log([1]), FakeEndpoint(), name="m", max_batch_ms=200)
    assert mirror.run_once() == 1  # a fresh bulk still waits for company
    assert time.monotonic() - started >= 0.15


def test_settings_are_declared_once_and_checked() -> None:
    """The mirror's options: a ``MirrorSettings`` or the same options as keywords, each
    checked by the model (a bad or unknown one is a ``ConfigError`` naming it), and the
    command line's defaults are the model's."""
    from gridstream.errors import ConfigError
    from gridstream.mirror.cli import build_parser
    from gridstream.mirror.config import MirrorSettings

    log = _log([1])
    as_keywords = Mirror(log, FakeEndpoint(), name="m", max_batch_operations=7)
    as_model = Mirror(log, FakeEndpoint(), name="m",
                      settings=MirrorSettings(max_batch_operations=7))
    assert as_keywords.settings == as_model.settings
    assert as_keywords.max_batch_operations == 7 and as_keywords.poll_s == 0.005
    for bad, named in (({"max_batch_operations": 0}, "max_batch_operations"),
                       ({"poll_interval_ms": -1}, "poll_interval_ms"),
                       ({"max_batch_size": 5}, "max_batch_size")):
        with pytest.raises(ConfigError, match=f"(?s)invalid settings of mirror m:.*{named}"):
            Mirror(log, FakeEndpoint(), name="m", **bad)
    with pytest.raises(ConfigError, match="not both"):
        Mirror(log, FakeEndpoint(), name="m", settings=MirrorSettings(),
               max_batch_ms=0)
    args = build_parser().parse_args(["--name", "m", "--data-dir", "/d"])
    assert {o: getattr(args, o) for o in MirrorSettings.model_fields} == \
        MirrorSettings().model_dump()


def test_the_cli_refuses_bad_settings_before_it_opens_anything(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad setting on ``gridstream mirror``'s command line is one error and exit 2,
    before the endpoint or the log is opened (no data directory is created)."""
    from gridstream.mirror.cli import main

    data_dir = tmp_path / "never-opened"
    code = main(["--name", "m", "--data-dir", str(data_dir),
                 "--bootstrap", "127.0.0.1:1", "--max-batch-operations", "0"])
    assert code == 2
    err = capsys.readouterr().err
    assert "gridstream mirror: error:" in err and "max_batch_operations" in err
    assert not data_dir.exists()
