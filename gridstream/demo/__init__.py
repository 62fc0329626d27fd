"""``gridstream demo``: the quickstart, end to end, on embedded defaults.

grid (embedded space + operation log) -> mirror (one Kafka transaction per batch) ->
Kafka topics -> a SQL consumer (SQLite) and Spark store pipelines (Cassandra, lake) ->
a reconciliation table: every place must hold the same live entities, at the same
versions, with the same value in every property (``gridstream.reconcile``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from gridstream import stack
from gridstream.demo.workload import DemoTypes, make_types, run_workload
from gridstream.mirror.endpoint import SyncEndpoint
from gridstream.reconcile import Comparison, Holding, compare
from gridstream.reconcile.readers import (
    from_cassandra,
    from_grid,
    from_kafka,
    from_lake,
    from_sql,
)
from gridstream.space import Space

__all__ = ["DemoResult", "DemoRun", "run_and_check", "run_demo"]

console = Console()


@contextmanager
def _step(title: str) -> Iterator[None]:
    started = time.monotonic()
    console.print(f"[bold cyan]>[/] {title} ...")
    yield
    console.print(f"  [green]done[/] in {time.monotonic() - started:.1f}s")


def _mirror(space: Space, endpoint: SyncEndpoint, name: str, target_seq: int) -> str:
    from gridstream.mirror import Mirror

    mirror = Mirror(space, endpoint, name=name)
    mirror.start()
    try:
        if not mirror.wait_for(target_seq, timeout_s=120):
            raise SystemExit(f"the mirror did not catch up: {mirror.metrics()}")
    finally:
        mirror.stop()
    m = mirror.metrics()
    return f"{m.operations_total} operations in {m.batches_total} batches, position {m.position}"


def _sql(
    bootstrap: str, types: DemoTypes, space_types: dict[str, Any], db: Path, run_id: str
) -> int:
    from gridstream.consumer import OperationConsumer
    from gridstream.stores.sql import SqlStore, run_sql_consumer

    store = SqlStore(f"sqlite:///{db}", types=space_types)
    consumer = OperationConsumer(bootstrap, topics=[types.customer_topic, types.order_topic],
                                 group_id=f"demo-sql-{run_id}", types=space_types)
    try:
        with consumer:
            return run_sql_consumer(consumer, store, idle_timeout_s=3.0)
    finally:
        store.close()


def _spark_pipelines(bootstrap: str, topics: list[str], space_types: dict[str, Any],
                     keyspace: str, lake: Path, checkpoints: Path) -> None:
    """Kafka -> Cassandra and Kafka -> Delta current state, on Spark, caught up once."""
    from gridstream.pipeline_config import build_pipelines, load_config
    from gridstream.spark import get_spark
    from gridstream.spark.runner import PipelineRunner
    from gridstream.spark.types import descriptor_to_table

    def pipeline(name: str, sink: dict[str, str]) -> dict[str, Any]:
        return {"name": name, "topics": topics, "checkpoint": str(checkpoints / name),
                "trigger": "available_now", "sink": sink}

    config = load_config({
        "kafka": {"bootstrap_servers": bootstrap},
        "types": {name: descriptor_to_table(d) for name, d in space_types.items()},
        "pipeline": [pipeline("to-cassandra", {"kind": "cassandra", "keyspace": keyspace}),
                     pipeline("to-lake", {"kind": "delta", "path": str(lake)})],
    })
    runner = PipelineRunner(build_pipelines(config),
                            lambda: get_spark(app_name="gridstream-demo"), poll_s=2.0)
    if runner.run() != 0:
        raise SystemExit("a Spark pipeline failed (see above)")


def _cassandra_cluster(cleanup: ExitStack) -> Any:
    from cassandra.cluster import Cluster

    host, port = stack.services(["cassandra"])[0].address.rsplit(":", 1)
    cluster = Cluster([host], port=int(port))
    cleanup.callback(cluster.shutdown)
    return cluster


@dataclass(frozen=True)
class DemoRun:
    """Where one demo run put everything (handed to ``tamper`` before the check)."""

    run_id: str
    work: Path
    space: Space
    bootstrap: str
    types: DemoTypes
    space_types: dict[str, Any]
    type_names: list[str]
    topics: list[str]
    keyspace: str
    spark_keyspace: str
    lake: Path
    db: Path
    cassandra: Any
    """A connected Cassandra session."""


@dataclass(frozen=True)
class DemoResult:
    """The comparison of every place with the grid; ``exit_code`` 0 when all match."""

    grid: Holding
    comparisons: list[Comparison]
    work: Path

    @property
    def exit_code(self) -> int:
        return 0 if all(c.matches for c in self.comparisons) else 1


def _table(result: DemoResult) -> Table:
    grid = result.grid
    table = Table(title="Reconciliation: grid vs Kafka vs stores (every property compared)")
    for column in ("place", "ops", "live entities", "state hash", "matches grid"):
        table.add_column(column, no_wrap=True)
    table.add_row(grid.place, str(grid.operations), str(len(grid.entities)),
                  compare(grid, grid).state_hash, "(reference)")
    for c in result.comparisons:
        mark = "[green]yes[/]" if c.matches else "[red]NO[/]"
        if c.notes:
            mark += " (" + "; ".join(c.notes) + ")"
        table.add_row(c.place, "-" if c.operations is None else str(c.operations),
                      str(c.live), c.state_hash, mark)
    return table


def _differences(result: DemoResult) -> list[str]:
    lines = []
    for c in result.comparisons:
        if c.matches:
            continue
        lines.append(f"[red]{c.place}[/]: {c.summary()}")
        if c.first is not None:
            lines.append(f"  first difference: {c.first.line()}")
    return lines


def _read_back(run: DemoRun) -> list[Holding]:
    descriptors = [run.space_types[n] for n in run.type_names]
    declared = {d.name: d for d in descriptors}
    from gridstream.spark import get_spark

    return [
        from_kafka(run.bootstrap, run.topics, declared, run.space.next_seq - 1,
                   f"demo-check-{run.run_id}"),
        from_sql(f"sqlite:///{run.db}", declared),
        from_cassandra(run.cassandra, run.keyspace, descriptors, "cassandra (mirror)"),
        from_cassandra(run.cassandra, run.spark_keyspace, descriptors, "cassandra (spark)"),
        from_lake(get_spark(app_name="gridstream-demo"), str(run.lake), declared),
    ]


def run_demo(*, keep_stack: bool = False, operations: int = 2000) -> int:
    """Run the quickstart; 0 when every place reconciles with the grid, else 1."""
    return run_and_check(keep_stack=keep_stack, operations=operations).exit_code


def run_and_check(*, keep_stack: bool = False, operations: int = 2000,
                  tamper: Callable[[DemoRun], None] | None = None) -> DemoResult:
    """The quickstart; ``tamper`` runs after the pipelines, before the read-back (tests
    use it to change a stored value behind the product's back)."""
    from gridstream.mirror import KafkaSyncEndpoint
    from gridstream.stores.cassandra import CassandraConfig, CassandraSyncEndpoint

    run_id = uuid.uuid4().hex[:8]
    work = stack.gridstream_home() / "demo" / run_id
    work.mkdir(parents=True)
    with ExitStack() as cleanup:
        with _step("starting the local stack (Kafka, Cassandra)"):
            for service in stack.services(["kafka", "cassandra"]):
                if service.status().state != "up" and not keep_stack:
                    cleanup.callback(service.down)
                service.up()
        bootstrap = stack.services(["kafka"])[0].address
        types = make_types(run_id)
        space = cleanup.enter_context(Space.embedded("demo", data_dir=work / "space"))
        space.introduce_type(types.customer)
        with _step(f"writing ~{operations} operations to the grid (a fifth in transactions)"):
            run_workload(space, types, operations)
        with _step("mirroring the operation log to Kafka (exactly-once)"):
            endpoint = KafkaSyncEndpoint(bootstrap)
            console.print("  " + _mirror(space, endpoint, f"demo-{run_id}", space.next_seq))
        keyspace = f"gridstream_demo_{run_id}"
        with _step(f"mirroring the same log straight to Cassandra ({keyspace})"):
            cassandra = CassandraSyncEndpoint(CassandraConfig(keyspace=keyspace))
            console.print("  " + _mirror(space, cassandra, f"demo-cql-{run_id}", space.next_seq))
        space_types = dict(space.types())
        with _step("SQL consumer: Kafka -> SQLite (idempotent by version)"):
            applied = _sql(bootstrap, types, space_types, work / "demo.db", run_id)
            console.print(f"  applied {applied} operations")
        topics = [types.customer_topic, types.order_topic]
        spark_keyspace, lake = f"gridstream_demo_{run_id}_spark", work / "lake"
        with _step(f"Spark pipelines: Kafka -> Cassandra ({spark_keyspace}) and -> Delta lake"):
            _spark_pipelines(bootstrap, topics, space_types, spark_keyspace, lake,
                             work / "checkpoints")
        run = DemoRun(run_id, work, space, bootstrap, types, space_types,
                      ["demo.Customer", types.order_type], topics, keyspace, spark_keyspace,
                      lake, work / "demo.db", _cassandra_cluster(cleanup).connect())
        if tamper is not None:
            tamper(run)
        grid = from_grid(space, run.type_names)
        with _step("reading everything back and comparing every property"):
            comparisons = [compare(grid, place) for place in _read_back(run)]
        result = DemoResult(grid, comparisons, work)
        console.print(_table(result))
        for line in _differences(result):
            console.print(line)
        console.print(f"work directory: {work}")
        return result
