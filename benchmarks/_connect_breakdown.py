"""Where a connector run's time goes (``--breakdown`` of the connector benchmarks).

Two measures: one more connector run with some of its steps timed (the methods are
wrapped for that run only), and the same Python steps alone, in this process, without
Spark, on the same records.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gridstream.grid import Position


@contextmanager
def timed_calls(targets: dict[str, tuple[Any, str]]) -> Iterator[dict[str, list[float]]]:
    """``{label: (object, method name)}``: each call's seconds under its label while the
    block runs; the methods are restored after."""
    seconds: dict[str, list[float]] = {label: [] for label in targets}
    saved = []
    for label, (obj, name) in targets.items():
        original = getattr(obj, name)
        saved.append((obj, name, original))

        def wrapper(*args: Any, __original: Any = original, __label: str = label,
                    **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return __original(*args, **kwargs)
            finally:
                seconds[__label].append(time.perf_counter() - started)

        setattr(obj, name, functools.wraps(original)(wrapper))
    try:
        yield seconds
    finally:
        for obj, name, original in saved:
            setattr(obj, name, original)


def rounded(seconds: dict[str, list[float]]) -> dict[str, float]:
    return {label: round(sum(values), 2) for label, values in seconds.items()}


def source_run(side: Any, expected: int) -> dict[str, Any]:
    """One source connector run (``side``: a prepared ``SourceSide``), its batches' steps
    timed: the whole ``foreachBatch``, the write, and for exactly-once the writer's
    one-off preparation of a new query (fencing, marker topic), its scan of the marker
    topic before each batch and its ranking pass; the rest of the ``foreachBatch`` is
    the job that reads the grid and counts the rows by status."""
    from gridstream.connect.source import connector as source_connector
    from gridstream.spark import kafka_writer

    writer = kafka_writer.KafkaExactlyOnceWriter
    with timed_calls({
        "foreach_batch": (source_connector.SourceConnector, "process_batch"),
        "write": (source_connector.SourceConnector, "_write"),
        "writer_prepare": (writer, "_prepare"),
        "writer_marker_scan": (writer, "_committed"),
    }) as seconds:
        run = side.run(expected)
    out: dict[str, Any] = {"drain_s": round(run["drain_s"], 2), **rounded(seconds)}
    out["read_and_count_job"] = round(out["foreach_batch"] - out["write"], 2)
    return out


def source_python_alone(config: Any, starts: dict[str, Position],
                        ends: dict[str, Position], snap_dir: str) -> dict[str, float]:
    """The source's read path alone, cache after cache, one adapter: the changes read
    (``read_changes`` from start to end), then the same with the records made (filter,
    transforms, converter, Arrow batches: ``read_work``)."""
    from gridstream.connect.converters import build_converter
    from gridstream.connect.source.offsets import Work
    from gridstream.connect.source.read import RecordMaker, read_work
    from gridstream.connect.transforms import build_chain
    from gridstream.grid.settings import grid_adapter

    out: dict[str, float] = {}
    with grid_adapter(config.grid) as adapter:
        started = time.perf_counter()
        for cache, start in starts.items():
            position, end = start, ends[cache]
            while any(position.next_seqs.get(s, 0) < q for s, q in end.next_seqs.items()):
                position = adapter.read_changes(cache, position, 5_000).position
        out["read_changes"] = round(time.perf_counter() - started, 2)
    with grid_adapter(config.grid) as adapter:
        maker = RecordMaker(config, build_converter(config.converter),
                            build_chain(config.transforms), None, 0)
        started = time.perf_counter()
        rows = 0
        for cache, start in starts.items():
            for batch in read_work(Work(cache, start=start, end=ends[cache]),
                                   lambda _fresh, a=adapter: a, maker, Path(snap_dir)):
                rows += batch.num_rows
        out["read_and_records"] = round(time.perf_counter() - started, 2)
    return out
