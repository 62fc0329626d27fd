"""The compiler: a pipeline's chain → the streaming DataFrame its sink writes.

Consecutive per-item steps, with the source's Python decode (if any) at their head and
the sink's ``encode`` at their tail, become ONE ``mapInArrow`` pass. ``map_batch`` is a
pass of its own; JVM steps (windows, joins) transform the flow in the JVM. A chain with
no Python step whose source decodes and whose sink encodes in the JVM runs no Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gridstream.errors import ConfigError
from gridstream.pipeline.api import BatchStep, ItemStep, JvmStep, Step
from gridstream.pipeline.base import (
    HIDDEN,
    ORIGIN_PARTS,
    Flow,
    LastPass,
    RunContext,
    Sink,
    visible,
)
from gridstream.pipeline.passes import BatchPass, ItemPass, one_to_one, to_row

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = ["HIDDEN_DDL", "Compiled", "compile_chain", "plan", "with_hidden"]

HIDDEN_DDL = ("_gs_ts timestamp, _gs_where string, _gs_error string, _gs_stage string, "
              "_gs_raw_key binary, _gs_raw_value binary")
_HIDDEN_TYPES = dict(part.strip().split(" ") for part in HIDDEN_DDL.split(","))


@dataclass
class Compiled:
    """What the sink starts: the flow (visible columns: the sink's ``columns()`` when
    ``encoded``), and what runs where."""

    flow: Flow
    encoded: bool
    python_passes: int = 0
    where: list[str] = field(default_factory=list)


def with_hidden(df: DataFrame, *, keep_raw: bool = True) -> DataFrame:
    """``df`` with every hidden column (missing ones null), visible columns first, the
    origin's parts (``ORIGIN_PARTS``) last when it has them. Without ``keep_raw`` the raw
    bytes are dropped (nulls: only dead letters need them)."""
    import pyspark.sql.functions as F

    present = set(df.columns)
    hidden = []
    for name in HIDDEN:
        raw = name in ("_gs_raw_key", "_gs_raw_value")
        if name in present and (keep_raw or not raw):
            hidden.append(F.col(name))
        else:
            hidden.append(F.lit(None).cast(_HIDDEN_TYPES[name]).alias(name))
    return df.select(*visible(df.columns), *hidden,
                     *(c for c in ORIGIN_PARTS if c in present))


def plan(steps: tuple[Step, ...]) -> list[list[Step]]:
    """The steps in groups: each run of per-item steps, each ``map_batch``, each JVM
    step (for ``describe`` and the compiler)."""
    groups: list[list[Step]] = []
    for step in steps:
        if isinstance(step, ItemStep) and groups and isinstance(groups[-1][-1], ItemStep):
            groups[-1].append(step)
        else:
            groups.append([step])
    return groups


def _struct(ddl: str) -> StructType:
    from pyspark.sql.types import StructType, _parse_datatype_string

    parsed = _parse_datatype_string(ddl)
    if not isinstance(parsed, StructType):
        raise ConfigError(f"schema {ddl!r}: give columns, e.g. 'service string, n long'")
    return parsed


def _with_hidden_struct(columns: StructType, without: set[str] | None = None) -> StructType:
    from pyspark.sql.types import StructType

    names = set(columns.fieldNames())
    clash = sorted(names & {*HIDDEN, *ORIGIN_PARTS})
    if clash:
        raise ConfigError(f"column names starting with _gs_ are reserved: {', '.join(clash)}")
    return StructType([*columns.fields, *(f for f in _struct(HIDDEN_DDL).fields
                                          if f.name not in (without or ()))])


def _arrow(schema: StructType) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC", prefers_large_types=False)


def _visible_struct(df: DataFrame) -> StructType:
    from pyspark.sql.types import StructType

    return StructType([f for f in df.schema.fields if f.name not in HIDDEN])


def compile_chain(flow: Flow, steps: tuple[Step, ...], sink: Sink, context: RunContext,
                  ) -> Compiled:
    """The flow the sink writes (see the module docstring)."""
    keep_raw = context.errors == "dead_letter"
    groups = plan(steps)
    if flow.for_pass is not None and groups and isinstance(groups[0][0], ItemStep):
        flow = flow.for_pass  # the first pass decodes: no decode in the JVM before it
    # a source that gives no error column cannot fail a row before the first pass
    flawless = "_gs_error" not in flow.df.columns
    flow = Flow(with_hidden(flow.df, keep_raw=keep_raw), flow.item, flow.decode, flow.notes,
                flow.head, origin_topic=flow.origin_topic)
    where = list(flow.notes)
    passes = 0
    for number, group in enumerate(groups, 1):
        first = group[0]
        if isinstance(first, ItemStep):
            items = [s for s in group if isinstance(s, ItemStep)]
            if number == len(groups):
                return _tail(flow, items, sink, context, where, passes,
                             flawless and number == 1)
            names = _names(items, flow)
            flow = _item_pass(flow, items, None, context, flawless and number == 1)
            passes += 1
            where.append(f"python pass {passes}: {names}")
        elif isinstance(first, BatchStep):
            flow = _batch_pass(flow, first, context)
            passes += 1
            where.append(f"python pass {passes}: {first.label} ({first.kind} batches)")
        else:
            assert isinstance(first, JvmStep)
            if flow.item != "row" or flow.decode is not None:
                raise ConfigError(f"{first.label} needs a structured flow: give the map "
                                  "before it a schema (map(fn, schema='name type, ...'))")
            flow = first.transform(flow)
            flow = Flow(with_hidden(flow.df, keep_raw=keep_raw), flow.item, flow.decode,
                        flow.notes)
            where.append(f"jvm: {first.label}" + (f" ({first.note})" if first.note else ""))
    return _tail(flow, [], sink, context, where, passes, flawless and not groups)


def _decodes(flow: Flow) -> bool:
    return flow.decode is not None or flow.head is not None


def _names(items: list[ItemStep], flow: Flow) -> str:
    head = ["decode"] if _decodes(flow) else []
    return ", ".join([*head, *(s.label for s in items)])


def _item_pass(flow: Flow, items: list[ItemStep], sink: Sink | None,
               context: RunContext, flawless: bool = False) -> Flow:
    """One fused pass; its output is the sink's columns (``sink``) or the rows of the
    last schema among the steps (a structured flow). Hidden columns that are null by
    construction or unread do not cross into Python: the error columns of a
    ``flawless`` input (no row in error yet), and for the sink's pass the event time
    (nothing after it reads it) and the raw bytes unless dead letters need them; the
    origin's text either, when its parts come instead (``ORIGIN_PARTS``). Nor
    does the sink's pass give back what nothing after it reads: the error columns under
    ``errors="fail"`` (the pass raises for an error row), the origin for a sink that
    does not read it (except for dead letters). They are null literals again after the
    pass."""
    encode = None
    if sink is not None:
        columns = _struct(sink.columns())
        # the sink encodes a batch's columns at once (a chain of maps and filters: an
        # input row's outputs of a flat_map fail or pass together, encoded one by one)
        halves = sink.column_encoder() if one_to_one(s.kind for s in items) else None
        if halves is not None:
            tail, encode = halves
        else:  # a sink that gives its columns' values in order spares a dict per item
            tail = sink.row_encoder() or _Encoded(sink.encode, tuple(columns.fieldNames()))
        tail_stage = "encode"
    else:
        columns, tail_stage = _items_schema(flow, items)
        tail = to_row(tuple(columns.fieldNames()))
    skipped: set[str] = set()  # neither in the pass's input nor in its output
    unread: set[str] = set()  # not in its output
    if sink is not None:
        skipped.add("_gs_ts")
        if context.errors != "dead_letter":
            skipped.update(("_gs_raw_key", "_gs_raw_value"))
            if not sink.reads_where:
                unread.add("_gs_where")  # read in the pass, for its error rows
        if context.errors == "fail":
            unread.update(("_gs_error", "_gs_stage"))
    absent = skipped | ({"_gs_error", "_gs_stage"} if flawless else set())
    parts = [c for c in ORIGIN_PARTS if c in flow.df.columns]
    origin_topic = None
    keeps_parts = bool(parts) and "_gs_where" in unread
    if keeps_parts:  # the origin's text only for the rows in error
        absent.add("_gs_where")
        origin_topic = flow.origin_topic
    else:
        absent.update(parts)
    schema = _with_hidden_struct(columns, without=skipped | unread)
    fused = ItemPass(pipeline=context.name, errors=context.errors, shape=flow.item,
                     decode=flow.decode, head=flow.head,
                     steps=[(s.kind, s.fn, s.label) for s in items],
                     tail=tail, tail_stage=tail_stage, schema=_arrow(schema), encode=encode,
                     origin_topic=origin_topic)
    given = flow.df.drop(*absent)
    df = given.mapInArrow(fused, schema)
    # the origin's parts come only from a Kafka source's rows, before any pass
    last = LastPass(given, fused, origin_topic) if sink is not None and keeps_parts else None
    return Flow(with_hidden(df), "row" if sink is None else flow.item, None, flow.notes,
                last_pass=last)


class _Encoded:
    """The sink's ``encode`` as a pass's tail: the dict's values in column order."""

    def __init__(self, encode: Any, names: tuple[str, ...]) -> None:
        self.encode, self.names = encode, names

    def __call__(self, item: Any) -> list[Any]:
        encoded = self.encode(item)
        return [encoded.get(n) for n in self.names]


def _items_schema(flow: Flow, items: list[ItemStep]) -> tuple[StructType, str]:
    """The columns the items have after ``items`` (they must end structured)."""
    schema: StructType | None = _visible_struct(flow.df) if (
        flow.item == "row" and flow.decode is None) else None
    stage = "decode"
    for step in items:
        if step.schema is not None:
            schema, stage = _struct(step.schema), step.label
        elif step.kind != "filter":
            schema, stage = None, step.label
    if schema is None:
        raise ConfigError(f"the step after {stage} needs a structured flow: give "
                          f"{stage} a schema (map(fn, schema='name type, ...'))")
    return schema, stage


def _batch_pass(flow: Flow, step: BatchStep, context: RunContext) -> Flow:
    if flow.item != "row" or flow.decode is not None:
        raise ConfigError(f"{step.label} needs a structured flow: give the map before it a "
                          "schema (map(fn, schema='name type, ...'))")
    columns = _struct(step.schema) if step.schema else _visible_struct(flow.df)
    schema = _with_hidden_struct(columns)
    batch = BatchPass(pipeline=context.name, errors=context.errors, fn=step.fn,
                      kind=step.kind, stage=step.label, schema=_arrow(schema))
    return Flow(flow.df.mapInArrow(batch, schema), "row", None, flow.notes)


def _tail(flow: Flow, items: list[ItemStep], sink: Sink, context: RunContext,
          where: list[str], passes: int, flawless: bool) -> Compiled:
    """The last group: fused with the sink's encode into one pass, or (no Python
    step, no Python decode) the sink's JVM encode when it has one."""
    if not items and not _decodes(flow):
        jvm = getattr(sink, "jvm_encode", None)
        encoded = jvm(flow) if jvm is not None else None
        if encoded is not None:
            where.append(f"jvm: encode for {sink.describe()}")
            return Compiled(Flow(encoded, flow.item, None, flow.notes), True, passes, where)
    names = ", ".join([*(["decode"] if _decodes(flow) else []),
                       *(s.label for s in items), "encode"])
    out = _item_pass(flow, items, sink, context, flawless)
    fused = out.last_pass is not None and sink.fuses(context)
    where.append(f"python pass {passes + 1}: {names}"
                 + (", the writer's produce (in the same task)" if fused else ""))
    return Compiled(out, True, passes + 1, where)
