"""Every benchmark (``benchmarks/bench_*.py``) still runs: its smoke mode (``--smoke``:
tiny sizes, one round, no warm-up) exits cleanly and prints its JSON result. A benchmark
nothing runs rots (one crashed on a changed record timestamp and lost the figures it had
measured); this keeps each in the default suite but seven, which the slow suite runs
(below). No figure is asserted.

All of them run in one ``benchmarks/run_all.py --smoke`` process, so that Spark's JVM
starts once for the benchmarks that hold a session in-process (the pipeline benchmarks'
sides are processes of their own by design). Seven run in the slow suite only, their
smoke runs being mostly new driver processes, fixed-rate runs, a session's first Delta
MERGEs or many query starts:

- ``bench_pipeline_kafka`` (``test_pipeline_bench_smoke.py``, every side): Quix Streams'
  sides need a virtualenv from the package index; its other sides took 80 s of every
  default run here;
- ``bench_pipeline_latency`` (below, and ``test_pipeline_bench_smoke.py`` with a longer
  run): 43 s, a new driver process for its query;
- ``bench_spark_start`` (below): every round is two new drivers; its subject, the
  class-data archive, the default suite checks in ``test_spark_session.py``;
- ``bench_connect_latency`` (below): 38 s of a fixed-rate run and its drain; the
  connectors' paths are the default suite's connector tests;
- ``bench_spark_delta`` (below): a session's first Delta MERGEs take 20 s and more; the
  lake sink is the default suite's store feed tests';
- ``bench_connect_source`` (below): 47 s, eight source connector queries started (each
  side's checkpoint is taken by a run of its own first); the connector on both grids is
  the default suite's ``test_connect_source.py``;
- ``bench_pipeline_avro`` (below): 25 s, four pipelines started for 200 records; Avro
  in Python and in the JVM is the default suite's ``test_pipeline_avro_jvm.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gridstream.stack.service import LocalService

ROOT = Path(__file__).resolve().parents[2]
IN_THE_SLOW_SUITE = frozenset({"bench_pipeline_kafka", "bench_pipeline_latency",
                               "bench_spark_start", "bench_connect_latency",
                               "bench_spark_delta", "bench_connect_source",
                               "bench_pipeline_avro"})
BENCHMARKS = sorted(p.stem for p in (ROOT / "benchmarks").glob("bench_*.py")
                    if p.stem not in IN_THE_SLOW_SUITE)
TIMEOUT_S = 600  # ~3 minutes on a quiet 2-core machine


def _smoke_runs(benchmarks: list[str], out: Path) -> dict[str, Any]:
    """``run_all.py --smoke``'s results: per benchmark ``result`` or ``error``."""
    try:
        proc = subprocess.run(
            [sys.executable, "benchmarks/run_all.py", "--smoke", "--out", str(out),
             *benchmarks],
            cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        pytest.fail(f"the smoke runs took over {TIMEOUT_S} s:\n{output[-6000:]}")
    if not out.exists():
        pytest.fail(f"run_all.py exited {proc.returncode} without results:\n"
                    f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    runs = json.loads(out.read_text())
    assert isinstance(runs, dict) and sorted(runs) == sorted(benchmarks), sorted(runs)
    return runs


@pytest.fixture(scope="module")
def smoke_runs(kafka_service: LocalService, cassandra_service: LocalService,
               hazelcast_service: LocalService, registry_service: LocalService,
               tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _smoke_runs(BENCHMARKS, tmp_path_factory.mktemp("bench-smoke") / "smoke.json")


def _check(benchmark: str, runs: dict[str, Any]) -> None:
    run = runs[benchmark]
    assert "error" not in run, f"{benchmark} --smoke failed:\n{run['stdout']}\n{run['error']}"
    result = run["result"]
    assert isinstance(result, dict) and result, f"{benchmark} printed {result!r}"


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_the_benchmark_runs_in_its_smoke_mode(benchmark: str,
                                              smoke_runs: dict[str, Any]) -> None:
    _check(benchmark, smoke_runs)


@pytest.mark.slow
@pytest.mark.parametrize("benchmark", sorted(
    IN_THE_SLOW_SUITE - {"bench_pipeline_kafka", "bench_spark_start"}))  # those: their own
def test_a_slow_suite_benchmark_runs_in_its_smoke_mode(
        benchmark: str, kafka_service: LocalService, hazelcast_service: LocalService,
        registry_service: LocalService, tmp_path: Path) -> None:
    _check(benchmark, _smoke_runs([benchmark], tmp_path / "smoke.json"))


@pytest.mark.slow
def test_the_spark_start_benchmark_runs_in_its_smoke_mode() -> None:
    proc = subprocess.run([sys.executable, "benchmarks/bench_spark_start.py", "--smoke"],
                          cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    result = json.loads("\n".join(lines[max(i for i, ln in enumerate(lines)
                                            if ln.startswith("{")):]))
    for side in ("archive", "none"):
        assert all(result["medians"][side][k] > 0 for k in ("session_s", "first_job_s"))
    assert result["archive_over_none"]["whole_process_s"] > 0

