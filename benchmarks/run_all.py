"""Run every benchmark (benchmarks/bench_*.py) once and collect the JSON each prints last.

Usage: python benchmarks/run_all.py [--smoke] [--out FILE] [name-substring ...]

Each benchmark runs as a process of its own (nothing left over from another one in its
measurements); the results are printed and written to benchmarks/results/latest.json.
Each benchmark measures its own baseline in the same run and reports ratios against it.

``--smoke`` runs each benchmark's smoke mode (``--smoke``: tiny sizes, one round, no
warm-up; the figures mean nothing) instead, one after the other in this one process, by
calling its ``main``: Spark's JVM starts once (a session stopped by one benchmark starts
again in the same JVM in under a second for the next one) and the imports are paid once.
A benchmark's own sides that are processes by design (the pipeline benchmarks') still
are. Each run is bounded by ``--limit`` seconds. The results (each benchmark's JSON, or
its error) go to benchmarks/results/smoke.json; the exit status is 1 if any benchmark
failed or printed no JSON. The default test suite runs this
(``tests/integration/test_benchmark_smoke.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def _last_json(stdout: str) -> object:
    """The last JSON object printed: a one-line object, or a pretty one starting at a
    line of its own."""
    lines = stdout.rstrip().splitlines()
    for start in range(len(lines) - 1, -1, -1):
        if lines[start].startswith("{"):
            try:
                return json.loads("\n".join(lines[start:]))
            except json.JSONDecodeError:
                continue
    raise ValueError("the benchmark printed no JSON object")


def _measure(scripts: list[Path]) -> tuple[dict[str, object], bool]:
    """Each benchmark in a process of its own, with its default sizes."""
    results: dict[str, object] = {}
    failed = False
    for script in scripts:
        print(f"> {script.name} ...", flush=True)
        started = time.monotonic()
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              check=False)
        elapsed = time.monotonic() - started
        if proc.returncode != 0:
            failed = True
            print(proc.stdout[-2000:], proc.stderr[-4000:], sep="\n")
            results[script.stem] = {"error": f"exit {proc.returncode}"}
            continue
        results[script.stem] = _last_json(proc.stdout)
        print(f"  {elapsed:.0f}s: {json.dumps(results[script.stem])}", flush=True)
    return results, failed


class _Overrun(Exception):
    """A smoke run took longer than ``--limit``."""


@contextlib.contextmanager
def _limit(seconds: int) -> Iterator[None]:
    """``_Overrun`` in this (the main) thread once ``seconds`` have passed."""

    def overrun(_signum: int, _frame: FrameType | None) -> None:
        raise _Overrun(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, overrun)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _smoke_one(script: Path, limit_s: int) -> dict[str, Any]:
    """``main(["--smoke"])`` of one benchmark, in this process, its stdout captured:
    ``seconds`` and ``result`` (its last JSON), or ``error`` (and ``stdout``)."""
    out = io.StringIO()
    started = time.monotonic()
    try:
        with _limit(limit_s), contextlib.redirect_stdout(out):
            module = importlib.import_module(f"benchmarks.{script.stem}")
            status = module.main(["--smoke"])
        if isinstance(status, int) and status:  # an exit status; None or a result: fine
            raise RuntimeError(f"main returned {status}")
        run: dict[str, Any] = {"result": _last_json(out.getvalue())}
    except BaseException as exc:  # SystemExit included: argparse, a benchmark's own exit
        if isinstance(exc, KeyboardInterrupt):
            raise
        run = {"error": "".join(traceback.format_exception(exc))[-6000:],
               "stdout": out.getvalue()[-2000:]}
    run["seconds"] = round(time.monotonic() - started, 1)
    return run


def _smoke(scripts: list[Path], limit_s: int) -> tuple[dict[str, object], bool]:
    results: dict[str, object] = {}
    failed = False
    started = time.monotonic()
    for script in scripts:
        print(f"> {script.name} --smoke ...", flush=True)
        run = _smoke_one(script, limit_s)
        results[script.stem] = run
        if "error" in run:
            failed = True
            print(f"  FAILED after {run['seconds']}s:\n{run['stdout']}\n{run['error']}",
                  flush=True)
        else:
            print(f"  {run['seconds']}s: {json.dumps(run['result'])[:300]}", flush=True)
    print(f"all smoke runs: {time.monotonic() - started:.0f}s", flush=True)
    return results, failed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="only the benchmarks whose name has one "
                        "of these in it")
    parser.add_argument("--smoke", action="store_true",
                        help="each benchmark's smoke mode, all in this process")
    parser.add_argument("--limit", type=int, default=300,
                        help="seconds a smoke run may take (default 300)")
    parser.add_argument("--out", type=Path, default=None,
                        help="where to write the results (default benchmarks/results/"
                        "latest.json, smoke.json under --smoke)")
    args = parser.parse_args(argv)
    scripts = sorted(HERE.glob("bench_*.py"))
    if args.names:
        scripts = [s for s in scripts if any(a in s.stem for a in args.names)]
    if args.smoke:
        results, failed = _smoke(scripts, args.limit)
    else:
        results, failed = _measure(scripts)
    out = args.out or HERE / "results" / ("smoke.json" if args.smoke else "latest.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
