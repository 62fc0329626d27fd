"""The session ``get_spark`` builds, as the store feeds see it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gridstream.feeds import FeedConfig, StoreFeed
from tests.integration.support.spark_workload import ORDER, PERSON, Workload, produce

_V1_READERS = "spark.sql.streaming.disabledV2MicroBatchReaders"


def _sources(spark: Any, topic: str, tmp: Path, name: str) -> list[str]:
    """The Kafka source descriptions of a pipeline's streaming query, batch by batch."""
    pipeline = StoreFeed(FeedConfig.model_validate({
        "name": name, "topics": [topic], "checkpoint": str(tmp / f"ckpt-{name}"),
        "trigger": "available_now", "maxOffsetsPerTrigger": 40,
        "sink": {"kind": "parquet", "path": str(tmp / f"log-{name}")},
    }))
    query = pipeline.start(spark)
    query.awaitTermination(300)
    assert query.exception() is None, pipeline.failure
    assert sum(r.records for r in pipeline.reports) == 60
    return [s["description"] for p in query.recentProgress for s in p["sources"]
            if p["numInputRows"]]


def test_pipeline_micro_batches_read_kafka_through_the_v1_source(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    """``get_spark`` routes micro-batches to the connector's V1 source (its
    ``DEFAULT_CONF``); without that setting the same pipeline runs on the V2 reader."""
    topic = topic_factory(2)
    produce(kafka_bootstrap, {PERSON.name: topic, ORDER: topic},
            Workload(seed=11).run(60, people=10, orders=1))
    v1 = _sources(spark, topic, tmp_path, "v1")
    assert len(v1) == 2 and set(v1) == {f"KafkaSourceV1[Subscribe[{topic}]]"}
    chosen = spark.conf.get(_V1_READERS, "")
    spark.conf.set(_V1_READERS, "")
    try:
        v2 = _sources(spark, topic, tmp_path, "v2")
    finally:
        spark.conf.set(_V1_READERS, chosen)
    assert len(v2) == 2 and set(v2) == {f"KafkaV2[Subscribe[{topic}]]"}


def _checkpoint_managers(spark: Any, checkpoint: Path) -> set[str]:
    """The classes that wrote a streaming query's offset and commit logs."""
    query = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 5).load()
             .writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120)
    finally:
        query.stop()  # a query still running would outlive the test in the shared session
    assert query.exception() is None
    execution = query._jsq.streamingQuery()
    assert (checkpoint / "commits" / "0").is_file()
    return {execution.offsetLog().fileManager().getClass().getName(),
            execution.commitLog().fileManager().getClass().getName()}


def test_checkpoints_are_written_through_the_filesystem_api(spark: Any,
                                                           tmp_path: Path) -> None:
    """``get_spark``'s queries write their checkpoints through Hadoop's FileSystem API
    (``DEFAULT_CONF``: the FileContext API forks two processes a file on a local path,
    ~80 ms a micro-batch), and Spark still reads that key: set back to its own default,
    the next query writes through FileContext."""
    from gridstream.spark.session import (
        CHECKPOINT_FILE_MANAGER,
        DEFAULT_CONF,
        SPARK_CHECKPOINT_FILE_MANAGER,
    )

    chosen = spark.conf.get(CHECKPOINT_FILE_MANAGER)
    assert chosen == DEFAULT_CONF[CHECKPOINT_FILE_MANAGER]
    assert chosen.endswith(".FileSystemBasedCheckpointFileManager")
    assert _checkpoint_managers(spark, tmp_path / "ours") == {chosen}
    spark.conf.unset(CHECKPOINT_FILE_MANAGER)
    try:
        assert _checkpoint_managers(spark, tmp_path / "spark's") == {
            SPARK_CHECKPOINT_FILE_MANAGER}
    finally:
        spark.conf.set(CHECKPOINT_FILE_MANAGER, chosen)


def test_delta_snapshots_are_as_wide_as_the_sessions_shuffles(spark: Any,
                                                              tmp_path: Path) -> None:
    """``get_spark`` sets Delta's snapshot width to the session's shuffle partitions (not
    Delta's 50: a lake sink's batch in about half the time, ``bench_spark_delta.py``),
    and Delta still reads that key: a snapshot computed after it changed has the new
    width."""
    from gridstream.spark.session import DELTA_SNAPSHOT_PARTITIONS

    width = spark.conf.get("spark.sql.shuffle.partitions")
    assert spark.conf.get(DELTA_SNAPSHOT_PARTITIONS) == width
    path = str(tmp_path / "lake")
    delta_log = spark._jvm.org.apache.spark.sql.delta.DeltaLog

    def snapshot_width() -> int:
        spark.range(10).write.format("delta").mode("append").save(path)  # a new snapshot
        snapshot = delta_log.forTable(spark._jsparkSession, path).unsafeVolatileSnapshot()
        return int(snapshot.stateDF().rdd().getNumPartitions())

    assert snapshot_width() == int(width)
    spark.conf.set(DELTA_SNAPSHOT_PARTITIONS, "7")
    try:
        assert snapshot_width() == 7
    finally:
        spark.conf.set(DELTA_SNAPSHOT_PARTITIONS, width)


_NOISY = """
import time
from gridstream.spark import get_spark

spark = get_spark(app_name="noise-check")
seen = []


def slow(batch, batch_id):  # longer than the trigger: Spark says it "falls behind"
    seen.append(batch_id)
    time.sleep(0.3)


query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
         .writeStream.foreachBatch(slow).trigger(processingTime="100 milliseconds")
         .option("checkpointLocation", "{checkpoint}").start())
while len(seen) < 4:
    time.sleep(0.05)
query.stop()  # between batches: Spark cancels a job group that has no job
spark.stop()
print("stopped after", len(seen), "batches")
"""


@pytest.fixture(scope="module")
def noisy_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    """The script above run as a process of its own (a new driver JVM), and the classes
    its driver JVM loaded with where each came from (Java's class-load log)."""
    from gridstream.spark import class_data

    class_data.build()  # `gridstream stack fetch` (the README's commands) built it
    tmp = tmp_path_factory.mktemp("noise")
    script = _NOISY.replace("{checkpoint}", str(tmp / "ckpt"))
    # each JVM (spark-submit's launcher, then the driver) logs to a file of its own
    env = {**os.environ,
           "JDK_JAVA_OPTIONS": f"-Xlog:class+load=info:file={tmp}/classes-%p.log"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, check=False, env=env,
                          cwd=Path(__file__).resolve().parents[2])
    logs = [p.read_text() for p in tmp.glob("classes-*.log")]
    driver = [log for log in logs if "org.apache.spark.SparkContext " in log]
    assert len(driver) == 1, f"{len(logs)} class-load logs, {len(driver)} of a driver"
    return done, driver[0]


def test_a_clean_run_shows_no_spark_warning_noise(noisy_run: tuple[Any, str]) -> None:
    """A batch longer than its trigger (every batch of a connector's backlog at its
    100 ms pollInterval) and a stop between batches printed Spark WARNs a user can do
    nothing about: "Current batch is falling behind", "Failed to cancel job group"."""
    done, _ = noisy_run
    assert done.returncode == 0, done.stderr[-3000:]
    assert "stopped after" in done.stdout
    assert "falling behind" not in done.stderr, done.stderr[-3000:]
    assert "Failed to cancel job group" not in done.stderr, done.stderr[-3000:]
    assert "[cds" not in done.stdout + done.stderr  # Java's notes on the archive


def test_a_new_driver_loads_its_classes_from_the_class_data_archive(
        noisy_run: tuple[Any, str]) -> None:
    """The driver JVM maps Spark's classes, and the pinned jars' (its own class path
    too), from the archive ``gridstream stack fetch`` built (Java calls it the top
    layer of the shared objects file), instead of reading and verifying each jar's."""
    done, classes = noisy_run
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("org.apache.spark.SparkContext",
                 "org.apache.spark.sql.kafka010.KafkaSourceProvider"):
        line = next((ln for ln in classes.splitlines() if f" {name} source:" in ln), None)
        assert line is not None, f"{name} was not loaded"
        assert line.endswith("source: shared objects file (top)"), line


_SHARED_BY_DESIGN = {"org/apache/spark/unused/UnusedStubClass.class"}
"""A class every Spark module jar carries a copy of."""


def test_the_pinned_jars_hold_no_class_of_pysparks_own() -> None:
    """The driver's class path has the pinned jars before PySpark's (so that the
    class-data archive can hold their classes): a pinned jar that carried one of
    PySpark's classes (a shaded copy of a library, another version of one) would now
    win over Spark's own instead of losing to it."""
    import zipfile

    from gridstream.spark import class_data

    def classes(jars: list[Path]) -> dict[str, str]:
        found: dict[str, str] = {}
        for jar in jars:
            with zipfile.ZipFile(jar) as archive:
                for name in archive.namelist():
                    if name.endswith(".class") and not name.startswith("META-INF/"):
                        found.setdefault(name, jar.name)
        return found

    pyspark = classes(sorted(class_data._pyspark_jars().glob("*.jar")))
    pinned = classes(class_data.driver_jars())
    both = sorted(set(pyspark) & set(pinned) - _SHARED_BY_DESIGN)
    assert not both, [(name, pinned[name], pyspark[name]) for name in both[:20]]
