"""``gridstream demo``: the whole product, end to end, on embedded defaults.

grid (embedded space + operation log) -> mirror (one Kafka transaction per batch) ->
Kafka topics -> a SQL consumer (SQLite) and Spark store feeds (Cassandra, lake);
and a Hazelcast map -> source connector -> Kafka -> API pipelines (a map/filter, a
windowed aggregation) -> sink connector -> Hazelcast maps (``gridstream.demo.hazelcast``),
the Spark flows in one run with its status page. Then two reconciliation tables: every
place must hold the same live entities, at the same versions, with the same value in
every property (``gridstream.reconcile``), and every Hazelcast map what its flows must
make of the orders.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from gridstream import stack
from gridstream._optional import require
from gridstream.demo.hazelcast import (
    HzNames,
    Orders,
    TopicReader,
    Watch,
    expectations,
    flows_config,
    hz_config,
)
from gridstream.demo.workload import DemoTypes, make_types, run_workload
from gridstream.grid.hazelcast import HazelcastAdapter
from gridstream.mirror.endpoint import SyncEndpoint
from gridstream.ops.run import Operated
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


def _store_pipelines(topics: list[str], space_types: dict[str, Any], keyspace: str,
                     lake: Path, checkpoints: Path) -> list[dict[str, Any]]:
    """Kafka -> Cassandra and Kafka -> Delta current state, caught up once."""
    def pipeline(name: str, sink: dict[str, str]) -> dict[str, Any]:
        return {"name": name, "topics": topics, "checkpoint": str(checkpoints / name),
                "trigger": "available_now", "sink": sink}

    return [pipeline("to-cassandra", {"kind": "cassandra", "keyspace": keyspace}),
            pipeline("to-lake", {"kind": "delta", "path": str(lake)})]


def _run_flows(bootstrap: str, space_types: dict[str, Any], store: list[dict[str, Any]],
               hz: HzPart) -> dict[str, Any]:
    """The store feeds and the Hazelcast flows in one run, status page served, until
    ``hz.watch`` says they are done; the run's status (every flow's counts)."""
    from gridstream.run.config import load_config, run_flows
    from gridstream.spark import get_spark
    from gridstream.spark.types import descriptor_to_table

    flows = flows_config(hz.names, hz.adapter.config, hz.checkpoints)
    config = load_config({
        "kafka": {"bootstrap_servers": bootstrap},
        "spark": {"app_name": "gridstream-demo"},
        "run": {"allowed_modules": ["gridstream.demo.flows"], "progress_interval_s": 1},
        "types": {name: descriptor_to_table(d) for name, d in space_types.items()},
        "pipeline": [*store, *flows["pipeline"]],
        "connector": flows["connector"],
    })
    with Operated(config.run, "demo") as ops:
        # started here, with the run's log file, so that it outlives the run (read-back)
        get_spark(config.spark.master, config.spark.app_name, log_file=ops.log.path)
        code = run_flows(config, ops, where="the demo's flows", until=hz.watch)
        if code != 0:
            raise SystemExit(f"a flow failed (see above; traces: {ops.log.path})")
        console.print(f"  {hz.watch.outcome}")
        return ops.monitor.status()


def _cassandra_cluster(cleanup: ExitStack) -> Any:
    Cluster = require("cassandra.cluster", "the demo").Cluster  # noqa: N806

    host, port = stack.services(["cassandra"])[0].address.rsplit(":", 1)
    cluster = Cluster([host], port=int(port))
    cleanup.callback(cluster.shutdown)
    return cluster


@dataclass
class HzPart:
    """The demo's Hazelcast half while it runs (``gridstream.demo.hazelcast``)."""

    names: HzNames
    adapter: HazelcastAdapter
    checkpoints: Path
    topic: TopicReader
    watch: Watch


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
    hazelcast: HazelcastAdapter
    hz_names: HzNames


@dataclass(frozen=True)
class DemoResult:
    """The comparison of every place with what it must hold; ``exit_code`` 0 when all
    match."""

    grid: Holding
    comparisons: list[Comparison]
    hz_comparisons: list[tuple[str, Comparison]]
    """(what the place is compared with, the comparison) of the Hazelcast half."""
    work: Path
    problems: list[str] = field(default_factory=list)
    """What went wrong besides a place that differs (the flows not caught up in time)."""

    @property
    def exit_code(self) -> int:
        every = [*self.comparisons, *(c for _, c in self.hz_comparisons)]
        return 0 if all(c.matches for c in every) and not self.problems else 1


def _mark(c: Comparison) -> str:
    mark = "[green]yes[/]" if c.matches else "[red]NO[/]"
    return mark + (" (" + "; ".join(c.notes) + ")" if c.notes else "")


def _table(result: DemoResult) -> Table:
    grid = result.grid
    table = Table(title="Reconciliation: grid vs Kafka vs stores (every property compared)")
    for column in ("place", "ops", "live entities", "state hash", "matches grid"):
        table.add_column(column, no_wrap=True)
    table.add_row(grid.place, str(grid.operations), str(len(grid.entities)),
                  compare(grid, grid).state_hash, "(reference)")
    for c in result.comparisons:
        table.add_row(c.place, "-" if c.operations is None else str(c.operations),
                      str(c.live), c.state_hash, _mark(c))
    return table


def _hz_table(result: DemoResult) -> Table:
    table = Table(title="Hazelcast -> connectors, pipelines -> Hazelcast")
    for column in ("place", "compared with", "entries", "state hash", "matches"):
        table.add_column(column, no_wrap=True)
    for reference, c in result.hz_comparisons:
        table.add_row(c.place, reference, str(c.live), c.state_hash, _mark(c))
    return table


def _rates(status: dict[str, Any]) -> Table:
    table = Table(title="The run's flows (rec/s: records read / their batches' time)")
    for column in ("flow", "kind", "batches", "read", "written", "busy", "rec/s"):
        table.add_column(column, no_wrap=True)
    for f in status["flows"]:
        rate = f"{f['read'] / f['busy_s']:,.0f}" if f["busy_s"] > 0 else "-"
        kind = {"store feed": "store", "source connector": "source",
                "sink connector": "sink"}.get(f["kind"], f["kind"])
        table.add_row(f["name"], kind, str(f["batches"]), f"{f['read']:,}",
                      f"{f['written']:,}", f"{f['busy_s']:.1f}s", rate)
    return table


def _differences(result: DemoResult) -> list[str]:
    lines = [f"[red]{problem}[/]" for problem in result.problems]
    for c in [*result.comparisons, *(c for _, c in result.hz_comparisons)]:
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


def _hz_read_back(hz: HzPart) -> list[tuple[str, Comparison]]:
    """Each place of the Hazelcast half compared with what it must hold."""
    hz.topic.read_to_end()
    return [(what, compare(want, got))
            for what, want, got in expectations(hz.adapter, hz.names, hz.topic)]


def run_demo(*, keep_stack: bool = False, operations: int = 2000) -> int:
    """Run the quickstart; 0 when every place reconciles with the grid, else 1."""
    return run_and_check(keep_stack=keep_stack, operations=operations).exit_code


def _hazelcast(cleanup: ExitStack, run_id: str, work: Path, bootstrap: str,
               operations: int) -> HzPart:
    """The orders map with its first order, the topic's reader and the run's ``Watch``."""
    names = HzNames.of(run_id)
    adapter = HazelcastAdapter(hz_config())
    adapter.open()
    cleanup.callback(adapter.close)
    orders = Orders(adapter, names.orders, operations)
    orders.first()
    from confluent_kafka.admin import AdminClient

    from gridstream.kafka.admin import TopicSpec, ensure_topics

    # the pipelines' outputs exist from the start: the sink connector reads along
    ensure_topics(AdminClient({"bootstrap.servers": bootstrap}),
                  [TopicSpec(names.paid, 1), TopicSpec(names.windows, 1)])
    topic = TopicReader(bootstrap, names.orders)
    cleanup.callback(topic.close)
    watch = Watch(orders, names, adapter, topic, ("to-cassandra", "to-lake"),
                  timeout_s=WATCH_TIMEOUT_S)
    return HzPart(names, adapter, work / "checkpoints", topic, watch)


WATCH_TIMEOUT_S = 180.0
"""How long the demo's flows may take to bring every place up to date."""


def run_and_check(*, keep_stack: bool = False, operations: int = 2000,
                  tamper: Callable[[DemoRun], None] | None = None) -> DemoResult:
    """The quickstart; ``tamper`` runs after the flows, before the read-back (tests
    use it to change a stored value behind the product's back)."""
    from gridstream.mirror import KafkaEndpointConfig, KafkaSyncEndpoint
    from gridstream.stores.cassandra import CassandraConfig, CassandraSyncEndpoint

    run_id = uuid.uuid4().hex[:8]
    work = stack.gridstream_home() / "demo" / run_id
    work.mkdir(parents=True)
    with ExitStack() as cleanup:
        with _step("starting the local stack (Kafka, Cassandra, Hazelcast)"):
            for service in stack.services(["kafka", "cassandra", "hazelcast"]):
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
            endpoint = KafkaSyncEndpoint(KafkaEndpointConfig(bootstrap_servers=bootstrap))
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
        hz = _hazelcast(cleanup, run_id, work, bootstrap, max(50, operations // 2))
        from gridstream.spark.session import spark_running

        if not spark_running():  # a session of the caller's (a test's) is left running
            cleanup.callback(_stop_spark)
        with _step(f"Spark: store feeds Kafka -> Cassandra ({spark_keyspace}) and -> "
                   f"Delta lake; Hazelcast map {hz.names.orders} -> source connector -> "
                   "Kafka -> pipelines paid-orders and order-windows -> sink connector -> "
                   "Hazelcast (orders written while they run)"):
            status = _run_flows(bootstrap, space_types, _store_pipelines(
                topics, space_types, spark_keyspace, lake, work / "checkpoints"), hz)
        run = DemoRun(run_id, work, space, bootstrap, types, space_types,
                      ["demo.Customer", types.order_type], topics, keyspace, spark_keyspace,
                      lake, work / "demo.db", _cassandra_cluster(cleanup).connect(),
                      hz.adapter, hz.names)
        if tamper is not None:
            tamper(run)
        grid = from_grid(space, run.type_names)
        with _step("reading everything back and comparing every property"):
            comparisons = [compare(grid, place) for place in _read_back(run)]
            hz_comparisons = _hz_read_back(hz)
        problems = [] if hz.watch.caught_up else [f"the flows {hz.watch.outcome}"]
        result = DemoResult(grid, comparisons, hz_comparisons, work, problems)
        console.print(_rates(status))
        console.print(_table(result))
        console.print(_hz_table(result))
        for line in _differences(result):
            console.print(line)
        console.print(f"work directory: {work}")
        return result


def _stop_spark() -> None:
    from pyspark import SparkContext

    context = SparkContext._active_spark_context  # the process's, whatever the thread
    if context is not None:
        context.stop()
