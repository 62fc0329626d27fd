"""A Space owned by a process of its own, for the Space adapter tests.

``python -m tests.integration.support.grid_space_proc DIR FIRST COUNT close|kill`` runs steps
FIRST..FIRST+COUNT-1 of a fixed workload on the document type ``Doc`` (writes, partial
updates, change sets with nested paths and unsets, removes, transactions mixing in the
type ``Other``), then closes the Space (``close``: a saved state is written) or exits
without closing it (``kill``). After each operation on ``Doc`` it prints one JSON line
``[key, version, value]``: the entry's data as the Space then holds it, in wire form
(null once removed) — what the adapter's change stream must give.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import orjson

from gridstream.grid._space_writes import wire
from gridstream.model import DocumentType, SpaceDocument
from gridstream.space import Change, Space

DOC = DocumentType("Doc", id="id", fixed={"id": "str", "score": "int", "meta": "dict"})
TEMPLATE = SpaceDocument("Doc")


def open_space(data_dir: str) -> Space:
    space = Space.embedded("grid-test", data_dir=data_dir, partitions=2, fsync="never",
                           segment_bytes=4096)
    space.introduce_type(DOC)
    return space


def emit(space: Space, key: str) -> None:
    found = space.read_versioned(TEMPLATE, key)
    if found is None:
        row: list[Any] = [key, None, None]
    else:
        row = [key, found.version, wire(found.entry.properties)]
    print(orjson.dumps(row).decode(), flush=True)


def emit_removed(key: str, version: int) -> None:
    print(orjson.dumps([key, version, None]).decode(), flush=True)


def step(space: Space, i: int) -> None:
    key = f"d{i % 5}"
    kind = i % 8
    exists = space.read(TEMPLATE, key) is not None
    if not exists or kind in (0, 7):
        space.write(SpaceDocument("Doc", {"id": key, "score": i, "name": f"n{i}",
                                          "meta": {"a": {"b": i}}, "tags": [i, "t"]}))
    elif kind == 1:
        space.change(TEMPLATE, key, [Change.increment("score", 2),
                                     Change.set("meta.x.y", f"v{i}")])
    elif kind == 2:
        space.partial_update(SpaceDocument("Doc", {"id": key, "name": f"p{i}", "tags": None}))
    elif kind == 3:
        space.change(TEMPLATE, key, [Change.unset("name"), Change.unset("score"),
                                     Change.unset("meta.a")])
    elif kind == 4:
        version = space.remove(TEMPLATE, key)
        assert version is not None
        emit_removed(key, version)
        return
    elif kind == 5:
        other = f"d{(i + 1) % 5}"
        with space.transaction() as tx:
            tx.change(TEMPLATE, key, {"meta.t": i})
            tx.write(SpaceDocument("Other", {"id": i, "x": i}))
            if tx.read(TEMPLATE, other) is None:
                tx.write(SpaceDocument("Doc", {"id": other, "score": 0}))
            else:
                tx.partial_update(SpaceDocument("Doc", {"id": other, "score": -i}))
        emit(space, key)
        emit(space, other)
        return
    else:
        space.change(TEMPLATE, key, {"name": f"c{i}", "meta.a.c": [i]})
    emit(space, key)


def main(argv: list[str]) -> None:
    data_dir, first, count, end = argv[0], int(argv[1]), int(argv[2]), argv[3]
    space = open_space(data_dir)
    for i in range(first, first + count):
        step(space, i)
    if end == "kill":
        sys.stdout.flush()
        os._exit(0)
    space.close()


if __name__ == "__main__":
    main(sys.argv[1:])
