"""The package's layers, top to bottom: nothing imports upward, and no flow imports
another flow's modules. Every import counts: at the top of a module, inside a function,
under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gridstream

PACKAGE = Path(gridstream.__file__).parent

LAYERS: tuple[tuple[str, ...], ...] = (
    # the front: what a user runs or types
    ("gridstream", "gridstream.cli", "gridstream.demo", "gridstream.options_doc",
     "gridstream.mirror.cli", "gridstream.mirror.__main__", "gridstream.ops.cli"),
    # loading run files
    ("gridstream.run",),
    # flows on Spark (and the comparison of what they wrote)
    ("gridstream.feeds", "gridstream.connect", "gridstream.pipeline", "gridstream.reconcile"),
    # the Spark pieces the flows share (session, Kafka read and write, the exactly-once
    # writer, the store sinks, the runner and its Runnable contract)
    ("gridstream.spark",),
    # operating a run: counts, failures, status, metrics, preflight checks
    ("gridstream.ops",),
    # stores (the mirror's endpoints among them)
    ("gridstream.stores",),
    # grids, the mirror, reading what it wrote, local services
    ("gridstream.grid", "gridstream.mirror", "gridstream.consumer", "gridstream.stack"),
    # the space and its log
    ("gridstream.space",),
    # the protocol, Kafka, folding, the JVM runtime
    ("gridstream.protocol", "gridstream.kafka", "gridstream.fold", "gridstream.runtime"),
    # what every part moves and checks
    ("gridstream.model", "gridstream.paths"),
    ("gridstream.kinds",),
    ("gridstream.operations", "gridstream._config", "gridstream._optional",
     "gridstream._stopping", "gridstream.allowlist", "gridstream._lazy"),
    ("gridstream.errors",),
)
"""Top to bottom; a module may import its own layer and those below it."""

FLOWS = ("gridstream.feeds", "gridstream.connect", "gridstream.pipeline")
"""A flow uses another only through its package's own names (``from gridstream.connect
import change_stream``), never its modules: the pipeline API's grid source reads the
source connector's change stream so."""


def _module(path: Path) -> str:
    parts = ("gridstream", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _home(module: str, prefixes: tuple[str, ...]) -> str | None:
    """The longest of ``prefixes`` that is ``module`` or a package above it."""
    found = [p for p in prefixes if module == p or module.startswith(p + ".")]
    return max(found, key=len) if found else None


_PLACES = {prefix: i for i, layer in enumerate(LAYERS) for prefix in layer}


def layer(module: str) -> int:
    home = _home(module, tuple(_PLACES))
    assert home is not None, f"{module} is in no layer: add it to LAYERS"
    return _PLACES[home]


def _is_module(name: str) -> bool:
    place = PACKAGE.parent.joinpath(*name.split("."))
    return place.with_suffix(".py").exists() or (place / "__init__.py").exists()


def imports(path: Path) -> set[str]:
    """Every ``gridstream`` module ``path`` imports, anywhere in it (``from package
    import module`` counts as the module, and so does each module a package's ``_LAZY``
    table names: ``gridstream._lazy`` imports them on first use)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign | ast.AnnAssign) and "_LAZY" in {
                t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(t, ast.Name)} and node.value is not None:
            found.update(c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)
                         and isinstance(c.value, str) and c.value.startswith("gridstream.")
                         and _is_module(c.value))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and (
                node.module == "gridstream" or node.module.startswith("gridstream.")):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names
                         if _is_module(f"{node.module}.{a.name}"))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("gridstream"))
    return found


def _graph() -> dict[str, set[str]]:
    return {_module(p): imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def violations(graph: dict[str, set[str]]) -> tuple[list[str], list[str]]:
    upward, sideways = [], []
    for module, imported in sorted(graph.items()):
        for other in sorted(imported):
            if layer(other) < layer(module):
                upward.append(f"{module} imports {other}, a layer above it")
            mine, theirs = _home(module, FLOWS), _home(other, FLOWS)
            if mine and theirs and mine != theirs and other != theirs:
                sideways.append(f"{module} (a flow) imports {other}, another flow's internals")
    return upward, sideways


def test_every_module_is_in_a_layer() -> None:
    for module in _graph():
        layer(module)


def test_nothing_imports_upward_and_no_flow_into_another() -> None:
    upward, sideways = violations(_graph())
    assert upward == []
    assert sideways == []


@pytest.mark.parametrize(("module", "imported", "kind"), [
    ("gridstream.space._log", "gridstream.mirror", "upward"),       # the log under the mirror
    ("gridstream.spark.session", "gridstream.run.config", "upward"),
    ("gridstream.feeds.feed", "gridstream.connect.config", "sideways"),
    ("gridstream.pipeline.grid_changes", "gridstream.connect.source.datasource", "sideways"),
])
def test_an_upward_or_sideways_import_is_found(module: str, imported: str, kind: str) -> None:
    graph = _graph()
    graph[module] = {*graph.get(module, set()), imported}
    upward, sideways = violations(graph)
    found = upward if kind == "upward" else sideways
    assert any(f"{module} " in line and imported in line for line in found)


def test_a_flow_may_use_another_flows_package_names() -> None:
    graph = {"gridstream.pipeline.grid_changes": {"gridstream.connect"}}
    assert violations(graph) == ([], [])


def test_a_module_imported_from_its_package_counts_as_the_module(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from gridstream.connect import config, build_connector\n")
    assert imports(source) == {"gridstream.connect", "gridstream.connect.config"}


def test_the_modules_a_lazy_table_names_count_as_imports(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text('_LAZY: dict[str, str] = {"Pipeline": "gridstream.pipeline",\n'
                      '    **dict.fromkeys(["a"], "gridstream.run.config"), "x": "notamodule"}\n'
                      'OTHER = {"y": "gridstream.feeds"}\n')
    assert imports(source) == {"gridstream.pipeline", "gridstream.run.config"}
