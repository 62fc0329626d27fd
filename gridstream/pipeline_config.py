"""``gridstream run PIPELINE.toml``: typed config file → store pipelines on Spark.

File layout (see ``docs/pipelines.md`` and ``examples/pipeline.toml``)::

    [kafka]                       # defaults for every pipeline's Kafka source
    bootstrap_servers = "127.0.0.1:9092"
    properties = { "security.protocol" = "PLAINTEXT" }

    [spark]                       # optional: master, app_name, conf
    master = "local[2]"

    [types."com.example.Person"]  # declared types (see gridstream.spark.types)
    id_property = "id"
    properties = { id = "str", name = "str", address = { city = "str" } }

    [[pipeline]]
    name = "people-to-cassandra"
    topics = ["people"]           # or pattern = "grid\\..*"
    checkpoint = "/var/lib/gridstream/checkpoints/people-cassandra"
    trigger = "5 seconds"         # or "available_now"
    sink = { kind = "cassandra", keyspace = "grid" }

Every problem in the file is a ``ConfigError`` naming the key at fault.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gridstream.errors import ConfigError
from gridstream.spark.config import PipelineConfig

__all__ = ["PipelineFile", "build_pipelines", "load_config", "run_config"]

_STRICT = ConfigDict(frozen=True, populate_by_name=True, extra="forbid",
                     hide_input_in_errors=True)


class KafkaDefaults(BaseModel):
    """``[kafka]``: bootstrap servers and client properties shared by every pipeline."""

    model_config = _STRICT
    bootstrap_servers: str = Field(default="127.0.0.1:9092", alias="bootstrap.servers")
    properties: dict[str, str | int | float | bool] = Field(default_factory=dict)


class SparkSettings(BaseModel):
    """``[spark]``: where and how Spark runs (``local[2]`` by default)."""

    model_config = _STRICT
    master: str | None = None
    app_name: str = "gridstream-pipelines"
    conf: dict[str, str] = Field(default_factory=dict)


class RunSettings(BaseModel):
    """``[run]``: supervision of the running pipelines."""

    model_config = _STRICT
    max_restarts: int = Field(default=0, ge=0)
    restart_delay_s: float = Field(default=10.0, ge=0)
    progress_interval_s: float = Field(default=1.0, gt=0)


class PipelineFile(BaseModel):
    """A whole ``PIPELINE.toml``."""

    model_config = _STRICT
    kafka: KafkaDefaults = Field(default_factory=KafkaDefaults)
    spark: SparkSettings = Field(default_factory=SparkSettings)
    run: RunSettings = Field(default_factory=RunSettings)
    types: dict[str, dict[str, Any]] = Field(default_factory=dict)
    pipeline: list[PipelineConfig] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> PipelineFile:
        names = [p.name for p in self.pipeline]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"pipeline names must be unique: {', '.join(dupes)}")
        checkpoints = [p.checkpoint for p in self.pipeline]
        if len(set(checkpoints)) != len(checkpoints):
            raise ValueError("each pipeline needs its own checkpoint directory")
        from gridstream.spark.types import TypeRegistry

        TypeRegistry.from_tables(self.types)  # a bad [types] table is a ConfigError here
        return self


def _describe(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(file)"
        lines.append(f"  {where}: {item['msg']}")
    return "\n".join(lines)


def load_config(source: str | Path | Mapping[str, Any]) -> PipelineFile:
    """Parse and validate a pipeline file (a path, or an already-parsed mapping)."""
    if isinstance(source, Mapping):
        raw: Mapping[str, Any] = source
        where = "pipeline config"
    else:
        path = Path(source)
        where = str(path)
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(f"{where}: no such file") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{where}: not valid TOML: {exc}") from exc
    try:
        return PipelineFile.model_validate(dict(raw))
    except ValidationError as exc:
        raise ConfigError(f"{where} is invalid:\n{_describe(exc)}") from exc


def build_pipelines(config: PipelineFile) -> list[Any]:
    """The ``StorePipeline`` objects of a validated file."""
    from gridstream.spark.pipeline import StorePipeline
    from gridstream.spark.types import TypeRegistry

    pipelines = []
    for p in config.pipeline:
        types = TypeRegistry.from_tables(config.types, unknown_types=p.unknown_types,
                                         default_id_property=p.default_id_property)
        pipelines.append(StorePipeline(p, types, bootstrap_servers=config.kafka.bootstrap_servers,
                                       kafka_properties=config.kafka.properties))
    return pipelines


def run_config(path: str | Path) -> int:
    """Run every pipeline of the file until stopped; the process exit code."""
    from gridstream.spark.runner import PipelineRunner, RestartPolicy
    from gridstream.spark.session import get_spark

    config = load_config(path)
    pipelines = build_pipelines(config)
    settings = config.spark
    restarts = {p.name: RestartPolicy(config.run.max_restarts, config.run.restart_delay_s)
                for p in pipelines}
    runner = PipelineRunner(
        pipelines,
        lambda: get_spark(settings.master, settings.app_name, settings.conf),
        poll_s=config.run.progress_interval_s,
        restarts=restarts,
    )
    return runner.run()
