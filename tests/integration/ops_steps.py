"""Step functions of the run files of ``test_run_operating`` (imported by the run through
its ``[run] allowed_modules``)."""

from __future__ import annotations

import orjson


def even(kv: tuple[str | None, str]) -> bool:
    """Whether the JSON value's ``n`` is even (a value that is not JSON raises)."""
    return int(orjson.loads(kv[1])["n"]) % 2 == 0
