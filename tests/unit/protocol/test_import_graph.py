"""The protocol modules import each other one way only (no import cycle, lazy or not)."""

from __future__ import annotations

import ast
from pathlib import Path

import gridstream.protocol

PACKAGE = Path(gridstream.protocol.__file__).parent
PREFIX = "gridstream.protocol."


def _imports(path: Path) -> set[str]:
    """Every ``gridstream.protocol.X`` module ``path`` imports, at any place in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            found.add(node.module.removeprefix(PREFIX))
        elif isinstance(node, ast.Import):
            found.update(a.name.removeprefix(PREFIX) for a in node.names
                         if a.name.startswith(PREFIX))
    return found


def test_the_protocol_modules_have_no_import_cycle() -> None:
    graph = {p.stem: _imports(p) for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert graph["avro"] and "codecs" not in graph["avro"]
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join((*path, module))}"
        if module in done:
            return
        for imported in graph.get(module, ()):
            visit(imported, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())
