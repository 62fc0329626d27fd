"""A Spark driver's start, with the class-data archive (``gridstream stack fetch``) against
without it, in the same run.

Each round starts two fresh processes, one after the other: each imports gridstream,
starts a session (``get_spark``: a new driver JVM), runs a first batch job
(``range(1000)`` through a Python Arrow pass, grouped) and a first streaming query
(a rate source, one ``available_now`` batch through ``foreachBatch``), stops, and prints
how long each phase took. The side without the archive runs with a ``$GRIDSTREAM_HOME``
of its own whose pinned jars are links to the same files: the archive's digest names
the jars' paths, so that driver finds no archive; it is otherwise the same driver
(same jars, same options). Whole-process times come from this process (start to
exit). Needs no service.

Each driver's class-load log (Java's, a file) says whether it loaded ``SparkContext``
from the archive: every driver of the archive side must have, and none of the other
(else the run fails). The order of the two sides alternates round by round.

Prints JSON: per side the median of each phase over the rounds, and the ratios
with/without. Usage: python benchmarks/bench_spark_start.py [--repeat 5] [--smoke]
(``--smoke``: one round)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _smoke
from gridstream.runtime import gridstream_home
from gridstream.runtime.artifacts import jar_dir
from gridstream.spark import class_data

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("import_s", "session_s", "first_job_s", "first_stream_s")

_CHILD = """
import json, sys, time
t0 = time.monotonic()
from pyspark.sql import functions as F
from gridstream.spark import get_spark
t1 = time.monotonic()
spark = get_spark(app_name="bench-spark-start")
t2 = time.monotonic()

def upper(batches):
    for batch in batches:
        yield batch

spark.range(1000).mapInArrow(upper, "id long").groupBy((F.col("id") % 4)).count().collect()
t3 = time.monotonic()
seen = []
query = (spark.readStream.format("rate").option("rowsPerSecond", 100).load()
         .writeStream.foreachBatch(lambda df, _: seen.append(df.count()))
         .option("checkpointLocation", sys.argv[1]).trigger(availableNow=True).start())
if not query.awaitTermination(300):
    raise SystemExit("the first streaming query did not end within 300 s")
t4 = time.monotonic()
spark.stop()
print(json.dumps({"import_s": t1 - t0, "session_s": t2 - t1, "first_job_s": t3 - t2,
                  "first_stream_s": t4 - t3}))
"""


def _bare_home(tmp: Path) -> Path:
    """A ``$GRIDSTREAM_HOME`` whose Spark jars are links to the real ones."""
    home = tmp / "home"
    real = jar_dir("spark")
    (home / "jvm").mkdir(parents=True)
    (home / "jvm" / real.name).symlink_to(real, target_is_directory=True)
    return home


def _start(env: dict[str, str], work: Path) -> dict[str, Any]:
    """One driver process: its phases, its whole time, and whether its driver JVM loaded
    ``SparkContext`` from the archive (Java's class-load log, a file per JVM)."""
    work.mkdir()
    logs = f"-Xlog:class+load=info:file={work}/classes-%p.log"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _CHILD, str(work / "checkpoint")],
                          cwd=ROOT, env={**env, "JDK_JAVA_OPTIONS": logs},
                          capture_output=True, text=True, timeout=600, check=False)
    whole = time.monotonic() - started
    if done.returncode != 0:
        raise AssertionError(f"the driver process failed: {done.stderr[-3000:]}")
    phases: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    context = [line for p in work.glob("classes-*.log") for line in p.read_text().splitlines()
               if " org.apache.spark.SparkContext source:" in line]
    if len(context) != 1:
        raise AssertionError(f"{len(context)} driver JVMs loaded SparkContext")
    return {**phases, "whole_process_s": whole,
            "from_archive": context[0].endswith("source: shared objects file (top)")}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = _smoke.parse_args(parser, argv, repeat=1)
    archive = class_data.build()
    runs: dict[str, list[dict[str, Any]]] = {"archive": [], "none": []}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="gs-bench-start-") as raw:
        tmp = Path(raw)
        envs = {"archive": {**os.environ, "GRIDSTREAM_HOME": str(gridstream_home())},
                "none": {**os.environ, "GRIDSTREAM_HOME": str(_bare_home(tmp))}}
        for round_ in range(args.repeat):
            for side in ("archive", "none") if round_ % 2 else ("none", "archive"):
                runs[side].append(_start(envs[side], tmp / f"{side}-{round_}"))
                print(json.dumps({side: runs[side][-1]}), file=sys.stderr, flush=True)
    for side, want in (("archive", True), ("none", False)):
        if any(run["from_archive"] is not want for run in runs[side]):
            raise AssertionError(f"the {side} side's drivers: from the archive "
                                 f"{[run['from_archive'] for run in runs[side]]}")
    load.append(os.getloadavg()[0])
    keys = (*PHASES, "whole_process_s")
    medians = {side: {k: round(statistics.median(r[k] for r in rs), 2) for k in keys}
               for side, rs in runs.items()}
    ratios = {k: round(medians["archive"][k] / medians["none"][k], 2) for k in keys}
    print(json.dumps({"benchmark": "spark_start", "repeat": args.repeat,
                      "archive": str(archive), "archive_mb": archive.stat().st_size >> 20,
                      "load_average": load, "medians": medians,
                      "archive_over_none": ratios}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
