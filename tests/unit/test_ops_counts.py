"""Every flow's report says what became of each record read in the same words
(``BatchCounts``), and the metrics reference in docs/operating.md is the declarations'."""

from __future__ import annotations

from pathlib import Path

from gridstream.connect.base import ConnectorReport
from gridstream.feeds.feed import BatchReport
from gridstream.ops import metrics
from gridstream.ops.counts import BatchCounts
from gridstream.pipeline.run import PipelineReport
from gridstream.spark.sinks.base import SinkResult

ROOT = Path(__file__).resolve().parents[2]


def _adds_up(c: BatchCounts) -> bool:
    return c.read == c.written + c.filtered + c.skipped + c.dead_lettered


def test_a_source_batch_re_run_after_a_crash_counts_what_the_earlier_run_committed() -> None:
    """10 read: 6 written now, 3 committed by the crashed run (in Kafka all the same), 1
    dead letter of the earlier run: read still equals written + ... ."""
    report = ConnectorReport("src", 4, 10, 6, earlier_written=3, earlier_dead_lettered=1)
    counts = report.counts()
    assert (counts.written, counts.dead_lettered) == (9, 1) and _adds_up(counts)
    assert report.line().startswith("src  batch 4: 10 records, 6 written")


def test_a_pipeline_batch_counts_what_its_steps_filtered() -> None:
    dead = PipelineReport("logs", 3, 1000, 800, 2, 0.41, "dead_letter",
                          {"written": 802, "skipped": 0})
    assert dead.counts() == BatchCounts(1000, 800, 198, 0, 2, 0.41) and _adds_up(dead.counts())
    assert dead.line() == ("logs  batch 3: 1000 in, 800 out, 198 filtered, 2 dead-lettered in "
                           "0.41s (2,439 rec/s); sink: skipped 0, written 802")
    logged = PipelineReport("logs", 4, 10, 9, 1, 1.0, "log")
    assert logged.counts() == BatchCounts(10, 9, 0, 1, 0, 1.0)
    assert logged.line() == "logs  batch 4: 10 in, 9 out, 1 skipped (logged) in 1.00s (10 rec/s)"
    failing = PipelineReport("logs", 5, 10, 10, 0, 1.0, "fail")
    assert "skipped" not in failing.line() and "errors" not in failing.line()


def test_a_windowed_pipeline_batch_counts_no_row_as_filtered() -> None:
    # rows go into windows; a window comes out once the watermark passes it
    report = PipelineReport("win", 0, 1001, 0, 0, 2.0, "fail", {"late": 0}, windowed=True)
    assert report.counts() == BatchCounts(1001, 0, 0, 0, 0, 2.0)
    assert report.line() == ("win  batch 0: 1001 in, 0 out (windows) in 2.00s (500 rec/s); "
                             "sink: late 0")


def test_a_store_batch_counts_stale_operations_as_filtered() -> None:
    report = BatchReport("people", 1, 12, 2, 1, SinkResult(10, 7, 2, 1), 0.5)
    counts = report.counts()
    assert counts == BatchCounts(12, 7, 3, 1, 1, 0.5) and _adds_up(counts)


def test_the_metrics_reference_in_the_docs_is_current() -> None:
    """python -m gridstream.ops.metrics --write docs/operating.md regenerates it."""
    assert metrics.main(["--check", str(ROOT / "docs" / "operating.md")]) == 0
    text = (ROOT / "docs" / "operating.md").read_text()
    for spec in metrics.METRICS:
        assert f"`{spec.name}" in text, spec.name


def test_a_batch_after_an_idle_trigger_of_the_same_id_is_reported() -> None:
    """An idle trigger's progress carries the id the next batch runs as: taking it as
    seen dropped that batch's report (its counts never reached the metrics)."""
    import json
    from collections import deque
    from types import SimpleNamespace
    from typing import Any

    from gridstream.pipeline.base import Guarantee
    from gridstream.pipeline.run import OBSERVED, PipelineJob

    class Progress(dict[str, Any]):
        @property
        def json(self) -> str:
            return json.dumps(self)

    idle = Progress(batchId=1, numInputRows=0, durationMs={"triggerExecution": 3})
    real = Progress(batchId=1, numInputRows=5, durationMs={"triggerExecution": 500},
                    observedMetrics={OBSERVED: {"rows": 5, "errors": 0}})
    job: Any = object.__new__(PipelineJob)
    job.__dict__.update(pipeline=SimpleNamespace(name="p"), _last_batch=0, batches={},
                        _windows=False,
                        reports=deque(), options=SimpleNamespace(errors="fail"),
                        guarantee=Guarantee.AT_LEAST_ONCE, source=None,
                        _query=SimpleNamespace(recentProgress=[idle]))
    job.poll()
    assert list(job.reports) == []
    job._query.recentProgress = [idle, real]
    job.poll()
    assert [(r.batch_id, r.rows_in) for r in job.reports] == [(1, 5)]
    job.poll()  # once
    assert len(job.reports) == 1
