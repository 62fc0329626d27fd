"""A JVM that does not start: the error names the log file its output went to."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridstream.errors import SparkError
from gridstream.spark import session


def test_a_failed_start_points_at_the_log_file_with_the_jvms_output(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pyspark.sql import SparkSession

    def refuse(self: object) -> None:
        raise RuntimeError("Java gateway process exited before sending its port number")

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", refuse)
    monkeypatch.setattr(session.class_data, "driver_jars", lambda extra=(): [])
    log = tmp_path / "run.log"
    with pytest.raises(SparkError, match=f"exited before .*what the JVM said is in {log}"):
        session.get_spark(log_file=log)
    with pytest.raises(SparkError) as without:
        session.get_spark()
    assert "what the JVM said" not in str(without.value)
