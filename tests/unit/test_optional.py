"""Optional dependencies: one table, one ``NotInstalledError`` naming the extra, and no
module of the package that ends in a bare ``ModuleNotFoundError`` when an extra is
missing (each extra is hidden in a child interpreter, and every module imported)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from gridstream._optional import EXTRAS, require
from gridstream.errors import ConfigError, NotInstalledError

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DECLARED = PYPROJECT["project"]["optional-dependencies"]

HIDDEN = {
    "spark": ["pyspark", "pyarrow", "delta", "pandas"],
    "cassandra": ["cassandra"],
    "avro": ["fastavro"],
    "msgpack": ["msgpack"],
    "postgres": ["psycopg"],
    "hazelcast": ["hazelcast"],
    "registry": ["httpx", "authlib", "cachetools"],
}
"""What each extra brings, as the top-level names a child cannot import."""

CHILD = """
import importlib, json, pkgutil, sys
hidden = set(sys.argv[1].split(","))

class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Hide())
import gridstream
seen = {}
for info in pkgutil.walk_packages(gridstream.__path__, "gridstream."):
    if info.name.endswith("__main__"):
        continue
    try:
        importlib.import_module(info.name)
    except gridstream.errors.NotInstalledError as exc:
        seen[info.name] = "NotInstalledError: " + str(exc)
    except ModuleNotFoundError as exc:
        seen[info.name] = "ModuleNotFoundError: " + str(exc)
print(json.dumps(seen))
"""


def test_the_table_names_only_declared_extras_and_their_packages() -> None:
    assert set(HIDDEN) == set(DECLARED) - {"all", "dev"}
    for module, (distribution, extra) in EXTRAS.items():
        assert extra in DECLARED, module
        if "." not in module:  # a package: its distribution is a requirement of the extra
            assert any(r.startswith(distribution) for r in DECLARED[extra]), module


def test_require_names_the_extra_and_is_a_config_and_an_import_error() -> None:
    assert require("msgpack", "x").packb({}) == b"\x80"
    with pytest.raises(ValueError, match="not an optional dependency"):
        require("orjson", "x")
    with pytest.raises(NotInstalledError) as caught:
        require("pyspark.no_such_module", "the test")
    assert str(caught.value) == ("the test needs pyspark, which is not installed: "
                                 "pip install 'gridstream[spark]'")
    assert isinstance(caught.value, ConfigError) and isinstance(caught.value, ImportError)


@pytest.mark.parametrize("extra", sorted(HIDDEN))
def test_no_module_ends_in_a_bare_module_not_found_error(extra: str) -> None:
    out = subprocess.run([sys.executable, "-c", CHILD, ",".join(HIDDEN[extra])], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    seen: dict[str, str] = json.loads(out.splitlines()[-1])
    bare = {m: e for m, e in seen.items() if e.startswith("ModuleNotFoundError")}
    assert bare == {}
    for module, error in seen.items():
        assert f"pip install 'gridstream[{extra}]'" in error, (module, error)


def test_every_front_door_name_imports_with_the_core_dependencies_alone() -> None:
    hidden = ",".join(name for names in HIDDEN.values() for name in names)
    code = CHILD.split("import gridstream\n")[0] + (
        "from gridstream import *\nimport gridstream\n"
        "print(json.dumps(sorted(n for n in gridstream.__all__ if n not in globals())))\n")
    out = subprocess.run([sys.executable, "-c", code, hidden], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.splitlines()[-1]) == []
