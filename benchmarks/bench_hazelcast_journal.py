"""Hazelcast adapter throughput on the stack's member: writes, and the event journal read
as a change stream; prints JSON.

    python benchmarks/bench_hazelcast_journal.py --entries 50000 [--max-changes 10000] [--smoke]

Baselines in the same run: the client's own ``put_all`` (no adapter) for writes; for
reads, the same journal reads with the codec alone (no key/value decoding, no position
checks). ``--smoke``: 300 entries in batches of 100, read 100 changes at a time
(seconds; the figures mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hazelcast.core import HazelcastJsonValue

from benchmarks import _smoke
from gridstream import stack
from gridstream.grid import Position, Write
from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig, _journal
from gridstream.stack.hazelcast import HazelcastService


def _value(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"item-{i}", "qty": i % 100, "price": i / 7, "tags": ["a", "b"]}


def _read_all(grid: HazelcastAdapter, cache: str, start: Position, max_changes: int) -> int:
    position, count = start, 0
    while True:
        batch = grid.read_changes(cache, position, max_changes)
        if not batch.changes:
            return count
        count += len(batch.changes)
        position = batch.position


def _raw_read_all(grid: HazelcastAdapter, cache: str, start: Position) -> int:
    nexts = {int(p): s for p, s in start.next_seqs.items()}
    count = 0
    while True:
        reads = _journal.read_partitions(
            grid.client, cache, nexts, {p: _journal.MAX_READ for p in nexts}
        )
        got = 0
        for read in reads:
            if read.seqs:
                nexts[read.partition] = read.seqs[-1] + 1
                got += len(read.seqs)
        if not got:
            return count
        count += got


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--max-changes", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=1000)
    args = _smoke.parse_args(parser, argv, entries=300, max_changes=100, batch=100)
    service = stack.services(["hazelcast"])[0]
    assert isinstance(service, HazelcastService)
    service.up()
    config = HazelcastGridConfig(cluster_name=service.settings.cluster_name,
                                 members=(service.address,))
    cache, base = f"gs-bench-{uuid.uuid4().hex[:8]}", f"gs-bench-{uuid.uuid4().hex[:8]}"
    n = args.entries
    with HazelcastAdapter(config) as grid:
        try:
            start = grid.end_position(cache)
            t = time.perf_counter()
            for i in range(0, n, args.batch):
                grid.apply(cache, [Write(k, _value(k)) for k in range(i, min(n, i + args.batch))])
            apply_rate = n / (time.perf_counter() - t)

            raw = grid.client.get_map(base).blocking()
            t = time.perf_counter()
            for i in range(0, n, args.batch):
                raw.put_all({k: HazelcastJsonValue(json.dumps(_value(k)))
                             for k in range(i, min(n, i + args.batch))})
            put_all_rate = n / (time.perf_counter() - t)

            t = time.perf_counter()
            read = _read_all(grid, cache, start, args.max_changes)
            read_rate = read / (time.perf_counter() - t)
            t = time.perf_counter()
            raw_read = _raw_read_all(grid, cache, start)
            raw_read_rate = raw_read / (time.perf_counter() - t)
            assert read == raw_read == n, (read, raw_read, n)
        finally:
            grid.client.get_map(cache).blocking().destroy()
            grid.client.get_map(base).blocking().destroy()
    print(json.dumps({
        "entries": n, "max_changes": args.max_changes,
        "apply_entries_per_s": round(apply_rate), "client_put_all_per_s": round(put_all_rate),
        "apply_ratio": round(apply_rate / put_all_rate, 2),
        "journal_changes_per_s": round(read_rate),
        "journal_raw_reads_per_s": round(raw_read_rate),
        "read_ratio": round(read_rate / raw_read_rate, 2),
        "load_1min": round(os.getloadavg()[0], 2),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
