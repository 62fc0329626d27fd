"""The writer's statements per operation, against a recording fake session and schema
(the real behaviour against Cassandra is in tests/integration/test_cassandra_*.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pytest

from gridstream.errors import StoreError
from gridstream.operations import Operation, OpType, PropertySpec, TypeDescriptor
from gridstream.stores.cassandra.columns import VERSION_COLUMN, Column
from gridstream.stores.cassandra.flatten import DefaultFlattenFilter, TypeLayout
from gridstream.stores.cassandra.mapping import CassandraMapping
from gridstream.stores.cassandra.schema import CassandraSchema, TableState
from gridstream.stores.cassandra.writer import CassandraWriter
from gridstream.stores.naming import TableNames
from tests.unit.stores.memory_registry import MemoryRegistry

PERSON = TypeDescriptor(
    "com.example.Person",
    "id",
    fixed=(
        PropertySpec("id", "int"),
        PropertySpec("name", "str"),
        PropertySpec(
            "address", "object", (PropertySpec("street", "str"), PropertySpec("no", "int"))
        ),
    ),
)
TYPES = {PERSON.name: PERSON}
TABLE = "com_example_Person"


@dataclass
class Bound:
    cql: str
    params: tuple[Any, ...]


class FakePrepared:
    def __init__(self, cql: str) -> None:
        self.cql = cql
        self.is_idempotent = False
        self.consistency_level: int | None = None

    def bind(self, params: tuple[Any, ...]) -> Bound:
        return Bound(self.cql, tuple(params))


class FakeRows:
    def __init__(self, row: tuple[Any, ...] | None) -> None:
        self.row = row

    def one(self) -> tuple[Any, ...] | None:
        return self.row


class FakeSession:
    """Prepares anything; answers the writer's single-column reads from ``cells``."""

    def __init__(self) -> None:
        self.prepared: list[str] = []
        self.cells: dict[str, tuple[Any, int]] = {}
        self.reads: list[Bound] = []

    def prepare(self, cql: str) -> FakePrepared:
        self.prepared.append(cql)
        return FakePrepared(cql)

    def execute(self, statement: Bound) -> FakeRows:
        self.reads.append(statement)
        column = statement.cql.split('"')[1]
        return FakeRows(self.cells.get(column))


class FakeSchema(CassandraSchema):
    """Tables in memory; DDL is applied directly instead of executed."""

    def __init__(self) -> None:
        super().__init__(None, "ks")
        self.tables: dict[str, TableState] = {}

    def load(self, table: str) -> TableState | None:
        state = self.tables.get(table)
        return (
            None
            if state is None
            else TableState(state.name, state.id_column, state.id_type, dict(state.columns))
        )

    def _create(self, table: str, layout: TypeLayout, id_type: str) -> None:
        columns = {layout.id_column: id_type, VERSION_COLUMN: "bigint"}
        columns.update((c.name, c.cql_type) for c in layout.columns.values())
        self.tables[table] = TableState(table, layout.id_column, id_type, columns)

    def ensure_columns(self, state: TableState, columns: Iterable[Column]) -> None:
        for col in self._missing(state, columns):
            self.tables[state.name].columns[col.name] = col.cql_type
            state.columns[col.name] = col.cql_type


@dataclass
class Result:
    success: bool
    result_or_exc: Any


class FakeBatch:
    def __init__(self, batch_type: Any, consistency_level: Any = None) -> None:
        self.statements: list[Bound] = []
        self.is_idempotent = False

    def add(self, statement: Bound) -> None:
        self.statements.append(statement)


def flat(requests: list[Any]) -> list[Bound]:
    """The statements of the executed requests, batches opened."""
    return [s for r in requests for s in (r.statements if isinstance(r, FakeBatch) else [r])]


@pytest.fixture
def executed(monkeypatch: pytest.MonkeyPatch) -> list[Bound]:
    """The requests the writer executed (a lone statement, or a ``FakeBatch``)."""
    monkeypatch.setattr("cassandra.query.BatchStatement", FakeBatch)
    statements: list[Bound] = []

    def fake_execute(session: Any, pairs: list[tuple[Bound, None]], **kwargs: Any) -> list[Result]:
        assert kwargs["concurrency"] >= 1
        statements.extend(statement for statement, _ in pairs)
        return [Result(True, None) for _ in pairs]

    monkeypatch.setattr("cassandra.concurrent.execute_concurrent", fake_execute)
    return statements


def make_writer(**options: Any) -> CassandraWriter:
    w = CassandraWriter(FakeSession(), "ks", **options)
    w.schema = FakeSchema()
    w.tables = TableNames(MemoryRegistry(), w.mapping.seed_table_name, max_length=48)
    return w


@pytest.fixture
def writer() -> CassandraWriter:
    return make_writer(replace_on_write=False)


def session_of(writer: CassandraWriter) -> FakeSession:
    assert isinstance(writer.session, FakeSession)
    return writer.session


def op(
    kind: OpType, version: int, data: dict[str, Any] | None, removed: tuple[str, ...] = ()
) -> Operation:
    return Operation(kind, PERSON.name, 1, version, data, 0, 0, removed=removed)


def insert_values(bound: Bound) -> dict[str, Any]:
    columns = bound.cql.split("(", 1)[1].split(")", 1)[0]
    names = [c.strip().strip('"') for c in columns.split(",")]
    return dict(zip(names, bound.params[:-1], strict=True))


def test_write_inserts_non_null_columns_with_version_timestamp(
    writer: CassandraWriter, executed: list[Bound]
) -> None:
    writer.apply([op(OpType.WRITE, 5, {"id": 1, "name": "a", "address": None, "x": 2})], TYPES)
    (bound,) = executed
    assert bound.cql.startswith(f'INSERT INTO "ks"."{TABLE}" ')
    assert bound.cql.endswith("USING TIMESTAMP ?")
    values = insert_values(bound)
    assert values["id"] == 1 and values["_version"] == 5 and values["name"] == "a"
    assert set(values) == {"id", "_version", "name", "x"}
    assert isinstance(values["x"], bytes)  # dynamic: a tagged blob
    assert bound.params[-1] == 5
    assert writer.counters.inserts == 1


def test_update_in_nulls_mode_replaces_the_row_in_one_json_insert(executed: list[Bound]) -> None:
    writer = make_writer(replace_mode="nulls")
    writer.apply([op(OpType.UPDATE, 6, {"id": 1, "address": {"street": "s", "no": None}})], TYPES)
    (bound,) = executed
    assert bound.cql == f'INSERT INTO "ks"."{TABLE}" JSON ? DEFAULT NULL USING TIMESTAMP ?'
    doc, timestamp = bound.params
    assert timestamp == 6
    assert json.loads(doc) == {'"id"': 1, '"_version"': 6, '"address.street"': "s"}
    assert writer.counters.replaces == 1


def test_write_and_update_replace_with_a_row_deletion_one_below_the_version(
    executed: list[Any],
) -> None:
    writer = make_writer()
    writer.apply([op(OpType.WRITE, 6, {"id": 1, "name": "a", "address": None})], TYPES)
    writer.apply([op(OpType.UPDATE, 9, {"id": 1, "address": {"no": 2}})], TYPES)
    first, second = executed
    assert isinstance(first, FakeBatch) and isinstance(second, FakeBatch)
    assert first.is_idempotent
    insert, delete = first.statements
    assert insert_values(insert) == {"id": 1, "_version": 6, "name": "a"}
    assert delete.cql == f'DELETE FROM "ks"."{TABLE}" USING TIMESTAMP ? WHERE "id" = ?'
    assert delete.params == (5, 1)
    assert insert_values(second.statements[0]) == {"id": 1, "_version": 9, "address.no": 2}
    assert second.statements[1].params == (8, 1)
    assert writer.counters.replaces == 2


def test_change_applies_paths(writer: CassandraWriter, executed: list[Bound]) -> None:
    writer.apply([op(OpType.WRITE, 1, {"id": 1, "address": {"street": "s", "zip": "z"}})], TYPES)
    executed.clear()
    change = op(OpType.CHANGE, 2, {"address.no": 4, "kafka.topic": "t"}, removed=("address.zip",))
    writer.apply([change], TYPES)
    values = insert_values(executed[0])
    topic = values.pop("kafka")  # a new dynamic map {"topic": "t"}: no such column yet
    assert writer.mapping.dynamic_serializer.from_bytes(topic) == {"topic": "t"}
    assert values == {"id": 1, "_version": 2, "address.no": 4, "address.zip": None}


def test_change_inside_a_map_reads_edits_and_writes_back(
    writer: CassandraWriter, executed: list[Bound]
) -> None:
    serializer = writer.mapping.dynamic_serializer
    writer.apply([op(OpType.WRITE, 1, {"id": 1, "extra": {"a": 1, "b": {"c": 2}}})], TYPES)
    session_of(writer).cells["extra"] = (serializer.to_bytes({"a": 1, "b": {"c": 2}}), 1)
    executed.clear()
    writer.apply([op(OpType.CHANGE, 3, {"b.d": 5, "extra.b.c": 3}, removed=("extra.a",))], TYPES)
    values = insert_values(executed[0])
    assert serializer.from_bytes(values["extra"]) == {"b": {"c": 3}}
    assert serializer.from_bytes(values["b"]) == {"d": 5}
    assert writer.counters.read_modify_writes == 1  # "b" had no column: nothing to read
    session_of(writer).cells["extra"] = (serializer.to_bytes({"x": 1}), 7)
    executed.clear()
    stats = writer.apply([op(OpType.CHANGE, 5, {"extra.y": 1})], TYPES)
    assert executed == [] and stats.skipped_id_only == 1  # the column holds a newer write


def test_change_nulls_removed_and_stale_columns(
    writer: CassandraWriter, executed: list[Bound]
) -> None:
    writer.apply(
        [op(OpType.WRITE, 1, {"id": 1, "address": {"street": "s", "zip": "z"}, "d": 1})], TYPES
    )
    executed.clear()
    writer.apply([op(OpType.CHANGE, 2, {"address": {"no": 3}}, removed=("d",))], TYPES)
    (bound,) = executed
    values = insert_values(bound)
    assert values == {
        "id": 1,
        "_version": 2,
        "address.no": 3,
        "address.street": None,
        "address.zip": None,
        "d": None,
    }
    assert writer.counters.partial_writes == 1


def test_remove_and_take_delete_with_version_timestamp(
    writer: CassandraWriter, executed: list[Bound]
) -> None:
    writer.apply([op(OpType.REMOVE, 7, None), op(OpType.TAKE, 8, {"id": 1})], TYPES)
    (batch,) = executed  # one request: the rows share their replicas
    assert isinstance(batch, FakeBatch) and batch.is_idempotent
    assert [b.cql for b in flat(executed)] == [
        f'DELETE FROM "ks"."{TABLE}" USING TIMESTAMP ? WHERE "id" = ?'
    ] * 2
    assert [b.params for b in flat(executed)] == [(7, 1), (8, 1)]
    assert writer.counters.deletes == 2


def test_id_only_entries_write_nothing_and_are_counted(
    writer: CassandraWriter, executed: list[Bound]
) -> None:
    stats = writer.apply(
        [
            op(OpType.WRITE, 1, {"id": 1}),
            op(OpType.PARTIAL_UPDATE, 2, {"id": 1, "name": None}),
            op(OpType.CHANGE, 3, {}),
        ],
        TYPES,
    )
    assert executed == []
    assert stats.skipped_id_only == 3 and writer.counters.operations == 3


def test_id_only_entries_can_be_written(executed: list[Bound]) -> None:
    w = make_writer(write_id_only_entries=True, replace_on_write=False)
    w.apply([op(OpType.WRITE, 1, {"id": 1})], TYPES)
    assert insert_values(executed[0]) == {"id": 1, "_version": 1}


def test_prepared_statements_are_cached_per_column_set(
    writer: CassandraWriter, executed: list[Bound]
) -> None:
    writer.apply([op(OpType.WRITE, v, {"name": str(v)}) for v in range(1, 4)], TYPES)
    writer.apply([op(OpType.PARTIAL_UPDATE, 4, {"name": "x", "address": {"no": 1}})], TYPES)
    assert isinstance(writer.session, FakeSession)
    assert len(writer.session.prepared) == 2


def test_missing_type_and_bad_id_are_store_errors(
    writer: CassandraWriter, executed: list[Bound]
) -> None:
    with pytest.raises(StoreError):
        writer.apply([op(OpType.WRITE, 1, {"name": "a"})], {})
    bad = Operation(OpType.WRITE, PERSON.name, "not-a-number", 1, {"name": "a"}, 0, 0)
    with pytest.raises(StoreError):
        writer.apply([bad], TYPES)


def test_failed_writes_raise_and_count_nothing(
    writer: CassandraWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    cause = TimeoutError("write timeout")

    def failing(session: Any, pairs: list[Any], **kwargs: Any) -> list[Result]:
        return [Result(False, cause) for _ in pairs]

    monkeypatch.setattr("cassandra.concurrent.execute_concurrent", failing)
    with pytest.raises(StoreError) as info:
        writer.apply([op(OpType.WRITE, 1, {"name": "a"})], TYPES)
    assert info.value.__cause__ is cause
    assert writer.counters.operations == 0


def test_removing_a_declared_field_inside_one_column_nulls_it(executed: list[Bound]) -> None:
    """An object past the nesting limit is one column: the removed declared field inside
    it becomes null (as in the space), a removed dynamic key disappears."""
    writer = CassandraWriter(FakeSession(), "ks", CassandraMapping(
        flatten_filter=DefaultFlattenFilter(max_nesting_level=0)))
    writer.schema = FakeSchema()
    serializer = writer.mapping.fixed_serializer
    writer.apply([op(OpType.WRITE, 1, {"id": 1, "address": {"street": "s", "no": 2}})], TYPES)
    session_of(writer).cells["address"] = (
        serializer.to_bytes({"street": "s", "no": 2, "note": "x"}), 1)
    executed.clear()
    writer.apply([op(OpType.CHANGE, 2, {}, removed=("address.street", "address.note"))], TYPES)
    values = insert_values(executed[0])
    assert serializer.from_bytes(values["address"]) == {"street": None, "no": 2}
