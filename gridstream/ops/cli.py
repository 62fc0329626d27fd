"""``gridstream status``: what a running ``gridstream run`` is doing, from its ``/status``.

Exit codes: 0 every flow healthy, 1 a flow failed, 3 no run answers at the URL.
"""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gridstream.ops.server import DEFAULT_PORT

__all__ = ["DEFAULT_URL", "fetch_status", "show_status"]

DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"


def fetch_status(url: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """The JSON status of the run serving at ``url`` (http or https)."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"not an http URL: {url!r}")
    with urllib.request.urlopen(url.rstrip("/") + "/status",  # noqa: S310 - checked above
                                timeout=timeout_s) as answer:
        data: dict[str, Any] = orjson.loads(answer.read())
        return data


_COLUMNS = ("flow", "kind", "state", "batches", "read", "written", "filtered", "skipped",
            "dead-lettered", "lag", "rate/s", "last batch", "restarts")


def _ago(stamp: float | None, now: float) -> str:
    return "-" if stamp is None else f"{max(0.0, now - stamp):.0f}s ago"


def show_status(url: str, *, as_json: bool = False, console: Console | None = None) -> int:
    """Print the run's flows (a table, or the JSON); the exit code (see the module)."""
    out = console or Console()
    try:
        status = fetch_status(url)
        if not isinstance(status, dict) or not {"flows", "healthy", "now"} <= status.keys():
            raise ValueError("the answer is not a gridstream run's status")
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        out.print(f"no gridstream run answers at {url}: {reason} (is it running? "
                  "its status URL is printed when it starts)", markup=False, highlight=False)
        return 3
    if as_json:
        out.print_json(orjson.dumps(status).decode())
        return 0 if status["healthy"] else 1
    now = status["now"]
    rows = [[str(cell) for cell in (
        f["name"], f["kind"], f["state"], f["batches"], f["read"], f["written"], f["filtered"],
        f["skipped"], f["dead_lettered"], "-" if f["lag_records"] is None else f["lag_records"],
        f"{f['rate_per_s']:,.0f}", _ago(f["last_batch_at"], now), f["restarts"])]
        for f in status["flows"]]
    title = f"gridstream run at {url} (log: {status['log_file']})"
    if out.is_terminal:
        table = Table(title=Text(title))
        for column in _COLUMNS:
            table.add_column(column, justify="left" if column in ("flow", "kind", "state")
                             else "right")
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))  # names are not markup
        out.print(table)
    else:  # a pipe or a file: whole lines, one a flow, nothing wrapped or cut
        widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(_COLUMNS)]
        out.print(title, markup=False, highlight=False, soft_wrap=True)
        for row in [list(_COLUMNS), *rows]:
            out.print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)
                                ).rstrip(), markup=False, highlight=False, soft_wrap=True)
    for f in status["flows"]:
        if f["error"]:
            again = f["next_restart_at"]
            when = ("" if again is None else f" (restart in {max(0.0, again - time.time()):.0f}s)"
                    if f["state"] == "restarting" else f" (checking again in "
                    f"{max(0.0, again - time.time()):.0f}s)")
            out.print(f"{f['name']}: {f['state'].upper()}: {f['error']}{when}",
                      markup=False, highlight=False, soft_wrap=True)
    return 0 if status["healthy"] else 1
