"""What every connector is to the runner: a named streaming query with progress lines."""

from __future__ import annotations

from abc import abstractmethod
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gridstream.ops.counts import BatchCounts
from gridstream.spark.runnable import Runnable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["Connector", "ConnectorReport"]


@dataclass(frozen=True)
class ConnectorReport:
    """What one micro-batch of a connector did. Every record read is exactly one of
    written, filtered (``cacheFilter`` said no), skipped (bad, ``LOG_ONLY``) or
    dead-lettered (bad, ``DEAD_LETTER``)."""

    connector: str
    batch_id: int
    records: int
    written: int
    filtered: int = 0
    skipped: int = 0
    dead_lettered: int = 0
    seconds: float = 0.0
    note: str = ""
    """Events of the batch in words (a snapshot started, changes skipped under NONE, a
    position lost, a cache discovered or dropped)."""
    earlier_written: int = 0
    earlier_dead_lettered: int = 0
    """Records of the batch a crashed earlier run of it had committed already (not
    written again, not in ``written`` / ``dead_lettered``: in Kafka all the same)."""

    def line(self, lag: int | None = None) -> str:
        rate = self.records / self.seconds if self.seconds > 0 else 0.0
        text = (f"{self.connector}  batch {self.batch_id}: {self.records} records, "
                f"{self.written} written, {self.filtered} filtered, {self.skipped} skipped, "
                f"{self.dead_lettered} dead-lettered in {self.seconds:.2f}s "
                f"({rate:,.0f} rec/s)")
        if lag is not None:
            text += f", lag {lag}"
        return f"{text}; {self.note}" if self.note else text

    def counts(self) -> BatchCounts:
        """Records an earlier run committed count as written (or dead-lettered): they are
        in Kafka, and read = written + filtered + skipped + dead-lettered holds."""
        return BatchCounts(self.records, self.written + self.earlier_written, self.filtered,
                           self.skipped, self.dead_lettered + self.earlier_dead_lettered,
                           self.seconds)


class Connector(Runnable):
    """A source or sink connector. The runner calls ``describe``, ``start``, reads
    ``reports`` and ``failure``, and calls ``close`` at the end."""

    def __init__(self, name: str) -> None:
        self._name = name
        self.reports: deque[ConnectorReport] = deque(maxlen=1000)
        self.failure: BaseException | None = None

    @property
    def name(self) -> str:
        return self._name

    @abstractmethod
    def describe(self) -> str:
        """One line for the terminal (secrets redacted)."""

    @abstractmethod
    def start(self, spark: SparkSession) -> StreamingQuery:
        """Start the streaming query (resuming from the checkpoint)."""

    @abstractmethod
    def process_batch(self, records: DataFrame, batch_id: int) -> ConnectorReport:
        """Handle one micro-batch and say what it did."""

    def _handle(self, records: DataFrame, batch_id: int) -> None:
        """The query's ``foreachBatch``: keeps each batch's report, and the failure that
        stops the query (the runner names it)."""
        try:
            self.reports.append(self.process_batch(records, batch_id))
        except BaseException as exc:
            self.failure = exc
            raise

    def progressed(self, progress: Mapping[str, Any] | None) -> None:
        """The runner hands over the query's last progress (``lastProgress``) now and
        then (a sink commits its positions to its consumer group)."""
        return None

    def lags(self, progress: Mapping[str, Any] | None) -> dict[str, int]:
        """The records it is behind by, per what it reads, where the query's progress
        does not say (a grid source); the runner asks after each look at its progress."""
        return {}

    def close(self) -> None:
        """Release what ``start`` opened on the driver."""
        return None
