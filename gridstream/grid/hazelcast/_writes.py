"""Writes into an IMap: plain batches (last write wins) and versioned ones.

A versioned write is skipped when the grid already holds, for the same source and key,
a version that is not older (equal versions are skipped: the rule of every grid, see
``Write``). The versions (of puts and of removes: tombstones) live in a companion map
``__gridstream.versions.<cache>`` (internal, never listed as a cache), keyed by
``[source, key]`` as JSON text, so writers with unrelated version sequences (distinct
sources) never compare them. The versions are checked and both maps written in two-phase
Hazelcast transactions of at most ``TX_KEYS`` keys: each commits whole or not at all,
and a writer that stalls past its timeout is rolled back instead of overwriting a newer
write.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from hazelcast.errors import HazelcastError
from hazelcast.transaction import TWO_PHASE

from gridstream.errors import GridError
from gridstream.grid.contract import Key, Write

__all__ = ["VERSIONS_PREFIX", "apply_absent", "apply_plain", "apply_versioned", "version_key",
           "versions_map"]

VERSIONS_PREFIX = "__gridstream.versions."
TX_KEYS = 1000
"""The most keys one transaction of a versioned batch writes."""
_ACTIVE, _PARTIAL_COMMIT = "active", "rolling_back"
"""``Transaction.state`` values after which a rollback is still due."""


def versions_map(cache: str) -> str:
    return f"{VERSIONS_PREFIX}{cache}"


def apply_plain(entries: Any, writes: Sequence[Write], encode: Callable[[Write], Any]) -> None:
    """In the batch's order: runs of puts as one ``put_all``, runs of removes in parallel."""
    run: list[Write] = []
    for write in writes:
        if run and (write.value is None) != (run[-1].value is None):
            _plain_run(entries, run, encode)
            run = []
        run.append(write)
    if run:
        _plain_run(entries, run, encode)


def _plain_run(entries: Any, run: list[Write], encode: Callable[[Write], Any]) -> None:
    if run[0].value is not None:
        entries.put_all({w.key: encode(w) for w in run}).result()
    else:
        for future in [entries.delete(w.key) for w in run]:
            future.result()


def apply_absent(entries: Any, writes: Sequence[Write], encode: Callable[[Write], Any]) -> None:
    """Puts of keys the map does not hold (``putIfAbsent``, in parallel); ``writes`` has
    one put per key (``first_puts``)."""
    for future in [entries.put_if_absent(w.key, encode(w)) for w in writes]:
        future.result()


def newest_per_key(writes: Sequence[Write]) -> dict[Key, Write]:
    """Each key's write with the highest version (the first one of equal versions: a
    later equal one is skipped, as it would be against the grid)."""
    out: dict[Key, Write] = {}
    for write in writes:
        if write.version is None:
            raise GridError("a batch must give a version to every write or to none")
        if type(write.version) is not int or write.version < 0:
            raise GridError(f"key {write.key!r}: a version must be a non-negative int")
        held = out.get(write.key)
        if held is None or held.version is None or write.version > held.version:
            out[write.key] = write
    return out


def version_key(source: str, key: Key) -> str:
    """The companion map's key: unambiguous for ``1`` and ``"1"``."""
    return orjson.dumps([source, key]).decode()


def _order(key: Key) -> tuple[int, str | int]:
    return (0, key) if isinstance(key, int) else (1, key)


def apply_versioned(
    client: Any, cache: str, writes: Sequence[Write], encode: Callable[[Write], Any],
    source: str, timeout_s: float, overwrite: bool = True,
) -> int:
    """Apply each key's newest write unless the grid holds a version that is not older,
    ``TX_KEYS`` keys per transaction (so a large batch still commits within the
    timeout); how many writes were applied. ``overwrite=False``: ``writes`` are each
    key's first put (``first_puts``), each applied only if its key is absent too."""
    newest = newest_per_key(writes)
    # One lock order for every writer (keys sorted), so two never wait on each other.
    keys = sorted(newest, key=_order)
    applied = 0
    for start in range(0, len(keys), TX_KEYS):
        chunk = [newest[k] for k in keys[start : start + TX_KEYS]]
        applied += _transaction(client, cache, chunk, encode, source, timeout_s, overwrite)
    return applied


def _transaction(
    client: Any, cache: str, writes: list[Write], encode: Callable[[Write], Any],
    source: str, timeout_s: float, overwrite: bool,
) -> int:
    transaction = client.new_transaction(timeout=timeout_s, durability=1, type=TWO_PHASE)
    transaction.begin()
    try:
        versions = transaction.get_map(versions_map(cache))
        entries = transaction.get_map(cache)
        applied = 0
        for write in writes:
            assert write.version is not None  # noqa: S101 - newest_per_key checked it
            vkey = version_key(source, write.key)
            held = versions.get_for_update(vkey)
            if held is not None and held >= write.version:
                continue
            if not overwrite:
                assert write.value is not None  # noqa: S101 - first_puts gives puts only
                if entries.put_if_absent(write.key, encode(write)) is None:
                    versions.set(vkey, write.version)
                    applied += 1
                continue
            versions.set(vkey, write.version)
            if write.value is None:
                entries.delete(write.key)
            else:
                entries.set(write.key, encode(write))
            applied += 1
        transaction.commit()
    except BaseException:
        if transaction.state in (_ACTIVE, _PARTIAL_COMMIT):
            with contextlib.suppress(HazelcastError):
                transaction.rollback()
        raise
    return applied
