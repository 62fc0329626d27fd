"""Bounded batches: a planned span of sequence numbers cut to a fair share of a limit
(pure position arithmetic; ``offsets`` plans with it); and how often a quiet grid is
checked (``QuietChecks``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gridstream.grid.contract import Position

__all__ = ["QuietChecks", "bounded", "limited", "share_out", "upto"]


class QuietChecks:
    """When the grid is checked for changes: at every trigger (``pollInterval``) while
    changes flow; after a check that found none, the checks back off, doubling from
    ``poll_ms`` up to ``idle_ms`` (``idlePollInterval``), and a found change ends the
    back-off. A quiet grid costs a check every ``idle_ms``, and the first change after a
    quiet spell waits at most that long; changes that follow each other closely wait at
    most ``poll_ms`` plus a batch. Times are ``time.monotonic()`` seconds."""

    def __init__(self, poll_ms: int, idle_ms: int) -> None:
        self.poll_s, self.idle_s = poll_ms / 1000, max(idle_ms, poll_ms) / 1000
        self._wait_s = 0.0
        self._next = 0.0

    def due(self, now: float) -> bool:
        """Whether to check the grid now."""
        return now >= self._next

    def checked(self, now: float, *, found: bool) -> None:
        """A check at ``now`` found changes (``found``) or none."""
        if found:
            self._wait_s = self._next = 0.0
            return
        self._wait_s = min(self.idle_s, max(self.poll_s, 2 * self._wait_s))
        # a trigger runs every poll_s: be due at the trigger that ends the wait
        self._next = now + self._wait_s - self.poll_s / 2


def share_out(spans: Mapping[Any, int], limit: int) -> dict[Any, int]:
    """Fair shares of ``limit`` over ``spans`` (what each item has pending): items
    below the common cap keep their span, the others get the cap; the cap is at least
    1, so every item with something pending advances (a limit below the number of such
    items is exceeded by at most that number)."""
    pending = sorted(n for n in spans.values() if n > 0)
    if sum(pending) <= limit:
        return dict(spans)
    cap, left = 1, limit
    for i, n in enumerate(pending):
        share = left // (len(pending) - i)
        if n > share:
            cap = max(share, 1)
            break
        left -= n
    return {item: min(n, cap) for item, n in spans.items()}


def bounded(start: Position, end: Position, shares: Mapping[str, int]) -> Position:
    """``end`` with each stream moved from ``start`` by at most its share (marks only
    where the stream reaches ``end``: a mark fingerprints the change before the
    stream's next sequence; ``GridView.cut`` gives the others theirs)."""
    seqs: dict[str, int] = {}
    for stream, seq in end.next_seqs.items():
        begin = start.next_seqs.get(stream, seq)
        seqs[stream] = min(seq, begin + shares.get(stream, seq - begin)) if seq > begin else seq
    marks = {s: m for s, m in end.marks.items() if seqs.get(s) == end.next_seqs.get(s)}
    marks.update({s: m for s, m in start.marks.items()
                  if s not in marks and seqs.get(s) == start.next_seqs.get(s)})
    return Position(end.lineage, seqs, marks)


def limited(moving: dict[str, tuple[Position, Position]], limit: int, shared: bool
             ) -> dict[str, tuple[Position, Position]]:
    """Each cache's span cut to its fair share of ``limit``. Caches of one shared stream
    (the Space's log) that stand at the same position read it together: such a group
    is one item of the share-out, so its span counts once, and a cache far behind (one
    discovered late) takes its own share without holding the others back."""
    if not shared:
        spans = {(c, s): max(n - b.next_seqs.get(s, n), 0)
                 for c, (b, e) in moving.items() for s, n in e.next_seqs.items()}
        cut = share_out(spans, limit)
        return {c: (b, bounded(b, e, {s: cut[(c, s)] for s in e.next_seqs}))
                for c, (b, e) in moving.items()}
    groups: dict[str, list[str]] = {}
    for cache, (begin, _) in moving.items():
        groups.setdefault(begin.to_json(), []).append(cache)
    spans = {(g, s): max(max(moving[c][1].next_seqs.get(s, 0) for c in caches)
                         - moving[caches[0]][0].next_seqs.get(s, 0), 0)
             for g, caches in groups.items()
             for s in moving[caches[0]][1].next_seqs}
    cut = share_out(spans, limit)
    out = {}
    for g, caches in groups.items():
        for c in caches:
            begin, end = moving[c]
            out[c] = (begin, bounded(begin, end, {s: cut.get((g, s), 0)
                                                 for s in end.next_seqs}))
    return out


def upto(begin: Position, end: Position, ceiling: Mapping[str, int]) -> Position:
    """``end`` held at ``ceiling`` per stream, never before ``begin``."""
    return bounded(begin, end, {s: max(min(n, ceiling.get(s, n)) - begin.next_seqs.get(s, n),
                                       0) for s, n in end.next_seqs.items()})
