"""The one state directory: JVM artifacts, service configs, data, logs and PIDs."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["gridstream_home"]


def gridstream_home() -> Path:
    """``$GRIDSTREAM_HOME``, or ``~/.gridstream``."""
    raw = os.environ.get("GRIDSTREAM_HOME")
    home = Path(raw).expanduser() if raw else Path.home() / ".gridstream"
    home.mkdir(parents=True, exist_ok=True)
    return home
