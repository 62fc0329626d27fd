"""``GridSources.changes``: a grid's change streams as a pipeline source.

The rows come from the source connector's Python data source (``gridstream-grid``,
through ``gridstream.connect.change_stream``, the connector's public entry): its planner
(offsets per cache in the Spark checkpoint, snapshots under it, cache discovery, lost
positions), its reader and its JSON converter (keys and values as JSON bytes, the
change's version in the ``gs.version`` header). This
module only chooses the connector options and turns each row into the item
``{"cache", "key", "value", "version", "op"}`` (the flow's Python ``decode`` head).

A change the data source could not read (a value JSON cannot hold) is an error row
(``_gs_error`` = the data source's reason, ``_gs_stage`` = ``"read"``): the pipeline's
error policy takes it.

The source reads changes again after a restart under ``FULL_SNAPSHOT`` or
``on_position_lost="snapshot"``: its ``cap`` is then ``AT_LEAST_ONCE``. The data source
gives no change time: ``_gs_ts`` is the batch's processing time (``current_timestamp()``),
not reproducible by a re-run batch (windows should use a ``timestamp=`` column).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from gridstream.connect import FailoverPolicy, SourceConnectorConfig, change_stream
from gridstream.errors import CodecError, ConfigError
from gridstream.grid.settings import GridSettings, HazelcastGridSettings
from gridstream.grid.values import decode_key, loads
from gridstream.pipeline.base import Flow, Guarantee, RunContext, Source
from gridstream.protocol import H_VERSION

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["CHANGE_COLUMNS", "GridChangesSource", "decode_change"]

CHANGE_COLUMNS = ("cache", "key", "value", "version")
"""The flow's visible columns: the cache, the key and value as JSON bytes (value null:
a removal) and the change's version (null for a snapshot entry without one)."""
_READ = ("ok", "error")
"""Row statuses that become items (``error``: through the error policy). The others
are the data source's bookkeeping: ``event`` (snapshots, discovered or dropped caches)
rows, which the progress log shows; ``filtered`` and ``gap`` never occur with the
options chosen here (no filter, removals kept, no ``NONE`` failover)."""
_NO_BACK_OFF_MS = 10
"""The source's poll and idle intervals for a pipeline (the least allowed): the pipeline's
own trigger decides how often Spark asks for changes, each ask reads the grid."""


def decode_change(row: dict[str, Any]) -> dict[str, Any]:
    """One row of the flow → the item ``{cache, key, value, version, op}``."""
    key = decode_key(row["key"])
    if key is None:
        raise CodecError("a change without a key")
    raw = row["value"]
    try:
        value = None if raw is None else loads(raw)
    except ValueError as exc:  # orjson.JSONDecodeError: the converter wrote JSON
        raise CodecError(f"value is not JSON: {exc}") from exc
    return {"cache": row["cache"], "key": key, "value": value, "version": row["version"],
            "op": "put" if value is not None else "remove"}


def _connector_name(pipeline: str) -> str:
    """A connector name (``[A-Za-z0-9_.-]``, at most 100) for the pipeline: it names the
    Space log consumer the source registers (``gridstream-source-<name>``)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", pipeline)[:100]
    return safe or "pipeline"


class GridChangesSource(Source):
    """Built by ``GridSources.changes``."""

    def __init__(self, grid: GridSettings, caches: str | Sequence[str], *,
                 failover: str = "BACKLOG", initial: bool = True,
                 on_position_lost: str = "fail", batch_size: int = 10_000,
                 cache_list_interval_ms: int = 5000) -> None:
        names = (caches,) if isinstance(caches, str) else tuple(caches)
        if not names or not all(isinstance(c, str) and c for c in names):
            raise ConfigError("grid changes: caches must name at least one cache")
        policy = str(failover).strip().upper().replace("-", "_")
        if policy == FailoverPolicy.NONE.value:
            raise ConfigError("grid changes: failover 'NONE' is not offered (it drops the "
                              "changes made while the pipeline was stopped); use 'BACKLOG' "
                              "or 'FULL_SNAPSHOT'")
        self.grid = grid
        self.caches = names
        self.options: dict[str, Any] = {
            "failover_policy": policy, "shall_load_initial_data": initial,
            "on_position_lost": on_position_lost, "batch_size": batch_size,
            "cache_list_poll_interval_ms": cache_list_interval_ms,
            # the pipeline's trigger says how often the grid is checked: no back-off
            "poll_interval_ms": _NO_BACK_OFF_MS, "idle_poll_interval_ms": _NO_BACK_OFF_MS}
        checked = self.config("check", "/tmp/check")  # noqa: S108 - a bad option fails now
        self._resumes_exactly = (checked.failover_policy == FailoverPolicy.BACKLOG
                                 and checked.on_position_lost == "fail")

    @property
    def cap(self) -> Guarantee:  # type: ignore[override]
        """``EXACTLY_ONCE`` only when a restart resumes exactly where the checkpoint
        left off (``BACKLOG``, ``on_position_lost="fail"``); a full snapshot on failover
        or on a lost position reads changes again: ``AT_LEAST_ONCE``."""
        return Guarantee.EXACTLY_ONCE if self._resumes_exactly else Guarantee.AT_LEAST_ONCE

    def config(self, pipeline: str, checkpoint: str) -> SourceConnectorConfig:
        """The source connector's config for this pipeline: the caches by exact name,
        removals kept, JSON keys and values, records named after their cache."""
        try:
            return SourceConnectorConfig.model_validate({
                "name": _connector_name(pipeline), "grid": self.grid,
                "checkpoint": checkpoint, "shall_process_removals": True,
                "cache_whitelist": [re.escape(c) for c in self.caches], **self.options})
        except ValidationError as exc:
            raise ConfigError(f"grid changes: {exc}") from exc

    def nodes(self) -> list[str]:
        return [f"{self.grid.kind}:{c}" for c in self.caches]

    def describe(self) -> str:
        g = self.grid
        where = (f"hazelcast {g.cluster_name}@{','.join(g.members)}"
                 if isinstance(g, HazelcastGridSettings)
                 else f"space {g.space_name} ({g.data_dir})")
        o = self.options
        return (f"changes of {', '.join(self.caches)} in {where} [{o['failover_policy']}, "
                f"initial load {str(o['shall_load_initial_data']).lower()}, position lost: "
                f"{o['on_position_lost']}]")

    def flow(self, spark: SparkSession, context: RunContext) -> Flow:
        import pyspark.sql.functions as F

        from gridstream.allowlist import allowed_modules

        config = self.config(context.name, context.checkpoint)
        rows: DataFrame = change_stream(spark, config, allowed_modules(()))
        version = F.filter("headers", lambda h: h["key"] == F.lit(H_VERSION))
        failed = F.col("status") == "error"
        df = rows.where(F.col("status").isin(*_READ)).select(
            "cache", "key", "value",
            F.when(F.size(version) > 0, F.element_at(version, 1)["value"].cast("string")
                   .cast("long")).alias("version"),
            F.current_timestamp().alias("_gs_ts"), F.col("where").alias("_gs_where"),
            F.when(failed, F.col("reason")).alias("_gs_error"),
            F.when(failed, F.lit("read")).alias("_gs_stage"))
        return Flow(df, "row", decode_change,
                    notes=("grid changes: the gridstream-grid data source (Python, one "
                           "task per cache); rows decoded to dicts in Python",))
