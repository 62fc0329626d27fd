"""``gridstream run FILE``: typed config file → store feeds and connectors on Spark.

``FILE`` is a TOML file (below) or a Kafka Connect–style ``.properties`` file holding one
connector (``gridstream.run.properties``). TOML layout (see ``docs/feeds.md``,
``docs/connectors.md``, ``examples/feeds.toml`` and ``examples/connectors.toml``)::

    [kafka]                       # defaults for every pipeline's Kafka source
    bootstrap_servers = "127.0.0.1:9092"
    properties = { "security.protocol" = "PLAINTEXT" }

    [spark]                       # optional: master, app_name, conf
    master = "local[2]"

    [types."com.example.Person"]  # declared types (see gridstream.spark.types)
    id_property = "id"
    properties = { id = "str", name = "str", address = { city = "str" } }

    [[feed]]                      # a store feed ([[pipeline]] without a source: the same)
    name = "people-to-cassandra"
    topics = ["people"]           # or pattern = "grid\\..*"
    checkpoint = "/var/lib/gridstream/checkpoints/people-cassandra"
    trigger = "5 seconds"         # or "available_now"
    sink = { kind = "cassandra", keyspace = "grid" }

    [[pipeline]]                  # a pipeline of the API: it has a source table
    name = "logs"                 # (docs/pipeline-api.md, examples/pipeline_api.toml)
    source = { kind = "kafka", topics = ["logs"] }
    steps = [{ map = "myapp.logs:parse" }]
    sink = { kind = "kafka", topic = "entries" }

    [[connector]]
    name = "people-source"
    kind = "source"               # or "connector.class" = "gridstream.connect.GridSourceConnector"
    checkpoint = "/var/lib/gridstream/checkpoints/people-source"
    grid = { kind = "hazelcast", members = ["127.0.0.1:5701"] }

Any of the three lists may be empty, not all. Names and checkpoints are unique across
feeds, pipelines and connectors. Connectors take ``[kafka]``'s bootstrap servers and
properties unless they name their own ``bootstrap_servers`` (then only their own
``kafka`` properties apply).
Every problem in the file is a ``ConfigError`` naming the key at fault.
"""

from __future__ import annotations

import difflib
import posixpath
import threading
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from gridstream._config import StrictModel, comma_separated, importance
from gridstream.connect.config import ConnectorConfig
from gridstream.errors import ConfigError
from gridstream.feeds.config import FeedConfig
from gridstream.kafka.config import secret_properties

__all__ = ["RunFile", "build_api_jobs", "build_connectors", "build_feeds",
           "load_config", "run_config"]

CONNECTOR_CLASSES = {
    "gridstream.connect.GridSourceConnector": "source",
    "gridstream.connect.GridSinkConnector": "sink",
    "GridSourceConnector": "source",
    "GridSinkConnector": "sink",
}
"""``connector.class`` spellings (Kafka Connect's) and the ``kind`` each one means."""



class KafkaDefaults(StrictModel):
    """``[kafka]``: bootstrap servers and client properties shared by every pipeline."""

    bootstrap_servers: str = Field(
        default="127.0.0.1:9092", alias="bootstrap.servers", json_schema_extra=importance("high")
    )
    """The Kafka cluster of every flow that does not name its own bootstrap servers."""
    properties: dict[str, str | int | float | bool | SecretStr] = Field(default_factory=dict)
    """Kafka client properties every flow's clients take (``security.protocol``, ...);
    a flow's own properties win over them, and a connector naming its own
    ``bootstrap_servers`` takes none of them. Secret properties
    (``gridstream.kafka.config.is_secret``) are held as ``SecretStr``, never printed."""

    @field_validator("properties")
    @classmethod
    def _secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        return secret_properties(value)


class SparkSettings(StrictModel):
    """``[spark]``: where and how Spark runs (``local[2]`` by default)."""

    master: str | None = None
    """The Spark master URL (``local[4]``, ``spark://host:7077``). Unset:
    ``$GRIDSTREAM_SPARK_MASTER``, else ``local[2]``."""
    app_name: str = "gridstream-pipelines"
    """The Spark application's name."""
    conf: dict[str, str] = Field(default_factory=dict)
    """Spark configuration entries (``"spark.sql.shuffle.partitions" = "4"``); they win
    over gridstream's defaults."""


class RunSettings(StrictModel):
    """``[run]``: supervision of the running pipelines and connectors."""

    max_restarts: int = Field(default=10, ge=0)
    """Restarts in a row of a flow whose failure may pass by itself (a service
    unreachable, a store refusing); a permanent failure is never restarted."""
    restart_delay_s: float = Field(default=2.0, ge=0)
    """The wait before the first restart; it doubles at each one, up to
    ``restart_max_delay_s``."""
    restart_max_delay_s: float = Field(default=60.0, ge=0, json_schema_extra=importance("low"))
    """The longest wait before a restart, in seconds: where the doubling of
    ``restart_delay_s`` stops (never below ``restart_delay_s``)."""
    wait_for_inputs_s: float = Field(default=300.0, ge=0)
    """How long, in seconds, a flow waits for a topic it reads that is not there yet and
    that no flow of the file writes (another application may create it), checking every
    few seconds; then it fails. A topic a flow of the file creates is waited for as long
    as it takes."""
    progress_interval_s: float = Field(default=1.0, gt=0, json_schema_extra=importance("low"))
    """How often, in seconds, the run looks at its flows: prints their batch lines,
    updates the status, and handles failures and due restarts."""
    heartbeat_s: float = Field(default=60.0, gt=0, json_schema_extra=importance("low"))
    """An idle flow prints a line after this long without a batch."""
    status: bool = True
    """Serve ``/metrics``, ``/status`` and the status page on loopback."""
    status_port: int | None = Field(default=None, ge=0, le=65535)
    """0: any free port (printed). Unset: 8094, or any free port when another run holds
    it (said); a port set here that is taken is an error."""
    log_dir: str | None = None
    """Where the run's log file goes (default ``$GRIDSTREAM_HOME/logs``)."""
    allowed_modules: tuple[str, ...] = ()
    """Modules (and their submodules) that a connector's ``cacheFilter`` and an API
    pipeline's functions (steps, ``key_fn``, ``value_fn``) may be imported from, with
    those of ``GRIDSTREAM_ALLOWED_MODULES``; nothing else is ever imported from config."""

    @field_validator("allowed_modules", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return comma_separated(value)


class RunFile(StrictModel):
    """A whole run file: store feeds, API pipelines and connectors."""

    kafka: KafkaDefaults = Field(default_factory=KafkaDefaults)
    """``[kafka]``: the Kafka cluster and client properties the flows share."""
    spark: SparkSettings = Field(default_factory=SparkSettings)
    """``[spark]``: the Spark session every flow runs on."""
    run: RunSettings = Field(default_factory=RunSettings)
    """``[run]``: supervision, status endpoint, log file and the allow-list of modules."""
    types: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """``[types."<name>"]``: the types the store feeds declare (id property,
    properties and their kinds, indexes; ``gridstream.spark.types``), by type name."""
    feed: list[FeedConfig] = Field(default_factory=list)
    """The store feeds: ``[[feed]]`` sections, then the ``[[pipeline]]`` sections without
    a ``source`` table (a feed's earlier form, still read as one)."""
    connector: list[ConnectorConfig] = Field(default_factory=list)
    """The ``[[connector]]`` sections: grid ↔ Kafka connectors."""
    api_pipelines: list[Any] = Field(default_factory=list, exclude=True)
    """``[[pipeline]]`` sections with a ``source`` table (pipelines of the API, validated
    by ``load_config`` into ``gridstream.pipeline.config.ApiPipelineConfig``)."""

    @model_validator(mode="before")
    @classmethod
    def _connector_classes(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("connector"), list):
            return data
        return {**data, "connector": [_kind_from_class(i, c)
                                      for i, c in enumerate(data["connector"])]}

    @model_validator(mode="after")
    def _unique(self) -> RunFile:
        if not self.feed and not self.connector and not self.api_pipelines:
            raise ValueError("no [[feed]], no [[pipeline]] and no [[connector]]: nothing to "
                             "run")
        names = [p.name for p in self.feed] + [c.name for c in self.connector] + [
            p.name for p in self.api_pipelines]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError("feed, pipeline and connector names must be unique: "
                             f"{', '.join(dupes)}")
        checkpoints = [_place(p.checkpoint) for p in self.feed] + [
            _place(c.checkpoint) for c in self.connector] + [
            _place(p.checkpoint) for p in self.api_pipelines if p.checkpoint]
        shared = sorted({c for c in checkpoints if checkpoints.count(c) > 1})
        if shared:
            raise ValueError("each feed, pipeline and connector needs its own checkpoint "
                             f"directory; shared: {', '.join(shared)}")
        from gridstream.spark.types import TypeRegistry

        TypeRegistry.from_tables(self.types)  # a bad [types] table is a ConfigError here
        return self


def _describe(error: ValidationError, feeds: Sequence[str] = ()) -> str:
    """One line per error, naming where it is; ``feeds``: each feed's own place in the
    file (``pipeline.2`` for a feed written as a ``[[pipeline]]``)."""
    lines = []
    for item in error.errors():
        loc = list(item["loc"])
        if loc[:1] == ["feed"] and len(loc) > 1 and isinstance(loc[1], int) and (
                loc[1] < len(feeds)):
            loc[:2] = [feeds[loc[1]]]
        where = ".".join(str(part) for part in loc) or "(file)"
        lines.append(f"  {where}: {item['msg']}{did_you_mean(item)}")
    return "\n".join(lines)


def _names(model: type[BaseModel], seen: set[type[BaseModel]] | None = None) -> set[str]:
    """Every option name a run file may use below ``model``: fields and their aliases."""
    seen = set() if seen is None else seen
    if model in seen:
        return set()
    seen.add(model)
    names: set[str] = set()
    for name, info in model.model_fields.items():
        names.add(name)
        alias = info.validation_alias
        if isinstance(alias, str):
            names.add(alias)
        elif alias is not None and hasattr(alias, "choices"):
            names.update(c for c in alias.choices if isinstance(c, str))
        for inner in _models(info.annotation):
            names |= _names(inner, seen)
    return names


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The config models an annotation holds (unions, containers, ``Annotated``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in _models(arg)]


_KNOWN: set[str] | None = None


def did_you_mean(item: Mapping[str, Any]) -> str:
    """For an unknown option (pydantic's ``extra_forbidden``): `` (did you mean 'x'?)``
    when a known option name is close to it, else empty."""
    global _KNOWN
    if item.get("type") != "extra_forbidden" or not item.get("loc"):
        return ""
    if _KNOWN is None:
        _KNOWN = _names(RunFile)
    found = difflib.get_close_matches(str(item["loc"][-1]), sorted(_KNOWN), n=1, cutoff=0.75)
    return f" (did you mean {found[0]!r}?)" if found else ""


def _place(path: str) -> str:
    """A checkpoint location in one spelling (``/a/b/``, ``/a//b`` and ``/a/./b`` are one
    directory), for comparison."""
    if "://" in path:
        scheme, _, rest = path.partition("://")
        return f"{scheme}://{posixpath.normpath(rest) if rest else rest}"
    return posixpath.normpath(path)


def _kind_from_class(index: int, section: Any) -> Any:
    """A ``[[connector]]`` with ``connector.class`` → the same with ``kind``."""
    if not isinstance(section, dict) or "connector.class" not in section:
        return section
    section = dict(section)
    spelled = section.pop("connector.class")
    kind = CONNECTOR_CLASSES.get(spelled) if isinstance(spelled, str) else None
    if kind is None:
        raise ValueError(f"connector.{index}.connector.class: not a gridstream connector "
                         f"(one of {', '.join(CONNECTOR_CLASSES)})")
    if section.setdefault("kind", kind) != kind:
        raise ValueError(f"connector.{index}: connector.class says {kind!r}, kind says "
                         f"{section['kind']!r}")
    return section


def check_connectors(config: RunFile, where: str) -> None:
    """What pydantic cannot check: each connector's transforms build, its
    ``cacheFilter`` is on the allow-list (and importable), and a source connector's
    producer takes no lossy setting from ``[kafka]``'s properties."""
    from gridstream.allowlist import allowed_modules
    from gridstream.connect.config import SourceConnectorConfig
    from gridstream.connect.filters import load_filter
    from gridstream.connect.transforms import build_chain

    allowed = allowed_modules(config.run.allowed_modules)
    for c in config.connector:
        if isinstance(c, SourceConnectorConfig):
            problem = c.producer_problem(connector_kafka(config, c)[1],
                                         "its Kafka properties with [kafka]'s")
            if problem is not None:
                raise ConfigError(f"{where}: {problem}")
        try:
            build_chain(c.transforms)
        except ConfigError as exc:
            raise ConfigError(f"{where}: connector {c.name!r}: {exc}") from exc
        if c.cache_filter is not None:
            try:
                load_filter(c.cache_filter, allowed)
            except ConfigError as exc:
                raise ConfigError(f"{where}: connector {c.name!r}: option 'cacheFilter': "
                                  f"{exc}") from exc


def load_config(source: str | Path | Mapping[str, Any]) -> RunFile:
    """Parse and validate a run file: a TOML path, a ``.properties`` path (one
    connector) or an already-parsed mapping."""
    if isinstance(source, Mapping):
        raw: Mapping[str, Any] = source
        where = "pipeline config"
    else:
        path = Path(source)
        where = str(path)
        if path.suffix == ".properties":
            from gridstream.run.properties import load_properties_file

            config = load_properties_file(path)
            check_connectors(config, where)
            return config
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(f"{where}: no such file") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{where}: not valid TOML: {exc}") from exc
    raw, feeds = _split_pipelines(raw, where)
    try:
        config = RunFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{where} is invalid:\n{_describe(exc, feeds)}") from exc
    check_connectors(config, where)
    build_api_jobs(config, where)  # every function path resolves from the allow-list
    return config


def _split_pipelines(raw: Mapping[str, Any], where: str) -> tuple[dict[str, Any], list[str]]:
    """``raw`` with its ``[[pipeline]]`` sections sorted out: API pipelines (with a
    ``source`` table) validated and moved to ``api_pipelines``, the others (store feeds
    in their earlier form) appended to ``feed``; and each feed's place in the file."""
    from gridstream.pipeline.config import is_api_pipeline, validate_api_pipeline

    data = dict(raw)
    feeds = data.get("feed", [])
    if not isinstance(feeds, list):
        raise ConfigError(f"{where}: [[feed]] must be an array of tables")
    places = [f"feed.{i}" for i in range(len(feeds))]
    sections = data.pop("pipeline", None)
    if sections is None:
        return data, places
    if not isinstance(sections, list):
        raise ConfigError(f"{where}: [[pipeline]] must be an array of tables")
    old = [(i, s) for i, s in enumerate(sections) if not is_api_pipeline(s)]
    data["feed"] = [*feeds, *(s for _, s in old)]
    places += [f"pipeline.{i}" for i, _ in old]
    data["api_pipelines"] = [validate_api_pipeline(s, i, where)
                             for i, s in enumerate(sections) if is_api_pipeline(s)]
    return data, places


def build_api_jobs(config: RunFile, where: str = "pipeline config") -> list[Any]:
    """The ``PipelineJob`` of each API pipeline of a validated file."""
    from gridstream.allowlist import allowed_modules
    from gridstream.pipeline.config import build_job

    allowed = allowed_modules(config.run.allowed_modules)
    return [build_job(p, i, where, config.kafka, allowed)
            for i, p in enumerate(config.api_pipelines)]


def build_feeds(config: RunFile) -> list[Any]:
    """The ``StoreFeed`` objects of a validated file."""
    from gridstream.feeds.feed import StoreFeed
    from gridstream.spark.types import TypeRegistry

    pipelines = []
    for p in config.feed:
        types = TypeRegistry.from_tables(config.types, unknown_types=p.unknown_types,
                                         default_id_property=p.default_id_property)
        pipelines.append(StoreFeed(p, types, bootstrap_servers=config.kafka.bootstrap_servers,
                                       kafka_properties=config.kafka.properties))
    return pipelines


def connector_kafka(config: RunFile, connector: Any) -> tuple[str, dict[str, Any]]:
    """A connector's bootstrap servers and Kafka properties: its own over ``[kafka]``'s,
    or only its own when it names its own bootstrap servers (another cluster)."""
    if connector.bootstrap_servers:
        return connector.bootstrap_servers, dict(connector.kafka)
    return config.kafka.bootstrap_servers, {**config.kafka.properties, **connector.kafka}


def build_connectors(config: RunFile, *, space: Any = None) -> list[Any]:
    """The connectors of a validated file (``gridstream.connect.build_connector``)."""
    from gridstream.allowlist import allowed_modules
    from gridstream.connect import build_connector

    allowed = allowed_modules(config.run.allowed_modules)
    connectors = []
    for c in config.connector:
        servers, properties = connector_kafka(config, c)
        connectors.append(build_connector(c, bootstrap_servers=servers,
                                          kafka_properties=properties,
                                          allowed_modules=allowed, space=space))
    return connectors


def run_config(path: str | Path) -> int:
    """Run every pipeline and connector of the file until stopped; the process exit
    code."""
    from gridstream.ops.run import Operated

    config = load_config(path)
    with Operated(config.run, Path(path).stem) as ops:
        return run_flows(config, ops, where=str(path))


def run_flows(config: RunFile, ops: Any, *, where: str = "pipeline config",
              until: Callable[[Any], bool] | None = None) -> int:
    """Run the file's flows under ``ops`` (``gridstream.ops.run.Operated``: its log file,
    monitor and status endpoint) until stopped, every flow has finished or failed, or
    ``until(monitor)`` (asked every second on a thread of its own) says so; the exit
    code; prints the log file and the status URL once the flows are known. ``where``
    names the file in configuration errors. What ``until`` raises stops
    the run and is raised here."""
    from gridstream.ops.preflight import Preflight
    from gridstream.spark.runner import PipelineRunner, RestartPolicy

    pipelines = [*build_feeds(config), *build_api_jobs(config, where),
                 *build_connectors(config)]
    run = config.run
    restarts = {p.name: RestartPolicy(run.max_restarts, run.restart_delay_s,
                                      run.restart_max_delay_s, run.wait_for_inputs_s)
                for p in pipelines}
    runner = PipelineRunner(pipelines, lambda: _spark(config, pipelines, ops.log.path),
                            poll_s=run.progress_interval_s, restarts=restarts,
                            monitor=ops.monitor, log=ops.log, heartbeat_s=run.heartbeat_s,
                            preflight=Preflight(pipelines).check)
    ops.announce()  # once the status lists every flow
    if until is None:
        return runner.run()
    watcher = _Watcher(runner, until, ops.monitor)
    watcher.start()
    try:
        code = runner.run()
    finally:
        watcher.done.set()
        watcher.join(timeout=WATCHER_JOIN_S)
    if watcher.error is not None:
        raise watcher.error
    return code


WATCHER_JOIN_S = 10.0
"""How long the end of a run waits for its ``until`` to return (a check still asking a
service; the thread is a daemon)."""


class _Watcher(threading.Thread):
    """Asks ``until(monitor)`` every second; stops the runner when it says so or raises."""

    def __init__(self, runner: Any, until: Callable[[Any], bool], monitor: Any) -> None:
        super().__init__(name="gridstream-run-until", daemon=True)
        self.runner, self.until, self.monitor = runner, until, monitor
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        while not self.done.wait(1.0):
            try:
                if self.until(self.monitor):
                    self.runner.stop("done")
                    return
            except BaseException as exc:  # noqa: BLE001 - raised again by run_flows
                self.error = exc
                self.runner.stop("an error of the run's own check")
                return


def _spark(config: RunFile, pipelines: list[Any], log_file: Path) -> Any:
    from gridstream.spark.session import get_spark

    settings = config.spark
    conf = dict(settings.conf)
    if any(getattr(getattr(p, "options", None), "real_time_python", False) for p in pipelines):
        from gridstream.pipeline.run import REAL_TIME_PYTHON_CONF

        conf.update(REAL_TIME_PYTHON_CONF)  # Spark reads it from the session's build
    return get_spark(settings.master, settings.app_name, conf, log_file=log_file)
