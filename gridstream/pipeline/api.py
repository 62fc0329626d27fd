"""The user API: ``Pipeline.create().read_from(source).map(fn)...write_to(sink)``.

A pipeline is one chain: one source, steps, one sink. Each step method returns the next
``Stage``; a stage can be extended once (no branches). Nothing runs until ``run`` or
``job`` (``gridstream.pipeline.run``) compiles the chain (``gridstream.pipeline.compile``).

Extension point for steps that run in the JVM (windows, joins): ``Stage.jvm_step(label,
transform, stateful=...)`` appends a ``JvmStep`` whose ``transform`` maps the incoming
``Flow`` to the outgoing one (a structured flow: ``Flow.item == "row"``, hidden columns
kept). ``stateful=True`` makes real-time mode refuse the pipeline. ``Stage.window`` and
``Stage.join`` call ``gridstream.pipeline.stateful.window(stage, ...)`` / ``join(stage,
...)``, which build their ``JvmStep`` through this hook (both stateful).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from gridstream.errors import ConfigError
from gridstream.pipeline.base import Flow, Guarantee, Sink, Source

if TYPE_CHECKING:
    from gridstream.pipeline.run import PipelineJob
    from gridstream.pipeline.tables import Table

__all__ = ["BatchStep", "ItemStep", "JvmStep", "KafkaRecord", "Pipeline", "Stage", "Step",
           "entry"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def entry(key: Any, value: Any) -> tuple[Any, Any]:
    """A ``(key, value)`` item (what a Kafka sink writes as key and value)."""
    return (key, value)


class KafkaRecord(NamedTuple):
    """A Kafka record as items of ``projection="record"`` see it."""

    topic: str
    partition: int
    offset: int
    timestamp: Any
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True)
class ItemStep:
    """A per-item Python step (fused with its neighbours into one ``mapInArrow`` pass)."""

    kind: Literal["map", "filter", "flat_map"]
    fn: Callable[[Any], Any]
    schema: str | None
    """Spark DDL: the items after this step are rows of these columns (dicts, or tuples
    in field order); None: any Python object."""
    label: str
    """The stage's name in errors and dead letters (``map#2``)."""


@dataclass(frozen=True)
class BatchStep:
    """``map_batch``: its own ``mapInArrow`` pass over Arrow or pandas batches."""

    fn: Callable[[Any], Any]
    schema: str | None
    kind: Literal["arrow", "pandas"]
    label: str


@dataclass(frozen=True)
class JvmStep:
    """A step that runs in the JVM: ``transform(flow) -> flow`` on a structured flow."""

    label: str
    transform: Callable[[Flow], Flow]
    stateful: bool = False
    """Real-time mode refuses stateful steps (windows, joins)."""
    note: str = ""
    """What it runs, for ``describe``."""


Step = ItemStep | BatchStep | JvmStep


@dataclass
class _Chain:
    source: Source
    steps: list[Step] = field(default_factory=list)
    sink: Sink | None = None


class Stage:
    """A point of the chain: add the next step, or end it with ``write_to``."""

    def __init__(self, pipeline: Pipeline, index: int) -> None:
        self._pipeline = pipeline
        self._index = index

    def _chain(self) -> _Chain:
        chain = self._pipeline._chain
        assert chain is not None
        if chain.sink is not None:
            raise ConfigError(f"pipeline {self._pipeline.name!r} already ends with "
                              "write_to: one sink per pipeline")
        if self._index != len(chain.steps):
            raise ConfigError(f"pipeline {self._pipeline.name!r}: this stage already has a "
                              "next step; a pipeline is one chain (no branches)")
        return chain

    def _label(self, kind: str) -> str:
        return f"{kind}#{self._index + 1}"

    def _add(self, step: Step) -> Stage:
        self._chain().steps.append(step)
        return Stage(self._pipeline, self._index + 1)

    def map(self, fn: Callable[[Any], Any], schema: str | None = None) -> Stage:
        """Each item → ``fn(item)``. With ``schema`` (Spark DDL) the flow becomes
        structured: items are then dicts of those columns."""
        return self._add(ItemStep("map", _callable(fn), schema, self._label("map")))

    def filter(self, fn: Callable[[Any], bool]) -> Stage:
        """Keep the items for which ``fn(item)`` is true."""
        return self._add(ItemStep("filter", _callable(fn), None, self._label("filter")))

    def flat_map(self, fn: Callable[[Any], Iterable[Any]], schema: str | None = None) -> Stage:
        """Each item → every item of ``fn(item)`` (an iterable; empty drops the item)."""
        return self._add(ItemStep("flat_map", _callable(fn), schema, self._label("flat_map")))

    def map_batch(self, fn: Callable[[Any], Any], schema: str | None = None,
                  kind: Literal["arrow", "pandas"] = "arrow") -> Stage:
        """``fn(batch) -> batch`` on a structured flow: a ``pyarrow.RecordBatch``
        (``kind="arrow"``) or a ``pandas.DataFrame`` of the visible columns; returns one
        of ``schema``'s columns (default: the same columns)."""
        if kind not in ("arrow", "pandas"):
            raise ConfigError(f"map_batch kind {kind!r}: use 'arrow' or 'pandas'")
        return self._add(BatchStep(_callable(fn), schema, kind, self._label("map_batch")))

    def jvm_step(self, label: str, transform: Callable[[Flow], Flow], *,
                 stateful: bool = False, note: str = "") -> Stage:
        """Append a JVM step (internal API for windows and joins): ``transform`` gets the
        structured flow before it (Python steps before it already compiled into a pass)
        and returns the flow after it."""
        return self._add(JvmStep(f"{label}#{self._index + 1}", transform, stateful, note))

    def window(self, size: str, *, slide: str | None = None, key: str | None = None,
               aggregate: Mapping[str, str | Sequence[str]] | None = None,
               watermark: str = "10 seconds", timestamp: str | None = None) -> Stage:
        """Keyed windowed aggregation on event time, in the JVM: rows ``key,
        window_start, window_end, <aggregates>``, each emitted once the watermark passes
        its window's end (``gridstream.pipeline.stateful``)."""
        from gridstream.pipeline import stateful

        return stateful.window(self, size, slide=slide, key=key, aggregate=aggregate,
                               watermark=watermark, timestamp=timestamp)

    def join(self, table: Table | Mapping[str, Any], *, on: str | Sequence[str],
             how: Literal["inner", "left"] = "inner",
             fields: str | Sequence[str] | None = None) -> Stage:
        """A stream–table join with ``GridTables.map(...)`` or ``DeltaTables.path(...)``
        (``gridstream.pipeline.tables``)."""
        from gridstream.pipeline import stateful

        return stateful.join(self, table, on=on, how=how, fields=fields)

    def write_to(self, sink: Sink) -> Pipeline:
        """End the chain with ``sink``."""
        if not isinstance(sink, Sink):
            raise ConfigError(f"write_to takes a sink, not {type(sink).__name__}")
        self._chain().sink = sink
        return self._pipeline


class Pipeline:
    """One source, a chain of steps, one sink; compiled to one streaming query."""

    def __init__(self, name: str = "pipeline") -> None:
        if not _NAME.match(name):
            raise ConfigError(f"pipeline name {name!r}: letters, digits, '.', '_', '-'")
        self.name = name
        self._chain: _Chain | None = None

    @classmethod
    def create(cls, name: str | None = None) -> Pipeline:
        """A new, empty pipeline. ``name`` (default ``"pipeline"``) names its
        transactional ids and version sources: unique per application."""
        return cls(name or "pipeline")

    def read_from(self, source: Source) -> Stage:
        """Start the chain at ``source`` (once)."""
        if self._chain is not None:
            raise ConfigError(f"pipeline {self.name!r} already reads from a source: one "
                              "source per pipeline")
        if not isinstance(source, Source):
            raise ConfigError(f"read_from takes a source, not {type(source).__name__}")
        self._chain = _Chain(source)
        return Stage(self, 0)

    @property
    def source(self) -> Source:
        return self._complete().source

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(self._complete().steps)

    @property
    def sink(self) -> Sink:
        sink = self._complete().sink
        assert sink is not None
        return sink

    def _complete(self) -> _Chain:
        if self._chain is None:
            raise ConfigError(f"pipeline {self.name!r} has no source: call read_from")
        if self._chain.sink is None:
            raise ConfigError(f"pipeline {self.name!r} has no sink: end it with write_to")
        return self._chain

    def job(self, guarantee: Guarantee | str = Guarantee.NONE, checkpoint: str | None = None,
            trigger: str | None = None, *, errors: str = "fail",
            dead_letter_topic: str | None = None, checkpoint_interval: str | None = None,
            allowed_modules: tuple[str, ...] = (),
            real_time_python: bool = False) -> PipelineJob:
        """The pipeline as a ``Runnable`` for ``PipelineRunner`` (not started)."""
        from gridstream.pipeline.run import PipelineJob, RunOptions

        self._complete()
        return PipelineJob(self, RunOptions.of(
            guarantee, checkpoint, trigger, errors=errors,
            dead_letter_topic=dead_letter_topic, checkpoint_interval=checkpoint_interval,
            allowed_modules=allowed_modules, real_time_python=real_time_python))

    def run(self, guarantee: Guarantee | str = Guarantee.NONE, checkpoint: str | None = None,
            trigger: str | None = None, *, errors: str = "fail",
            dead_letter_topic: str | None = None,
            checkpoint_interval: str | None = None, real_time_python: bool = False) -> None:
        """Run until Ctrl-C (or, with ``trigger="available_now"``, until the input is
        read), printing a line per batch; raises the error that failed the query."""
        from gridstream.pipeline.run import run_jobs

        run_jobs([self.job(guarantee, checkpoint, trigger, errors=errors,
                           dead_letter_topic=dead_letter_topic,
                           checkpoint_interval=checkpoint_interval,
                           real_time_python=real_time_python)])


def _callable(fn: Any) -> Callable[[Any], Any]:
    if not callable(fn):
        raise ConfigError(f"a step takes a function, not {type(fn).__name__}")
    return fn  # type: ignore[no-any-return]
