"""A job's batch reports from its query's progress: counts a fused sink's tasks gave
(``on_batch``), when no JVM node after the pass observed them."""

from __future__ import annotations

import json
from typing import Any

from gridstream.pipeline import Guarantee, KafkaSinks, KafkaSources, Pipeline
from gridstream.pipeline.streaming import OBSERVED


class _Progress(dict[str, Any]):
    @property
    def json(self) -> str:
        return json.dumps(self)


class _Query:
    def __init__(self, *progress: _Progress) -> None:
        self.recentProgress = list(progress)


def _progress(batch: int, rows: int) -> _Progress:
    return _Progress(batchId=batch, numInputRows=rows,
                     durationMs={"triggerExecution": 250 if rows else 3})


def _job(tmp: str) -> Any:
    p = Pipeline.create(name="reports")
    (p.read_from(KafkaSources.kafka({"bootstrap.servers": "127.0.0.1:1"}, "in"))
      .map(lambda kv: kv)
      .write_to(KafkaSinks.kafka({"bootstrap.servers": "127.0.0.1:1"}, "out")))
    return p.job(Guarantee.AT_LEAST_ONCE, checkpoint=tmp)


def test_an_idle_triggers_progress_does_not_take_the_next_batchs_counts(
        tmp_path: Any) -> None:
    """An idle trigger's progress carries the id of the batch after it: polled after
    that batch ran, it must not be reported with that batch's counts (which would
    hide the batch's own progress)."""
    job = _job(str(tmp_path / "ck"))
    job._on_batch(4, {"written": 7, OBSERVED: {"rows": 9, "errors": 2}})
    job._query = _Query(_progress(4, 0), _progress(4, 9))
    reports = []
    while job.reports:
        reports.append(job.reports.popleft())
    assert [(r.batch_id, r.rows_in, r.rows_out, r.errors) for r in reports] == [(4, 9, 7, 2)]
    assert reports[0].extra == {"written": 7}
