"""The Spark session: local[2] by default, the pinned connector jars, quiet, loopback only."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gridstream._optional import require
from gridstream.errors import SparkError
from gridstream.runtime.java import find_java
from gridstream.spark import class_data

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["CHECKPOINT_FILE_MANAGER", "DEFAULT_CONF", "DELTA_CONF",
           "DELTA_SNAPSHOT_PARTITIONS", "SPARK_CHECKPOINT_FILE_MANAGER", "get_spark",
           "spark_running"]

CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"

DEFAULT_CONF: dict[str, str] = {
    "spark.driver.memory": "2g",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    "spark.sql.adaptive.enabled": "false",
    "spark.python.worker.reuse": "true",
    # Micro-batches read Kafka through the connector's V1 source (`KafkaSourceV1`, the
    # code path of batch reads) instead of the V2 reader (`KafkaV2`; on Spark 4.0 a
    # profile showed it projecting every record into a row of its own first). Measured
    # again on Spark 4.2 (docs/benchmarks.md): the Kafka → Parquet pipeline spends 2–4 %
    # less JVM CPU on V1, its wall time within the noise. Same options, offsets and
    # checkpoint format, so a query switches either way. An internal Spark setting:
    # tests/integration/test_spark_session.py fails if a Spark upgrade stops honouring it.
    "spark.sql.streaming.disabledV2MicroBatchReaders":
        "org.apache.spark.sql.kafka010.KafkaSourceProvider",
    # Checkpoint files (each micro-batch's offset and commit log entries, state stores)
    # through Hadoop's FileSystem API instead of its FileContext API: on a local path the
    # FileContext API forks `readlink` (its rename) and `chmod` processes (no native Hadoop
    # library here), ~40 ms a file; each batch writes two (docs/benchmarks.md). Both write a
    # temporary file and rename it into place. An existing entry is not overwritten: on
    # a local path both check and then rename (Hadoop's local rename is not atomic with
    # FileContext either); on HDFS both refuse it in the rename. Session-wide; the time
    # saved is on local paths. An internal Spark class: a Spark upgrade that moves it
    # fails tests/integration/test_spark_session.py.
    CHECKPOINT_FILE_MANAGER: "org.apache.spark.sql.execution.streaming.checkpointing."
                             "FileSystemBasedCheckpointFileManager",
}

SPARK_CHECKPOINT_FILE_MANAGER = ("org.apache.spark.sql.execution.streaming.checkpointing."
                                 "FileContextBasedCheckpointFileManager")
"""Spark's own default for ``CHECKPOINT_FILE_MANAGER`` (give it in ``conf`` to keep it)."""


DELTA_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
"""Added when Delta Lake is on the classpath (the lake sink's MERGE needs both)."""

DELTA_SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"
"""Also set with Delta, unless ``conf`` sets it: to the session's
``spark.sql.shuffle.partitions``. A table's snapshot is computed again after each commit
(each micro-batch's MERGE) and read before the next: shuffles of Delta's default 50
partitions, 50 tasks for a few files' work on a two-core driver; as wide as the
session's own shuffles instead, a lake sink's batch took less than half the time
(``benchmarks/bench_spark_delta.py``)."""


def _environment() -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    java = find_java()
    os.environ.setdefault("JAVA_HOME", str(java.resolve().parents[1]))
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    # Python workers (mapInArrow, data sources) must run this interpreter, with its packages
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")


AVRO_LIMITS = ("-Dorg.apache.avro.limits.string.maxLength=67108864 "
               "-Dorg.apache.avro.limits.bytes.maxLength=67108864 "
               "-Dorg.apache.avro.limits.collectionItems.maxLength=8388608")
"""Avro's own bounds in the JVMs (``from_avro``): a string or bytes value over 64 MiB,
or an array or map over 8 Mi items, is a malformed record (an error row) instead of
an allocation as large as a corrupt length says (Avro allocates before it reads: a
10-byte record could ask for 2 GiB and stop the JVM)."""


def get_spark(
    master: str | None = None,
    app_name: str = "gridstream",
    conf: Mapping[str, str] | None = None,
    extra_jar_sets: tuple[str, ...] = (),
    log_file: Path | None = None,
    *,
    archive_classes_to: Path | None = None,
) -> SparkSession:
    """A SparkSession with the Kafka connector (and Delta Lake, when pinned) on the
    classpath (no network resolution).

    ``master`` defaults to ``$GRIDSTREAM_SPARK_MASTER`` or ``local[2]``; ``conf`` entries
    win over the defaults. With ``log_file``, the driver's log goes there instead of to
    stderr, and so does whatever the JVM and the Python workers it starts write to their
    stderr (``_stderr_into``; a JVM started before keeps its own). A new driver JVM
    starts from the class-data archive when there is one (``class_data``);
    ``archive_classes_to`` makes it write one there as it exits instead.
    """
    require("pyspark", "a Spark session")
    from pyspark.sql import SparkSession
    _environment()
    pinned = class_data.driver_jars(extra_jar_sets)
    jars = [str(j) for j in pinned]
    builder = SparkSession.builder.master(
        master or os.environ.get("GRIDSTREAM_SPARK_MASTER", "local[2]")
    ).appName(app_name)
    log_conf = Path(__file__).with_name("log4j2.properties")
    has_delta = any(Path(j).name.startswith("delta-spark_") for j in jars)
    shared = class_data.java_options(pinned, dump_to=archive_classes_to)
    settings = {
        **DEFAULT_CONF,
        **(DELTA_CONF if has_delta else {}),
        "spark.jars": ",".join(jars),
        # the driver's own class path too: classes its application class loader loads
        # can be in the class-data archive (those of ``spark.jars`` alone cannot)
        "spark.driver.extraClassPath": os.pathsep.join(jars),
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log_conf} "
        f"{AVRO_LIMITS} {shared}".rstrip() + (
            f' -Dgridstream.log.appender=file "-Dgridstream.log.file={log_file}"'
            if log_file is not None else ""),
        "spark.executor.extraJavaOptions": AVRO_LIMITS,
        **(conf or {}),
    }
    if has_delta:
        settings.setdefault(DELTA_SNAPSHOT_PARTITIONS, settings["spark.sql.shuffle.partitions"])
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        with _stderr_into(log_file):
            session = builder.getOrCreate()
    except Exception as exc:
        said = f" (what the JVM said is in {log_file})" if log_file is not None else ""
        raise SparkError(f"could not start Spark: {exc}{said}") from exc
    session.sparkContext.setLogLevel(os.environ.get("GRIDSTREAM_SPARK_LOG_LEVEL", "WARN"))
    return session


def spark_running() -> bool:
    """Whether this process already has a running SparkContext (``getOrCreate`` would
    return its session): one that is not ours to stop."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return False
    return SparkContext._active_spark_context is not None


@contextlib.contextmanager
def _stderr_into(log_file: Path | None) -> Iterator[None]:
    """While a new JVM starts, this process's stderr (fd 2) is a pipe that a thread copies
    into ``log_file``: the JVM inherits it as its stderr for its lifetime, and so do the
    Python workers it starts (the JVM's start-up notes, a worker's warnings and traces,
    an uncaught exception of a JVM thread). This process's own stderr is back when the
    JVM has started. Nothing changes without a log file, or with a JVM already running."""
    from pyspark import SparkContext

    if log_file is None or SparkContext._gateway is not None:
        yield
        return
    read_end, write_end = os.pipe()
    pump = threading.Thread(target=_copy, args=(read_end, log_file), daemon=True,
                            name="gridstream-jvm-stderr")
    pump.start()
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _copy(read_end: int, log_file: Path) -> None:
    """Until every process holding the pipe has ended (the JVM, its workers)."""
    with os.fdopen(read_end, "rb", buffering=0) as source, open(log_file, "ab") as sink:
        while chunk := source.read(65536):
            sink.write(chunk)
            sink.flush()
