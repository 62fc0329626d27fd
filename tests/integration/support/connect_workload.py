"""The source connector fault tests' workload, in a process of its own.

``python -m tests.integration.support.connect_workload CONFIG.json`` makes the changes
``FIRST..OPS-1`` of the plan (``connect_plan.plan``) in the grid the config names:

- ``{"grid": "space", "data_dir": ..., "space_name": ...}``: this process opens and owns
  the embedded Space (a killed earlier owner's torn log tail is cut);
- ``{"grid": "hazelcast", "cluster_name": ..., "members": [...]}``: a client writes the
  maps; an operation that fails (a member lost) is checked against the map and made
  again when it did not happen.

Makes each cache's first change, prints ``caches ready``, waits (when ``"hold"`` names a file)
until that file exists, then ``op I`` after each change (paced at ``rate`` changes a
second) and ``finished`` at the end. Started again after a kill with ``first`` = the
last printed op + 1, it first checks whether that op was made before the kill (the
grid then holds its value) and skips it if so.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from tests.integration.support.connect_plan import Op, plan

SPACE_ID = "id"


class SpaceGrid:
    def __init__(self, cfg: dict[str, Any], caches: list[str]) -> None:
        from gridstream.model import DocumentType
        from gridstream.space import Space

        self.space = Space.embedded(cfg["space_name"], data_dir=cfg["data_dir"],
                                    fsync="never", on_corrupt_tail="truncate")
        for cache in caches:
            self.space.introduce_type(DocumentType(cache, id=SPACE_ID,
                                                   fixed={SPACE_ID: "str", "n": "int"}))

    def value(self, op: Op) -> dict[str, Any] | None:
        from gridstream.grid._space_writes import wire
        from gridstream.model import SpaceDocument

        found = self.space.read_versioned(SpaceDocument(op.cache), op.key)
        return None if found is None else dict(wire(found.entry.properties))

    def apply(self, op: Op) -> None:
        from gridstream.model import SpaceDocument

        if op.kind == "put":
            assert op.value is not None
            self.space.write(SpaceDocument(op.cache, dict(op.value)))
        elif op.kind == "update":
            self.space.change(SpaceDocument(op.cache), op.key, dict(op.fields))
        else:
            assert self.space.remove(op.cache, op.key) is not None

    def close(self) -> None:
        self.space.close()


class HazelcastGrid:
    def __init__(self, cfg: dict[str, Any], caches: list[str]) -> None:
        from hazelcast.client import HazelcastClient
        from hazelcast.config import IntType

        self.client = HazelcastClient(cluster_name=cfg["cluster_name"],
                                      cluster_members=list(cfg["members"]),
                                      default_int_type=IntType.LONG,
                                      invocation_timeout=120.0)
        self.maps: dict[str, Any] = {
            cache: self.client.get_map(cache).blocking() for cache in caches}

    def value(self, op: Op) -> dict[str, Any] | None:
        found = self.maps[op.cache].get(op.key)
        return None if found is None else dict(json.loads(found.to_string()))

    def apply(self, op: Op) -> None:
        from hazelcast.core import HazelcastJsonValue

        entries = self.maps[op.cache]
        if op.value is None:
            entries.delete(op.key)
        else:
            entries.set(op.key, HazelcastJsonValue(json.dumps(op.value)))

    def close(self) -> None:
        self.client.shutdown()


def make(grid: SpaceGrid | HazelcastGrid, op: Op) -> None:
    """Make ``op``; when the grid fails mid-operation (Hazelcast: a member lost), look
    whether it happened and make it again if not, until it did."""
    for attempt in range(100):
        try:
            if attempt == 0 or grid.value(op) != op.value:
                grid.apply(op)
            return
        except Exception as exc:  # noqa: BLE001 - any client error: check and retry
            print(f"retrying op {op.index} after {type(exc).__name__}: {exc}", flush=True)
            time.sleep(0.5)
    raise AssertionError(f"op {op.index} could not be made")


def main(argv: list[str]) -> int:
    cfg = json.loads(Path(argv[0]).read_text())
    caches = list(cfg["caches"])
    ops = plan(cfg["seed"], cfg["ops"], caches, cfg["keys_per_cache"])
    grid: SpaceGrid | HazelcastGrid = (SpaceGrid(cfg, caches) if cfg["grid"] == "space"
                                       else HazelcastGrid(cfg, caches))
    first = int(cfg.get("first", 0))
    if first == 0:  # each cache's first entry before the connector starts
        for op in ops[:len(caches)]:
            make(grid, op)
            print(f"op {op.index}", flush=True)
        first = len(caches)
    print("caches ready", flush=True)
    hold = cfg.get("hold")
    while hold and not Path(hold).exists():
        time.sleep(0.1)
    if first < len(ops) and first > 0 and grid.value(ops[first]) == ops[first].value:
        print(f"op {first} was made before the restart", flush=True)
        first += 1
    pace = 1.0 / float(cfg["rate"]) if cfg.get("rate") else 0.0
    started = time.monotonic()
    for op in ops[first:]:
        due = started + (op.index - first) * pace
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        make(grid, op)
        print(f"op {op.index}", flush=True)
    grid.close()
    print("finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
