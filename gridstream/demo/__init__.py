"""``gridstream demo``: the quickstart, end to end, on embedded defaults.

grid (embedded space + operation log) -> mirror (one Kafka transaction per batch) ->
Kafka topics -> a SQL consumer (SQLite) and Spark store pipelines (Cassandra, lake) ->
a reconciliation table: every place must hold the same entities at the same versions.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from gridstream import stack
from gridstream.demo.reconcile import (
    Holding,
    from_cassandra,
    from_grid,
    from_kafka,
    from_lake,
    from_sql,
    state_hash,
)
from gridstream.demo.workload import DemoTypes, make_types, run_workload
from gridstream.mirror.endpoint import SyncEndpoint
from gridstream.space import Space

__all__ = ["run_demo"]

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


def _table(holdings: list[Holding]) -> Table:
    reference = holdings[0]
    table = Table(title="Reconciliation: grid vs Kafka vs stores")
    for column in ("place", "operations", "live entities", "state hash", "matches grid"):
        table.add_column(column, no_wrap=True)
    for h in holdings:
        same = h.state == reference.state
        mark = "[green]yes[/]" if same else "[red]NO[/]"
        if h.notes:
            mark += " (" + "; ".join(h.notes) + ")"
        table.add_row(h.place, "-" if h.operations is None else str(h.operations),
                      str(len(h.state)), state_hash(h.state), mark)
    return table


def run_demo(*, keep_stack: bool = False, operations: int = 2000) -> int:
    """Run the quickstart; 0 when every place reconciles with the grid."""
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
        type_names = ["demo.Customer", types.order_type]
        space_types = dict(space.types())
        with _step("SQL consumer: Kafka -> SQLite (idempotent by version)"):
            applied = _sql(bootstrap, types, space_types, work / "demo.db", run_id)
            console.print(f"  applied {applied} operations")
        topics = [types.customer_topic, types.order_topic]
        spark_keyspace, lake = f"gridstream_demo_{run_id}_spark", work / "lake"
        with _step(f"Spark pipelines: Kafka -> Cassandra ({spark_keyspace}) and -> Delta lake"):
            _spark_pipelines(bootstrap, topics, space_types, spark_keyspace, lake,
                             work / "checkpoints")
        holdings = [from_grid(space, type_names)]
        with _step("reading everything back"):
            holdings.append(from_kafka(bootstrap, topics, space_types, space.next_seq - 1,
                                       f"demo-check-{run_id}"))
            holdings.append(from_sql(str(work / "demo.db"), type_names))
            descriptors = [space_types[n] for n in type_names]
            cluster = _cassandra_cluster(cleanup)
            session = cluster.connect()
            holdings.append(from_cassandra(session, keyspace, descriptors, "cassandra (mirror)"))
            holdings.append(from_cassandra(session, spark_keyspace, descriptors,
                                           "cassandra (spark)"))
            holdings.append(from_lake(lake))
        console.print(_table(holdings))
        console.print(f"work directory: {work}")
        ok = all(h.state == holdings[0].state and not h.notes for h in holdings)
        return 0 if ok else 1
