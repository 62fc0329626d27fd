"""Subprocess helpers for the space tests (run with ``python -m tests.unit.space._proc``).

``write DIR COUNT``: write COUNT operations (COUNT=0: forever), printing each committed
version, so a parent can kill the process mid-stream or tail its log.
``partitions N VALUE...``: print the partition of each routing value.
"""

from __future__ import annotations

import sys

from gridstream.space import Change, Space, stable_partition

from .models import Address, Order, Person


def _write(data_dir: str, count: int, fsync: str) -> None:
    space = Space.embedded("test", data_dir=data_dir, fsync=fsync,  # type: ignore[arg-type]
                           partitions=4, segment_bytes=64 * 1024, snapshot_every_ops=2000)
    i = 0
    while count == 0 or i < count:
        for version in _step(space, i):
            print(version, flush=True)
        i += 1
    space.close()


def _step(space: Space, i: int) -> list[int]:
    """One or more operations, varied by ``i``; returns the committed versions."""
    pid = i % 97
    kind = i % 10
    if kind == 9:
        with space.transaction() as tx:
            versions = [tx.write(Person(pid, f"tx{i}", i, Address(f"c{i % 7}"))),
                        tx.write(Order(f"o{i % 53}", f"cust{i % 11}", None, None, [str(i)]))]
        return versions
    if space.read(Person, pid) is None:
        return [space.write(Person(pid, f"p{i}", i, Address("x")))]
    if kind in (1, 4):
        return [space.change(Person, pid, [Change.increment("age", 1),
                                           Change.set("address.city", f"c{i}")])]
    if kind == 2:
        return [space.partial_update(Person(pid, age=i))]
    if kind == 3:
        removed = space.remove(Person, pid)
        return [removed] if removed is not None else []
    return [space.write(Person(pid, f"w{i}", i, None, {f"t{i % 3}"}))]


def main(argv: list[str]) -> None:
    if argv[0] == "write":
        _write(argv[1], int(argv[2]), argv[3] if len(argv) > 3 else "batch")
    elif argv[0] == "partitions":
        count = int(argv[1])
        print(" ".join(str(stable_partition(v, count)) for v in argv[2:]))
    else:
        raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
