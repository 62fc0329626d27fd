"""The session ``get_spark`` builds, as the store pipelines see it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gridstream.spark import PipelineConfig, StorePipeline
from tests.integration.spark_workload import ORDER, PERSON, Workload, produce

_V1_READERS = "spark.sql.streaming.disabledV2MicroBatchReaders"


def _sources(spark: Any, topic: str, tmp: Path, name: str) -> list[str]:
    """The Kafka source descriptions of a pipeline's streaming query, batch by batch."""
    pipeline = StorePipeline(PipelineConfig.model_validate({
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
