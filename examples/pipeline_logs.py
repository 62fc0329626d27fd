"""Parse log lines into entries and write them to Kafka, exactly once (the pipeline
API's second example).

    gridstream stack up --services kafka
    python examples/pipeline_logs.py
    python examples/pipeline_logs.py --seed logs    # only the lines, for pipeline_api.toml

Log lines ``"<LEVEL> <service> <message>"`` are read from one topic, parsed, DEBUG lines
dropped, and each written as the entry ``(service, message)`` to another topic in Kafka
transactions (``EXACTLY_ONCE``: a ``read_committed`` consumer sees each line once, even
across crashes and restarts from the checkpoint). The functions are also named by
``examples/pipeline_api.toml``.
"""

from __future__ import annotations

import argparse
import tempfile
import uuid
from typing import NamedTuple

from confluent_kafka import Consumer, Producer

from gridstream.pipeline import Guarantee, KafkaSinks, KafkaSources, Pipeline, entry

BOOTSTRAP = "127.0.0.1:9092"


class Log(NamedTuple):
    level: str
    service: str
    message: str


def parse(kv: tuple[str | None, str]) -> Log:
    level, service, message = kv[1].split(" ", 2)
    return Log(level, service, message)


def not_debug(log: Log) -> bool:
    return log.level != "DEBUG"


def to_entry(log: Log) -> tuple[str, str]:
    return entry(log.service, f"{log.level}: {log.message}")


LINES = ["INFO api started", "DEBUG api cache warm", "WARN db slow query 1.2s",
         "ERROR api upstream timeout", "DEBUG db vacuum"]


def seed(topic: str) -> None:
    producer = Producer({"bootstrap.servers": BOOTSTRAP})
    for line in LINES:
        producer.produce(topic, value=line)
    if producer.flush(30):
        raise SystemExit(f"the lines did not reach {topic} at {BOOTSTRAP}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", metavar="TOPIC",
                        help="only write the sample lines to TOPIC (pipeline_api.toml's input)")
    args = parser.parse_args()
    if args.seed:
        seed(args.seed)
        print(f"wrote {len(LINES)} lines to {args.seed}")
        return
    logs, entries = (f"pipeline-{name}-{uuid.uuid4().hex[:8]}" for name in ("logs", "entries"))
    seed(logs)

    source_props = {"bootstrap.servers": BOOTSTRAP, "key.deserializer": "StringDeserializer",
                    "value.deserializer": "StringDeserializer", "auto.offset.reset": "earliest"}
    sink_props = {"bootstrap.servers": BOOTSTRAP, "key.serializer": "StringSerializer",
                  "value.serializer": "StringSerializer"}
    p = Pipeline.create(name="logs")
    (p.read_from(KafkaSources.kafka(source_props, logs))
      .map(parse)
      .filter(not_debug)
      .map(to_entry)
      .write_to(KafkaSinks.kafka(sink_props, entries)))
    with tempfile.TemporaryDirectory() as checkpoint:
        p.run(guarantee=Guarantee.EXACTLY_ONCE, checkpoint=checkpoint, trigger="available_now")

    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([entries])
    seen = 0
    while seen < 3:
        msg = consumer.poll(10)
        if msg is None:
            break
        if msg.error() is None:
            seen += 1
            print(f"{(msg.key() or b'').decode()}: {(msg.value() or b'').decode()}")
    consumer.close()


if __name__ == "__main__":
    main()
