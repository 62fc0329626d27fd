"""Fill the topics ``people`` and ``orders`` that ``examples/feeds.toml`` and
``examples/feeds-sqlite-once.toml`` read: people (the declared type
``com.example.Person``, a nested address) and orders (documents) written to a space and
mirrored to Kafka exactly once.

    gridstream stack up --services kafka,cassandra
    python examples/seed_topics.py [--people 200] [--data-dir /tmp/gridstream/people-space]
    gridstream run examples/feeds.toml

Run it again to add changes: the same people are updated (ages grow), new orders are
added, and one person in ten is removed and written again.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import uuid
from dataclasses import dataclass, field

from gridstream.mirror import KafkaEndpointConfig, KafkaSyncEndpoint, Mirror
from gridstream.model import SpaceDocument, space_class
from gridstream.space import Space


@dataclass
class Geo:
    lat: float
    lon: float


@dataclass
class Address:
    street: str
    city: str
    geo: Geo


@space_class(type_name="com.example.Person", topic="people", indexes=("name",))
@dataclass
class Person:
    id: str
    name: str
    age: int
    born: dt.date
    address: Address
    tags: list[str] = field(default_factory=list)


def seed(space: Space, people: int) -> int:
    """Write, update and remove people, add orders; the operations written."""
    rng = random.Random()  # noqa: S311 - sample data
    done = 0
    for i in range(people):
        pid = f"p-{i}"
        known = space.read(Person, pid)
        age = known.age + 1 if known is not None else rng.randrange(18, 90)
        person = Person(pid, f"person {i}", age, dt.date(2026 - age, 1 + i % 12, 1 + i % 28),
                        Address(f"{i} Main St", rng.choice(["Lyon", "Oslo", "Quito"]),
                                Geo(round(rng.uniform(-90, 90), 4),
                                    round(rng.uniform(-180, 180), 4))),
                        [f"t{i % 3}"])
        with space.transaction() as tx:
            if known is not None and i % 10 == 0:
                tx.remove(Person, pid)
            tx.write(person)
            tx.write(SpaceDocument("com.example.Order", {
                "id": f"o-{uuid.uuid4().hex[:12]}", "person": pid,
                "total": round(rng.uniform(1, 500), 2), "kafka.topic": "orders"}))
        done += 3 if known is not None and i % 10 == 0 else 2
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--data-dir", default="/tmp/gridstream/people-space")
    parser.add_argument("--people", type=int, default=200)
    args = parser.parse_args()
    with Space.embedded("people", data_dir=args.data_dir) as space:
        space.introduce_type(Person)
        wrote = seed(space, args.people)
        # a mirror's position is kept under its name, for one log: named after the log, a
        # space created again (a /tmp cleared) starts a mirror of its own
        name = f"seed-topics-{space.log_reader().log_id()}"
        endpoint = KafkaSyncEndpoint(KafkaEndpointConfig(bootstrap_servers=args.bootstrap))
        mirror = Mirror(space, endpoint, name=name)
        mirror.start()
        try:
            if not mirror.wait_for(space.next_seq, timeout_s=120):
                raise SystemExit(f"the mirror did not catch up: {mirror.metrics()}")
        finally:
            mirror.stop()
    print(f"wrote {wrote} operations; mirrored to the topics people and orders "
          f"(log position {mirror.metrics().position})")


if __name__ == "__main__":
    main()
