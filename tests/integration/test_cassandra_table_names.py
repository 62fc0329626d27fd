"""Type names the seed's rule merges (``shop.Order``, ``shop_Order``, ``shop$Order``) get
tables of their own, recorded in ``gs_tables`` so that new writers and readers agree."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gridstream.operations import Operation, OpType, PropertySpec, TypeDescriptor
from gridstream.stores.cassandra import CassandraReader, CassandraWriter
from gridstream.stores.cassandra.tables import CassandraTableRegistry
from gridstream.stores.naming import TableNameTakenError

NAMES = ("shop.Order", "shop_Order", "shop$Order")
TYPES = {n: TypeDescriptor(n, "id", fixed=(PropertySpec("id", "int"),)) for n in NAMES}


def ops(type_name: str, ids: range, version: int) -> list[Operation]:
    return [
        Operation(OpType.WRITE, type_name, i, version + i, {"id": i, "owner": type_name}, 0, 0)
        for i in ids
    ]


def stored(reader: CassandraReader, type_name: str) -> dict[int, str]:
    return {int(e.id): str(e.data["owner"]) for e in reader.read(TYPES[type_name])}


def data_tables(session: Any, keyspace: str) -> set[str]:
    rows = session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,)
    )
    return {r.table_name for r in rows} - {"gs_tables"}


@pytest.fixture()
def other_session(cassandra_service: Any) -> Iterator[Any]:
    """A second driver connection: what a restarted process would open."""
    from cassandra.cluster import Cluster

    host, port = cassandra_service.address.rsplit(":", 1)
    cluster = Cluster([host], port=int(port), protocol_version=5)
    yield cluster.connect()
    cluster.shutdown()


def test_colliding_type_names_get_their_own_tables_across_restarts(
    cassandra_session: Any, other_session: Any, keyspace: str
) -> None:
    writer = CassandraWriter(cassandra_session, keyspace)
    for n, type_name in enumerate(NAMES):
        writer.apply(ops(type_name, range(n * 10, n * 10 + 3), 100), TYPES)
    reader = CassandraReader(cassandra_session, keyspace)
    for n, type_name in enumerate(NAMES):
        assert stored(reader, type_name) == {i: type_name for i in range(n * 10, n * 10 + 3)}
    assert len(data_tables(cassandra_session, keyspace)) == 3
    tables = {n: writer.table_for(n) for n in NAMES}
    assert tables["shop.Order"] == "shop_Order"  # the first type keeps the seed's name
    assert data_tables(cassandra_session, keyspace) == set(tables.values())

    # a new process: new session, writer and reader; the types now come in reverse order
    again = CassandraWriter(other_session, keyspace)
    for n, type_name in reversed(list(enumerate(NAMES))):
        again.apply(ops(type_name, range(n * 10 + 3, n * 10 + 5), 200), TYPES)
    assert {n: again.table_for(n) for n in NAMES} == tables
    assert data_tables(other_session, keyspace) == set(tables.values())
    fresh_reader = CassandraReader(other_session, keyspace)
    for n, type_name in enumerate(NAMES):
        assert stored(fresh_reader, type_name) == {
            i: type_name for i in range(n * 10, n * 10 + 5)
        }


def test_a_reader_of_an_unknown_type_reads_no_other_types_rows(
    cassandra_session: Any, keyspace: str
) -> None:
    CassandraWriter(cassandra_session, keyspace).apply(ops("shop.Order", range(3), 1), TYPES)
    reader = CassandraReader(cassandra_session, keyspace)
    assert stored(reader, "shop_Order") == {}
    assert stored(reader, "shop.Order") == {i: "shop.Order" for i in range(3)}


def test_a_table_claimed_for_another_type_is_refused(
    cassandra_session: Any, other_session: Any, keyspace: str
) -> None:
    mine = CassandraTableRegistry(cassandra_session, keyspace, create=True)
    theirs = CassandraTableRegistry(other_session, keyspace, create=True)
    assert mine.load() == {}
    assert theirs.record("shop_Order", "t1") == "t1"
    with pytest.raises(TableNameTakenError) as caught:
        mine.record("shop.Order", "t1")
    assert (caught.value.table, caught.value.owner) == ("t1", "shop_Order")
    assert mine.record("shop_Order", "t1") == "t1"  # the same claim again is accepted
    assert mine.load() == theirs.load() == {"shop_Order": "t1"}


def test_a_reader_creates_no_registry(cassandra_session: Any, keyspace: str) -> None:
    reader = CassandraReader(cassandra_session, keyspace)
    assert stored(reader, "shop.Order") == {}
    assert data_tables(cassandra_session, keyspace) == set()
    rows = cassandra_session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,)
    )
    assert [r.table_name for r in rows] == []
