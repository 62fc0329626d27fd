"""A Spark driver running one real-time pipeline with a Python map, as a process of its
own: a real-time Python pass needs a session *built* for it (``REAL_TIME_PYTHON_CONF``),
which the suite's shared session is not (``test_pipeline_real_time.py``).

``python -m tests.integration.support.real_time_child BOOTSTRAP SOURCE TARGET CHECKPOINT
INTERVAL``: Kafka source → ``map`` (the value uppercased; a value ``bad…`` raises, under
``errors="log"``) → Kafka sink, ``AT_LEAST_ONCE``, ``trigger="real_time"``, batches of
INTERVAL. Prints ``ready`` once the query runs, then each batch's report as a JSON line
(``report {...}``) as it comes, until killed.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def upper(kv: tuple[Any, Any]) -> Any:
    from gridstream.pipeline import entry

    if kv[1].startswith("bad"):
        raise ValueError(f"refused {kv[1]!r}")
    return entry(kv[0], kv[1].upper())


def main(bootstrap: str, source: str, target: str, checkpoint: str, interval: str) -> None:
    from gridstream.pipeline import Guarantee, KafkaSinks, KafkaSources, Pipeline
    from gridstream.pipeline.run import REAL_TIME_PYTHON_CONF
    from gridstream.spark import get_spark

    spark = get_spark(app_name="real-time-child", conf=dict(REAL_TIME_PYTHON_CONF))
    p = Pipeline.create(name="real-time-child")
    (p.read_from(KafkaSources.kafka({
        "bootstrap.servers": bootstrap, "key.deserializer": "StringDeserializer",
        "value.deserializer": "StringDeserializer", "auto.offset.reset": "earliest"}, source))
      .map(upper)
      .write_to(KafkaSinks.kafka({"bootstrap.servers": bootstrap,
                                  "key.serializer": "StringSerializer",
                                  "value.serializer": "StringSerializer"}, target)))
    job = p.job(Guarantee.AT_LEAST_ONCE, checkpoint, "real_time", errors="log",
                real_time_python=True, checkpoint_interval=interval)
    query = job.start(spark)
    print("ready", json.dumps(job.describe()), flush=True)
    try:
        while query.isActive:
            query.awaitTermination(1)
            job.poll()
            while len(job.reports):
                r = job.reports.popleft()
                print("report", json.dumps({"batch": r.batch_id, "in": r.rows_in,
                                            "out": r.rows_out, "errors": r.errors}),
                      flush=True)
        if job.failure is not None:
            print("failed", job.failure, flush=True)
    finally:
        job.close()
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
