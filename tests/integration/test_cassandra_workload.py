"""The Cassandra mapping against a real Cassandra: a mixed workload, replays, reordering.

A reference model applies the same operations in version order; the table contents read
back through ``CassandraReader`` must equal the model's final state, every property of
every live entity (the reconciliation's canonical form, with Cassandra's rules), after
the workload, after replaying it, and after applying it in shuffled order.
"""

from __future__ import annotations

import copy
import datetime as dt
import random
import uuid
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

import pytest

from gridstream.operations import Operation, OpType, PropertySpec, TypeDescriptor
from gridstream.reconcile import Comparison, Entity, Holding, compare
from gridstream.reconcile.readers import from_cassandra
from gridstream.stores.cassandra import (
    CassandraReader,
    CassandraWriter,
    StoredEntry,
)

GEO = PropertySpec("geo", "object", (PropertySpec("lat", "float"), PropertySpec("lon", "float")))
ADDRESS = PropertySpec(
    "address", "object", (PropertySpec("street", "str"), PropertySpec("no", "int"), GEO)
)
PERSON = TypeDescriptor(
    "com.example.Person",
    "id",
    fixed=(
        PropertySpec("id", "int"),
        PropertySpec("name", "str"),
        PropertySpec("age", "int"),
        PropertySpec("score", "float"),
        PropertySpec("active", "bool"),
        PropertySpec("photo", "bytes"),
        PropertySpec("born", "datetime"),
        PropertySpec("birthday", "date"),
        PropertySpec("balance", "decimal"),
        PropertySpec("ref", "uuid"),
        PropertySpec("tags", "list"),
        PropertySpec("attrs", "dict"),
        ADDRESS,
    ),
    indexes=("name",),
)
ORDER = TypeDescriptor(
    "my-app.orders.Order$Line",
    "key",
    fixed=(PropertySpec("key", "str"), PropertySpec("qty", "int")),
)
TYPES = {PERSON.name: PERSON, ORDER.name: ORDER}
DYNAMIC = ("nickname", "extra", "kafka.topic", "when", "labels")


class Workload:
    """Random operations on a few entries with a reference model of the final state."""

    def __init__(self, seed: int, size: int) -> None:
        self.rng = random.Random(seed)
        self.model: dict[tuple[str, Any], dict[str, Any]] = {}
        self.versions: dict[tuple[str, Any], int] = {}
        self.ops: list[Operation] = []
        for version in range(1, size + 1):
            self._step(version)

    def _step(self, version: int) -> None:
        descriptor = PERSON if self.rng.random() < 0.8 else ORDER
        entity = (
            self.rng.randint(1, 6) if descriptor is PERSON else f"line-{self.rng.randint(1, 3)}"
        )
        key = (descriptor.name, entity)
        if key not in self.model:
            op = self._op(
                OpType.WRITE, descriptor, entity, version, self._entry(descriptor, entity)
            )
        else:
            kind = self.rng.choice(
                [OpType.UPDATE, OpType.PARTIAL_UPDATE, OpType.CHANGE, OpType.CHANGE, OpType.REMOVE]
            )
            op = self._mutation(kind, descriptor, entity, version)
        self._apply(key, op)
        self.ops.append(op)

    def _mutation(
        self, kind: OpType, descriptor: TypeDescriptor, entity: Any, version: int
    ) -> Operation:
        if kind is OpType.REMOVE:
            kind = self.rng.choice([OpType.REMOVE, OpType.TAKE])
            return self._op(kind, descriptor, entity, version, None)
        full = self._entry(descriptor, entity)
        if kind is OpType.UPDATE:
            return self._op(kind, descriptor, entity, version, full)
        names = [n for n in full if n != descriptor.id_property]
        picked = self.rng.sample(names, k=min(len(names), self.rng.randint(1, 3)))
        data = {n: full[n] for n in picked}
        if kind is OpType.PARTIAL_UPDATE:
            data.update({n: None for n in self.rng.sample(names, k=1)})  # nulls: not written
            return self._op(kind, descriptor, entity, version, data)
        current = self.model[(descriptor.name, entity)]
        if "kafka.topic" not in current:  # a change path: it would mean kafka -> topic
            data.pop("kafka.topic", None)
        removable = [n for n in current if n != descriptor.id_property and n not in data]
        removed = tuple(self.rng.sample(removable, k=min(len(removable), self.rng.randint(0, 2))))
        return self._op(kind, descriptor, entity, version, data, removed)

    @staticmethod
    def _op(
        kind: OpType,
        descriptor: TypeDescriptor,
        entity: Any,
        version: int,
        data: dict[str, Any] | None,
        removed: tuple[str, ...] = (),
    ) -> Operation:
        return Operation(kind, descriptor.name, entity, version, data, 0, version, removed=removed)

    def _apply(self, key: tuple[str, Any], op: Operation) -> None:
        data = copy.deepcopy(dict(op.data or {}))
        if op.op.is_delete:
            self.model.pop(key, None)
            self.versions.pop(key, None)
            return
        if op.op in (OpType.WRITE, OpType.UPDATE):
            self.model[key] = data
        elif op.op is OpType.PARTIAL_UPDATE:
            self.model[key].update((k, v) for k, v in data.items() if v is not None)
        else:
            self.model[key].update(data)
            for name in op.removed:
                self.model[key].pop(name, None)
        self.versions[key] = op.version

    def _entry(self, descriptor: TypeDescriptor, entity: Any) -> dict[str, Any]:
        r = self.rng
        if descriptor is ORDER:
            return {"key": entity, "qty": r.randint(0, 9), **self._dynamic()}
        data: dict[str, Any] = {
            "id": entity,
            "name": r.choice(["ann", "bob", "cy", None]),
            "age": r.choice([r.randint(-(2**40), 2**40), None]),
            "score": r.choice([r.uniform(-1e6, 1e6), 0.1, None]),
            "active": r.choice([True, False, None]),
            "photo": r.randbytes(r.randint(0, 6)),
            "born": dt.datetime(1950, 1, 1) + dt.timedelta(milliseconds=r.randint(0, 2**41)),
            "birthday": dt.date(1900, 1, 1) + dt.timedelta(days=r.randint(0, 70000)),
            "balance": Decimal(r.randint(-(10**8), 10**8)).scaleb(-r.randint(0, 4)),
            "ref": uuid.UUID(int=r.getrandbits(128)),
            "tags": [r.choice(["a", "b"]), (1, 2), {"x": None}],
            "attrs": {"k": r.randint(0, 3), "when": dt.date(2024, 1, 2)},
            "address": self._address(),
        }
        for name in r.sample(sorted(data), k=2):
            if name != "id":
                del data[name]  # missing fixed properties read back as None
        return {**data, **self._dynamic()}

    def _address(self) -> dict[str, Any] | None:
        r = self.rng
        if r.random() < 0.2:
            return None
        address: dict[str, Any] = {
            "street": r.choice(["main", "high", None]),
            "no": r.randint(1, 99),
        }
        if r.random() < 0.7:
            address["geo"] = {"lat": r.uniform(-90, 90), "lon": r.uniform(-180, 180)}
        if r.random() < 0.4:
            address["zip"] = f"{r.randint(0, 99999):05d}"  # dynamic, nested in a fixed object
        return address

    def _dynamic(self) -> dict[str, Any]:
        r = self.rng
        values = {
            "nickname": r.choice(["x", "y", None]),
            "extra": {"nested": [1, 2.5, b"\x00"], "s": frozenset({"q"})},
            "kafka.topic": f"t{r.randint(0, 3)}",
            "when": dt.datetime(2024, 1, 1, 12, 0, 0, r.randint(0, 999999), tzinfo=dt.UTC),
            "labels": {r.choice(["a", "b", "c"]) for _ in range(2)},
        }
        return {k: values[k] for k in r.sample(DYNAMIC, k=r.randint(0, 3))}

    def holding(self) -> Holding:
        """The model's final state, as the reference of the reconciliation."""
        return Holding("model", {(t, str(i)): Entity(self.versions[(t, i)], data)
                                 for (t, i), data in self.model.items()}, TYPES)


def canonical(specs: Sequence[PropertySpec], data: dict[str, Any]) -> dict[str, Any]:
    """The form a stored entry reads back in: every fixed property present, null dynamic
    properties absent, an object with only null values ``None``."""
    out: dict[str, Any] = {}
    names = {s.name for s in specs}
    for spec in specs:
        value = data.get(spec.name)
        if spec.kind == "object" and spec.nested and value is not None:
            nested = canonical(spec.nested, value)
            value = None if all(v is None for v in nested.values()) else nested
        out[spec.name] = value
    out.update((k, v) for k, v in data.items() if k not in names and v is not None)
    return out


def chunks(ops: Sequence[Operation], rng: random.Random) -> Iterator[list[Operation]]:
    i = 0
    while i < len(ops):
        size = rng.randint(1, 12)
        yield list(ops[i : i + size])
        i += size


def check_state(session: Any, keyspace: str, workload: Workload) -> Comparison:
    """The keyspace against the model: no entity missing, none extra (no removed entry
    came back), every property equal."""
    return compare(workload.holding(), from_cassandra(session, keyspace, TYPES.values()))


def assert_state(session: Any, keyspace: str, workload: Workload) -> None:
    result = check_state(session, keyspace, workload)
    assert result.matches, (result.summary(), result.first)
    assert result.live == len(workload.model) > 0


@pytest.mark.parametrize("replace_mode", ["nulls", "tombstone"])
def test_workload_then_replays_in_order_and_shuffled(
    cassandra_session: Any, keyspace: str, replace_mode: Any
) -> None:
    workload = Workload(seed=3, size=300)
    writer = CassandraWriter(cassandra_session, keyspace, replace_mode=replace_mode)
    rng = random.Random(5)
    for part in chunks(workload.ops, rng):
        writer.apply(part, TYPES)
    assert_state(cassandra_session, keyspace, workload)

    writer.apply(workload.ops, TYPES)  # the whole log again
    assert_state(cassandra_session, keyspace, workload)

    shuffled = list(workload.ops)
    rng.shuffle(shuffled)
    for part in chunks(shuffled, rng):
        writer.apply(part, TYPES)
    assert_state(cassandra_session, keyspace, workload)
    assert writer.counters.operations == 3 * len(workload.ops)
    assert writer.counters.skipped_id_only < len(workload.ops)


def test_the_check_fails_when_one_cell_differs(cassandra_session: Any, keyspace: str) -> None:
    workload = Workload(seed=3, size=300)
    writer = CassandraWriter(cassandra_session, keyspace)
    writer.apply(workload.ops, TYPES)
    assert_state(cassandra_session, keyspace, workload)
    person = min(i for (t, i), d in workload.model.items()
                 if t == PERSON.name and (d.get("address") or {}).get("geo"))
    lat = workload.model[(PERSON.name, person)]["address"]["geo"]["lat"]
    table = writer.table_for(PERSON.name)
    cassandra_session.execute(  # behind the writer's back
        f'UPDATE "{keyspace}"."{table}" SET "address.geo.lat" = %s WHERE "id" = %s',
        (lat + 1.0, person))
    result = check_state(cassandra_session, keyspace, workload)
    assert (result.missing, result.extra, result.different) == (0, 0, 1)
    assert result.first is not None
    assert (result.first.id, result.first.path) == (str(person), "address.geo.lat")
    assert (result.first.grid, result.first.place) == (repr(lat), repr(lat + 1.0))


def test_shuffled_from_scratch_in_one_batch(cassandra_session: Any, keyspace: str) -> None:
    """Every column is created while the batch is planned, before any write runs."""
    workload = Workload(seed=11, size=250)
    shuffled = list(workload.ops)
    random.Random(2).shuffle(shuffled)
    writer = CassandraWriter(cassandra_session, keyspace)
    writer.apply(shuffled + shuffled[:100], TYPES)
    assert_state(cassandra_session, keyspace, workload)


def late(
    kind: OpType, version: int, data: dict[str, Any] | None, removed: tuple[str, ...] = ()
) -> Operation:
    return Operation(kind, ORDER.name, "late", version, data, 0, 0, removed=removed)


@pytest.mark.parametrize("replace_mode", ["nulls", "tombstone"])
def test_older_operations_arriving_in_later_calls(
    cassandra_session: Any, keyspace: str, replace_mode: Any
) -> None:
    """Operations that first arrive after newer ones, each in its own call."""
    writer = CassandraWriter(cassandra_session, keyspace, replace_mode=replace_mode)
    reader = CassandraReader(cassandra_session, keyspace)
    newest = [
        late(OpType.CHANGE, 9, {"qty": 3}, removed=("gone",)),
        late(OpType.UPDATE, 8, {"key": "late", "qty": 2}),
        late(OpType.REMOVE, 5, None),
    ]
    older = [
        late(OpType.WRITE, 6, {"key": "late", "qty": 1, "gone": "g", "kept": "k"}),
        late(OpType.WRITE, 4, {"key": "late", "qty": 0, "old": "o"}),
        late(OpType.PARTIAL_UPDATE, 7, {"qty": 5, "fresh": "f"}),
    ]
    for op in newest + older:
        writer.apply([op], TYPES)
    entry = reader.get(ORDER, "late")
    assert entry is not None and entry.version == 9
    expected = {"key": "late", "qty": 3}
    if replace_mode == "nulls":
        # columns created after the UPDATE ran were not nulled by it
        expected.update(kept="k", fresh="f")
    assert entry.data == expected


def test_every_write_carries_the_version_as_timestamp(
    cassandra_session: Any, keyspace: str
) -> None:
    writer = CassandraWriter(cassandra_session, keyspace)
    ops = [
        Operation(OpType.WRITE, ORDER.name, "a", 41, {"key": "a", "qty": 1}, 0, 0),
        Operation(OpType.CHANGE, ORDER.name, "a", 42, {"qty": 2}, 0, 0),
    ]
    writer.apply(ops, TYPES)
    table = writer.table_for(ORDER.name)
    row = cassandra_session.execute(
        f'SELECT writetime("qty"), writetime("_version"), "_version" FROM "{keyspace}"."{table}"'
    ).one()
    assert tuple(row) == (42, 42, 42)
    writer.apply(
        [Operation(OpType.UPDATE, ORDER.name, "a", 7, {"key": "a", "qty": 9}, 0, 0)], TYPES
    )
    writer.apply([Operation(OpType.REMOVE, ORDER.name, "a", 6, None, 0, 0)], TYPES)
    reader = CassandraReader(cassandra_session, keyspace)
    entry = reader.get(ORDER, "a")
    assert entry is not None and entry.data["qty"] == 2 and entry.version == 42  # old ops lost


def test_id_only_entries_are_counted_not_written(cassandra_session: Any, keyspace: str) -> None:
    writer = CassandraWriter(cassandra_session, keyspace)
    stats = writer.apply([Operation(OpType.WRITE, ORDER.name, "z", 1, {"key": "z"}, 0, 0)], TYPES)
    assert stats.skipped_id_only == 1 and stats.inserts == 0
    assert CassandraReader(cassandra_session, keyspace).get(ORDER, "z") is None


def test_reader_round_trip_and_load_into(cassandra_session: Any, keyspace: str) -> None:
    workload = Workload(seed=23, size=40)
    first: dict[tuple[str, Any], Operation] = {}
    for op in workload.ops:
        if op.op is OpType.WRITE:
            first.setdefault((op.type_name, op.id), op)
    writes = list(first.values())
    writer = CassandraWriter(cassandra_session, keyspace)
    writer.apply(writes, TYPES)
    reader = CassandraReader(cassandra_session, keyspace, fetch_size=3)  # several pages
    loaded: list[StoredEntry] = []
    assert reader.load_into(loaded.append, PERSON) == len(
        [w for w in writes if w.type_name == PERSON.name]
    )

    class SpaceLike:
        def __init__(self) -> None:
            self.entries: list[dict[str, Any]] = []

        def write(self, entry: dict[str, Any]) -> None:
            self.entries.append(entry)

    space = SpaceLike()
    reader.load_into(space, PERSON, to_entry=lambda e: e.data)
    specs = tuple(s for s in PERSON.fixed if s.name != "id")
    last = {op.id: op for op in writes if op.type_name == PERSON.name}
    for entry in loaded:
        original = dict(last[entry.id].data or {})
        assert entry.data == {**canonical(specs, original), "id": entry.id}
        assert entry.version == last[entry.id].version
    assert sorted(e["id"] for e in space.entries) == sorted(last)
