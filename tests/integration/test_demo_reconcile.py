"""The demo's check looks at the data: one value changed behind the product's back in a
store, or in a Hazelcast map, makes that place not match, names the entity and the
property, and fails the run."""

from __future__ import annotations

import sqlite3
from typing import Any

from gridstream.demo import DemoRun, run_and_check
from gridstream.demo.hazelcast import read_map
from gridstream.grid.contract import Write
from gridstream.model import SpaceDocument
from gridstream.stores.cassandra import CassandraReader
from gridstream.stores.cassandra.naming import qualified_table, quote_identifier
from gridstream.stores.sql import SqlStore


def _tamper_hazelcast(run: DemoRun, changed: dict[str, Any]) -> None:
    """The orders map (the grid: its topic no longer matches), one paid order's amount,
    one window removed."""
    names, hz = run.hz_names, run.hazelcast
    orders = read_map(hz, names.orders)
    new = sorted(k for k, v in orders.items() if v["status"] == "NEW")[0]
    hz.apply(names.orders, [Write(new, {**orders[new], "customer": "c-tampered"})])
    paid = read_map(hz, names.paid)
    victim = sorted(paid)[0]
    hz.apply(names.paid, [Write(victim, {**paid[victim], "amount": -1})])
    window = sorted(read_map(hz, names.windows))[0]
    hz.apply(names.windows, [Write(window, None)])
    changed.update(order=new, customer=orders[new]["customer"], paid=victim,
                   amount=paid[victim]["amount"], window=window)


def test_one_changed_value_in_cassandra_in_sql_and_in_hazelcast_fails_the_demo(
        kafka_service: Any, cassandra_service: Any, hazelcast_service: Any,
        spark: Any) -> None:
    changed: dict[str, Any] = {}

    def tamper(run: DemoRun) -> None:
        customers = sorted(run.space.read_multiple(SpaceDocument("demo.Customer")),
                           key=lambda c: str(c["id"]))
        victim, other = customers[0], customers[1]
        descriptor = run.space_types["demo.Customer"]
        reader = CassandraReader(run.cassandra, run.keyspace)
        table = qualified_table(run.keyspace, reader.tables.lookup(descriptor.name))
        id_column = reader.mapping.layout(descriptor).id_column
        run.cassandra.execute(
            f"UPDATE {table} SET {quote_identifier('name')} = %s "
            f"WHERE {quote_identifier(id_column)} = %s", ("tampered", victim["id"]))
        changed.update(id=victim["id"], name=victim["name"])
        with SqlStore(f"sqlite:///{run.db}") as store:
            sql_table = store.table_name(descriptor.name)
        with sqlite3.connect(run.db) as conn:
            done = conn.execute(
                f"UPDATE \"{sql_table}\" SET data = json_set(data, '$.address.city', "  # noqa: S608
                "'Atlantis') WHERE id = ?", (other["id"],))
            assert done.rowcount == 1
        changed.update(sql_id=other["id"], city=other["address"]["city"])
        _tamper_hazelcast(run, changed)

    result = run_and_check(keep_stack=True, operations=300, tamper=tamper)
    # a Spark session running before the demo (here the tests') is not the demo's to stop
    assert not spark.sparkContext._jsc.sc().isStopped()

    assert result.exit_code == 1
    places = {c.place: c for c in result.comparisons}
    mirror = places["cassandra (mirror)"]
    assert not mirror.matches
    assert (mirror.missing, mirror.extra, mirror.different) == (0, 0, 1)
    assert mirror.first is not None
    assert (mirror.first.type_name, mirror.first.id, mirror.first.path) == \
        ("demo.Customer", changed["id"], "name")
    assert (mirror.first.grid, mirror.first.place) == (f'"{changed["name"]}"', '"tampered"')
    sql = places["sql"]
    assert (sql.missing, sql.extra, sql.different) == (0, 0, 1)
    assert sql.first is not None
    assert (sql.first.type_name, sql.first.id, sql.first.path) == \
        ("demo.Customer", changed["sql_id"], "address.city")
    assert (sql.first.grid, sql.first.place) == (f'"{changed["city"]}"', '"Atlantis"')
    # the same data through Kafka, the Spark pipeline to Cassandra and Delta still matches
    for place in ("kafka", "cassandra (spark)", "lake (delta)"):
        assert places[place].matches, (place, places[place].summary(), places[place].first)
    assert places["kafka"].state_hash == places["lake (delta)"].state_hash
    hz = {c.place: c for _, c in result.hz_comparisons}
    assert set(hz) == {"kafka orders", "hz paid-orders", "hz order-windows"}
    topic = hz["kafka orders"]  # the grid changed behind the connector's back
    assert (topic.missing, topic.extra, topic.different) == (0, 0, 1)
    assert topic.first is not None
    assert (topic.first.id, topic.first.path) == (changed["order"], "customer")
    assert (topic.first.grid, topic.first.place) == ('"c-tampered"', f'"{changed["customer"]}"')
    paid = hz["hz paid-orders"]
    assert (paid.missing, paid.extra, paid.different) == (0, 0, 1)
    assert paid.first is not None
    assert (paid.first.id, paid.first.path) == (changed["paid"], "amount")
    assert (paid.first.grid, paid.first.place) == (str(changed["amount"]), "-1")
    windows = hz["hz order-windows"]
    assert (windows.missing, windows.extra, windows.different) == (1, 0, 0)
    assert windows.first is not None and windows.first.id == changed["window"]
    assert windows.live > 10  # windows were emitted, not an empty map matching nothing
