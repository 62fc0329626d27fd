"""``Sinks.console()``: print each item (Spark's console sink, in the driver's output).

For trying pipelines out: no guarantee beyond ``AT_LEAST_ONCE`` (a re-run batch prints
again), no ``foreachBatch`` (real-time mode can run it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gridstream.pipeline.base import Flow, Guarantee, RunContext, Sink
from gridstream.pipeline.streaming import configure, good_rows, observed

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["ConsoleSink", "Sinks"]


class ConsoleSink(Sink):
    cap = Guarantee.AT_LEAST_ONCE
    foreach_batch = False

    def __init__(self, rows: int = 20) -> None:
        self.rows = rows

    def describe(self) -> str:
        return "console"

    def columns(self) -> str:
        return "item string"

    def encode(self, item: Any) -> dict[str, Any]:
        return {"item": repr(item)}

    def start(self, flow: Flow, context: RunContext,
              on_batch: Callable[[int, dict[str, Any]], None]) -> StreamingQuery:
        df = good_rows(observed(flow.df), context).select("item")
        writer = (df.writeStream.format("console").option("truncate", "false")
                  .option("numRows", str(self.rows)))
        return configure(writer, context).start()


class Sinks:
    """Sinks for trying pipelines out."""

    @staticmethod
    def console(rows: int = 20) -> ConsoleSink:
        """Print each item's ``repr`` (up to ``rows`` per batch)."""
        return ConsoleSink(rows)
