"""What every gridstream function that runs in a Spark Python worker does first.

``prepare()`` (once per worker process, then a no-op) raises the cyclic garbage
collector's first threshold to ``GC_GEN0`` allocations. With Python's default (700) the
collector runs ~1 700 times per 100 000 grid changes, and the objects a read holds for a
moment (a read's 5 000 changes, a log read's operations) outlive those collections, are
promoted, and set off full collections that walk every live object — the source
connector's per-cache state included: 35–40 % of a source partition's time (the Space and
Hazelcast alike; ``docs/benchmarks.md``). Nothing in these loops builds reference cycles
that must be freed sooner; a worker's memory bound is the batch's, not the collector's.
A threshold already higher (set by the operator) stays.
"""

from __future__ import annotations

import gc

__all__ = ["GC_GEN0", "prepare"]

GC_GEN0 = 20_000
_prepared = False


def prepare() -> None:
    """Tune this worker process once (see the module docstring)."""
    global _prepared
    if _prepared:
        return
    _prepared = True
    gen0, gen1, gen2 = gc.get_threshold()
    if 0 < gen0 < GC_GEN0:  # 0: the operator turned automatic collection off: keep it so
        gc.set_threshold(GC_GEN0, gen1, gen2)
