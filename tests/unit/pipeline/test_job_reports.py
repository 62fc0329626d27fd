"""A job's batch reports from its query's progress: the counts a JVM node observed
(``observedMetrics``), or those the exactly-once writer's tasks gave (``on_batch``)."""

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


def _progress(batch: int, rows: int, observed: dict[str, int] | None = None) -> _Progress:
    progress = _Progress(batchId=batch, numInputRows=rows,
                         durationMs={"triggerExecution": 250 if rows else 3})
    if observed is not None:
        progress["observedMetrics"] = {OBSERVED: observed}
    return progress


def _job(tmp: str, guarantee: Guarantee = Guarantee.EXACTLY_ONCE) -> Any:
    p = Pipeline.create(name="reports")
    (p.read_from(KafkaSources.kafka({"bootstrap.servers": "127.0.0.1:1"}, "in"))
      .map(lambda kv: kv)
      .write_to(KafkaSinks.kafka({"bootstrap.servers": "127.0.0.1:1"}, "out")))
    return p.job(guarantee, checkpoint=tmp)


def _drain(job: Any) -> list[tuple[int, int, int, int]]:
    reports = []
    while job.reports:
        report = job.reports.popleft()
        reports.append((report.batch_id, report.rows_in, report.rows_out, report.errors))
    return reports


def test_at_least_once_reports_the_counts_its_query_observed(tmp_path: Any) -> None:
    """``AT_LEAST_ONCE``'s tasks produce and give their counts to Spark's
    ``observe``: each batch's report takes them from its progress; an idle trigger's
    progress (no rows, no metrics) is no report, and a batch already reported is not
    reported again when a later poll sees its progress once more."""
    job = _job(str(tmp_path / "ck"), Guarantee.AT_LEAST_ONCE)
    job._query = _Query(_progress(0, 5, {"rows": 5, "errors": 1}), _progress(1, 0))
    assert _drain(job) == [(0, 5, 4, 1)]
    job._query = _Query(_progress(0, 5, {"rows": 5, "errors": 1}), _progress(1, 0),
                        _progress(1, 3, {"rows": 3, "errors": 0}))
    assert _drain(job) == [(1, 3, 3, 0)]


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
