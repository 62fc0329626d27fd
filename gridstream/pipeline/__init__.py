"""The pipeline API: ``read_from(source)`` → ``map`` / ``filter`` / ``flat_map`` /
``map_batch`` / ``window`` / ``join`` → ``write_to(sink)``, compiled to one Spark
Structured Streaming query per pipeline (``docs/pipeline-api.md``).

Each name is imported from its own module on first use (``gridstream._lazy``): a Spark
Python worker that unpickles a pass imports the modules the pass names, not every
source and sink (the grids', the stores').
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridstream._lazy import exports

if TYPE_CHECKING:
    from gridstream.pipeline.api import KafkaRecord, Pipeline, Stage, entry
    from gridstream.pipeline.base import Flow, Guarantee, RunContext, Sink, Source
    from gridstream.pipeline.console import Sinks
    from gridstream.pipeline.grids import GridSinks, GridSources
    from gridstream.pipeline.kafka import KafkaSinks, KafkaSources
    from gridstream.pipeline.stores import StoreSinks
    from gridstream.pipeline.tables import DeltaTables, GridTables

_LAZY: dict[str, str] = {
    **dict.fromkeys(["KafkaRecord", "Pipeline", "Stage", "entry"], "gridstream.pipeline.api"),
    **dict.fromkeys(["Flow", "Guarantee", "RunContext", "Sink", "Source"],
                    "gridstream.pipeline.base"),
    "Sinks": "gridstream.pipeline.console",
    **dict.fromkeys(["GridSinks", "GridSources"], "gridstream.pipeline.grids"),
    **dict.fromkeys(["KafkaSinks", "KafkaSources"], "gridstream.pipeline.kafka"),
    "StoreSinks": "gridstream.pipeline.stores",
    **dict.fromkeys(["DeltaTables", "GridTables"], "gridstream.pipeline.tables"),
}
"""Each name and the module it lives in."""

__all__ = ["DeltaTables", "Flow", "GridSinks", "GridSources", "GridTables", "Guarantee",
           "KafkaRecord", "KafkaSinks", "KafkaSources", "Pipeline", "RunContext", "Sink",
           "Sinks", "Source", "Stage", "StoreSinks", "entry"]

if not TYPE_CHECKING:
    __getattr__, __dir__ = exports(__name__, _LAZY)
