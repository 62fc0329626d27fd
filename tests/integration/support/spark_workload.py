"""Mirror-style workloads for the Spark store feed tests, and the expected final state.

Operations are encoded with the protocol's own encoder (JSON envelope, key = id, gs.*
headers). The expected state is computed by a small independent model of the space's
semantics (whole writes, partial updates of non-null properties, change sets by path,
removes), so the sinks are checked against it rather than against their own code.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from confluent_kafka import Producer

from gridstream.operations import Operation, OpType, PropertySpec, TypeDescriptor
from gridstream.protocol import OperationEncoder

PERSON = TypeDescriptor(
    name="com.example.Person",
    id_property="id",
    fixed=(
        PropertySpec("id", "str"),
        PropertySpec("name", "str"),
        PropertySpec("age", "int"),
        PropertySpec("score", "float"),
        PropertySpec("tags", "list"),
        PropertySpec("meta", "dict"),
        PropertySpec("address", "object", (
            PropertySpec("city", "str"),
            PropertySpec("zip", "str"),
            PropertySpec("geo", "object", (PropertySpec("lat", "float"),
                                           PropertySpec("lon", "float"))),
        )),
    ),
    indexes=("name",),
)
"""A declared type: nested objects (two levels), collections, fixed and dynamic props."""

ORDER = "Order"
"""An undeclared type (dynamic in the pipelines) with integer ids."""

PERSON_TABLE = {
    "id_property": "id",
    "indexes": ["name"],
    "properties": {
        "id": "str", "name": "str", "age": "int", "score": "float", "tags": "list",
        "meta": "dict",
        "address": {"city": "str", "zip": "str", "geo": {"lat": "float", "lon": "float"}},
    },
}
"""``PERSON`` as a pipeline config ``[types]`` table."""


def _set_path(data: dict[str, Any], path: str, value: Any) -> None:
    if path in data or "." not in path:
        data[path] = value
        return
    *parents, leaf = path.split(".")
    node = data
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[leaf] = value


@dataclass
class Workload:
    """Generates operations with space-wide increasing versions and tracks the state."""

    seed: int = 7
    version: int = 0
    state: dict[tuple[str, Any], dict[str, Any]] = field(default_factory=dict)
    deleted: set[tuple[str, Any]] = field(default_factory=set)
    ops: list[Operation] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def _op(self, op: OpType, type_name: str, entity_id: Any, data: dict[str, Any] | None,
            removed: tuple[str, ...] = ()) -> Operation:
        self.version += 1
        operation = Operation(op, type_name, entity_id, self.version, data, 0,
                              1_700_000_000_000 + self.version * 1000, removed=removed)
        self.ops.append(operation)
        self._apply(operation)
        return operation

    def _apply(self, op: Operation) -> None:
        key = (op.type_name, op.id)
        data = orjson.loads(orjson.dumps(op.data)) if op.data is not None else None
        if op.op.is_delete:
            self.state.pop(key, None)
            self.deleted.add(key)
        elif op.op in (OpType.WRITE, OpType.UPDATE):
            self.state[key] = data or {}
            self.deleted.discard(key)
        elif op.op is OpType.PARTIAL_UPDATE:
            self.state[key].update((k, v) for k, v in (data or {}).items() if v is not None)
        else:
            current = self.state[key]
            for path, value in (data or {}).items():
                _set_path(current, path, value)
            for path in op.removed:
                if path in PERSON.fixed_names() and op.type_name == PERSON.name:
                    current[path] = None
                else:
                    current.pop(path, None)

    def person(self, i: int) -> dict[str, Any]:
        r = self.rng
        data: dict[str, Any] = {
            "id": f"p-{i}", "name": f"name-{r.randrange(1000)}", "age": r.randrange(18, 90),
            "score": r.randrange(1000) / 8, "tags": [f"t{r.randrange(5)}", "x"],
            "meta": {"k": r.randrange(9), "nested": {"deep": [1, 2]}},
            "address": {"city": r.choice(["Oslo", "Lyon", "Kyoto"]),
                        "zip": f"{r.randrange(99):02d}", "geo": {"lat": 1.5, "lon": -2.25}},
        }
        if r.random() < 0.6:
            data["nick"] = f"n{i}"  # dynamic
        if r.random() < 0.4:
            data["prefs"] = {"theme": "dark", "langs": ["en", "fr"]}  # dynamic map
        return data

    def order(self, i: int) -> dict[str, Any]:
        r = self.rng
        return {"id": i, "total": r.randrange(10_000) / 100, "items": [r.randrange(9)] * 2,
                "customer": {"name": f"c{r.randrange(50)}", "vip": r.random() < 0.2}}

    def step(self, people: int, orders: int) -> Operation:
        """One random operation on a random entity (creating it when needed)."""
        r = self.rng
        if r.random() < 0.7:
            type_name, entity_id = PERSON.name, f"p-{r.randrange(people)}"
        else:
            type_name, entity_id = ORDER, r.randrange(1, orders + 1)
        key = (type_name, entity_id)
        make = self.person if type_name == PERSON.name else self.order
        number = int(str(entity_id).removeprefix("p-"))
        if key not in self.state:
            return self._op(OpType.WRITE, type_name, entity_id, make(number))
        roll = r.random()
        if roll < 0.15:
            return self._op(OpType.REMOVE, type_name, entity_id, None)
        if roll < 0.35:
            return self._op(OpType.UPDATE, type_name, entity_id, make(number))
        if type_name == ORDER:
            return self._op(OpType.PARTIAL_UPDATE, type_name, entity_id,
                            {"total": r.randrange(100), "status": r.choice(["new", "paid"])})
        if roll < 0.65:
            return self._op(OpType.PARTIAL_UPDATE, type_name, entity_id,
                            {"name": f"renamed-{r.randrange(99)}", "age": None,
                             "nick": f"nick-{r.randrange(99)}"})
        removed = ("nick",) if r.random() < 0.5 else ("age",)
        return self._op(OpType.CHANGE, type_name, entity_id,
                        {"address.city": r.choice(["Rome", "Lima"]), "score": 9.5}, removed)

    def run(self, count: int, people: int = 40, orders: int = 20) -> list[Operation]:
        """``count`` more operations; returns them."""
        return [self.step(people, orders) for _ in range(count)]

    def live(self, type_name: str) -> dict[str, dict[str, Any]]:
        """Expected live entities of a type, keyed by ``str(id)``."""
        return {str(k[1]): v for k, v in self.state.items() if k[0] == type_name}

    def gone(self, type_name: str) -> set[str]:
        """Ids of entities whose last operation was a delete."""
        return {str(k[1]) for k in self.deleted if k[0] == type_name and k not in self.state}


ORDER_DESCRIPTOR = TypeDescriptor(name=ORDER, id_property="id")
"""``ORDER`` as the space describes it (no fixed property: every one is dynamic)."""


def produce(bootstrap: str, topics: dict[str, str], ops: list[Operation], *,
            transactional_id: str | None = None, per_txn: int = 50,
            encoder: OperationEncoder | None = None) -> None:
    """Produce ``ops`` (type name → topic) as the mirror would (its JSON codec, or
    ``encoder``'s); in Kafka transactions of ``per_txn`` operations when
    ``transactional_id`` is given."""
    encoder = encoder or OperationEncoder()
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "enable.idempotence": True,
                              "linger.ms": 5}
    if transactional_id:
        config["transactional.id"] = transactional_id
    producer = Producer(config)
    if transactional_id:
        producer.init_transactions(30)
    for chunk in _chunks(ops, per_txn):
        if transactional_id:
            producer.begin_transaction()
        for op in chunk:
            topic = topics[op.type_name]
            descriptor = PERSON if op.type_name == PERSON.name else ORDER_DESCRIPTOR
            msg = encoder.encode(op, descriptor, topic)
            producer.produce(topic, msg.value, msg.key, headers=list(msg.headers))
        if transactional_id:
            producer.commit_transaction(30)
    producer.flush(30)


def _chunks(items: list[Operation], size: int) -> Iterator[list[Operation]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]
