"""A real space's operation log, delivered to Cassandra through the mirror endpoint.

The space decides what WRITE, UPDATE, PARTIAL_UPDATE and CHANGE carry (overwrites, whole
nested objects, change paths into maps); after delivering its log, and after delivering
it again from earlier positions (a mirror's redelivery), the tables read back equal to
what the space holds.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gridstream.mirror import Mirror
from gridstream.model import DocumentType, SpaceDocument, space_class
from gridstream.operations import Bulk, TypeDescriptor
from gridstream.space import Change, Space, open_log_reader
from gridstream.stores.cassandra import CassandraConfig, CassandraSyncEndpoint
from tests.integration.test_cassandra_workload import canonical


@dataclasses.dataclass
class Address:
    street: str | None = None
    no: int | None = None


@space_class(type_name="com.example.Customer", indexes=("name",))
@dataclasses.dataclass
class Customer:
    id: int
    name: str | None = None
    address: Address | None = None
    tags: list[str] | None = None


DOC = "com.example.Profile"


class SpaceWorkload:
    """Random operations through the space's public API."""

    def __init__(self, space: Space, seed: int) -> None:
        self.space = space
        self.rng = random.Random(seed)

    def run(self, steps: int) -> None:
        for _ in range(steps):
            if self.rng.random() < 0.6:
                self._customer(self.rng.randint(1, 5))
            else:
                self._profile(f"p{self.rng.randint(1, 4)}")

    def _customer(self, ident: int) -> None:
        r, space = self.rng, self.space
        exists = space.read(Customer, ident) is not None
        action = r.choice(["write", "update", "partial", "change", "change", "remove"])
        if not exists or action == "write":
            space.write(
                Customer(
                    ident, r.choice(["a", "b", None]), self._address(), r.choice([["x"], None])
                )
            )
        elif action == "update":
            space.update(Customer(ident, "u", self._address(), None))
        elif action == "partial":
            space.partial_update(Customer(ident, r.choice(["p", None]), self._address(), None))
        elif action == "change":
            steps = r.sample(
                [
                    Change.set("address.street", f"s{r.randint(0, 9)}"),
                    Change.unset("name"),
                    Change.set("tags", ["q", "r"]),
                    Change.increment("address.no", 1),
                    Change.set("name", "c"),
                    Change.unset("address.street"),  # a declared nested field: becomes None
                ],
                k=2,
            )
            space.change(Customer, ident, steps)
        else:
            space.remove(Customer, ident) if r.random() < 0.5 else space.take(Customer, ident)

    def _address(self) -> Address | None:
        r = self.rng
        return r.choice([None, Address(r.choice(["main", None]), r.randint(1, 9))])

    def _profile(self, ident: str) -> None:
        r, space = self.rng, self.space
        exists = space.read(DOC, ident) is not None
        if not exists or r.random() < 0.2:
            props = {"id": ident, "x": r.randint(0, 5), "m": {"a": 1, "c": {"d": [1, 2]}}}
            if r.random() < 0.5:
                props["kafka.topic"] = f"t{r.randint(0, 2)}"
            space.write(SpaceDocument(DOC, props))
        elif r.random() < 0.15:
            space.remove(DOC, ident)
        else:
            steps = r.sample(
                [
                    Change.set("m.b", r.randint(0, 9)),
                    Change.unset("m.a"),
                    Change.increment("x", 2),
                    Change.set("m.c.d", ["z"]),
                    Change.set("fresh", {"k": 1}),
                    Change.unset("fresh"),
                    Change.set("m", {"only": True}),
                ],
                k=2,
            )
            space.change(DOC, ident, steps)


def space_contents(space: Space, descriptor: TypeDescriptor) -> dict[Any, dict[str, Any]]:
    target: Any = Customer if descriptor.name == "com.example.Customer" else DOC
    out = {}
    for entry in space.read_multiple(target):
        data = entry.properties if isinstance(entry, SpaceDocument) else dataclasses.asdict(entry)
        specs = tuple(s for s in descriptor.fixed if s.name != descriptor.id_property)
        out[data[descriptor.id_property]] = {**canonical(specs, data), "id": data["id"]}
    return out


@pytest.fixture()
def space(tmp_path: Path) -> Iterator[tuple[Space, Path]]:
    data_dir = tmp_path / "space"
    with Space.embedded("cassandra-test", data_dir=data_dir) as opened:
        opened.introduce_type(Customer)
        opened.introduce_type(DocumentType(DOC, fixed={"id": "str"}))
        yield opened, data_dir


def test_space_log_delivered_and_redelivered(
    cassandra_service: Any, keyspace: str, space: tuple[Space, Path]
) -> None:
    opened, data_dir = space
    SpaceWorkload(opened, seed=7).run(400)
    reader = open_log_reader(data_dir)
    bulks: list[Bulk] = []
    seq = reader.first_seq()
    while seq < reader.end_seq():
        batch = reader.read(seq, 50)
        bulks += batch
        seq = batch[-1].next_seq
    types = reader.types()
    reader.close()

    host, port = cassandra_service.address.rsplit(":", 1)
    endpoint = CassandraSyncEndpoint(
        CassandraConfig(keyspace=keyspace, contact_points=(host,), port=int(port))
    )
    endpoint.open("space-test")
    try:
        for i in range(0, len(bulks), 20):
            endpoint.write_batch(bulks[i : i + 20], types)
        assert_same(endpoint, opened, types)
        rng = random.Random(1)
        for _ in range(3):  # redelivery from an earlier position, in order
            start = rng.randrange(len(bulks))
            endpoint.write_batch(bulks[start:], types)
            assert_same(endpoint, opened, types)
        counters = endpoint.counters
        assert counters.replaces > 0 and counters.partial_writes > 0 and counters.deletes > 0
        assert counters.read_modify_writes > 0
    finally:
        endpoint.close()


def assert_same(endpoint: CassandraSyncEndpoint, space: Space, types: Any) -> None:
    reader = endpoint.reader()
    for descriptor in types.values():
        stored = {e.id: e.data for e in reader.read(descriptor)}
        assert stored == space_contents(space, descriptor), descriptor.name


def to_entry(stored: Any) -> Any:
    if stored.type_name == "com.example.Customer":
        data = dict(stored.data)
        address = data.pop("address")
        return Customer(**data, address=Address(**address) if address else None)
    return SpaceDocument(stored.type_name, stored.data)


def test_mirror_to_cassandra_then_initial_load(
    cassandra_service: Any, keyspace: str, space: tuple[Space, Path], tmp_path: Path
) -> None:
    """The endpoint under the real mirror; a new space loaded from the tables holds
    what the first one held."""
    opened, _ = space
    SpaceWorkload(opened, seed=21).run(200)
    host, port = cassandra_service.address.rsplit(":", 1)
    config = CassandraConfig(keyspace=keyspace, contact_points=(host,), port=int(port))
    mirror = Mirror(opened, CassandraSyncEndpoint(config), name="cassandra-it")
    mirror.start()
    assert mirror.wait_for(opened.next_seq, timeout_s=120), mirror.metrics()
    mirror.stop()

    endpoint = CassandraSyncEndpoint(config)
    endpoint.open("loader")
    try:
        types = opened.types()
        assert_same(endpoint, opened, types)
        with Space.embedded("copy", data_dir=tmp_path / "copy") as copy:
            for descriptor in types.values():
                copy.introduce_type(descriptor)
                endpoint.reader().load_into(copy, descriptor, to_entry=to_entry)
            for descriptor in types.values():
                assert space_contents(copy, descriptor) == space_contents(opened, descriptor)
    finally:
        endpoint.close()
