"""Options declared once: every config model has one strict base and a meaning on each
field, and every docs table of options is the generated one."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
from pydantic import BaseModel

import gridstream
from gridstream import options_doc
from gridstream._config import StrictModel
from gridstream.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_every_docs_table_of_options_is_the_generated_one() -> None:
    """Regenerate with ``python -m gridstream.options_doc --write``."""
    assert options_doc.write(ROOT, check=True) == []


def test_a_changed_docs_table_is_found(tmp_path: Path) -> None:
    for doc in options_doc.DOCS:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / doc).write_text((ROOT / doc).read_text())
    cassandra = tmp_path / "docs/cassandra.md"
    cassandra.write_text(cassandra.read_text().replace("| `connect_timeout_s` |", "| `x` |"))
    assert options_doc.write(tmp_path, check=True) == ["docs/cassandra.md"]
    assert options_doc.write(tmp_path) == ["docs/cassandra.md"]  # rewritten
    assert options_doc.write(tmp_path, check=True) == []


def _models() -> list[type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for info in pkgutil.walk_packages(gridstream.__path__, "gridstream."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseModel) and value.__module__.startswith("gridstream."):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[name] for name in sorted(found)]


@pytest.mark.parametrize("model", _models(), ids=lambda m: m.__qualname__)
def test_every_config_model_has_the_one_strict_base(model: type[BaseModel]) -> None:
    assert issubclass(model, StrictModel)
    assert model.model_config["frozen"] and model.model_config["hide_input_in_errors"]


def test_each_documented_option_has_its_meaning_on_its_field_or_in_the_seeds_table() -> None:
    for sections in options_doc.DOCS.values():
        for section in sections:
            for name, info in section.model.model_fields.items():
                if section.fields is not None and name not in section.fields:
                    continue
                assert info.description or name in section.meanings or (
                    f"{section.prefix}.{name}" in section.meanings), (section.model, name)


def test_an_option_without_a_meaning_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    class Bare(StrictModel):
        documented: int = 1
        """Has a meaning."""
        bare: int = 2

    monkeypatch.setitem(options_doc.DOCS, "docs/x.md", (options_doc.Section("x", Bare),))
    with pytest.raises(ConfigError, match="'bare' of Bare has no meaning"):
        options_doc.render("docs/x.md")


def test_importance_is_declared_or_follows_from_being_required() -> None:
    table = options_doc.render("docs/cassandra.md")
    assert "| `keyspaceName` | `keyspace` | required | high |" in table
    assert "| `concurrency` |  | `64` | low |" in table
    assert "| `port` |  | `9042` | medium |" in table
