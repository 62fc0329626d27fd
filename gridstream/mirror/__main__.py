"""``python -m gridstream.mirror --data-dir DIR --bootstrap HOST:PORT --name NAME``."""

from __future__ import annotations

import sys

from gridstream.mirror.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
