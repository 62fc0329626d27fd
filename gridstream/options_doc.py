"""The option tables of the docs, generated from the config models.

Every option is declared once, on its model's field (``gridstream._config``): names and
aliases, default, meaning (the field's docstring; for connectors, their seed's meanings
in ``gridstream.connect.meanings``) and importance. An option without a meaning is an
error, so the docs cannot drift from the code::

    python -m gridstream.options_doc --write      # rewrite every docs table
    python -m gridstream.options_doc --check      # exit 1 when a table differs

rewrites (checks) the part of each file of ``DOCS`` between ``<!-- options:begin -->``
and ``<!-- options:end -->``; a unit test checks every file holds what ``render`` gives.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from pydantic import AliasChoices, BaseModel
from pydantic_core import PydanticUndefined

from gridstream.connect.config import (
    ConverterConfig,
    SinkConnectorConfig,
    SourceConnectorConfig,
)
from gridstream.connect.meanings import MEANINGS
from gridstream.errors import ConfigError
from gridstream.feeds.config import FeedConfig
from gridstream.grid.settings import HazelcastGridSettings, SpaceGridSettings
from gridstream.mirror.config import KafkaEndpointConfig, MirrorSettings, TopicSettings
from gridstream.pipeline.config import (
    ApiPipelineConfig,
    KafkaSinkConfig,
    KafkaSourceConfig,
    StepConfig,
)
from gridstream.run.config import KafkaDefaults, RunSettings, SparkSettings
from gridstream.spark.sinks.config import DeltaSinkConfig, ParquetSinkConfig, SqlSinkConfig
from gridstream.stores.cassandra.config import CassandraConfig

__all__ = ["BEGIN", "DOCS", "END", "Section", "render", "write"]

BEGIN, END = "<!-- options:begin -->", "<!-- options:end -->"


@dataclass(frozen=True)
class Section:
    """One table: a model's options (all, or those of ``fields``)."""

    title: str
    model: type[BaseModel]
    fields: frozenset[str] | None = None
    meanings: Mapping[str, str] = field(default_factory=dict)
    """Meanings that override the fields' own (the connectors' seed meanings)."""
    prefix: str = ""
    """``meanings`` keys ``prefix.name`` win over plain ``name`` ones."""
    required: frozenset[str] = frozenset()
    """Options shown as required though they have a default (one that selects the
    model, as a connector's ``kind``)."""


def _fields(model: type[BaseModel], *excluded: str) -> frozenset[str]:
    return frozenset(model.model_fields) - set(excluded)


_SOURCE, _SINK = _fields(SourceConnectorConfig), _fields(SinkConnectorConfig)
_KIND = frozenset({"kind"})

DOCS: dict[str, tuple[Section, ...]] = {
    "docs/connectors.md": (
        Section("Options of both kinds", SourceConnectorConfig, _SOURCE & _SINK, MEANINGS,
                required=_KIND),
        Section("Source options (`kind = \"source\"`)", SourceConnectorConfig,
                _SOURCE - _SINK, MEANINGS),
        Section("Sink options (`kind = \"sink\"`)", SinkConnectorConfig, _SINK - _SOURCE,
                MEANINGS),
        Section("Grid settings: `grid = { kind = \"space\", ... }`", SpaceGridSettings,
                meanings=MEANINGS, prefix="grid"),
        Section("Grid settings: `grid = { kind = \"hazelcast\", ... }`",
                HazelcastGridSettings, meanings=MEANINGS, prefix="grid"),
        Section("Converters: `converter = { ... }`", ConverterConfig, meanings=MEANINGS,
                prefix="converter"),
    ),
    "docs/mirror.md": (
        Section("`KafkaEndpointConfig` (the mirror's Kafka endpoint)", KafkaEndpointConfig),
        Section("`TopicSettings` (its `topics`)", TopicSettings),
        Section("`MirrorSettings` (the mirror itself: `Mirror(..., settings=...)` or the "
                "same options as keywords)", MirrorSettings),
    ),
    "docs/cassandra.md": (
        Section("`CassandraConfig` (the mirror's endpoint, the `cassandra` sink)",
                CassandraConfig),
    ),
    "docs/feeds.md": (
        Section("`[[feed]]` (a store feed; a `[[pipeline]]` without a `source` is read as "
                "one too)", FeedConfig),
        Section("`sink = { kind = \"sql\", ... }`", SqlSinkConfig),
        Section("`sink = { kind = \"parquet\", ... }`", ParquetSinkConfig),
        Section("`sink = { kind = \"delta\", ... }`", DeltaSinkConfig),
    ),
    "docs/pipeline-api.md": (
        Section("`[[pipeline]]` (an API pipeline: it has a `source` table)",
                ApiPipelineConfig),
        Section("`[[pipeline.steps]]`", StepConfig),
        Section("`source = { kind = \"kafka\", ... }`", KafkaSourceConfig),
        Section("`sink = { kind = \"kafka\", ... }`", KafkaSinkConfig),
    ),
    "docs/operating.md": (
        Section("`[kafka]`", KafkaDefaults),
        Section("`[spark]`", SparkSettings),
        Section("`[run]`", RunSettings),
    ),
}
"""Each docs file and the tables between its markers, in order."""

_SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


def _names(name: str, model: type[BaseModel]) -> tuple[str, list[str]]:
    """The name a file uses (the seed's, when an alias is not snake_case; the alias
    when the field is known by one) and the other names it accepts."""
    info = model.model_fields[name]
    alias = info.validation_alias
    choices = [c for c in alias.choices if isinstance(c, str)] if isinstance(
        alias, AliasChoices) else []
    if info.alias and info.alias not in choices:
        choices.insert(0, info.alias)
    seeds = [c for c in choices if not _SNAKE.match(c)]
    shown = seeds[0] if seeds else info.alias or name
    others = [c for c in [name, *choices] if c != shown]
    return shown, list(dict.fromkeys(others))


def _default(name: str, section: Section) -> str:
    info = section.model.model_fields[name]
    if name in section.required or info.is_required():
        return "required"
    if info.default is PydanticUndefined:
        return "{}" if info.default_factory is not None else "required"
    value = info.default
    if isinstance(value, Enum):
        value = value.value
    if value is None:
        return "—"
    if isinstance(value, tuple):
        return "[]" if not value else "`" + str(list(value)).replace("'", '"') + "`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    return f"`{value}`"


def _importance(name: str, section: Section) -> str:
    info = section.model.model_fields[name]
    extra = info.json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("importance"), str):
        return str(extra["importance"])
    return "high" if _default(name, section) == "required" else "medium"


def _meaning(name: str, section: Section) -> str:
    for key in (f"{section.prefix}.{name}", name):
        if key in section.meanings:
            return section.meanings[key]
    description = section.model.model_fields[name].description
    if description:
        return " ".join(description.split())
    raise ConfigError(f"option {name!r} of {section.model.__name__} has no meaning: give "
                      "its field a docstring")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("``", "`")


def _table(section: Section) -> list[str]:
    rows = ["| option | also accepted | default | importance | meaning |",
            "| --- | --- | --- | --- | --- |"]
    for name in section.model.model_fields:
        if section.fields is not None and name not in section.fields:
            continue
        if section.model.model_fields[name].exclude:
            continue
        shown, others = _names(name, section.model)
        also = ", ".join(f"`{o}`" for o in others) or ""
        rows.append(f"| `{shown}` | {also} | {_default(name, section)} | "
                    f"{_importance(name, section)} | {_cell(_meaning(name, section))} |")
    return rows


def render(doc: str) -> str:
    """The generated block of ``doc`` (a key of ``DOCS``), markers included."""
    lines = [BEGIN, "<!-- generated by `python -m gridstream.options_doc --write`: edit the "
             "config models' fields -->"]
    for section in DOCS[doc]:
        lines += ["", f"#### {section.title}", ""]
        lines += _table(section)
    return "\n".join([*lines, "", END])


def _replaced(path: Path, doc: str) -> tuple[str, str]:
    text = path.read_text(encoding="utf-8")
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ConfigError(f"{path}: no {BEGIN} ... {END} section")
    return text, text[:start] + render(doc) + text[end + len(END):]


def write(root: Path, *, check: bool = False) -> list[str]:
    """Rewrite every file of ``DOCS`` under ``root`` (``check``: only say which differ)."""
    differing = []
    for doc in DOCS:
        path = root / doc
        old, new = _replaced(path, doc)
        if old != new:
            differing.append(doc)
            if not check:
                path.write_text(new, encoding="utf-8")
    return differing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(),
                        help="the project's root (default: here)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true", help="rewrite the docs' tables")
    what.add_argument("--check", action="store_true", help="exit 1 when a table differs")
    args = parser.parse_args(argv)
    if args.write or args.check:
        differing = write(args.root, check=args.check)
        for doc in differing:
            print(f"{doc}: {'differs' if args.check else 'rewritten'}")
        return 1 if args.check and differing else 0
    for doc in DOCS:
        print(f"{doc}:\n{render(doc)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
