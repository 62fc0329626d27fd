"""Read a Kafka topic and print its records (the pipeline API's first example).

    gridstream stack up --services kafka
    python examples/pipeline_print.py

Writes ten records to a new topic, then reads everything there is (``available_now``)
and prints each item: a ``(key, value)`` tuple. Without the trigger it would run until
Ctrl-C, printing new records as they come.
"""

from __future__ import annotations

import uuid

from confluent_kafka import Producer

from gridstream.pipeline import KafkaSources, Pipeline, Sinks

BOOTSTRAP = "127.0.0.1:9092"


def main() -> None:
    topic = f"pipeline-print-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": BOOTSTRAP})
    for i in range(10):
        producer.produce(topic, key=f"key-{i}", value=f"value-{i}")
    producer.flush(30)

    props = {"bootstrap.servers": BOOTSTRAP, "key.deserializer": "StringDeserializer",
             "value.deserializer": "StringDeserializer", "auto.offset.reset": "earliest"}
    p = Pipeline.create(name="print")
    p.read_from(KafkaSources.kafka(props, topic)).write_to(Sinks.console())
    p.run(trigger="available_now")


if __name__ == "__main__":
    main()
