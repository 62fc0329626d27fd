"""The demo's check looks at the data: one value changed behind the product's back in a
store makes that place not match, names the entity and the property, and fails the run."""

from __future__ import annotations

import sqlite3
from typing import Any

from gridstream.demo import DemoRun, run_and_check
from gridstream.model import SpaceDocument
from gridstream.stores.cassandra import CassandraReader
from gridstream.stores.cassandra.naming import qualified_table, quote_identifier
from gridstream.stores.sql import SqlStore


def test_one_changed_value_in_cassandra_and_in_sql_fails_the_demo(
        kafka_service: Any, cassandra_service: Any) -> None:
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

    result = run_and_check(keep_stack=True, operations=300, tamper=tamper)

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
