"""Embedded space throughput: writes, reads, log tailing and recovery; prints JSON.

    python benchmarks/bench_space.py --ops 100000 [--fsync batch] [--partitions 4] [--smoke]

``--smoke``: 200 operations (seconds; the figures mean nothing).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _smoke
from gridstream.model import space_class
from gridstream.space import Change, Space, open_log_reader


@space_class(type_name="bench.Item")
@dataclass
class Item:
    id: int
    name: str
    qty: int
    price: float


def _rate(ops: int, fn: Callable[[], None]) -> tuple[float, float]:
    """Operations per second of wall time, and per second of this process's CPU time
    (steadier on a shared machine)."""
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    elapsed, used = time.perf_counter() - start, time.process_time() - cpu
    return ops / elapsed, ops / max(used, 1e-9)


def _timed(fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run(ops: int, fsync: str, partitions: int, data_dir: Path) -> dict[str, object]:
    """Run every measurement on a fresh space in ``data_dir``."""
    space = Space.embedded("bench", data_dir=data_dir, partitions=partitions,
                           fsync=fsync,  # type: ignore[arg-type]
                           snapshot_every_ops=None)
    results: dict[str, object] = {}

    def writes() -> None:
        for i in range(ops):
            space.write(Item(i, "item", i, 1.5))

    def reads() -> None:
        for i in range(ops):
            space.read(Item, i)

    def changes() -> None:
        for i in range(ops // 4):
            space.change(Item, i, [Change.increment("qty", 1)])

    def transactions() -> None:
        for t in range(ops // 100):
            with space.transaction() as tx:
                for i in range(100):
                    tx.write(Item(ops + t * 100 + i, "tx", i, 2.5))

    results["write_ops_per_s"], results["write_ops_per_cpu_s"] = _rate(ops, writes)
    results["read_ops_per_s"], results["read_ops_per_cpu_s"] = _rate(ops, reads)
    results["change_ops_per_s"], _ = _rate(ops // 4, changes)
    results["txn_write_ops_per_s"], _ = _rate(ops // 100 * 100, transactions)
    space.sync()
    end = space.next_seq
    results["tail_ops_per_s"], results["tail_ops_per_cpu_s"] = _rate(
        end - 1, lambda: _tail(data_dir, end))
    results["close_s"] = _timed(space.close)
    reopened: list[Space] = []
    results["recover_with_snapshot_s"] = _timed(lambda: reopened.append(
        Space.embedded("bench", data_dir=data_dir, partitions=partitions)))
    reopened[0].close()
    return results


def _tail(data_dir: Path, end: int) -> None:
    reader = open_log_reader(data_dir)
    seq = 1
    try:
        while seq < end:
            bulks = reader.read(seq, 10_000)
            if not bulks:
                raise RuntimeError(f"the log stops at {seq}, expected {end}")
            seq = bulks[-1].next_seq
    finally:
        reader.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--fsync", choices=["always", "batch", "never"], default="batch")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--dir", type=Path, default=None, help="where to put the space")
    args = _smoke.parse_args(parser, argv, ops=200)
    root = Path(tempfile.mkdtemp(prefix="bench-space-", dir=args.dir))
    try:
        results = run(args.ops, args.fsync, args.partitions, root / "space")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report = {
        "benchmark": "space.embedded",
        "ops": args.ops,
        "fsync": args.fsync,
        "partitions": args.partitions,
        "python": platform.python_version(),
        **{k: round(v, 3) if isinstance(v, float) else v for k, v in results.items()},
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
