"""The contract between the pipeline API, its sources and its sinks.

A pipeline is compiled into one Spark streaming query: its source gives a ``Flow`` (a
streaming DataFrame and how per-item functions see a row), its steps change the Flow
(Python steps fused into one ``mapInArrow`` pass, windows and joins in the JVM), its
sink starts the query. Hidden columns (prefix ``_gs_``) travel with every row:

- ``_gs_ts``    (timestamp) the event time: the Kafka record's timestamp, kept through
  every step (``flat_map`` copies it to each output), used by windows and watermarks;
- ``_gs_where`` (string) where the row came from (``topic[partition]@offset``), for
  errors and dead letters; a Kafka source's first Python pass, when nothing after it
  reads the origin, takes its parts instead (``ORIGIN_PARTS``: the record's partition
  and offset, and its topic unless the source reads one topic, ``Flow.origin_topic``)
  and writes the text only for a row in error;
- ``_gs_error``, ``_gs_stage`` (string, nullable) set on a row that could not be
  decoded, mapped or encoded: such rows travel on untouched to the sink, which hands
  them to the error policy (fail, log, or dead-letter with the reason) — never dropped
  silently; ``_gs_raw_key``, ``_gs_raw_value`` (binary, nullable) the input bytes the
  dead letter carries.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from gridstream.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    ColumnEncode = Callable[[Sequence[list[Any]]], tuple[list[pa.Array], dict[int, Exception]]]
    """A batch's columns of values → their encoded Arrow arrays, and what each row that
    did not encode raised (its arrays' values are null)."""

__all__ = ["HIDDEN", "ORIGIN_PARTS", "Flow", "Guarantee", "ItemShape", "LastPass",
           "RunContext", "Sink", "Source", "visible"]

HIDDEN = ("_gs_ts", "_gs_where", "_gs_error", "_gs_stage", "_gs_raw_key", "_gs_raw_value")
ORIGIN_PARTS = ("_gs_origin_topic", "_gs_origin_partition", "_gs_origin_offset")
"""``_gs_where``'s parts, as a Kafka source gives them to a first Python pass (module
docstring): no per-row text built in the JVM and carried into Python."""

ItemShape = Literal["entry", "value", "record", "row"]
"""How a per-item function sees a row: ``entry`` a ``(key, value)`` tuple (Jet's
``Map.Entry``), ``value`` the value alone, ``record`` a ``KafkaRecord``, ``row`` a dict
of the visible columns."""


class Guarantee(StrEnum):
    NONE = "NONE"
    AT_LEAST_ONCE = "AT_LEAST_ONCE"
    EXACTLY_ONCE = "EXACTLY_ONCE"

    @classmethod
    def parse(cls, value: Guarantee | str, what: str = "guarantee") -> Guarantee:
        """``value`` as a guarantee, in any case; ``ConfigError`` naming ``what`` and the
        choices otherwise."""
        try:
            return cls(str(value).upper())
        except ValueError as exc:
            raise ConfigError(f"{what} {value!r}: use one of {', '.join(cls)}") from exc

    def lowered_to(self, cap: Guarantee) -> Guarantee:
        """The weaker of the two (a sink may lower the pipeline's guarantee, never
        raise it)."""
        order = list(Guarantee)
        return order[min(order.index(self), order.index(cap))]


@dataclass(frozen=True)
class RunContext:
    """What a source and a sink know of the run."""

    name: str
    """The pipeline's name: unique per application; names transactional ids, commit
    markers and the grid writers' version sources."""
    guarantee: Guarantee
    """The guarantee this sink must give (the pipeline's, lowered by the sink's cap)."""
    checkpoint: str
    """The Spark checkpoint directory (a temporary one under ``NONE`` without one)."""
    trigger: str | None = None
    """``None`` (as fast as possible), ``"5 seconds"``, ``"available_now"`` or
    ``"real_time"``."""
    allowed_modules: tuple[str, ...] = ()
    errors: Literal["fail", "log", "dead_letter"] = "fail"
    """The error policy for rows whose decode, step or encode raised (``_gs_error``)."""
    dead_letter_topic: str | None = None
    """Under ``errors="dead_letter"``: the topic of the dead letters."""
    dead_letter_options: Mapping[str, str] = field(default_factory=dict)
    """Spark Kafka options (``kafka.bootstrap.servers``, ...) to write dead letters with
    when the sink is not a Kafka sink of the same cluster (secrets: never print)."""
    checkpoint_interval: str = "5 seconds"
    """Real-time mode: the batch's length, how often the checkpoint is written (at
    least 100 ms; ``PipelineJob`` sets it from the plan unless one was given)."""


@dataclass(frozen=True)
class Flow:
    """A streaming DataFrame and how per-item functions see its rows."""

    df: DataFrame
    item: ItemShape
    decode: Callable[[dict[str, Any]], Any] | None = None
    """A Python step fused at the head of the next Python pass: the visible columns of
    one row (a dict) → the item (e.g. a deserializer with no JVM form). Raises
    ``CodecError`` for a row it cannot decode (the error policy takes the row)."""
    notes: tuple[str, ...] = field(default=())
    """What runs where (for ``describe``): e.g. ``"value: from_avro in the JVM"``."""
    head: Callable[[Any], tuple[dict[str, list[Any]], dict[int, tuple[str, str]]]] | None = None
    """A batch decode at the head of the next Python pass (``serde.ArrowDecode``): the
    Arrow batch → its decoded columns as lists and the rows that did not decode."""
    for_pass: Flow | None = None
    """The same rows for a Python pass that comes first: left to that pass to decode
    (``head``), the JVM's decode spared; the compiler takes it when a per-item step
    follows the source."""
    origin_topic: str | None = None
    """The topic of every row, when ``df`` carries the origin's parts (``ORIGIN_PARTS``)
    without ``_gs_origin_topic`` (a source reading one topic)."""
    last_pass: LastPass | None = None
    """How ``df`` came to be, when it is a sink's Python pass straight over a Kafka
    source's rows (``Sink.fuses``)."""


@dataclass(frozen=True)
class LastPass:
    """A sink's Python pass (``fn``, a ``mapInArrow`` function) over a Kafka source's
    rows (``input``, with the origin's parts: ``ORIGIN_PARTS``; ``origin_topic`` when
    they have no topic column). A sink whose own tasks run Python (the exactly-once
    Kafka writer) runs the pass in them: one Python pass a task, not two."""

    input: DataFrame
    fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
    origin_topic: str | None


class Source(ABC):
    """Where a pipeline reads from."""

    stateless_ok: bool = False
    """Whether real-time mode may read it (only Kafka)."""
    cap: Guarantee = Guarantee.EXACTLY_ONCE
    """The strongest guarantee reading it allows: a source that may give rows again
    after a restart caps the pipeline at ``AT_LEAST_ONCE``."""

    @abstractmethod
    def describe(self) -> str: ...

    def nodes(self) -> list[str]:
        """What it reads, as places of the run's topology (``kafka:topic``,
        ``hazelcast:map``, ``space:cache``)."""
        return [self.describe().split(" (", 1)[0]]

    @abstractmethod
    def flow(self, spark: SparkSession, context: RunContext) -> Flow:
        """The streaming DataFrame with the hidden columns ``_gs_ts`` and ``_gs_where``."""

    def check(self, guarantee: Guarantee) -> None:
        """``ConfigError`` for properties that would break ``guarantee`` (the run's,
        lowered by the sink), before anything starts."""
        return None

    def close(self) -> None:
        """Release what ``flow`` opened on the driver."""
        return None


class Sink(ABC):
    """Where a pipeline writes to."""

    cap: Guarantee = Guarantee.EXACTLY_ONCE
    """The strongest guarantee this sink gives (configured lower by the user)."""
    foreach_batch: bool = True
    """Whether it writes through ``foreachBatch`` (real-time mode refuses it)."""

    @abstractmethod
    def describe(self) -> str: ...

    def nodes(self) -> list[str]:
        """What it writes, as places of the run's topology (see ``Source.nodes``)."""
        return [self.describe().split(" (", 1)[0]]

    @abstractmethod
    def encode(self, item: Any) -> dict[str, Any]:
        """One item → the visible columns the sink writes (fused at the tail of the last
        Python pass; raises ``CodecError`` for an item it cannot write)."""

    @abstractmethod
    def columns(self) -> str:
        """The Spark DDL of what ``encode`` returns (e.g. ``"key binary, value binary"``)."""

    def row_encoder(self) -> Callable[[Any], list[Any]] | None:
        """``encode`` giving the values in the order of ``columns`` (no dict per item),
        when the sink has one; None: the pass's tail takes them from ``encode``'s dict."""
        return None

    def column_encoder(self) -> tuple[Callable[[Any], Sequence[Any]], ColumnEncode] | None:
        """``encode`` in two halves, when the sink has them: an item → its values in the
        order of ``columns`` (not yet encoded), and the encode of a batch's columns of
        such values at once (``serde.ArrowEncode``); None: ``row_encoder`` or
        ``encode`` encodes each item. The compiler uses them for a chain of maps and
        filters (one output row per input row at most)."""
        return None

    def fuses(self, context: RunContext) -> bool:
        """Whether ``start`` runs the flow's last Python pass in its own tasks when the
        flow has one over a Kafka source's rows (``Flow.last_pass``)."""
        return False

    reads_where: bool = True
    """Whether the sink reads ``_gs_where`` of the rows its Python pass gives (a store's
    change-log position; a subclass whose ``start`` reads it must say so); the
    dead-letter policy keeps it in any case."""

    def check(self, guarantee: Guarantee) -> None:
        """``ConfigError`` for properties that would break ``guarantee`` (the one this
        sink gives: the run's, lowered by ``cap``), before anything starts."""
        return None

    @abstractmethod
    def start(self, flow: Flow, context: RunContext,
              on_batch: Callable[[int, dict[str, Any]], None]) -> StreamingQuery:
        """Start the query writing ``flow.df`` (visible columns: ``columns()``, plus the
        hidden ones). ``on_batch(batch_id, counts)`` reports each batch it wrote."""

    def close(self) -> None:
        """Release what ``start`` opened on the driver."""
        return None


def visible(columns: Iterable[str]) -> list[str]:
    """The columns a per-item function sees."""
    return [c for c in columns if c not in HIDDEN and c not in ORIGIN_PARTS]
