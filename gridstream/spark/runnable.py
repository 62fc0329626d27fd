"""The one contract every flow on Spark keeps with the runner (``runner.PipelineRunner``).

A store feed, an API pipeline (its job) and each kind of connector subclass
``Runnable``: the runner starts it, reads its ``reports`` (one per batch) and ``failure``
(the error of its own that failed its query), looks at its query's progress, and closes
it at the end. The optional parts have defaults here, so the runner asks each flow the
same questions and probes for nothing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from gridstream.ops.counts import BatchCounts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["Report", "Reports", "Runnable"]


class Report(Protocol):
    """What one batch did, as the runner prints it and counts it."""

    def line(self, lag: int | None = None) -> str: ...

    def counts(self) -> BatchCounts: ...


class Reports(Protocol):
    """A flow's reports not yet taken by the runner, oldest first."""

    def __len__(self) -> int: ...

    def popleft(self) -> Report: ...


class Runnable(ABC):
    """A flow the runner runs. ``name``, ``reports`` and ``failure`` are attributes (or
    properties) of each flow; ``kind`` names its kind in lines, the status page and
    metrics."""

    kind: ClassVar[str]
    """``store feed``, ``pipeline``, ``source connector``, ``sink connector``."""
    reports: Reports
    failure: BaseException | None = None

    @property
    @abstractmethod
    def name(self) -> str:
        """Unique among the run's flows: names it in lines, errors and metrics."""

    @abstractmethod
    def describe(self) -> str:
        """One line for the terminal (secrets redacted)."""

    @abstractmethod
    def start(self, spark: SparkSession) -> StreamingQuery:
        """Start the streaming query (resuming from the checkpoint, when it has one)."""

    def close(self) -> None:
        """Release what ``start`` opened on the driver (the runner calls it at the end)."""
        return None

    def endpoints(self) -> tuple[list[str], list[str]]:
        """The places it reads and writes (the run's topology): ``kafka:topic``, ..."""
        return [], []

    @property
    def restartable(self) -> bool:
        """Whether a restart resumes it (it has a checkpoint of its own)."""
        return True

    def replan(self, failure: str) -> bool:
        """After a failure that a new plan may cure (a schema id the plan lacked, its
        text ``failure``): True when the next start plans differently."""
        return False

    def progressed(self, progress: Mapping[str, Any] | None) -> None:
        """The query's last progress (``lastProgress``), handed over now and then (a
        sink connector commits its positions to its consumer group)."""
        return None

    def lags(self, progress: Mapping[str, Any] | None) -> dict[str, int]:
        """The records it is behind by, per what it reads, where the query's progress
        does not say (a grid source)."""
        return {}
