"""Bounded batches: a planned span of sequence numbers cut to a fair share of a limit
(pure position arithmetic; ``offsets`` plans with it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gridstream.grid.contract import Position

__all__ = ["bounded", "limited", "share_out", "upto"]


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
