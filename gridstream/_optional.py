"""Optional dependencies: which ``pip install`` extra brings each, and importing one.

Every import of a package that is not a core dependency goes through ``require`` (or
sits under ``TYPE_CHECKING``, or inside a function of a module that ``require``\\ s it
on import): a missing package is then a ``NotInstalledError`` that names its extra,
never a bare ``ModuleNotFoundError``. ``EXTRAS`` is the one table; the extras
themselves are declared in ``pyproject.toml`` (a unit test keeps the two equal).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from gridstream.errors import NotInstalledError

__all__ = ["EXTRAS", "require"]

EXTRAS: dict[str, tuple[str, str]] = {
    # import name: (what it is, the extra that installs it)
    "pyspark": ("pyspark", "spark"),
    "pyarrow": ("pyarrow", "spark"),
    "delta": ("delta-spark", "spark"),
    "cassandra": ("cassandra-driver", "cassandra"),
    "fastavro": ("fastavro", "avro"),
    "msgpack": ("msgpack", "msgpack"),
    "psycopg": ("psycopg", "postgres"),
    "hazelcast": ("hazelcast-python-client", "hazelcast"),
    "confluent_kafka.schema_registry": ("confluent-kafka's schema registry client "
                                        "(httpx, authlib, attrs, cachetools)", "registry"),
}


def require(module: str, needed_by: str) -> ModuleType:
    """Import ``module`` (``EXTRAS``' name or a module under it) or raise
    ``NotInstalledError`` saying that ``needed_by`` needs it and which extra to
    install; an import failing for another reason propagates as it is."""
    home = _home(module)
    if home is None:
        raise ValueError(f"{module!r} is not an optional dependency (gridstream._optional)")
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        distribution, extra = EXTRAS[home]
        raise NotInstalledError(
            f"{needed_by} needs {distribution}, which is not installed: "
            f"pip install 'gridstream[{extra}]'") from exc


def _home(module: str) -> str | None:
    """The longest name of ``EXTRAS`` that is ``module`` or a package above it."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in EXTRAS:
            return name
    return None
