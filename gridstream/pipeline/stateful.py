"""Keyed windowed aggregation on event time, compiled to Spark SQL (it runs in the JVM).

``window(flow, "1 minute", key="service", aggregate={"n": "count", "bytes": ("sum",
"size")})`` groups the rows of a structured flow by key and event-time window and emits
one row per key and window: ``key, window_start, window_end, <aggregates>``.

- Event time is ``_gs_ts`` (the Kafka record's timestamp) or a named column
  (``timestamp=``: a timestamp, or a long of milliseconds since the epoch). Windows are
  tumbling (``slide=None``) or sliding (``slide`` < ``size``: a row falls into every
  window that covers it); ``[start, end)``, aligned on the epoch.
- **Append mode**: a window's row is emitted once, when the watermark (the greatest
  event time seen, minus ``watermark``) passes the window's end — never updated later.
  The watermark moves on only when newer records arrive: a window is emitted after a
  record at least ``watermark`` past its end has been read.
- **Late records** (whose window had ended, by the watermark, when they were read) are
  dropped by Spark's state operator. Spark counts them per state row after its partial
  aggregation (``numRowsDroppedByWatermark``); ``late_rows(progress)`` reads that count
  from a batch's progress and the batch report shows it (``late``): never silent.
- Rows carrying ``_gs_error`` (a row that could not be decoded or mapped) go through
  the aggregation as groups of their own (so the query reads its input once) and come
  out, visible columns null, when their window is emitted, to the sink's error policy
  (a late one is dropped and counted like any late record). With ``timestamp=`` an
  error row keeps ``_gs_ts``, and a row whose timestamp is null becomes an error row; in
  sliding windows an error row goes to one window only (emitted once).
- first/last/collect order rows of the same event time by Kafka position (topic,
  partition, offset as numbers).

Output rows keep the hidden columns: ``_gs_ts`` is the window's last instant
(``window_end`` minus one microsecond, so a following window of the same size puts the
row in the same window), ``_gs_where`` names the window and key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gridstream.errors import ConfigError
from gridstream.pipeline.base import HIDDEN, Flow

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import StructType

    from gridstream.pipeline.api import Stage
    from gridstream.pipeline.tables import Table

__all__ = [
    "AGGREGATES",
    "WindowSpec",
    "late_rows",
    "parse_duration",
    "join",
    "window",
    "window_flow",
    "window_spec",
]

AGGREGATES = ("count", "sum", "min", "max", "avg", "first", "last", "collect")
"""The aggregate functions a window computes (``"count"`` alone counts rows)."""

OUTPUT = ("key", "window_start", "window_end")

_UNITS = {
    "millisecond": "milliseconds", "milliseconds": "milliseconds", "ms": "milliseconds",
    "second": "seconds", "seconds": "seconds", "s": "seconds", "sec": "seconds",
    "minute": "minutes", "minutes": "minutes", "min": "minutes", "m": "minutes",
    "hour": "hours", "hours": "hours", "h": "hours",
    "day": "days", "days": "days", "d": "days",
}
_MS = {"milliseconds": 1, "seconds": 1000, "minutes": 60_000, "hours": 3_600_000,
       "days": 86_400_000}
_DURATION = re.compile(r"^\s*(\d+)\s*([a-zA-Z]+)\s*$")
_NUMERIC = ("byte", "short", "int", "bigint", "long", "float", "double", "decimal")


def parse_duration(text: object, what: str) -> tuple[str, int]:
    """``"10 seconds"`` → (Spark's interval text, milliseconds); ``ConfigError`` otherwise."""
    match = _DURATION.match(text) if isinstance(text, str) else None
    unit = _UNITS.get(match.group(2).lower()) if match else None
    if match is None or unit is None:
        raise ConfigError(f"window {what}: {text!r} is not a duration like '10 seconds' "
                          f"(units: milliseconds, seconds, minutes, hours, days)")
    amount = int(match.group(1))
    if amount <= 0 and what != "watermark":
        raise ConfigError(f"window {what} must be positive, not {text!r}")
    return f"{amount} {unit}", amount * _MS[unit]


@dataclass(frozen=True)
class Aggregate:
    name: str
    function: str
    column: str | None  # None: count rows


@dataclass(frozen=True)
class WindowSpec:
    """A validated window: what ``window`` compiles."""

    size: str
    size_ms: int
    slide: str | None
    key: str | None
    aggregates: tuple[Aggregate, ...]
    watermark: str
    timestamp: str | None
    timestamp_kind: str  # "timestamp" | "millis"

    def describe(self) -> str:
        kind = f"sliding {self.size} every {self.slide}" if self.slide else \
            f"tumbling {self.size}"
        by = f" by {self.key}" if self.key else ""
        aggs = ", ".join(f"{a.name}={a.function}({a.column or '*'})" for a in self.aggregates)
        on = self.timestamp or "the record timestamp"
        return (f"window {kind}{by} on {on}, watermark {self.watermark}: {aggs} "
                "(JVM, append mode: emitted once the watermark passes the window's end)")


def window_spec(schema: StructType | None, size: str, *, slide: str | None = None,
                key: str | None = None,
                aggregate: Mapping[str, str | Sequence[str]] | None = None,
                watermark: str = "10 seconds", timestamp: str | None = None) -> WindowSpec:
    """Validate a window against the flow's columns (``ConfigError`` naming the problem);
    ``schema=None``: everything but the columns."""
    columns = None if schema is None else \
        {f.name: f.dataType.simpleString() for f in schema.fields if f.name not in HIDDEN}
    size_text, size_ms = parse_duration(size, "size")
    slide_text: str | None = None
    if slide is not None:
        slide_text, slide_ms = parse_duration(slide, "slide")
        if slide_ms > size_ms:
            raise ConfigError(f"window slide {slide!r} is longer than its size {size!r}")
        if slide_ms == size_ms:
            slide_text = None
    watermark_text, _ = parse_duration(watermark, "watermark")
    if key is not None:
        _column(columns, key, "key")
    ts_kind = "timestamp"
    if timestamp is not None:
        kind = _column(columns, timestamp, "timestamp")
        if kind in ("bigint", "int"):
            ts_kind = "millis"
        elif kind not in ("timestamp", "timestamp_ntz", "?"):
            raise ConfigError(f"window timestamp column {timestamp!r} is {kind}: it must be a "
                              "timestamp, or a long of milliseconds since the epoch")
    if not aggregate:
        raise ConfigError("a window needs at least one aggregate, e.g. aggregate={'n': 'count'}")
    aggs = tuple(_aggregate(columns, name, spec) for name, spec in aggregate.items())
    return WindowSpec(size_text, size_ms, slide_text, key, aggs, watermark_text, timestamp,
                      ts_kind)


def _column(columns: Mapping[str, str] | None, name: object, what: str) -> str:
    if columns is None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"window {what}: {name!r} is not a column name")
        return "?"
    if not isinstance(name, str) or name not in columns:
        raise ConfigError(f"window {what}: no column {name!r} in the flow (columns: "
                          f"{', '.join(columns) or 'none'})")
    return columns[name]


def _aggregate(columns: Mapping[str, str] | None, name: object, spec: object) -> Aggregate:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"window aggregate name {name!r} must be a non-empty string")
    if name in OUTPUT or name.startswith("_gs_"):
        raise ConfigError(f"window aggregate name {name!r} is reserved (output columns: "
                          f"{', '.join(OUTPUT)}; hidden columns start with _gs_)")
    if isinstance(spec, str):
        function, column = spec, None
    elif (isinstance(spec, Sequence) and len(spec) == 2
          and all(isinstance(s, str) for s in spec)):
        function, column = spec[0], spec[1]
    else:
        raise ConfigError(f"window aggregate {name!r}: {spec!r} is not 'count' or "
                          "(function, column), e.g. ('sum', 'bytes')")
    if function not in AGGREGATES:
        raise ConfigError(f"window aggregate {name!r}: unknown function {function!r} "
                          f"(known: {', '.join(AGGREGATES)})")
    if column is None:
        if function != "count":
            raise ConfigError(f"window aggregate {name!r}: {function} needs a column: "
                              f"({function!r}, 'column')")
        return Aggregate(name, function, None)
    kind = _column(columns, column, f"aggregate {name!r}")
    if function in ("sum", "avg") and kind != "?" and not kind.startswith(_NUMERIC):
        raise ConfigError(f"window aggregate {name!r}: {function} needs a numeric column, "
                          f"{column!r} is {kind}")
    return Aggregate(name, function, column)


def _compile(agg: Aggregate) -> Column:
    import pyspark.sql.functions as F

    if agg.column is None:
        return F.count(F.lit(1)).alias(agg.name)
    col = F.col(agg.column)
    if agg.function == "count":
        out = F.count(col)
    elif agg.function in ("sum", "min", "max", "avg"):
        out = getattr(F, agg.function)(col)
    elif agg.function in ("first", "last"):
        # the value at the earliest (latest) event time, not Spark's arrival-order first()
        out = (F.min_by if agg.function == "first" else F.max_by)(col, _order())
    else:  # collect: every value (nulls too), in event-time order
        items = F.collect_list(F.struct(_order().alias("o"), col.alias("v")))
        ordered = F.array_sort(items, lambda a, b: F.when(a.o < b.o, -1)
                               .when(a.o > b.o, 1).otherwise(0))
        out = F.transform(ordered, lambda x: x.v)
    return out.alias(agg.name)


def _order() -> Column:
    """The order of a window's rows: event time, then the Kafka position (topic,
    partition and offset as numbers: ``t[0]@9`` before ``t[0]@10``), then ``_gs_where``."""
    import pyspark.sql.functions as F

    from gridstream.pipeline.grids import where_columns

    where = F.col("_gs_where")
    return F.struct(F.col("_gs_ts").alias("ts"), *where_columns(where), where.alias("where"))


def window(stage: Stage, size: str, *, slide: str | None = None, key: str | None = None,
           aggregate: Mapping[str, str | Sequence[str]] | None = None,
           watermark: str = "10 seconds", timestamp: str | None = None) -> Stage:
    """``Stage.window``: the arguments are checked now (durations, aggregate names and
    functions), the columns when the pipeline compiles (``ConfigError`` either way)."""
    spec = window_spec(None, size, slide=slide, key=key, aggregate=aggregate,
                       watermark=watermark, timestamp=timestamp)

    def transform(flow: Flow) -> Flow:
        return window_flow(flow, size, slide=slide, key=key, aggregate=aggregate,
                           watermark=watermark, timestamp=timestamp)

    return stage.jvm_step("window", transform, stateful=True, note=spec.describe())


def join(stage: Stage, table: Table | Mapping[str, Any], *, on: str | Sequence[str],
         how: str = "inner", fields: str | Sequence[str] | None = None) -> Stage:
    """``Stage.join``: a stream–table join (``gridstream.pipeline.tables``; ``table`` may
    be a run file's table description). Marked stateful: real-time mode refuses it."""
    from gridstream.pipeline.tables import check_join, join_flow, table_from

    table = table_from(table)
    note = check_join(table, on=on, how=how, fields=fields)

    def transform(flow: Flow) -> Flow:
        return join_flow(flow, table, on=on, how=how, fields=fields)  # type: ignore[arg-type]

    return stage.jvm_step("join", transform, stateful=True, note=note)


def window_flow(flow: Flow, size: str, *, slide: str | None = None, key: str | None = None,
                aggregate: Mapping[str, str | Sequence[str]] | None = None,
                watermark: str = "10 seconds", timestamp: str | None = None) -> Flow:
    """The windowed aggregation of a structured flow (module docstring). ``ConfigError``
    on an unstructured flow, an unknown column or aggregate, a malformed duration."""
    if flow.item != "row" or flow.decode is not None:
        raise ConfigError("window needs a structured flow (named columns): give the step "
                          "before it a schema, e.g. .map(fn, schema='service string, size "
                          f"long') (this flow's items are {flow.item!r})")
    spec = window_spec(flow.df.schema, size, slide=slide, key=key, aggregate=aggregate,
                       watermark=watermark, timestamp=timestamp)
    return Flow(compile_window(flow.df, spec), "row",
                notes=(*flow.notes, spec.describe()))


def compile_window(df: Any, spec: WindowSpec) -> Any:
    """The Spark plan of ``spec`` over ``df`` (which has the hidden columns)."""
    import pyspark.sql.functions as F

    failed = F.col("_gs_error").isNotNull()
    if spec.timestamp is not None:
        # An error row's visible columns are null: it keeps its record's time. A good row
        # whose timestamp is null becomes an error row (Spark's window would drop it).
        column = F.col(spec.timestamp)
        ts = (F.timestamp_millis(column) if spec.timestamp_kind == "millis"
              else column.cast("timestamp"))
        missing = ~failed & ts.isNull()
        df = df.select(
            *(F.col(c) for c in df.columns if c not in ("_gs_ts", "_gs_error", "_gs_stage")),
            F.when(failed | missing, F.col("_gs_ts")).otherwise(ts).alias("_gs_ts"),
            F.when(missing, F.lit(f"timestamp column {spec.timestamp} is null"))
             .otherwise(F.col("_gs_error")).alias("_gs_error"),
            F.when(missing, F.lit("window")).otherwise(F.col("_gs_stage")).alias("_gs_stage"))
        failed = F.col("_gs_error").isNotNull()
    df = df.withWatermark("_gs_ts", spec.watermark)
    # Error rows (``_gs_error`` set) go through the same aggregation, each its own group
    # (its ``_gs_where`` in the grouping), so the query reads its input once: a split and
    # union would read the source, and run the steps before the window, once per branch.
    # They come out with their window and go on to the sink's error policy.
    if spec.slide:
        df = df.withColumn("_gs_window", F.window("_gs_ts", spec.size, spec.slide))
        # a sliding window puts a row in every window covering it: an error row stays
        # only in the last of them (the one starting less than a slide before its time),
        # so it is emitted once
        _, slide_ms = parse_duration(spec.slide, "slide")
        last = (F.unix_micros(F.col("_gs_window.start")) + slide_ms * 1000
                > F.unix_micros(F.col("_gs_ts")))
        df = df.where(~failed | last)
    else:
        df = df.withColumn("_gs_window", F.window("_gs_ts", spec.size))
    groups = [F.col("_gs_window"), F.when(failed, F.col("_gs_where")).alias("_gs_failed")]
    if spec.key is not None:
        groups.append(F.col(spec.key).alias("key"))
    carried = [F.max(c).alias(c) for c in ("_gs_error", "_gs_stage", "_gs_raw_key",
                                           "_gs_raw_value")]
    aggregated = df.groupBy(*groups).agg(*(_compile(a) for a in spec.aggregates), *carried)
    names = [a.name for a in spec.aggregates]
    keys = ["key"] if spec.key is not None else []
    error = F.col("_gs_failed").isNotNull()
    where = F.concat(F.lit("window ["), F.col("_gs_window.start").cast("string"), F.lit(", "),
                     F.col("_gs_window.end").cast("string"), F.lit(")"),
                     *([F.lit(" key "), F.col("key").cast("string")] if keys else []))

    def good(column: Column, name: str) -> Column:
        return F.when(~error, column).alias(name)  # visible columns: null on error rows

    return aggregated.select(
        *(good(F.col(k), k) for k in keys),
        good(F.col("_gs_window.start"), "window_start"),
        good(F.col("_gs_window.end"), "window_end"),
        *(good(F.col(n), n) for n in names),
        F.window_time("_gs_window").alias("_gs_ts"),
        F.when(error, F.col("_gs_failed")).otherwise(where).alias("_gs_where"),
        "_gs_error", "_gs_stage", "_gs_raw_key", "_gs_raw_value",
    )


def late_rows(progress: Mapping[str, Any] | None) -> int:
    """Rows a batch's state operators dropped as late (Spark's ``numRowsDroppedByWatermark``
    summed over the operators of one ``StreamingQueryProgress`` as a dict)."""
    if not progress:
        return 0
    return sum(int(op.get("numRowsDroppedByWatermark") or 0)
               for op in progress.get("stateOperators") or ())
