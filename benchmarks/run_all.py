"""Run every benchmark (benchmarks/bench_*.py) once and collect the JSON each prints last.

Usage: python benchmarks/run_all.py [name-substring ...]
Results are printed and written to benchmarks/results/latest.json. Each benchmark measures
its own baseline in the same run and reports ratios against it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


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


def main(argv: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if argv:
        scripts = [s for s in scripts if any(a in s.stem for a in argv)]
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
    out = HERE / "results" / "latest.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
