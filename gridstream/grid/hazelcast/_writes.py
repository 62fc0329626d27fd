"""Writes into an IMap: plain batches (last write wins) and versioned ones.

A versioned write is applied only when its version is at least the one the grid holds
for the key; equal versions apply again, so a re-run batch leaves what its first run
left. The versions (of puts and of removes: tombstones) live in a companion map
``__gridstream.versions.<cache>`` (internal, never listed as a cache), and each key is
locked in the data map (a lease frees it should the writer die) while its version is
checked and both maps are written, version first: a writer that dies in between leaves
a version whose value its re-run writes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from gridstream.errors import GridError
from gridstream.grid.contract import Key, Write

__all__ = ["VERSIONS_PREFIX", "apply_plain", "apply_versioned", "versions_map"]

VERSIONS_PREFIX = "__gridstream.versions."
LOCK_TRIES = 20


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


def newest_per_key(writes: Sequence[Write]) -> dict[Key, Write]:
    """Each key's write with the highest version (the later one of equal versions)."""
    out: dict[Key, Write] = {}
    for write in writes:
        if write.version is None:
            raise GridError("a batch must give a version to every write or to none")
        held = out.get(write.key)
        if held is None or held.version is None or write.version >= held.version:
            out[write.key] = write
    return out


def apply_versioned(
    entries: Any, versions: Any, writes: Sequence[Write], encode: Callable[[Write], Any],
    lease_s: float,
) -> None:
    """Apply each key's newest write unless the grid holds a newer version for it."""
    newest = newest_per_key(writes)
    keys = list(newest)
    _lock_all(entries, keys, lease_s)
    try:
        held = versions.get_all(keys).result()
        accepted = [w for k, w in newest.items() if k not in held or w.version >= held[k]]
        if not accepted:
            return
        versions.put_all({w.key: w.version for w in accepted}).result()
        futures = [
            entries.delete(w.key) if w.value is None else entries.set(w.key, encode(w))
            for w in accepted
        ]
        for future in futures:
            future.result()
    finally:
        for future in [entries.unlock(k) for k in keys]:
            future.result()


def _lock_all(entries: Any, keys: list[Key], lease_s: float) -> None:
    """Lock every key (all at once, all or none, so two writers never wait on each other
    forever); a lock held elsewhere makes this release its own and try again."""
    for attempt in range(LOCK_TRIES):
        futures = [entries.try_lock(k, lease_time=lease_s, timeout=1.0) for k in keys]
        got = [k for k, f in zip(keys, futures, strict=True) if f.result()]
        if len(got) == len(keys):
            return
        for future in [entries.unlock(k) for k in got]:
            future.result()
        time.sleep(random.uniform(0.01, 0.05 * (attempt + 1)))  # noqa: S311 - jitter
    raise GridError(f"could not lock {len(keys)} keys: other writers hold them")
