"""``gridstream``'s front door: the names a user types, each lazily from its one home."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import gridstream


@pytest.mark.parametrize("name", sorted(gridstream._LAZY))
def test_each_front_door_name_is_its_homes_object(name: str) -> None:
    home = importlib.import_module(gridstream._LAZY[name])
    assert getattr(gridstream, name) is getattr(home, name)
    assert name in home.__all__  # a public name of its home, not an internal one


def test_every_name_of_all_resolves_and_an_unknown_one_is_an_attribute_error() -> None:
    for name in gridstream.__all__:
        assert getattr(gridstream, name) is not None
    assert set(gridstream._LAZY) <= set(dir(gridstream))
    with pytest.raises(AttributeError, match="no attribute 'Spaec'"):
        gridstream.Spaec  # noqa: B018 - the look-up is the test


def test_importing_gridstream_imports_no_flow_and_no_optional_dependency() -> None:
    code = ("import sys, gridstream; print(sorted(m for m in sys.modules if m.split('.')[0] "
            "in ('pyspark', 'cassandra', 'hazelcast', 'sqlalchemy', 'confluent_kafka') "
            "or m.startswith(('gridstream.spark', 'gridstream.pipeline', 'gridstream.mirror'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def _public_modules() -> list[str]:
    return [m.name for m in pkgutil.walk_packages(gridstream.__path__, "gridstream.")
            if m.ispkg]


@pytest.mark.parametrize("package", _public_modules())
def test_no_test_helper_is_in_a_public_all(package: str) -> None:
    module = importlib.import_module(package)
    for name in getattr(module, "__all__", ()):
        origin = getattr(getattr(module, name, None), "__module__", "") or ""
        assert not origin.rsplit(".", 1)[-1].startswith(("testing", "fake")), (package, name)


def test_all_is_the_eager_names_and_the_lazy_table() -> None:
    eager = {"Bulk", "GridstreamError", "OpType", "Operation", "PropertySpec",
             "TypeDescriptor", "__version__"}
    assert set(gridstream.__all__) == eager | set(gridstream._LAZY)
    assert len(gridstream.__all__) == len(set(gridstream.__all__))
