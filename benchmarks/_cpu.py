"""CPU seconds per process role on this machine, read from ``/proc``: where the cores go.

``snapshot()`` sums user + system time of every live process by role (a stack service
by its ``-Dgridstream.service=`` mark, Spark's JVM, Spark's Python workers, the
benchmark's own child roles, this process); ``spent(before, after)`` is the difference.
A process that exits between the snapshots is missing from ``after``: a child that ends
inside the window reports its own CPU (``time.process_time()``) instead.
"""

from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def _role(pid: int, argv: list[str]) -> str:
    if pid == os.getpid():
        return "driver (python)"
    text = " ".join(argv)
    for arg in argv:
        if arg.startswith("-Dgridstream.service="):
            return arg.split("=", 1)[1]
    if "org.apache.spark.deploy.SparkSubmit" in text:
        return "spark jvm"
    if "pyspark.daemon" in text or "pyspark.worker" in text:
        return "spark python workers"
    if "--role" in argv:
        return argv[argv.index("--role") + 1]
    return "other"


def snapshot() -> dict[str, float]:
    """CPU seconds by role, plus ``machine`` (busy time of all cores) and ``wall``."""
    roles: dict[str, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds = (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
        role = _role(int(entry.name), [a for a in argv if a])
        roles[role] = roles.get(role, 0.0) + seconds
    cpu = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    busy = sum(int(x) for x in cpu[:8]) - int(cpu[3]) - int(cpu[4])  # less idle, iowait
    roles["machine"] = busy / _TICK
    roles["wall"] = float(os.times().elapsed)
    return roles


def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds each role spent between two snapshots (rounded to 10 ms)."""
    return {role: round(after[role] - before.get(role, 0.0), 2) for role in after
            if after[role] - before.get(role, 0.0) >= 0.01}
