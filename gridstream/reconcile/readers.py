"""Reading each place back: its live entities with their properties and versions.

One reader per place; each returns a ``Holding`` (raw properties as the place gives
them back, restored to their declared types where the place keeps wire JSON) whose
``state()`` is ``{(type, id): (version, canonical properties)}``:

- ``from_grid``: the space's entries, every property;
- ``from_kafka``: every operation of the topics (``read_committed``) folded in order with
  the row-versioned sinks' fold (the grid's semantics), plus the per-entity order check;
- ``from_sql``: the SQL store's tables (``gridstream.stores.sql``, wire JSON per row);
- ``from_cassandra``: a keyspace read through the Cassandra mapping;
- ``from_lake``: the Delta current-state table.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from gridstream.errors import ReconcileError
from gridstream.fold import OpRow, fold, op_row
from gridstream.model import SpaceDocument
from gridstream.operations import Operation, TypeDescriptor
from gridstream.protocol import Envelope
from gridstream.protocol.values import restore
from gridstream.reconcile.canonical import CASSANDRA
from gridstream.reconcile.compare import Entity, Holding, Key
from gridstream.space import Space

if TYPE_CHECKING:
    from gridstream.consumer import OperationRecord

__all__ = [
    "fold_operations",
    "from_cassandra",
    "from_grid",
    "from_kafka",
    "from_lake",
    "from_records",
    "from_sql",
    "from_state_rows",
]


def from_grid(space: Space, type_names: Iterable[str]) -> Holding:
    """Every live entry of ``type_names`` with all its properties."""
    types = dict(space.types())
    entities: dict[Key, Entity] = {}
    ids: dict[Key, Any] = {}
    for type_name in type_names:
        descriptor = types[type_name]
        template = SpaceDocument(type_name)
        for doc in space.read_multiple(template):
            entity_id = doc.get(descriptor.id_property)
            versioned = space.read_versioned(template, entity_id)
            if versioned is not None:
                data = dict(versioned.entry.properties)
                key = _key(type_name, entity_id, ids)
                entities[key] = Entity(versioned.version, data)
    return Holding("grid", entities, types, operations=space.next_seq - 1)


def _key(type_name: str, entity_id: Any, ids: dict[Key, Any]) -> Key:
    """``(type, str(id))``; two ids of one type with the same text (``1`` and ``"1"``)
    would fold into one entity and hide the other: refused."""
    key = (type_name, str(entity_id))
    seen = ids.setdefault(key, entity_id)
    if type(seen) is not type(entity_id) or seen != entity_id:
        raise ReconcileError(f"{type_name}: ids {seen!r} and {entity_id!r} have the same "
                             "text; entities are compared by id text")
    return key


def fold_operations(ops: Mapping[Key, list[OpRow]], types: Mapping[str, TypeDescriptor]
                    ) -> dict[Key, Entity]:
    """Each entity's operations folded from nothing; the live ones, restored."""
    entities: dict[Key, Entity] = {}
    for key, rows in ops.items():
        descriptor = types.get(key[0])
        fixed = descriptor.declared_paths() if descriptor is not None else frozenset()
        state = fold(None, rows, fixed).state
        if state is None or state.deleted:
            continue
        entities[key] = Entity(state.version, _restored(state.data, descriptor, key))
    return entities


def _restored(stored: str | Mapping[str, Any] | None, descriptor: TypeDescriptor | None,
              key: Key) -> dict[str, Any]:
    """Stored wire JSON (text, or already parsed) with declared properties restored."""
    try:
        data = orjson.loads(stored) if isinstance(stored, str) else dict(stored or {})
    except orjson.JSONDecodeError as exc:
        raise ReconcileError(f"{key[0]} {key[1]}: stored data is not JSON") from exc
    if not isinstance(data, dict):
        raise ReconcileError(f"{key[0]} {key[1]}: stored data is not a JSON object")
    return restore(data, descriptor.fixed) if descriptor is not None else data


def from_kafka(bootstrap: str, topics: list[str], types: Mapping[str, TypeDescriptor],
               expected_ops: int, group: str, timeout_s: float = 60) -> Holding:
    """Fold every operation in ``topics`` (read_committed), reading on past
    ``expected_ops`` until nothing more comes; check the count and per-entity order."""
    from gridstream.consumer import OperationConsumer

    records: list[OperationRecord] = []
    deadline = time.monotonic() + timeout_s
    # no types: data stays in its wire form until the fold is done
    with OperationConsumer(bootstrap, topics=topics, group_id=group) as consumer:
        while time.monotonic() < deadline:
            batch = consumer.consume(1000, timeout_s=0.5)
            records.extend(batch)
            # on past the expected count until nothing more comes: an operation
            # delivered twice must be seen, not left unread behind the count
            if not batch and len(records) >= expected_ops:
                break
    holding = from_records("kafka", records, types)
    if len(records) != expected_ops:
        holding.notes.append(f"{len(records)} operations read, {expected_ops} expected")
    return holding


def from_records(place: str, records: Iterable[OperationRecord | Operation],
                 types: Mapping[str, TypeDescriptor]) -> Holding:
    """Operations (consumed records, or logged operations) folded in the order given; an
    operation not above its entity's previous version is counted in a note."""
    ops: dict[Key, list[OpRow]] = {}
    ids: dict[Key, Any] = {}
    count = out_of_order = 0
    for record in records:
        envelope = Envelope.from_operation(record) if isinstance(record, Operation) \
            else record.envelope
        rows = ops.setdefault(_key(envelope.type, envelope.id, ids), [])
        if rows and rows[-1].version >= envelope.version:
            out_of_order += 1
        rows.append(op_row(envelope))
        count += 1
    holding = Holding(place, fold_operations(ops, types), types, operations=count)
    if out_of_order:
        holding.notes.append(f"{out_of_order} operations out of per-entity order")
    return holding


StateRow = tuple[str, str, int, "str | Mapping[str, Any] | None"]
"""(type, id, version, data as wire JSON text or parsed) of a live current-state row."""


def from_state_rows(place: str, rows: Iterable[StateRow],
                    types: Mapping[str, TypeDescriptor]) -> Holding:
    """Live rows of a current-state table (the SQL store, the Delta table)."""
    entities = {(t, str(i)): Entity(int(v), _restored(d, types.get(t), (t, str(i))))
                for t, i, v, d in rows}
    return Holding(place, entities, types)


def from_lake(spark: Any, path: str, types: Mapping[str, TypeDescriptor]) -> Holding:
    """The Delta current-state table (live rows only)."""
    from gridstream.spark.sinks.delta import current_state

    rows = current_state(spark, path).select("type", "id", "version", "data").collect()
    return from_state_rows("lake (delta)", ((r[0], r[1], r[2], r[3]) for r in rows), types)


def from_cassandra(session: Any, keyspace: str, descriptors: Iterable[TypeDescriptor],
                   place: str = "cassandra", mapping: Any = None) -> Holding:
    """A keyspace read back through the Cassandra mapping (``mapping``: a
    ``CassandraMapping``, default: the default mapping)."""
    from gridstream.stores.cassandra import CassandraReader

    reader = CassandraReader(session, keyspace, mapping)
    types = {d.name: d for d in descriptors}
    entities: dict[Key, Entity] = {}
    for descriptor in types.values():
        for stored in reader.read(descriptor):
            entities[(descriptor.name, str(stored.id))] = Entity(int(stored.version or 0),
                                                                 stored.data)
    return Holding(place, entities, types, rules=CASSANDRA)


def from_sql(url: str, types: Mapping[str, TypeDescriptor]) -> Holding:
    """The SQL store's live rows of ``types`` (``url``: ``sqlite:///path`` or a
    PostgreSQL url), read through ``SqlStore.read``."""
    from gridstream.stores.sql import SqlStore

    with SqlStore(url, types=types) as store:
        rows = [(t, r.id, r.version, r.data) for t in types for r in store.read(t)]
    return from_state_rows("sql", rows, types)
