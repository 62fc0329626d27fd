"""Running store pipelines and connectors until stopped: progress on the terminal, clean
Ctrl-C.

SIGINT and SIGTERM stop every query (a batch in flight is abandoned before its offsets
are committed, and runs again on the next start) and then the Spark session. A query
that fails stops the run with its error, unless its pipeline allows restarts for store
errors (``max_restarts``): the query is then started again from its checkpoint after
``restart_delay_s``, re-applying the failed batch idempotently. The signal handlers only
raise a ``StopFlag`` (no lock taken inside a handler), which the supervising loop waits on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TextIO

from gridstream._stopping import StopFlag, stop_on_signals
from gridstream.errors import StoreError
from gridstream.spark.kafka_source import kafka_lag

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["PipelineRunner", "RestartPolicy", "Runnable"]


class _Report(Protocol):
    def line(self, lag: int | None = None) -> str: ...


class _Reports(Protocol):
    def __len__(self) -> int: ...

    def popleft(self) -> _Report: ...


class Runnable(Protocol):
    """What the runner runs: a store pipeline (``StorePipeline``) or a connector
    (``gridstream.connect.Connector``). ``reports`` fill with one report per batch,
    ``failure`` holds the error that failed the query, if it is the object's own."""

    @property
    def name(self) -> str: ...

    @property
    def reports(self) -> _Reports: ...

    @property
    def failure(self) -> BaseException | None: ...

    def describe(self) -> str: ...

    def start(self, spark: SparkSession) -> StreamingQuery: ...

    def close(self) -> None: ...


class RestartPolicy:
    """How often a pipeline whose store failed is started again, and after how long."""

    def __init__(self, max_restarts: int = 0, delay_s: float = 10.0) -> None:
        self.max_restarts = max_restarts
        self.delay_s = delay_s


class PipelineRunner:
    """Starts pipelines and connectors on one Spark session and supervises them."""

    def __init__(self, pipelines: Sequence[Runnable],
                 spark_factory: Callable[[], SparkSession], *, out: TextIO | None = None,
                 poll_s: float = 1.0, restarts: dict[str, RestartPolicy] | None = None) -> None:
        self.pipelines = list(pipelines)
        self.spark_factory = spark_factory
        self.out = out or sys.stdout
        self.poll_s = poll_s
        self.restarts = restarts or {}
        self._stop = StopFlag()
        self._restarted: dict[str, int] = {}

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def stop(self) -> None:
        """Ask ``run`` to stop (thread-safe, takes no lock: what the signal handlers
        call)."""
        self._stop.set()

    def run(self) -> int:
        """Run until stopped (0), until every query has finished (0, with an
        ``available_now`` trigger) or until a query fails (1). The Spark session is
        stopped at the end only if the runner started it: a session that was running
        before (an application's, a notebook's) is left running."""
        owned = not _spark_running()
        spark = self.spark_factory()
        queries: dict[str, StreamingQuery] = {}
        # installed after the SparkContext, which installs its own SIGINT handler
        with stop_on_signals(self.stop):
            try:
                for pipeline in self.pipelines:
                    self.say(f"starting {pipeline.describe()}")
                    queries[pipeline.name] = pipeline.start(spark)
                return self._supervise(spark, queries)
            finally:
                self._shutdown(spark, queries, owned)

    def _supervise(self, spark: SparkSession, queries: dict[str, StreamingQuery]) -> int:
        by_name = {p.name: p for p in self.pipelines}
        while not self._stop.is_set():
            self._report(queries)
            for name, query in list(queries.items()):
                if query.isActive or query.exception() is None:
                    continue
                if not self._restart(spark, by_name[name], queries):
                    self._report(queries)
                    self.say(f"{name}: FAILED: {self._reason(by_name[name], query)}")
                    return 1
            if all(not q.isActive for q in queries.values()):
                self._report(queries)
                self.say("all pipelines finished")
                return 0
            self._stop.wait(self.poll_s)
        self._report(queries)
        self.say("stopping (Ctrl-C): in-flight batches are not committed and will re-run")
        return 0

    def _restart(self, spark: SparkSession, pipeline: Runnable,
                 queries: dict[str, StreamingQuery]) -> bool:
        policy = self.restarts.get(pipeline.name)
        done = self._restarted.get(pipeline.name, 0)
        if policy is None or done >= policy.max_restarts:
            return False
        if not isinstance(pipeline.failure, StoreError):
            return False
        self._restarted[pipeline.name] = done + 1
        self.say(f"{pipeline.name}: store failed ({pipeline.failure}); restart "
                 f"{done + 1}/{policy.max_restarts} from the checkpoint in {policy.delay_s:g}s")
        if self._stop.wait(policy.delay_s):
            return True
        queries[pipeline.name] = pipeline.start(spark)
        return True

    @staticmethod
    def _reason(pipeline: Runnable, query: StreamingQuery) -> str:
        if pipeline.failure is not None:
            return f"{type(pipeline.failure).__name__}: {pipeline.failure}"
        error = query.exception()
        lines = str(error).strip().splitlines() if error is not None else []
        return lines[0] if lines else "unknown error"

    def _report(self, queries: dict[str, StreamingQuery]) -> None:
        for pipeline in self.pipelines:
            query = queries.get(pipeline.name)
            progress = query.lastProgress if query is not None else None
            lag = kafka_lag(progress)
            progressed = getattr(pipeline, "progressed", None)  # connectors have it
            if progressed is not None:
                progressed(progress)
            while pipeline.reports:
                self.say(pipeline.reports.popleft().line(lag))

    def _shutdown(self, spark: SparkSession, queries: dict[str, StreamingQuery],
                  owned: bool) -> None:
        for query in queries.values():
            if query.isActive:
                query.stop()
        for pipeline in self.pipelines:
            pipeline.close()
        if owned:
            spark.stop()


def _spark_running() -> bool:
    """Whether this process already has a running SparkContext (``getOrCreate`` would
    return its session)."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return False
    return SparkContext._active_spark_context is not None
