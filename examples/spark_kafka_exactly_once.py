"""Kafka → Spark → Kafka, exactly once: a streaming query whose foreachBatch is the
exactly-once writer.

    gridstream stack up --services kafka
    python examples/spark_kafka_exactly_once.py [--bootstrap 127.0.0.1:9092] [--records 10000]

Fills an input topic with numbered records, runs a query that upper-cases each value
and writes it with ``KafkaExactlyOnceWriter`` until the input is consumed
(``availableNow``), then counts the output with a ``read_committed`` consumer. Run the
query again on the same checkpoint (or kill it mid-way and restart it): nothing is
written twice.
"""

from __future__ import annotations

import argparse
import tempfile
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gridstream.spark import get_spark
from gridstream.spark.kafka_writer import KafkaExactlyOnceWriter


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--records", type=int, default=10_000)
    args = parser.parse_args()
    source, target = f"example-in-{uuid.uuid4().hex[:8]}", f"example-out-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    for topic in (source, target):
        admin.create_topics([NewTopic(topic, num_partitions=3)])[topic].result(30)
    producer = Producer({"bootstrap.servers": args.bootstrap})
    for i in range(args.records):
        producer.produce(source, f"record-{i}".encode(), str(i).encode())
        producer.poll(0)
    producer.flush(30)

    import pyspark.sql.functions as F

    spark = get_spark(app_name="exactly-once-example")
    rows = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", args.bootstrap)
            .option("subscribe", source).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", 2000).load()
            .select("key", F.upper(F.col("value").cast("string")).alias("value")))
    writer = KafkaExactlyOnceWriter(args.bootstrap, name="example", topic=target)
    with tempfile.TemporaryDirectory() as checkpoint:
        query = (rows.writeStream.foreachBatch(writer).trigger(availableNow=True)
                 .option("checkpointLocation", checkpoint).start())
        query.awaitTermination()
    for result in writer.results:
        print(f"batch {result.batch_id}: {result.written} written, {result.skipped} "
              f"skipped (committed by an earlier run), {result.seconds:.2f}s")
    spark.stop()

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([target])
    seen = 0
    while True:
        messages = consumer.consume(1000, timeout=5)
        if not messages:
            break
        seen += sum(1 for m in messages if m.error() is None)
    consumer.close()
    print(f"{seen} of {args.records} records in {target} (read_committed)")
    if seen != args.records:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
