"""The pipeline API on the real broker and Spark: Kafka → steps → Kafka under each
guarantee, map_batch, the error policies, real-time mode's refusals, a TOML run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gridstream.pipeline import Guarantee, KafkaSinks, KafkaSources, Pipeline, entry
from tests.integration.pipeline_helpers import out_props, produce, props, read


def _run(pipeline: Pipeline, spark: Any, **options: Any) -> Any:
    job = pipeline.job(trigger="available_now", **options)
    try:
        query = job.start(spark)
        query.awaitTermination(300)
        assert not query.isActive
        failure = job.failure
        reports = []
        while job.reports:
            reports.append(job.reports.popleft())
        return failure, reports
    finally:
        job.close()


@pytest.mark.parametrize("guarantee", list(Guarantee))
def test_map_filter_flat_map_kafka_to_kafka(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        guarantee: Guarantee) -> None:
    source, sink = topic_factory(3), topic_factory(2)
    produce(kafka_bootstrap, source, ((f"k{i}".encode(), str(i).encode())
                                      for i in range(2000)))
    p = Pipeline.create(name=f"t-{guarantee.lower()}")
    (p.read_from(KafkaSources.kafka(props(kafka_bootstrap), source))
      .map(lambda kv: (kv[0], int(kv[1])))
      .filter(lambda kv: kv[1] % 2 == 0)
      .flat_map(lambda kv: [kv, (kv[0], kv[1] + 1)])
      .map(lambda kv: entry(kv[0], str(kv[1] * 10)))
      .write_to(KafkaSinks.kafka(out_props(kafka_bootstrap), sink)))
    failure, reports = _run(p, spark, guarantee=guarantee,
                            checkpoint=None if guarantee == Guarantee.NONE
                            else str(tmp_path / "ck"))
    assert failure is None
    got = Counter((k, v) for k, v, _ in read(kafka_bootstrap, sink))
    expected = Counter((f"k{i}".encode(), str(j * 10).encode())
                       for i in range(0, 2000, 2) for j in (i, i + 1))
    assert got == expected
    assert sum(r.rows_in for r in reports) == 2000
    assert sum(r.rows_out for r in reports) == 2000
