"""``python -m gridstream.spark._class_data_warmup ARCHIVE``: the process ``class_data.build``
runs. A driver JVM started to write ``ARCHIVE`` as it exits runs what most drivers run
first (a batch job, a Python Arrow pass, JSON and Avro decoding, a streaming query with
``foreachBatch``, the plans of a Kafka read and of a Delta write), then exits; nothing
here needs a service running.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

WAIT_FOR_EXIT_S = 300.0


def _upper(batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow.compute as pc

    for batch in batches:
        yield batch.set_column(1, "s", pc.utf8_upper(batch.column(1)))


def _warm_up(spark: Any, work: Path) -> None:
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.avro.functions import from_avro, to_avro

    df = spark.range(1000).select("id", F.concat(F.lit("v-"), F.col("id")).alias("s"))
    df.mapInArrow(_upper, "id long, s string").groupBy(F.col("id") % 4).count().collect()
    parsed = df.select(F.from_json(F.to_json(F.struct("id", "s")), "id long, s string")
                       .alias("j"))
    parsed.write.mode("overwrite").parquet(str(work / "parquet"))
    spark.read.parquet(str(work / "parquet")).count()
    schema = '{"type":"record","name":"r","fields":[{"name":"id","type":"long"}]}'
    avro = df.select(to_avro(F.struct("id")).alias("a"))
    avro.select(from_avro("a", schema)).count()
    # a streaming read's plan (a batch read's would ask a broker for offsets)
    (spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:1")
     .option("subscribe", "warm-up").load().select("key", "value", "partition", "offset")
     .explain())
    stream = spark.readStream.format("rate").option("rowsPerSecond", 1000).load()
    query = (stream.mapInArrow(_stamp, "value long").writeStream
             .foreachBatch(lambda batch, _: batch.count())
             .option("checkpointLocation", str(work / "checkpoint"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        query.processAllAvailable()
        query.processAllAvailable()
    finally:
        query.stop()
    df.write.format("delta").mode("overwrite").save(str(work / "delta"))


def _stamp(batches: Iterator[Any]) -> Iterator[Any]:
    for batch in batches:
        yield batch.select(["value"])


def main(argv: list[str]) -> int:
    from pyspark import SparkContext

    from gridstream.spark.session import get_spark

    target = Path(argv[0])
    # local: the warm-up's files are this machine's, and so are its executors' classes
    spark = get_spark("local[2]", app_name="gridstream-class-data",
                      archive_classes_to=target)
    with tempfile.TemporaryDirectory(prefix="gs-class-data-") as work:
        _warm_up(spark, Path(work))
    spark.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        print("no Java gateway after the warm-up: no JVM to write the archive", flush=True)
        return 1
    process = gateway.proc
    gateway.shutdown()
    process.stdin.close()  # the JVM exits when its stdin ends, writing the archive
    code = process.wait(WAIT_FOR_EXIT_S)
    if code != 0 or not target.is_file() or target.stat().st_size == 0:
        print(f"the driver JVM exited {code}; {target} "
              f"{'is not a whole archive' if target.is_file() else 'was not written'}",
              flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
