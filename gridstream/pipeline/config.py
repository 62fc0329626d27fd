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

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gridstream.errors import ConfigError
from gridstream.pipeline.api import Pipeline, Stage
from gridstream.pipeline.base import Guarantee, Sink, Source
from gridstream.spark.kafka_source import MAX_OFFSETS_PER_TRIGGER

__all__ = ["SINKS", "SOURCES", "ApiPipelineConfig", "build_job", "is_api_pipeline",
           "validate_api_pipeline"]

_STRICT = ConfigDict(frozen=True, populate_by_name=True, extra="forbid",
                     hide_input_in_errors=True)
_STEP_KINDS = ("map", "filter", "flat_map", "map_batch", "window", "join")
_SCHEMA_STEPS = ("map", "flat_map", "map_batch")


class StepConfig(BaseModel):
    """One ``[[pipeline.steps]]`` table: exactly one of ``map``, ``filter``, ``flat_map``,
    ``map_batch`` (a function path), ``window``, ``join`` (a table of options)."""

    model_config = _STRICT
    map: str | None = None
    filter: str | None = None
    flat_map: str | None = None
    map_batch: str | None = None
    window: dict[str, Any] | None = None
    join: dict[str, Any] | None = None
    schema_: str | None = Field(default=None, alias="schema")
    kind: Literal["arrow", "pandas"] | None = None

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


class ApiPipelineConfig(BaseModel):
    """A ``[[pipeline]]`` with a ``source`` table."""

    model_config = _STRICT
    name: str
    guarantee: Guarantee = Guarantee.NONE
    checkpoint: str | None = None
    trigger: str | None = None
    checkpoint_interval: str | None = None
    real_time_python: bool = False
    errors: Literal["fail", "log", "dead_letter"] = "fail"
    dead_letter_topic: str | None = None
    source: dict[str, Any]
    steps: list[StepConfig] = Field(default_factory=list)
    sink: dict[str, Any]


class KafkaSourceConfig(BaseModel):
    model_config = _STRICT
    kind: Literal["kafka"] = "kafka"
    topics: list[str] | None = None
    pattern: str | None = None
    projection: Literal["entry", "value", "record"] = "entry"
    max_offsets_per_trigger: int | None = Field(default=MAX_OFFSETS_PER_TRIGGER, gt=0)
    properties: dict[str, Any] = Field(default_factory=dict)


class KafkaSinkConfig(BaseModel):
    model_config = _STRICT
    kind: Literal["kafka"] = "kafka"
    topic: str
    key_fn: str | None = None
    value_fn: str | None = None
    guarantee: Guarantee | None = None
    properties: dict[str, Any] = Field(default_factory=dict)


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
    from gridstream.connect.filters import load_function

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
