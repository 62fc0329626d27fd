"""Kafka Connect–style ``.properties`` files: ``gridstream run my-connector.properties``.

One file holds one connector. The file is read with ``java.util.Properties``' rules
(``gridstream.kafka.sources.parse_properties``: ``key=value``, ``key: value`` or ``key
value``; ``#`` and ``!`` comment lines; a trailing backslash continues the line; Java's
escapes), except that an option given twice is an error.

Options (every other name is the connector's own, seed or snake_case, see
``docs/connectors.md``):

- ``connector.class``: ``gridstream.connect.GridSourceConnector`` or ``...GridSinkConnector``;
- ``grid.<option>``: the grid (``grid.kind``, ``grid.members``, ``grid.data_dir``, ...);
- ``kafka.*``, ``producer.*``, ``consumer.*`` (also ``producer.override.*`` and
  ``consumer.override.*``): Kafka client properties;
- ``key.converter``, ``value.converter``, ``value.converter.schemas.enable`` (with the
  JsonConverter: true → ``json_schema``, false → ``json``), ``schema.registry.url`` or
  ``value.converter.schema.registry.url``, ``value.converter.<option>``;
- ``transforms=a,b`` with ``transforms.a.type`` and ``transforms.a.<option>``: a
  gridstream transform type, or one of Kafka Connect's SMT classes that match one
  (``RegexRouter``, ``ReplaceField$Value``, ``MaskField$Value``, ``InsertField$Value``,
  ``ValueToKey``, ``Flatten$Value``);
- ``spark.master``, ``spark.app.name``, other ``spark.*`` (Spark conf), ``run.<option>``
  (``run.allowed_modules``, ``run.max_restarts``, ...).

Lists are comma-separated. Every unknown or invalid option is a ``ConfigError`` naming the
file and the option; values never appear in errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from gridstream.connect.config import TransformConfig
from gridstream.errors import ConfigError
from gridstream.kafka.sources import parse_properties

if TYPE_CHECKING:
    from gridstream.run.config import RunFile

__all__ = ["KAFKA_CONNECT_TRANSFORMS", "load_properties_file"]

_SMT = "org.apache.kafka.connect.transforms."
KAFKA_CONNECT_TRANSFORMS = {
    f"{_SMT}RegexRouter": {"regex": ("route", "regex"), "replacement": ("route", "replacement")},
    f"{_SMT}ReplaceField$Value": {"exclude": ("drop", "fields"), "blacklist": ("drop", "fields"),
                                  "renames": ("rename", "fields")},
    f"{_SMT}MaskField$Value": {"fields": ("mask", "fields"),
                               "replacement": ("mask", "replacement")},
    f"{_SMT}InsertField$Value": {"static.field": ("insert", "field"),
                                 "static.value": ("insert", "value"),
                                 "timestamp.field": ("timestamp", "field")},
    f"{_SMT}ValueToKey": {"fields": ("value_to_key", "fields")},
    f"{_SMT}Flatten$Value": {"delimiter": ("flatten", "delimiter")},
}
"""Kafka Connect's SMT classes accepted: option → (gridstream type, its option). A class
may give two steps (``ReplaceField$Value``: drop, then rename; ``InsertField$Value``:
insert, then timestamp), in the order listed."""
_PREFIXES = ("producer.override.", "consumer.override.", "producer.", "consumer.", "kafka.")
_CONVERTER_OPTIONS = ("value.converter.", "key.converter.")


class _Translation:
    """A properties file → the run file mapping, remembering each option's spelling."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.connector: dict[str, Any] = {}
        self.run: dict[str, Any] = {}
        self.spark: dict[str, Any] = {}
        self.names: dict[str, str] = {"grid": "grid.kind", "converter": "value.converter"}
        """run-file path (``grid.members``, ``converter.value``) → the file's option."""

    def error(self, option: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.where}: option {option!r}: {problem}")

    def put(self, section: dict[str, Any], path: tuple[str, ...], value: Any,
            option: str) -> None:
        for part in path[:-1]:
            section = section.setdefault(part, {})
        if path[-1] in section:
            raise self.error(option, f"sets {'.'.join(path)} a second time")
        section[path[-1]] = value
        self.names[".".join(path)] = option


def _bool(t: _Translation, option: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise t.error(option, "must be true or false")
    return lowered == "true"


def _converters(t: _Translation, options: dict[str, str]) -> None:
    schemas = options.pop("value.converter.schemas.enable", None)
    value = options.get("value.converter")
    if schemas is not None:
        json_like = {None, "json", "json_schema", "org.apache.kafka.connect.json.jsonconverter"}
        if (value.strip().lower() if value is not None else None) not in json_like:
            raise t.error("value.converter.schemas.enable", "only applies to the JSON "
                                                             "converter")
        options.pop("value.converter", None)
        enabled = _bool(t, "value.converter.schemas.enable", schemas)
        t.put(t.connector, ("converter", "value"), "json_schema" if enabled else "json",
              "value.converter.schemas.enable")
    key_schemas = options.pop("key.converter.schemas.enable", None)
    if key_schemas is not None and _bool(t, "key.converter.schemas.enable", key_schemas):
        raise t.error("key.converter.schemas.enable", "keys are JSON scalars or strings, "
                                                      "without a schema: set it false")
    for option in [o for o in options if o in ("value.converter", "key.converter")]:
        t.put(t.connector, ("converter", option.split(".")[0]), options.pop(option), option)
    if "schema.registry.url" in options:
        t.put(t.connector, ("converter", "schema_registry_url"),
              options.pop("schema.registry.url"), "schema.registry.url")
    for option in [o for o in options if o.startswith(_CONVERTER_OPTIONS)]:
        rest = option.split(".", 2)[2]
        if option.startswith("key."):
            raise t.error(option, "is not an option of the key converter")
        value = options.pop(option)
        if rest == "schema.registry.url":
            t.put(t.connector, ("converter", "schema_registry_url"), value, option)
        elif rest.startswith("avro.schemas."):
            t.put(t.connector, ("converter", "avro.schemas", rest[len("avro.schemas."):]),
                  value, option)
        else:
            t.put(t.connector, ("converter", rest), value, option)


def _kc_steps(t: _Translation, alias: str, cls: str,
              options: dict[str, str]) -> list[tuple[TransformConfig, dict[str, str]]]:
    known = KAFKA_CONNECT_TRANSFORMS[cls]
    steps: dict[str, dict[str, Any]] = {}
    spelled: dict[str, dict[str, str]] = {}
    for option, value in options.items():
        if option not in known:
            raise t.error(f"transforms.{alias}.{option}", f"is not an option of {cls} here "
                          f"(only {', '.join(known)})")
        kind, ours = known[option]
        if ours in steps.get(kind, {}):
            raise t.error(f"transforms.{alias}.{option}", "repeats another option")
        steps.setdefault(kind, {"type": kind})[ours] = value
        spelled.setdefault(kind, {})[ours] = f"transforms.{alias}.{option}"
    if not steps:
        raise t.error(f"transforms.{alias}.type", f"{cls} needs one of {', '.join(known)}")
    for option, (kind, ours) in known.items():  # errors about options not given
        spelled.setdefault(kind, {}).setdefault(ours, f"transforms.{alias}.{option}")
    order = list(dict.fromkeys(kind for kind, _ in known.values()))
    return [(TransformConfig.model_validate(steps[k]), spelled[k]) for k in order if k in steps]


def _transforms(t: _Translation, options: dict[str, str]) -> None:
    from gridstream.connect.transforms import StepConfigError, build_chain

    aliases = [a.strip() for a in options.pop("transforms", "").split(",") if a.strip()]
    if len(set(aliases)) != len(aliases):
        raise t.error("transforms", "names a transform twice")
    by_alias: dict[str, dict[str, str]] = {a: {} for a in aliases}
    for option in [o for o in options if o.startswith("transforms.")]:
        alias, _, rest = option[len("transforms."):].partition(".")
        if alias not in by_alias or not rest:
            raise t.error(option, "is not an option of a transform listed in 'transforms'")
        by_alias[alias][rest] = options.pop(option)
    steps: list[TransformConfig] = []
    for alias, step_options in by_alias.items():
        kind = step_options.pop("type", None)
        if kind is None:
            raise t.error(f"transforms.{alias}.type", "is required")
        if kind in KAFKA_CONNECT_TRANSFORMS:
            built = _kc_steps(t, alias, kind, step_options)
        else:
            spelled = {o: f"transforms.{alias}.{o}" for o in step_options}
            built = [(TransformConfig.model_validate({**step_options, "type": kind}), spelled)]
        for step, names in built:
            try:
                build_chain([step])
            except StepConfigError as exc:
                option = (names.get(exc.option, f"transforms.{alias}.{exc.option}")
                          if exc.option else f"transforms.{alias}.type")
                raise t.error(option, exc.problem) from exc
            steps.append(step)
    if steps:
        t.connector["transforms"] = [s.model_dump() for s in steps]


def _translate(t: _Translation, options: dict[str, str]) -> None:
    from gridstream.run.config import CONNECTOR_CLASSES

    spelled = options.pop("connector.class", None)
    if spelled is None:
        raise t.error("connector.class", f"is required (one of {', '.join(CONNECTOR_CLASSES)})")
    if spelled.strip() not in CONNECTOR_CLASSES:
        raise t.error("connector.class", f"not a gridstream connector (one of "
                                         f"{', '.join(CONNECTOR_CLASSES)})")
    t.put(t.connector, ("kind",), CONNECTOR_CLASSES[spelled.strip()], "connector.class")
    _converters(t, options)
    _transforms(t, options)
    for option, value in options.items():
        prefix = next((p for p in _PREFIXES if option.startswith(p)), None)
        if prefix is not None and option != prefix:
            t.put(t.connector, ("kafka", option[len(prefix):]), value, option)
        elif option.startswith("grid.") and option != "grid.":
            t.put(t.connector, ("grid", option[len("grid."):]), value, option)
        elif option == "spark.master":
            t.put(t.spark, ("master",), value, option)
        elif option == "spark.app.name":
            t.put(t.spark, ("app_name",), value, option)
        elif option.startswith("spark."):
            t.put(t.spark, ("conf", option), value, option)
        elif option.startswith("run.") and option != "run.":
            t.put(t.run, (option[len("run."):],), value, option)
        else:
            t.put(t.connector, (option,), value, option)


def _location(loc: tuple[str | int, ...]) -> str:
    """A pydantic error location → the run-file path (list indexes and union tags
    dropped)."""
    parts = [str(p) for p in loc if not isinstance(p, int)]
    if not parts:
        return ""
    if parts[:1] == ["connector"]:
        parts = parts[2:] if parts[1:2] in (["source"], ["sink"]) else parts[1:]
    if parts[:1] == ["grid"] and parts[1:2] in (["space"], ["hazelcast"]):
        parts = ["grid", *parts[2:]]
    return ".".join(parts)


def load_properties_file(path: Path) -> RunFile:
    """The ``RunFile`` of one connector's ``.properties`` file."""
    from gridstream.run.config import RunFile, did_you_mean

    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"{where}: no such file") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: not UTF-8 text") from exc
    t = _Translation(where)
    _translate(t, parse_properties(text, where, unique=True))
    raw = {"connector": [t.connector], "run": t.run, "spark": t.spark}
    try:
        return RunFile.model_validate(raw)
    except ValidationError as exc:
        lines = []
        for item in exc.errors():
            at = _location(item["loc"])
            option = t.names.get(at, at)
            hint = did_you_mean(item)
            lines.append(f"  option {option!r}: {item['msg']}{hint}" if option else
                         f"  {item['msg']}{hint}")
        raise ConfigError(f"{where} is invalid:\n" + "\n".join(lines)) from exc
