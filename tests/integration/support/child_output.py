"""A child process whose output lines a test waits on (to kill it mid-stream)."""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path


def start_piped(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
                ) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    """Start ``argv`` in a new session (so its whole process group can be killed) with its
    stdout and stderr pumped, line by line, into the returned queue."""
    process = subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True, env=env,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return process, lines


def await_line(process: subprocess.Popen[str], lines: queue.Queue[str], seen: list[str],
               matches: Callable[[str], bool], timeout: float = 240) -> None:
    """Block until the process prints a line that ``matches``; every line read is kept in
    ``seen``. Fails if the process ends first or nothing matches within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            assert process.poll() is None, "".join(seen[-40:])
            continue
        seen.append(line)
        if matches(line):
            return
    raise AssertionError("no matching line within the timeout:\n" + "".join(seen[-40:]))
