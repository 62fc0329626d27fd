"""Packages whose names are imported from their own modules on first use
(``gridstream._lazy``): each name is its home's object, and a Python worker's modules do
not import the stores' drivers through a package's ``__init__``."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

LAZY_PACKAGES = ["gridstream", "gridstream.pipeline", "gridstream.spark",
                 "gridstream.spark.sinks", "gridstream.stores.sql"]


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_each_lazy_name_is_its_homes_object_and_listed(package: str) -> None:
    module = importlib.import_module(package)
    table: dict[str, str] = module._LAZY
    for name, home in table.items():
        assert getattr(module, name) is getattr(importlib.import_module(home), name), name
        assert name in module.__all__ and name in dir(module)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nope'"):
        module.nope  # noqa: B018 - the look-up is the test


# Modules Spark's Python workers import: the data sources' readers and writers, the
# pipeline API's passes and the workers' set-up.
WORKER_MODULES = ["gridstream.connect.source.datasource", "gridstream.connect.sink.fused",
                  "gridstream.connect.sink.decode", "gridstream.pipeline.passes",
                  "gridstream.spark.worker", "gridstream.spark.value_codecs"]


@pytest.mark.parametrize("module", WORKER_MODULES)
def test_a_worker_module_imports_no_store_driver(module: str) -> None:
    code = (f"import sys, {module}; print(sorted({{m.split('.')[0] for m in sys.modules}}"
            " & {'sqlalchemy', 'cassandra', 'psycopg', 'delta'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]", out


def test_a_kafka_pipelines_pass_imports_no_other_source_or_sink() -> None:
    """A Python worker unpickling a Kafka → Kafka pipeline's pass imports the pass and the
    Kafka sink, not the grids' or the stores' sources and sinks (a third of a second more
    of each worker's start when ``gridstream.pipeline`` imported them all)."""
    code = ("import json, sys, gridstream.pipeline.passes, gridstream.pipeline.kafka; "
            "print(json.dumps([m for m in sys.modules if m.startswith(("
            "'gridstream.pipeline.', 'gridstream.space', 'gridstream.stores', "
            "'gridstream.connect'))]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    loaded = set(json.loads(out))
    assert not loaded & {"gridstream.pipeline.grids", "gridstream.pipeline.stores",
                         "gridstream.pipeline.tables", "gridstream.pipeline.grid_changes"}, loaded
    assert not {m for m in loaded if not m.startswith("gridstream.pipeline.")}, loaded
