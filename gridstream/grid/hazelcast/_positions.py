"""Where a map's journal stands, in small pure pieces: an event's fingerprint (a position's
marks), and how a read's budget is shared among partitions."""

from __future__ import annotations

import hashlib

from gridstream.errors import ConfigError
from gridstream.grid.contract import Position
from gridstream.grid.hazelcast._codec import JournalEvent
from gridstream.grid.hazelcast._journal import MAX_READ

__all__ = ["allocate", "mark", "marks_of", "start_partition"]


def mark(event: JournalEvent) -> str:
    """A journal event's fingerprint: its type, key and new value."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(event.event_type.to_bytes(4, "big", signed=True))
    for data in (event.key, event.new_value):
        raw = b"" if data is None else bytes(data.buffer)
        digest.update(len(raw).to_bytes(8, "big"))
        digest.update(raw)
    return digest.hexdigest()


def marks_of(cache: str, position: Position, nexts: dict[int, int]) -> dict[int, str]:
    """The position's marks by partition; a mark needs a stored sequence after 0."""
    try:
        marks = {int(stream): mark for stream, mark in position.marks.items()}
    except ValueError as exc:
        raise ConfigError(
            f"cache {cache!r}: position marks must name partition ids: {exc}"
        ) from exc
    if any(p not in nexts or nexts[p] < 1 for p in marks):
        raise ConfigError(f"cache {cache!r}: a position mark names no stored sequence after 0")
    return marks


def start_partition(nexts: dict[int, int]) -> int:
    """Where a read's fair share starts: from the position itself (it moves on with every
    change read), so successive reads rotate even when each opens a new adapter."""
    return sum(nexts.values())


def allocate(
    pending: dict[int, int], budget: int, cursor: int, count: int
) -> tuple[dict[int, int], int]:
    """Share ``budget`` fairly among partitions with pending events, starting at ``cursor``
    (turns rotate between calls); at most one journal read per partition."""
    left = {p: min(n, MAX_READ) for p, n in pending.items() if n > 0}
    order = sorted(left, key=lambda p: (p - cursor) % count)
    sizes: dict[int, int] = {}
    furthest = -1  # the furthest partition served, counted from the cursor
    while budget > 0 and left:
        share = max(1, budget // len(left))
        for p in [q for q in order if q in left]:
            if budget == 0:
                break
            take = min(share, left[p], budget)
            sizes[p] = sizes.get(p, 0) + take
            left[p] -= take
            budget -= take
            furthest = max(furthest, (p - cursor) % count)
            if left[p] == 0:
                del left[p]
    return sizes, (cursor + furthest + 1) % count
