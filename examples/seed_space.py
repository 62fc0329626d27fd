"""Create (or add to) the Space that ``examples/connectors.toml`` reads: a few people and
orders in ``/tmp/gridstream/space`` (the Space "demo").

    python examples/seed_space.py [--data-dir /tmp/gridstream/space] [--people 100]
    gridstream run examples/connectors.toml

A Space is owned by its application's process; this one writes and closes it, and the
source connector reads its log. Run it again (while the connectors run, or not) to add
changes: every run updates the same people and adds new orders.
"""

from __future__ import annotations

import argparse
import time
import uuid

from gridstream.model import SpaceDocument
from gridstream.space import Space


def seed(data_dir: str, people: int) -> int:
    """Write ``people`` people and as many orders; the number of writes."""
    stamp = time.strftime("%H:%M:%S")
    with Space.embedded("demo", data_dir=data_dir) as space, space.transaction() as tx:
        for i in range(people):
            tx.write(SpaceDocument("people", {"id": f"p-{i}", "name": f"person {i}",
                                              "ssn": f"000-00-{i:04d}", "seen": stamp}))
            tx.write(SpaceDocument("orders_2024", {"id": f"o-{uuid.uuid4().hex[:12]}",
                                                   "person": f"p-{i}", "total": 10.0 + i}))
    return 2 * people


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="/tmp/gridstream/space")
    parser.add_argument("--people", type=int, default=100)
    args = parser.parse_args()
    wrote = seed(args.data_dir, args.people)
    print(f"wrote {wrote} entries (people, orders_2024) to the Space 'demo' in {args.data_dir}")


if __name__ == "__main__":
    main()
