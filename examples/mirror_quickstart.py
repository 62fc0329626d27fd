"""Write to an embedded space, mirror it to Kafka exactly once, read it back decoded.

    gridstream stack up --services kafka
    python examples/mirror_quickstart.py [--bootstrap 127.0.0.1:9092]
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import uuid
from dataclasses import dataclass
from decimal import Decimal

from gridstream.consumer import OperationConsumer
from gridstream.mirror import KafkaEndpointConfig, KafkaSyncEndpoint, Mirror
from gridstream.model import SpaceDocument, space_class
from gridstream.space import Space

TOPIC = f"quickstart-orders-{uuid.uuid4().hex[:6]}"


@space_class(type_name="Order", topic=TOPIC)
@dataclass
class Order:
    id: str
    customer: str
    total: Decimal
    placed: dt.datetime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir, \
            Space.embedded("quickstart", data_dir=data_dir) as space:
        now = dt.datetime.now(dt.UTC)
        space.write(Order("o-1", "ada", Decimal("12.50"), now))
        with space.transaction() as tx:  # reaches Kafka as one Kafka transaction
            tx.write(Order("o-2", "bob", Decimal("3.10"), now))
            tx.update(Order("o-1", "ada", Decimal("14.00"), now))
        space.partial_update(SpaceDocument("Order", {"id": "o-2", "customer": "bo"}))
        space.remove(Order, "o-1")
        # documents may name their topic in the "kafka.topic" property
        space.write(SpaceDocument("Note", {"id": "n-1", "text": "hi", "kafka.topic": TOPIC}))

        # a mirror keeps its position under its name, for one log: this space is new on
        # every run (a temporary directory), so is the mirror
        name = f"quickstart-{space.log_reader().log_id()}"
        endpoint = KafkaSyncEndpoint(KafkaEndpointConfig(bootstrap_servers=args.bootstrap))
        mirror = Mirror(space, endpoint, name=name)
        mirror.start()
        if not mirror.wait_for(space.next_seq, timeout_s=60):
            raise SystemExit(f"mirror did not catch up: {mirror.metrics()}")
        mirror.stop()
        print(mirror.metrics())

        consumer = OperationConsumer(args.bootstrap, topics=[TOPIC],
                                     group_id=f"quickstart-{uuid.uuid4().hex[:6]}",
                                     types=space.types())
        with consumer:
            seen = 0
            while seen < 6:
                for record in consumer.consume(100, timeout_s=1.0):
                    seen += 1
                    print(f"{record.partition}@{record.offset} {record.op:<14} "
                          f"{record.type_name}:{record.id} v{record.version} {record.data}")
            consumer.commit()


if __name__ == "__main__":
    main()
