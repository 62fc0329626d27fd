"""The write-behind mirror: delivers a space's committed bulks to a sync endpoint.

It resumes from the endpoint's own position when the endpoint keeps one (Kafka: stored
in the same transaction as the data) and otherwise from the log's acknowledged
position; it acknowledges the log only after the endpoint returned, so a crash at any
moment redelivers, and never loses, a batch. A bulk is never split across batches.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from gridstream._stopping import StopFlag
from gridstream.errors import (
    ConfigError,
    EndpointError,
    GridstreamError,
    KafkaClientError,
    MirrorError,
)
from gridstream.mirror.config import MirrorSettings
from gridstream.mirror.endpoint import SyncEndpoint
from gridstream.operations import Bulk
from gridstream.space.contract import LogReader

__all__ = ["HasLogReader", "Mirror", "MirrorMetrics", "RetryPolicy"]

log = logging.getLogger(__name__)


class HasLogReader(Protocol):
    """Anything that can hand out a reader of its operation log (the embedded Space)."""

    def log_reader(self) -> LogReader: ...


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of a failed batch: exponential backoff, bounded, then the mirror fails."""

    max_attempts: int = 10
    initial_backoff_ms: int = 100
    max_backoff_ms: int = 10_000
    multiplier: float = 2.0

    def backoff_s(self, attempt: int) -> float:
        """Seconds to wait after the ``attempt``-th failure (1-based)."""
        delay = self.initial_backoff_ms * self.multiplier ** max(attempt - 1, 0)
        return min(delay, self.max_backoff_ms) / 1000.0


@dataclass(frozen=True, slots=True)
class MirrorMetrics:
    """A snapshot of a mirror's progress (safe to read from any thread)."""

    name: str
    state: str
    position: int
    end_seq: int
    lag_operations: int
    operations_total: int
    bulks_total: int
    batches_total: int
    retries_total: int
    last_batch_operations: int
    max_batch_operations_seen: int
    throughput_ops_per_s: float
    last_error: str | None


def _retriable(exc: GridstreamError) -> bool:
    if isinstance(exc, KafkaClientError):
        return exc.retriable
    return isinstance(exc, EndpointError) and bool(getattr(exc, "retriable", True))


class Mirror:
    """Reads bulks from ``source`` and writes them to ``endpoint`` in batches.

    ``source`` is a ``LogReader`` or an object with a ``log_reader()`` method (the
    embedded Space). A batch holds at most ``max_batch_operations`` (a larger single bulk
    goes alone) and waits at most ``max_batch_ms`` for more operations once it has some;
    an idle mirror polls the log every ``poll_interval_ms``. Only one batch is in flight,
    so a slow endpoint holds the mirror back (the durable log absorbs the difference,
    visible as ``lag_operations``).
    """

    def __init__(self, source: LogReader | HasLogReader, endpoint: SyncEndpoint, *,
                 name: str, settings: MirrorSettings | None = None,
                 retry: RetryPolicy | None = None, **options: Any) -> None:
        if settings is not None and options:
            raise ConfigError(f"mirror {name}: settings or their options as keywords "
                              f"({', '.join(sorted(options))}), not both")
        try:
            settings = settings or MirrorSettings.model_validate(options)
        except ValidationError as exc:
            raise ConfigError(f"invalid settings of mirror {name}: {exc}") from None
        self.settings = settings
        self._owns_reader = not isinstance(source, LogReader)
        self.reader: LogReader = source if isinstance(source, LogReader) else source.log_reader()
        self.endpoint = endpoint
        self.name = name
        self.max_batch_operations = settings.max_batch_operations
        self.max_batch_s = settings.max_batch_ms / 1000.0
        self.poll_s = settings.poll_interval_ms / 1000.0
        self.ack_interval_s = settings.ack_interval_ms / 1000.0
        self._acked = 0
        self._acked_at = 0.0
        self.retry = retry or RetryPolicy()
        self._seq = 0
        self._pending: list[Bulk] = []
        self._batch_operations = 0
        self._opened = False
        self._stop = StopFlag()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._state = "new"
        self._counts = {"ops": 0, "bulks": 0, "batches": 0, "retries": 0, "last": 0, "max": 0}
        self._end_seq = 0
        self._last_error: str | None = None
        self._window: deque[tuple[float, int]] = deque()

    # lifecycle -------------------------------------------------------------------------

    def open(self) -> int:
        """Connect the endpoint and find the position to resume from."""
        if self._opened:
            return self._seq
        acked = self.reader.register(self.name)
        self.endpoint.bind_log(self.reader.log_id())
        self.endpoint.open(self.name)
        try:
            stored = self.endpoint.position()
            if stored is not None and stored > self.reader.end_seq():
                raise MirrorError(
                    f"mirror {self.name}: the endpoint's position {stored} is beyond the end "
                    f"of the log ({self.reader.end_seq()}); is it another space's mirror, or "
                    "was the log's tail cut after this mirror delivered it? Refusing to "
                    "skip operations")
            if stored is not None and stored > acked:
                self.reader.acknowledge(self.name, stored)
        except BaseException:
            self.endpoint.close()
            raise
        self._seq = acked if stored is None else stored
        self._acked = self._seq
        self._opened = True
        self._state = "running"
        log.info("mirror %s resumes at seq %d (log acknowledged %d, endpoint %s)",
                 self.name, self._seq, acked, stored)
        return self._seq

    def run(self) -> None:
        """Deliver until ``stop()``; raises on a failure that retries cannot fix."""
        try:
            self.open()
            while not self._stop.is_set():
                self.run_once()
        except BaseException as exc:
            self._state = "failed"
            self._last_error = _describe(exc)
            raise
        finally:
            self._close_endpoint()

    def run_once(self) -> int:
        """Gather and deliver one batch; the number of operations delivered (0 if idle)."""
        self.open()
        batch = self._gather()
        if not batch:
            return 0
        return self._deliver(batch, self._batch_operations)

    def start(self) -> None:
        """Run in a background thread."""
        if self._thread is not None:
            raise MirrorError(f"mirror {self.name} is already started")
        self._thread = threading.Thread(target=self._run_thread, name=f"mirror-{self.name}",
                                        daemon=True)
        self._thread.start()

    def _run_thread(self) -> None:
        try:
            self.run()
        except BaseException as exc:
            self._failure = exc
            log.error("mirror %s failed: %s", self.name, _describe(exc))

    def request_stop(self) -> None:
        """Ask ``run()`` to return after the batch in flight (safe from a signal handler:
        the stop flag takes no lock, see ``gridstream._stopping``)."""
        self._stop.set()

    def stop(self, timeout_s: float | None = 60.0) -> None:
        """Finish the batch in flight, close the endpoint; re-raises a background failure."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                raise MirrorError(f"mirror {self.name} did not stop within {timeout_s}s")
        elif self._opened:
            self._close_endpoint()
        if self._state != "failed":
            self._state = "stopped"
        if self._failure is not None:
            raise MirrorError(f"mirror {self.name} failed: {_describe(self._failure)}") \
                from self._failure

    @property
    def failure(self) -> BaseException | None:
        """The error that stopped a background mirror, if any."""
        return self._failure

    @property
    def position(self) -> int:
        """The next sequence number to deliver."""
        return self._seq

    def wait_for(self, seq: int, timeout_s: float) -> bool:
        """Wait until everything before ``seq`` is delivered (or the mirror failed)."""
        deadline = time.monotonic() + timeout_s
        while self._seq < seq and self._failure is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return self._seq >= seq

    def _acknowledge(self, *, force: bool) -> None:
        """Tell the log what is delivered: at most every ``ack_interval_ms`` (the ack only
        frees log segments and shortens redelivery after a crash), and always on close."""
        now = time.monotonic()
        if self._seq > self._acked and (force or now - self._acked_at >= self.ack_interval_s):
            self.reader.acknowledge(self.name, self._seq)
            self._acked, self._acked_at = self._seq, now

    def _close_endpoint(self) -> None:
        """Close the endpoint, and the log reader if the mirror opened it itself."""
        if self._opened:
            self._opened = False
            try:
                try:
                    self._acknowledge(force=True)
                finally:
                    self.endpoint.close()
            finally:
                if self._owns_reader:
                    self.reader.close()

    # batching --------------------------------------------------------------------------

    def _gather(self) -> list[Bulk]:
        batch, self._pending = self._pending, []
        count = sum(len(b.operations) for b in batch)
        limit = self.max_batch_operations
        expected = batch[-1].next_seq if batch else self._seq
        deadline = time.monotonic() + self.max_batch_s
        if batch:
            deadline = self._deadline(batch[0], deadline)
        while count < limit and not self._stop.is_set():
            bulks = self.reader.read(expected, limit - count)
            for index, bulk in enumerate(bulks):
                size = len(bulk.operations)
                if bulk.first_seq != expected:
                    resumed = self.reader.resume_seq(expected)
                    if bulk.first_seq != resumed:
                        raise MirrorError(
                            f"log gap: expected seq {expected}, got {bulk.first_seq}")
                    log.warning("mirror %s: seqs %d to %d are unused (the log's tail was "
                                "repaired); going on at %d", self.name, expected,
                                resumed - 1, resumed)
                    expected = resumed
                if count and count + size > limit:
                    batch.extend(bulks[:index])
                    self._pending = list(bulks[index:])
                    self._batch_operations = count
                    return batch
                count += size
                expected += size
            if bulks and not batch:
                deadline = self._deadline(bulks[0], deadline)
            batch.extend(bulks)
            if not batch:
                self._stop.wait(self.poll_s)
                return batch
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            if not bulks:
                self._stop.wait(min(self.poll_s, remaining))
        self._batch_operations = count
        return batch

    def _deadline(self, first: Bulk, deadline: float) -> float:
        """The window of a batch closes ``max_batch_ms`` after its first bulk was
        committed, not after the mirror saw it: a bulk that already waited (behind the
        previous batch, or through an idle poll) is not held back again."""
        if first.timestamp_ms <= 0:
            return deadline
        waited = time.time() - first.timestamp_ms / 1000.0
        return min(deadline, time.monotonic() + max(self.max_batch_s - max(waited, 0.0), 0.0))

    def _deliver(self, batch: list[Bulk], operations: int) -> int:
        attempt = 0
        total = operations
        while True:
            try:
                if attempt:
                    batch = self._resync(batch)
                    operations = sum(len(b.operations) for b in batch)
                if batch:
                    self.endpoint.write_batch(batch, self.reader.types())
                    self._advance(batch, operations)
                return total
            except GridstreamError as exc:
                attempt += 1
                self._last_error = _describe(exc)
                if not _retriable(exc):
                    raise
                if attempt >= self.retry.max_attempts:
                    raise MirrorError(f"mirror {self.name}: batch at seq {batch[0].first_seq} "
                                      f"failed {attempt} times; last: {exc}") from exc
                self._counts["retries"] += 1
                self._state = "retrying"
                log.warning("mirror %s: batch failed (attempt %d), retrying: %s",
                            self.name, attempt, exc)
                if self._stop.wait(self.retry.backoff_s(attempt)):
                    return 0  # stopping: the batch stays unacknowledged and is redelivered

    def _resync(self, batch: list[Bulk]) -> list[Bulk]:
        """After a failure: skip the bulks the endpoint has in fact stored."""
        stored = self.endpoint.position()
        if stored is None or stored == batch[0].first_seq:
            return batch
        if stored < batch[0].first_seq:
            raise MirrorError(f"endpoint position {stored} is behind the mirror's "
                              f"{batch[0].first_seq}")
        if stored > batch[-1].next_seq:
            raise MirrorError(f"endpoint position {stored} is ahead of this batch; is another "
                              f"mirror named {self.name!r} running?")
        kept = [b for b in batch if b.first_seq >= stored]
        delivered = [b for b in batch if b.next_seq <= stored]
        if len(kept) + len(delivered) != len(batch):
            raise MirrorError(f"endpoint position {stored} falls inside a bulk")
        if delivered:
            self._advance(delivered, sum(len(b.operations) for b in delivered))
        return kept

    def _advance(self, delivered: Sequence[Bulk], ops: int) -> None:
        self._seq = delivered[-1].next_seq
        self._acknowledge(force=False)
        counts = self._counts
        counts["ops"] += ops
        counts["bulks"] += len(delivered)
        counts["batches"] += 1
        counts["last"] = ops
        counts["max"] = max(counts["max"], ops)
        self._state = "running"
        now = time.monotonic()
        self._window.append((now, counts["ops"]))
        while len(self._window) > 2 and now - self._window[0][0] > 10.0:
            self._window.popleft()

    # metrics ---------------------------------------------------------------------------

    def metrics(self) -> MirrorMetrics:
        """Progress, lag, throughput, batch sizes and the last error."""
        with contextlib.suppress(GridstreamError):
            self._end_seq = self.reader.end_seq()
        counts = self._counts
        rate = 0.0
        if len(self._window) >= 2:
            (t0, n0), now = self._window[0], time.monotonic()
            rate = (self._window[-1][1] - n0) / (now - t0) if now > t0 else 0.0
        return MirrorMetrics(
            name=self.name, state=self._state, position=self._seq, end_seq=self._end_seq,
            lag_operations=max(self._end_seq - self._seq, 0),
            operations_total=counts["ops"], bulks_total=counts["bulks"],
            batches_total=counts["batches"], retries_total=counts["retries"],
            last_batch_operations=counts["last"], max_batch_operations_seen=counts["max"],
            throughput_ops_per_s=rate, last_error=self._last_error,
        )


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
