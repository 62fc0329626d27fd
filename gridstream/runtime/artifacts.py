"""Pinned JVM artifacts: resolved once from Maven Central with Maven, offline afterwards.

Each artifact set is a ``jvm/<name>/pom.xml`` in the repository; its runtime classpath is
copied into ``$GRIDSTREAM_HOME/jvm/<name>-<pom hash>/``. A changed pin resolves into a new
folder (a process still using the old classpath keeps it), and an unchanged one never
touches the network again. A set whose pom lists its files as ``artifactItems`` of the
dependency plugin (the schema registry's application archive) gets those files alone,
without their dependencies.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from gridstream.errors import StackError
from gridstream.runtime.home import gridstream_home

__all__ = ["ARTIFACT_SETS", "classpath", "ensure_artifacts", "jar_dir", "pom_dir"]

ARTIFACT_SETS = ("kafka", "cassandra", "spark", "hazelcast", "registry")
_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"
# Plugin 2.8's `copy` fetches an artifact without reading its descriptor: the registry's
# names a parent pom that Maven Central does not have.
_COPY_ITEMS = "org.apache.maven.plugins:maven-dependency-plugin:2.8:copy"
_ITEM_SETS = frozenset({"registry"})
_MARKER = ".resolved"


def pom_dir() -> Path:
    """The repository's ``jvm/`` folder (override with ``GRIDSTREAM_JVM_POMS``)."""
    override = os.environ.get("GRIDSTREAM_JVM_POMS")
    path = Path(override) if override else Path(__file__).resolve().parents[2] / "jvm"
    if not (path / "kafka" / "pom.xml").is_file():
        raise StackError(
            f"JVM artifact pins not found in {path}; run from a gridstream checkout "
            "(pip install -e .) or set GRIDSTREAM_JVM_POMS"
        )
    return path


def jar_dir(name: str) -> Path:
    """Where the artifact set ``name`` of the current pin lives (resolved or not)."""
    digest = _pom_hash(pom_dir() / name / "pom.xml")
    return gridstream_home() / "jvm" / f"{name}-{digest[:12]}"


def _pom_hash(pom: Path) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()


def ensure_artifacts(name: str, *, quiet: bool = False) -> Path:
    """Resolve artifact set ``name`` if it is missing or its pin changed; return its dir."""
    if name not in ARTIFACT_SETS:
        raise StackError(f"unknown artifact set {name!r}; known: {', '.join(ARTIFACT_SETS)}")
    pom = pom_dir() / name / "pom.xml"
    target = jar_dir(name)
    marker = target / _MARKER
    wanted = _pom_hash(pom)
    if marker.is_file() and marker.read_text().strip() == wanted:
        return target
    mvn = shutil.which("mvn")
    if not mvn:
        raise StackError("Maven (mvn) not found: it is needed once to fetch the JVM artifacts")
    if not quiet:
        print(f"fetching JVM artifacts for {name} (once) ...", flush=True)
    staging = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    if name in _ITEM_SETS:
        cmd = [mvn, "-B", "-q", "-f", str(pom), _COPY_ITEMS, f"-DoutputDirectory={staging}"]
    else:
        cmd = [mvn, "-B", "-q", "-f", str(pom), _PLUGIN, f"-DoutputDirectory={staging}",
               "-DincludeScope=runtime"]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)  # noqa: S603
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-15:])
        raise StackError(f"fetching JVM artifacts for {name} failed:\n{tail}")
    (staging / _MARKER).write_text(wanted + "\n")
    try:
        staging.rename(target)
    except OSError:  # another process resolved the same pin meanwhile
        shutil.rmtree(staging, ignore_errors=True)
        if not marker.is_file():
            raise
    return target


def classpath(name: str) -> list[Path]:
    """The jars of an artifact set, resolving it first if needed."""
    jars = sorted(ensure_artifacts(name).glob("*.jar"))
    if not jars:
        raise StackError(f"artifact set {name} resolved to no jars in {jar_dir(name)}")
    return jars
