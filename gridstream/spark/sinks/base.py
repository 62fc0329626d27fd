"""The contract of a store sink inside a Spark store feed.

A sink receives each micro-batch's valid operations as a DataFrame (the columns of
``OPERATION_COLUMNS`` plus the source columns) with the batch id. Spark may run a batch
again after a failure, so ``write`` must be idempotent: every sink here guards by the
operation's version (or, for the change log, replaces the batch's own files).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["BatchSink", "SinkResult", "streaming_query_id"]


@dataclass(frozen=True)
class SinkResult:
    """What a sink did with one batch: ``applied`` operations changed the store,
    ``stale`` ones were older than what it holds (a replay), ``skipped`` ones carried
    nothing to write (counted, never silent). ``details`` holds sink-specific counts."""

    operations: int = 0
    applied: int = 0
    stale: int = 0
    skipped: int = 0
    details: Mapping[str, int] = field(default_factory=dict)


class BatchSink(ABC):
    """Writes micro-batches of operations into one store."""

    kind: ClassVar[str]
    single_pass: ClassVar[bool] = False
    """True when ``write`` reads the frame in exactly one Spark action that either
    succeeds or leaves nothing of the batch visible in the store, and whose
    ``SinkResult.operations`` counts every row it read. Under the ``fail`` policy the
    pipeline then lets a malformed record fail that action (and takes the sink's count
    as the batch's); under ``dead_letter`` it counts the batch inside the action (an
    ``Observation``). Other sinks get a cached batch, counted before ``write``."""

    def open(self, spark: SparkSession) -> None:  # noqa: B027 - optional hook
        """Prepare the store (connect, create what is missing) before the first batch."""

    def bind_query(self, query_id: str | None) -> None:  # noqa: B027 - optional hook
        """The query the next batch belongs to (the streaming query's id, kept by its
        checkpoint; None for a batch applied by hand without one). Batch ids restart with
        a new checkpoint and repeat across queries, so a sink that names its output after
        batch ids must also name the query."""

    @abstractmethod
    def write(self, operations: DataFrame, batch_id: int) -> SinkResult:
        """Apply one batch; raise to fail it (Spark then does not commit its offsets)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    def describe(self) -> str:
        """One line for progress output (never a secret)."""
        return self.kind


_QUERY_ID_PROPERTY = "sql.streaming.queryId"
"""The local property Spark sets on a streaming query's thread (foreachBatch runs there)."""


def streaming_query_id(records: DataFrame) -> str | None:
    """The id of the streaming query running this batch, or None outside one (what a
    sink's ``bind_query`` takes)."""
    value = records.sparkSession.sparkContext.getLocalProperty(_QUERY_ID_PROPERTY)
    return str(value) if value else None
