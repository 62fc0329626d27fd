"""The ``--smoke`` flag of every benchmark: tiny sizes, one round, no warm-up.

A smoke run takes seconds and its figures mean nothing; it proves that the benchmark
still starts, moves its records through every side and checks them, and prints its
JSON. ``benchmarks/run_all.py --smoke`` runs every benchmark so, and the default test
suite runs that (``tests/integration/test_benchmark_smoke.py``): a benchmark that no
longer works fails CI instead of rotting until someone needs its figures.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

HELP = ("tiny sizes, one round, no warm-up: checks in seconds that the benchmark still "
        "runs end to end (its figures mean nothing); explicit options still win")


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None,
               **smoke: Any) -> argparse.Namespace:
    """Add ``--smoke`` to ``parser`` and parse ``argv``; under ``--smoke`` the options
    named in ``smoke`` default to the given values instead."""
    known = {action.dest for action in parser._actions}
    if unknown := set(smoke) - known:
        raise ValueError(f"smoke defaults for options the parser lacks: {sorted(unknown)}")
    parser.add_argument("--smoke", action="store_true", help=HELP)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--smoke", action="store_true")
    if pre.parse_known_args(argv)[0].smoke:
        parser.set_defaults(**smoke)
    return parser.parse_args(argv)
