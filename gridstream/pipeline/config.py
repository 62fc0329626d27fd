"""``[[pipeline]]`` sections with a ``source`` table: pipelines of the API in a run file.

::

    [[pipeline]]
    name = "logs"
    guarantee = "EXACTLY_ONCE"          # NONE | AT_LEAST_ONCE | EXACTLY_ONCE
    checkpoint = "/var/lib/gridstream/checkpoints/logs"
    trigger = "5 seconds"               # or "available_now", "real_time"
    errors = "dead_letter"              # fail | log | dead_letter
    dead_letter_topic = "logs-dead"
    [pipeline.source]
    kind = "kafka"
    topics = ["logs"]
    properties = { "value.deserializer" = "StringDeserializer", "auto.offset.reset" = "earliest" }
    [[pipeline.steps]]
    map = "myapp.logs:parse"            # from [run] allowed_modules only
    [[pipeline.steps]]
    filter = "myapp.logs:not_debug"
    [pipeline.sink]
    kind = "kafka"
    topic = "entries"
    properties = { "value.serializer" = "StringSerializer" }

Kafka sources and sinks take ``[kafka]``'s bootstrap servers and properties under their
own. Every problem is a ``ConfigError`` naming the file and the key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError

from gridstream._config import StrictModel
from gridstream.errors import ConfigError
from gridstream.pipeline.api import Pipeline, Stage
from gridstream.pipeline.base import Guarantee, Sink, Source
from gridstream.spark.kafka_source import MAX_OFFSETS_PER_TRIGGER

__all__ = ["SINKS", "SOURCES", "ApiPipelineConfig", "build_job", "is_api_pipeline",
           "validate_api_pipeline"]

_STEP_KINDS = ("map", "filter", "flat_map", "map_batch", "window", "join")
_SCHEMA_STEPS = ("map", "flat_map", "map_batch")


class StepConfig(StrictModel):
    """One ``[[pipeline.steps]]`` table: exactly one of ``map``, ``filter``, ``flat_map``,
    ``map_batch`` (a function path), ``window``, ``join`` (a table of options)."""

    map: str | None = None
    """``module:function`` (from an allowed module): each item becomes ``fn(item)``."""
    filter: str | None = None
    """``module:function`` (from an allowed module): keeps the items for which
    ``fn(item)`` is true."""
    flat_map: str | None = None
    """``module:function`` (from an allowed module): each item becomes every item of the
    iterable ``fn(item)`` (empty: the item is dropped)."""
    map_batch: str | None = None
    """``module:function`` (from an allowed module): ``fn(batch) -> batch`` on the
    visible columns of a structured flow, as ``kind`` says."""
    window: dict[str, Any] | None = None
    """A windowed aggregation on event time, in the JVM: a table of its options
    (``size``, ``slide``, ``key``, ``aggregate``, ``watermark``, ``timestamp``); needs a
    structured flow."""
    join: dict[str, Any] | None = None
    """A stream–table join: a table of its options (``table``, ``on``, ``how``,
    ``fields``); needs a structured flow."""
    schema_: str | None = Field(default=None, alias="schema")
    """Spark DDL of the step's output (``"service string, n long"``): the flow becomes
    structured, later items dicts of those columns. ``map``, ``flat_map`` and
    ``map_batch`` only (unset on ``map_batch``: the columns it got)."""
    kind: Literal["arrow", "pandas"] | None = None
    """``map_batch`` only: its batch is a ``pyarrow.RecordBatch`` (``arrow``) or a
    ``pandas.DataFrame`` (``pandas``). Unset: ``arrow``."""

    def which(self) -> tuple[str, Any]:
        """The step's kind and function path (or options); ``ValueError`` unless exactly
        one is given, or for an option the step does not take (``schema`` applies to
        ``map``, ``flat_map`` and ``map_batch``, ``kind`` to ``map_batch`` only)."""
        given = [(k, getattr(self, k)) for k in _STEP_KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"a step has exactly one of {', '.join(_STEP_KINDS)}")
        step = given[0][0]
        if self.schema_ is not None and step not in _SCHEMA_STEPS:
            raise ValueError(f"schema does not apply to a {step} step (only to "
                             f"{', '.join(_SCHEMA_STEPS)})")
        if self.kind is not None and step != "map_batch":
            raise ValueError(f"kind does not apply to a {step} step (only to map_batch)")
        return given[0]


class ApiPipelineConfig(StrictModel):
    """A ``[[pipeline]]`` with a ``source`` table."""

    name: str
    """The pipeline's name (letters, digits, ``.``, ``_``, ``-``), unique among the run's
    pipelines and connectors; it names the query, the exactly-once writer's
    transactional ids and the dead letters' ``gs.error.pipeline`` header."""
    guarantee: Guarantee = Guarantee.NONE
    """``NONE``, ``AT_LEAST_ONCE`` or ``EXACTLY_ONCE``; above ``NONE`` a ``checkpoint`` is
    required. A sink (its ``guarantee``) or a source may lower it, never raise it."""
    checkpoint: str | None = None
    """The Spark checkpoint directory: the query's id and offsets, resumed from after a
    restart. Unset (``NONE`` only): a temporary one, deleted at the end, and the pipeline
    is never restarted after a failure."""
    trigger: str | None = None
    """A duration (``"500 ms"``, ``"5 seconds"``, ``"1 minute"``): a micro-batch that
    often; ``available_now``: read what is there, then stop; ``real_time``: Spark's
    real-time mode (stateless steps, at-least-once). Unset: batches as fast as possible."""
    checkpoint_interval: str | None = None
    """Real-time mode: the length of a batch, how often the checkpoint is written (a
    duration of at least 100 ms). Unset: 5 seconds, or 200 ms when a Python pass runs."""
    real_time_python: bool = False
    """Real-time mode: run the Python steps anyway, in a Spark session built with Spark's
    real-time allow-list check off (``gridstream run`` builds it so); without it a
    real-time pipeline must run entirely in the JVM."""
    errors: Literal["fail", "log", "dead_letter"] = "fail"
    """What becomes of a row whose decode, step or encode fails: ``fail`` fails the query
    naming it, ``log`` logs and skips it, ``dead_letter`` sends its input bytes to
    ``dead_letter_topic``."""
    dead_letter_topic: str | None = None
    """The Kafka topic of the bad rows under ``errors = "dead_letter"``: required with it,
    refused with another policy."""
    source: dict[str, Any]
    """The source: a table whose ``kind`` picks it (``kafka``), with its options."""
    steps: list[StepConfig] = Field(default_factory=list)
    """The ``[[pipeline.steps]]``, applied to each item in order between source and sink;
    none: the source's items go to the sink as they are."""
    sink: dict[str, Any]
    """The sink: a table whose ``kind`` picks it (``kafka``), with its options."""


class KafkaSourceConfig(StrictModel):
    """``source = { kind = "kafka", ... }``: an API pipeline reading Kafka topics."""

    kind: Literal["kafka"] = "kafka"
    """``kafka``: Spark's Kafka source."""
    topics: list[str] | None = None
    """The topics to read. Exactly one of ``topics`` and ``pattern``."""
    pattern: str | None = None
    """A regular expression of the topics to read (Spark's ``subscribePattern``). Exactly
    one of ``topics`` and ``pattern``."""
    projection: Literal["entry", "value", "record"] = "entry"
    """What an item is: ``entry`` a ``(key, value)`` tuple, ``value`` the value alone,
    ``record`` a ``KafkaRecord`` (topic, partition, offset, timestamp, key, value,
    headers)."""
    max_offsets_per_trigger: int | None = Field(default=MAX_OFFSETS_PER_TRIGGER, gt=0)
    """The most records a micro-batch reads (Spark's ``maxOffsetsPerTrigger``): a backlog
    drains as many batches. Not applied in real-time mode."""
    properties: dict[str, Any] = Field(default_factory=dict)
    """Consumer properties and deserializer options (``value.deserializer``,
    ``auto.offset.reset``, ...), over ``[kafka]``'s bootstrap servers and properties;
    secret ones never appear in progress lines or errors."""


class KafkaSinkConfig(StrictModel):
    """``sink = { kind = "kafka", ... }``: an API pipeline writing a Kafka topic."""

    kind: Literal["kafka"] = "kafka"
    """``kafka``: the exactly-once writer under ``EXACTLY_ONCE``; at least once, the
    pass's own tasks with an idempotent producer when the pass reads the Kafka source's
    rows (micro-batches or real-time mode, no dead letters), else Spark's Kafka sink."""
    topic: str
    """The topic written: a ``(key, value)`` item gives the record's key and value, any
    other item is the value, with no key (unless ``key_fn`` or ``value_fn`` is set)."""
    key_fn: str | None = None
    """``module:function`` (from an allowed module) giving each item's key; unset while
    ``value_fn`` is set: no key."""
    value_fn: str | None = None
    """``module:function`` (from an allowed module) giving each item's value; unset while
    ``key_fn`` is set: the whole item."""
    guarantee: Guarantee | None = None
    """``NONE``, ``AT_LEAST_ONCE`` or ``EXACTLY_ONCE``: lowers the pipeline's guarantee
    for this sink, never raises it. Unset: the pipeline's."""
    properties: dict[str, Any] = Field(default_factory=dict)
    """Producer properties and serializer options (``value.serializer``,
    ``transaction.timeout.ms``, ...), over ``[kafka]``'s bootstrap servers and
    properties; secret ones never appear in progress lines or errors."""


Loader = Callable[[str, str], Callable[..., Any]]
"""``(path, option) -> function`` from the allow-list."""


def _kafka_props(kafka: Any, own: Mapping[str, Any]) -> dict[str, Any]:
    return {"bootstrap.servers": kafka.bootstrap_servers, **kafka.properties, **own}


def _kafka_source(table: dict[str, Any], kafka: Any, load: Loader) -> Source:
    from gridstream.pipeline.kafka import KafkaSources

    c = KafkaSourceConfig.model_validate(table)
    return KafkaSources.kafka(_kafka_props(kafka, c.properties), c.topics,
                              projection=c.projection, pattern=c.pattern,
                              max_offsets_per_trigger=c.max_offsets_per_trigger)


def _kafka_sink(table: dict[str, Any], kafka: Any, load: Loader) -> Sink:
    from gridstream.pipeline.kafka import KafkaSinks

    c = KafkaSinkConfig.model_validate(table)
    return KafkaSinks.kafka(_kafka_props(kafka, c.properties), c.topic,
                            key_fn=load(c.key_fn, "key_fn") if c.key_fn else None,
                            value_fn=load(c.value_fn, "value_fn") if c.value_fn else None,
                            guarantee=c.guarantee)


SOURCES: dict[str, Callable[[dict[str, Any], Any, Loader], Source]] = {"kafka": _kafka_source}
"""Source builders by ``kind``: ``(table, [kafka] defaults, loader) -> Source``."""
SINKS: dict[str, Callable[[dict[str, Any], Any, Loader], Sink]] = {"kafka": _kafka_sink}
"""Sink builders by ``kind``."""


def is_api_pipeline(section: Any) -> bool:
    """A ``[[pipeline]]`` of the API (it has a ``source`` table)."""
    return isinstance(section, dict) and "source" in section


def _locate(error: ValidationError, prefix: str) -> str:
    lines = []
    for item in error.errors():
        where = ".".join([prefix, *(str(p) for p in item["loc"])])
        lines.append(f"  {where}: {item['msg']}")
    return "\n".join(lines)


def validate_api_pipeline(section: dict[str, Any], index: int, where: str,
                          ) -> ApiPipelineConfig:
    """Validate one section (``ConfigError`` naming the file and the key)."""
    prefix = f"pipeline.{index}"
    try:
        config = ApiPipelineConfig.model_validate(section)
        for number, step in enumerate(config.steps):
            try:
                step.which()
            except ValueError as exc:
                raise ConfigError(f"{where} is invalid:\n  {prefix}.steps.{number}: "
                                  f"{exc}") from exc
    except ValidationError as exc:
        raise ConfigError(f"{where} is invalid:\n{_locate(exc, prefix)}") from exc
    for part, kinds in (("source", SOURCES), ("sink", SINKS)):
        kind = getattr(config, part).get("kind")
        if kind not in kinds:
            raise ConfigError(f"{where} is invalid:\n  {prefix}.{part}.kind: {kind!r} is not "
                              f"one of {', '.join(sorted(kinds))}")
    return config


def build_job(config: ApiPipelineConfig, index: int, where: str, kafka: Any,
              allowed: tuple[str, ...]) -> Any:
    """The ``PipelineJob`` of a validated section (functions loaded from ``allowed``)."""
    from gridstream.allowlist import load_function

    prefix = f"{where}: pipeline.{index}"

    def load(path: str, option: str) -> Callable[..., Any]:
        return load_function(path, allowed, what=option)

    def end(part: str, builders: Mapping[str, Callable[..., Any]]) -> Any:
        table = getattr(config, part)
        try:
            return builders[table["kind"]](table, kafka, load)
        except ValidationError as exc:
            raise ConfigError(f"{where} is invalid:\n"
                              f"{_locate(exc, f'pipeline.{index}.{part}')}") from exc

    try:
        p = Pipeline.create(config.name)
        stage: Stage = p.read_from(end("source", SOURCES))
        for number, step in enumerate(config.steps):
            kind, value = step.which()
            option = f"steps.{number}.{kind}"
            if kind in ("window", "join"):
                try:
                    stage = getattr(stage, kind)(**value)
                except TypeError as exc:  # an unknown or missing option of the step
                    raise ConfigError(f"{option}: {exc}") from exc
            elif kind == "map_batch":
                stage = stage.map_batch(load(value, option), step.schema_,
                                        step.kind or "arrow")
            elif kind == "filter":
                stage = stage.filter(load(value, option))
            else:
                stage = getattr(stage, kind)(load(value, option), step.schema_)
        stage.write_to(end("sink", SINKS))
    except ConfigError as exc:
        if isinstance(exc.__cause__, ValidationError):
            raise
        raise ConfigError(f"{prefix} ({config.name}): {exc}") from exc
    try:
        return p.job(config.guarantee, config.checkpoint, config.trigger,
                     errors=config.errors, dead_letter_topic=config.dead_letter_topic,
                     checkpoint_interval=config.checkpoint_interval, allowed_modules=allowed,
                     real_time_python=config.real_time_python)
    except ConfigError as exc:
        raise ConfigError(f"{prefix} ({config.name}): {exc}") from exc
