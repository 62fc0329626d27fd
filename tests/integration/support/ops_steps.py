"""Step functions of the run files of ``test_run_operating`` (imported by the run through
its ``[run] allowed_modules``)."""

from __future__ import annotations

import sys

import orjson

WORKER_NOTE = "ops_steps: a note on a Python worker's stderr"
_noted = False


def even(kv: tuple[str | None, str]) -> bool:
    """Whether the JSON value's ``n`` is even (a value that is not JSON raises). Writes
    ``WORKER_NOTE`` to the worker's stderr once (it must reach the run's log file, not
    the terminal)."""
    global _noted  # noqa: PLW0603 - once per worker process
    if not _noted:
        _noted = True
        print(WORKER_NOTE, file=sys.stderr, flush=True)
    return int(orjson.loads(kv[1])["n"]) % 2 == 0
