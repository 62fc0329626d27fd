"""Stream–table joins: enrich each row of a structured flow with a table's row for its key.

- ``GridTables.map(grid, name)``: a Space cache or a Hazelcast map. Looked up per Arrow
  batch on the executors, in one ``mapInArrow`` pass: one grid client per task, one
  ``get_all`` per batch of rows (distinct keys), so every batch sees the entries as they
  are when it runs. The value's ``fields`` (a Spark DDL, e.g. ``"name string, tier
  int"``) become columns (a missing field: null; a field whose value does not fit its
  type: the row becomes an error row, to the error policy), or, with ``fields=None``, the
  whole value as one JSON text column named after the map.
- ``DeltaTables.path(path)``: a Delta table, joined in the JVM (a stream–static join).
  Spark plans the static side again for every micro-batch and Delta reads the table's
  latest version then, so a batch sees the table as it is when the batch runs.

``how="inner"`` keeps only rows whose key the table holds (a row without a match is not
an error: it is what an inner join means); ``how="left"`` keeps every row, the table's
columns null when the key is missing (or null). Rows carrying ``_gs_error`` pass through
unchanged (the table's columns null) to the sink's error policy.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from gridstream.errors import ConfigError
from gridstream.pipeline.base import HIDDEN, Flow
from gridstream.spark import worker

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from gridstream.grid.settings import GridSettings

__all__ = ["DeltaTable", "DeltaTables", "GridTable", "GridTables", "Table", "check_join",
           "join_flow", "table_from"]

How = Literal["inner", "left"]
LOOKUP_CHUNK = 1000
"""Keys per ``get_all`` call."""


class Table:
    """A table a flow can be joined with (``GridTables.map``, ``DeltaTables.path``)."""

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class GridTable(Table):
    grid: GridSettings
    name: str

    def describe(self) -> str:
        return f"{self.grid.kind} map {self.name!r}"


@dataclass(frozen=True)
class DeltaTable(Table):
    path: str

    def describe(self) -> str:
        return f"Delta table {self.path}"


class GridTables:
    @staticmethod
    def map(grid: GridSettings | Mapping[str, Any], name: str) -> GridTable:
        """A Space cache or Hazelcast map (``grid``: the connectors' grid settings, or a
        dict of them: ``{"kind": "hazelcast", "members": [...], "cluster_name": ...}``)."""
        from pydantic import TypeAdapter, ValidationError

        from gridstream.grid.settings import GridSettings

        if not isinstance(name, str) or not name:
            raise ConfigError("GridTables.map: the map name must be a non-empty string")
        try:
            settings = TypeAdapter(GridSettings).validate_python(
                grid if isinstance(grid, Mapping) else grid.model_dump())
        except ValidationError as exc:
            raise ConfigError(f"GridTables.map: invalid grid settings: {exc}") from exc
        return GridTable(settings, name)


class DeltaTables:
    @staticmethod
    def path(path: str) -> DeltaTable:
        """The Delta table at ``path`` (read again for every micro-batch)."""
        if not isinstance(path, str) or not path:
            raise ConfigError("DeltaTables.path: the path must be a non-empty string")
        return DeltaTable(path)


def table_from(spec: Table | Mapping[str, Any]) -> Table:
    """A table, or its description in a run file: ``{kind = "delta", path = "..."}`` or
    ``{kind = "grid", grid = {kind = "hazelcast", ...}, name = "users"}``."""
    if isinstance(spec, Table):
        return spec
    if not isinstance(spec, Mapping):
        raise ConfigError(f"join: {spec!r} is not a table (GridTables.map, DeltaTables.path)")
    kinds: dict[str, set[str]] = {"delta": {"kind", "path"}, "grid": {"kind", "grid", "name"}}
    kind = spec.get("kind")
    if kind not in kinds:
        raise ConfigError(f"join table kind {kind!r}: 'delta' or 'grid'")
    unknown = sorted(set(spec) - kinds[kind])
    missing = sorted(kinds[kind] - set(spec))
    if unknown or missing:
        raise ConfigError(f"join table ({kind}): unknown key(s) {unknown}, missing {missing}"
                          if unknown else f"join table ({kind}): missing {missing}")
    if kind == "delta":
        return DeltaTables.path(spec["path"])
    return GridTables.map(spec["grid"], spec["name"])


def _on(on: str | Sequence[str]) -> tuple[str, str]:
    if isinstance(on, str) and on:
        return on, on
    if (isinstance(on, Sequence) and len(on) == 2 and all(isinstance(s, str) and s for s in on)):
        return on[0], on[1]
    raise ConfigError(f"join on={on!r}: give a column name, or (stream column, table column)")


def check_join(table: Table, *, on: str | Sequence[str], how: str,
               fields: str | Sequence[str] | None) -> str:
    """The arguments' checks that need no flow (``ConfigError``); what the join runs."""
    if how not in ("inner", "left"):
        raise ConfigError(f"join how={how!r}: 'inner' or 'left'")
    left, right = _on(on)
    if isinstance(table, GridTable):
        if right != left:
            raise ConfigError("join with a grid map: on= names the flow's column only "
                              "(the map's key is its key)")
        if fields is not None and (not isinstance(fields, str) or not fields.strip()):
            raise ConfigError("join with a grid map: fields= is a Spark DDL string, e.g. "
                              "'name string, tier int' (or None: the value as JSON)")
        return (f"{how} join with {table.describe()} on {left}: Python, one get_all per "
                "Arrow batch on the executors")
    if isinstance(table, DeltaTable):
        if fields is not None and (isinstance(fields, str)
                                   or not all(isinstance(f, str) for f in fields)):
            raise ConfigError("join with a Delta table: fields= lists the table's column names")
        return (f"{how} join with {table.describe()} on {left} = {right}: JVM stream-static "
                "join, the table read again each micro-batch")
    raise ConfigError(f"join: {table!r} is not a table (GridTables.map, DeltaTables.path)")


def join_flow(flow: Flow, table: Table, *, on: str | Sequence[str], how: How = "inner",
              fields: str | Sequence[str] | None = None) -> Flow:
    """``flow`` joined with ``table`` on the flow's column ``on`` (module docstring).

    ``on``: the flow's key column; for a Delta table, ``(flow column, table column)``
    when the names differ. ``fields``: a grid map: the value's fields as a Spark DDL
    (``None``: the value as one JSON column named after the map); a Delta table: the
    table's columns to add (``None``: all but the key)."""
    if flow.item != "row" or flow.decode is not None:
        raise ConfigError("join needs a structured flow (named columns): give the step "
                          "before it a schema, e.g. .map(fn, schema='user string, n long') "
                          f"(this flow's items are {flow.item!r})")
    note = check_join(table, on=on, how=how, fields=fields)
    left, right = _on(on)
    columns = {f.name: f for f in flow.df.schema.fields if f.name not in HIDDEN}
    if left not in columns:
        raise ConfigError(f"join on: no column {left!r} in the flow (columns: "
                          f"{', '.join(columns) or 'none'})")
    if isinstance(table, GridTable):
        df = _grid_join(flow.df, table, left, how, fields)
    else:
        assert isinstance(table, DeltaTable)
        df = _delta_join(flow.df, table, left, right, how, fields)
    return Flow(df, "row", notes=(*flow.notes, note))


def _added_fields(schema: StructType, added: StructType) -> None:
    taken = set(schema.fieldNames())
    clash = [f.name for f in added.fields if f.name in taken]
    if clash:
        raise ConfigError(f"join: the table's column(s) {', '.join(clash)} are already "
                          "columns of the flow (choose fields=, or rename before the join)")


# ------------------------------------------------------------------ grid map (Python)


def _grid_join(df: DataFrame, table: GridTable, on: str, how: How,
               fields: str | Sequence[str] | None) -> DataFrame:
    from pyspark.sql.types import StringType, StructField, StructType

    key_type = df.schema[on].dataType.simpleString()
    if key_type not in ("string", "bigint", "int", "smallint", "tinyint"):
        raise ConfigError(f"join on {on!r}: a grid key is a string or an integer, the "
                          f"column is {key_type}")
    if fields is None:
        added = StructType([StructField(table.name, StringType(), True)])
        whole = True
    else:
        added = _ddl(str(fields))
        whole = False
    _added_fields(df.schema, added)
    out_schema = StructType([*df.schema.fields, *added.fields])
    body = functools.partial(_lookup_partition, table.grid, table.name, on, how, added, whole)
    return df.mapInArrow(body, out_schema)


def _ddl(fields: str) -> StructType:
    from pyspark.sql.types import StructType, _parse_datatype_string

    try:
        parsed = _parse_datatype_string(fields)
    except Exception as exc:  # pyspark raises its own parse errors
        raise ConfigError(f"join fields {fields!r} is not a Spark DDL: {exc}") from exc
    if not isinstance(parsed, StructType) or not parsed.fields:
        raise ConfigError(f"join fields {fields!r} must list fields, e.g. 'name string'")
    return parsed


def _lookup_partition(grid: GridSettings, cache: str, on: str, how: How, added: StructType,
                      whole: bool, batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow body: one adapter for the task, one ``get_all`` per Arrow batch."""
    from gridstream.grid.settings import grid_adapter
    from gridstream.pipeline._lookup import enrich

    worker.prepare()
    adapter = grid_adapter(grid)
    adapter.open()
    try:
        for batch in batches:
            yield enrich(adapter, cache, on, how, added, whole, batch, LOOKUP_CHUNK)
    finally:
        adapter.close()


# ------------------------------------------------------------------ Delta table (JVM)


def _delta_join(df: DataFrame, table: DeltaTable, left: str, right: str, how: How,
                fields: str | Sequence[str] | None) -> DataFrame:
    import pyspark.sql.functions as F

    try:
        static = df.sparkSession.read.format("delta").load(table.path)
    except Exception as exc:  # AnalysisException: no table there
        raise ConfigError(f"join: cannot read the Delta table at {table.path}: {exc}") from exc
    if right not in static.columns:
        raise ConfigError(f"join on: the Delta table has no column {right!r} (columns: "
                          f"{', '.join(static.columns)})")
    if fields is None:
        names = [c for c in static.columns if c != right]
    else:
        names = list(fields)
        missing = [n for n in names if n not in static.columns]
        if missing:
            raise ConfigError(f"join fields: the Delta table has no column(s) "
                              f"{', '.join(missing)} (columns: {', '.join(static.columns)})")
    _added_fields(df.schema, static.select(*names).schema)
    key, hit = "_gs_join_key", "_gs_join_hit"
    side = static.select(F.col(right).alias(key), *names, F.lit(True).alias(hit))
    # one left join (error rows never match, so they keep their place), then the inner
    # join's filter: a single pass over the stream, no split and union
    joined = df.join(side, (df[left] == side[key]) & df["_gs_error"].isNull(), "left")
    if how == "inner":
        joined = joined.where(F.col("_gs_error").isNotNull() | F.col(hit).isNotNull())
    return joined.select(*df.columns, *names)
