"""Mirror an embedded space into Cassandra, then load the tables into a fresh space.

    gridstream stack up --services cassandra
    python examples/cassandra_mirror.py [--host 127.0.0.1] [--port 9042]

Shows the mapping at work: a nested dataclass flattened into ``address.street`` columns,
a document's dynamic properties in tagged blob columns, partial updates and changes,
a removal, and the initial load of a new space from the tables.
"""

from __future__ import annotations

import argparse
import tempfile
import uuid
from dataclasses import dataclass
from decimal import Decimal

from gridstream.mirror import Mirror
from gridstream.model import SpaceDocument, space_class
from gridstream.space import Change, Space
from gridstream.stores.cassandra import CassandraConfig, CassandraSyncEndpoint, StoredEntry


@dataclass
class Address:
    street: str | None = None
    city: str | None = None


@space_class(type_name="com.example.Customer", indexes=("address.city",))
@dataclass
class Customer:
    id: int
    name: str
    balance: Decimal
    address: Address | None = None


def fill(space: Space) -> None:
    space.write(Customer(1, "ada", Decimal("12.50"), Address("1 Main St", "Oslo")))
    space.write(Customer(2, "bob", Decimal("3.10")))
    space.partial_update(SpaceDocument("com.example.Customer", {"id": 2, "name": "bobby"}))
    space.change(Customer, 1, [Change.set("address.city", "Bergen")])
    space.write(SpaceDocument("Note", {"id": "n-1", "text": "hi", "tags": {"a", "b"}}))
    space.change("Note", "n-1", [Change.set("meta.source", "example")])
    space.write(Customer(3, "cy", Decimal("0")))
    space.remove(Customer, 3)


def to_entry(stored: StoredEntry) -> object:
    """Rows back to what the space writes: dataclasses for classes, else documents."""
    if stored.type_name == "com.example.Customer":
        data = dict(stored.data)
        address = data.pop("address")
        return Customer(**data, address=Address(**address) if address else None)
    return SpaceDocument(stored.type_name, stored.data)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9042)
    args = parser.parse_args()
    keyspace = f"example_{uuid.uuid4().hex[:8]}"
    config = CassandraConfig(keyspace=keyspace, contact_points=(args.host,), port=args.port)
    endpoint = CassandraSyncEndpoint(config)
    with tempfile.TemporaryDirectory() as source_dir, tempfile.TemporaryDirectory() as copy_dir:
        with Space.embedded("source", data_dir=source_dir) as space:
            fill(space)
            mirror = Mirror(space, endpoint, name="to-cassandra")
            mirror.start()
            if not mirror.wait_for(space.next_seq, timeout_s=60):
                raise SystemExit(f"mirror did not catch up: {mirror.metrics()}")
            mirror.stop()
            types = space.types()
        print("written:", endpoint.counters)

        endpoint.open("reader")
        try:
            reader = endpoint.reader()
            with Space.embedded("copy", data_dir=copy_dir) as copy:
                for descriptor in types.values():
                    copy.introduce_type(descriptor)
                    loaded = reader.load_into(copy, descriptor, to_entry=to_entry)
                    print(f"loaded {loaded} {descriptor.name}:")
                    for entry in reader.read(descriptor):
                        print(f"  v{entry.version} {entry.data}")
            endpoint.session.execute(f'DROP KEYSPACE "{keyspace}"', timeout=60)
        finally:
            endpoint.close()


if __name__ == "__main__":
    main()
