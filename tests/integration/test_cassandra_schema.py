"""Schema against a real Cassandra: tables on first sight, evolution, conflicts, indexes,
and the mirror endpoint built on the mapping."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from gridstream.errors import EndpointError, StoreError
from gridstream.operations import Bulk, Operation, OpType, PropertySpec, TypeDescriptor
from gridstream.stores.cassandra import (
    CassandraConfig,
    CassandraReader,
    CassandraSchema,
    CassandraSyncEndpoint,
    CassandraWriter,
)

ADDRESS = PropertySpec(
    "address", "object", (PropertySpec("street", "str"), PropertySpec("no", "int"))
)
PERSON = TypeDescriptor(
    "com.example.Person",
    "id",
    fixed=(
        PropertySpec("id", "int"),
        PropertySpec("name", "str"),
        PropertySpec("photo", "bytes"),
        ADDRESS,
    ),
    indexes=("name", "address.street", "photo", "nickname", "address"),
)
TABLE = "com_example_Person"


def columns(session: Any, keyspace: str, table: str) -> dict[str, str]:
    rows = session.execute(
        "SELECT column_name, type FROM system_schema.columns "
        "WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, table),
    )
    return {r.column_name: r.type for r in rows}


def write(version: int, data: dict[str, Any], type_name: str = PERSON.name) -> Operation:
    return Operation(OpType.WRITE, type_name, data.get("id", 1), version, data, 0, 0)


def test_table_on_first_sight_and_new_columns_as_types_evolve(
    cassandra_session: Any, keyspace: str
) -> None:
    writer = CassandraWriter(cassandra_session, keyspace)
    writer.apply([write(1, {"id": 1, "name": "a"})], {PERSON.name: PERSON})
    assert columns(cassandra_session, keyspace, TABLE) == {
        "id": "bigint",
        "_version": "bigint",
        "name": "text",
        "photo": "blob",
        "address.street": "text",
        "address.no": "bigint",
    }
    assert writer.schema.counters.tables_created == 1

    writer.apply(
        [write(2, {"id": 2, "newName": "n", "address": {"street": "s", "zip": "z"}})],
        {PERSON.name: PERSON},
    )
    added = columns(cassandra_session, keyspace, TABLE)
    assert added["newName"] == "blob" and added["address.zip"] == "blob"
    assert writer.schema.counters.columns_added == 2  # in one ALTER TABLE ... ADD (a, b)

    evolved = TypeDescriptor(PERSON.name, "id", fixed=(*PERSON.fixed, PropertySpec("email", "str")))
    writer.apply([write(3, {"id": 3, "email": "e@x"})], {PERSON.name: evolved})
    assert columns(cassandra_session, keyspace, TABLE)["email"] == "text"

    other = CassandraWriter(cassandra_session, keyspace)  # another process: reads the schema
    other.apply([write(4, {"id": 4, "newName": "m"})], {PERSON.name: PERSON})
    assert other.schema.counters.tables_created == 0 and other.schema.counters.columns_added == 0
    entries = {e.id: e.data for e in CassandraReader(cassandra_session, keyspace).read(evolved)}
    assert entries[2]["address"] == {"street": "s", "no": None, "zip": "z"}
    assert entries[3]["email"] == "e@x" and entries[4]["newName"] == "m"


def test_type_conflict_with_an_existing_column_is_a_store_error(
    cassandra_session: Any, keyspace: str
) -> None:
    writer = CassandraWriter(cassandra_session, keyspace)
    writer.apply(
        [write(1, {"id": 1, "name": "a", "age": 3})], {PERSON.name: PERSON}
    )  # age: dynamic blob

    renamed_kind = TypeDescriptor(
        PERSON.name, "id", fixed=(PropertySpec("id", "int"), PropertySpec("name", "int"))
    )
    with pytest.raises(StoreError, match="'name'.*text.*bigint"):
        CassandraWriter(cassandra_session, keyspace).apply(
            [write(2, {"id": 2, "name": 5})], {PERSON.name: renamed_kind}
        )

    declared_age = TypeDescriptor(
        PERSON.name, "id", fixed=(*PERSON.fixed, PropertySpec("age", "int"))
    )
    with pytest.raises(StoreError, match="'age'.*blob.*bigint"):
        writer.apply([write(3, {"id": 3, "age": 4})], {PERSON.name: declared_age})

    string_ids = TypeDescriptor(PERSON.name, "id", fixed=(PropertySpec("id", "str"),))
    with pytest.raises(StoreError, match="keyed by"):
        CassandraWriter(cassandra_session, keyspace).apply(
            [write(4, {"id": "x"})], {PERSON.name: string_ids}
        )


def test_declared_indexes(cassandra_session: Any, keyspace: str) -> None:
    writer = CassandraWriter(cassandra_session, keyspace)
    types = {PERSON.name: PERSON}
    writer.apply([write(1, {"id": 1, "name": "ann", "address": {"street": "main"}})], types)
    writer.apply([write(2, {"id": 2, "name": "bob", "nickname": "b"})], types)  # nickname appears
    rows = cassandra_session.execute(
        "SELECT options, kind FROM system_schema.indexes "
        "WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, TABLE),
    )
    kinds = {
        r.options["target"].strip('"'): (r.kind, r.options.get("class_name", "")) for r in rows
    }
    assert set(kinds) == {"name", "address.street", "photo", "nickname"}
    assert kinds["name"] == ("CUSTOM", "sai")
    assert kinds["address.street"][0] == "COMPOSITES"  # SAI refuses dotted names: legacy index
    assert writer.schema.counters.indexes_created == 4
    assert writer.schema.counters.indexes_skipped == 1  # "address" is a flattened object
    by_name = cassandra_session.execute(
        f'SELECT id FROM "{keyspace}"."{TABLE}" WHERE name = %s', ("bob",)
    )
    assert [r.id for r in by_name] == [2]
    by_street = cassandra_session.execute(
        f'SELECT id FROM "{keyspace}"."{TABLE}" WHERE "address.street" = %s', ("main",)
    )
    assert [r.id for r in by_street] == [1]


def test_long_and_odd_type_names(cassandra_session: Any, keyspace: str) -> None:
    long_name = "com.example." + "deeply.nested.package." * 3 + "VeryLongTypeNameForAnOrderLine"
    odd_name = "my-app.Order$Line"
    types = {
        n: TypeDescriptor(n, "id", fixed=(PropertySpec("id", "str"),))
        for n in (long_name, odd_name)
    }
    writer = CassandraWriter(cassandra_session, keyspace)
    writer.apply(
        [write(1, {"id": "a", "v": 1}, long_name), write(2, {"id": "b", "v": 2}, odd_name)], types
    )
    tables = {
        r.table_name
        for r in cassandra_session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,)
        )
    }
    assert tables == {writer.table_for(long_name), writer.table_for(odd_name), "gs_tables"}
    assert all(len(t) <= 48 for t in tables)
    reader = CassandraReader(cassandra_session, keyspace)
    assert [e.data for e in reader.read(types[odd_name])] == [{"id": "b", "v": 2}]


@pytest.fixture()
def fresh_keyspace(cassandra_session: Any) -> Iterator[str]:
    name = f"gs_test_{uuid.uuid4().hex[:12]}"
    yield name
    cassandra_session.execute(f'DROP KEYSPACE IF EXISTS "{name}"', timeout=60)


def test_keyspace_creation(cassandra_session: Any, fresh_keyspace: str) -> None:
    CassandraSchema(cassandra_session, fresh_keyspace, replication_factor=1).ensure_keyspace()
    row = cassandra_session.execute(
        "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
        (fresh_keyspace,),
    ).one()
    assert row.replication["class"].endswith("SimpleStrategy")
    assert row.replication["replication_factor"] == "1"


def test_endpoint_delivers_bulks(
    cassandra_service: Any, cassandra_session: Any, fresh_keyspace: str
) -> None:
    host, port = cassandra_service.address.rsplit(":", 1)
    config = CassandraConfig(keyspace=fresh_keyspace, contact_points=(host,), port=int(port))
    endpoint = CassandraSyncEndpoint(config)
    endpoint.open("mirror-test")
    try:
        types = {PERSON.name: PERSON}
        bulks = [
            Bulk(1, (write(1, {"id": 1, "name": "a"}), write(2, {"id": 2, "name": "b"}))),
            Bulk(3, (Operation(OpType.REMOVE, PERSON.name, 1, 3, None, 0, 0),)),
            Bulk(4, (write(4, {"id": 3}),)),  # id only: counted, not written
        ]
        endpoint.write_batch(bulks, types)
        endpoint.write_batch(bulks, types)  # redelivery after a crash: same state
        assert endpoint.position() is None
        assert endpoint.counters.skipped_id_only == 2 and endpoint.counters.deletes == 2
        entries = [e.data for e in endpoint.reader().read(PERSON)]
        assert entries == [{"id": 2, "name": "b", "photo": None, "address": None}]

        conflicting = TypeDescriptor(
            PERSON.name, "id", fixed=(PropertySpec("id", "int"), PropertySpec("name", "int"))
        )
        with pytest.raises(EndpointError) as info:
            endpoint.write_batch(
                [Bulk(5, (write(5, {"id": 5, "name": 1}),))], {PERSON.name: conflicting}
            )
        assert isinstance(info.value.__cause__, StoreError)
    finally:
        endpoint.close()
