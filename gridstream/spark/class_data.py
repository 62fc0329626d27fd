"""The Spark driver's class-data archive: the classes a driver JVM loads to start a session
and run its first queries, parsed and verified once and mapped from a file at every
later start (Java's application class-data sharing, a dynamic archive).

A driver started with it is ready in about half the time (``docs/benchmarks.md``,
"Spark's start-up"). ``gridstream stack fetch`` (which both README commands run) builds
it once, in ``$GRIDSTREAM_HOME/jvm/``: a driver JVM runs a small warm-up (a batch job,
a Python pass, a streaming query, the Kafka, Avro and Delta plans) and writes the
archive as it exits. The file's name holds a digest of what it was made from (the
``java`` executable, PySpark's jars and the pinned ones): after an upgrade of any of
them a driver starts without it until ``gridstream stack fetch`` builds a new one, and
a driver never starts with an archive of other jars (Java checks them again and starts
without it on any mismatch, silently). Nothing else changes: the classes are the same
and so is everything the driver does after its start.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from gridstream._optional import require
from gridstream.errors import SparkError
from gridstream.runtime.home import gridstream_home
from gridstream.runtime.java import find_java

__all__ = ["archive", "build", "driver_jars", "java_options"]

_PREFIX = "spark-driver-classes-"
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
"""Java's notes on the archive (classes it leaves out, an archive it cannot use) are not
the user's concern: the driver starts either way."""
BUILD_TIMEOUT_S = 600.0


def driver_jars(extra_sets: Sequence[str] = ()) -> list[Path]:
    """The pinned jars of a driver (the ``spark`` artifact set, then ``extra_sets``)."""
    from gridstream.runtime.artifacts import classpath

    return [jar for name in ("spark", *extra_sets) for jar in classpath(name)]


def _pyspark_jars() -> Path:
    pyspark = require("pyspark", "the Spark driver's class-data archive")
    return Path(str(pyspark.__file__)).resolve().parent / "jars"


def archive(jars: Sequence[Path]) -> Path:
    """Where the archive for this ``java``, PySpark and ``jars`` (the driver's class path
    after PySpark's own jars) is, or would be."""
    digest = hashlib.sha256()
    java = find_java().resolve()
    for path in (java, *sorted(_pyspark_jars().glob("*.jar")), *jars):
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return gridstream_home() / "jvm" / f"{_PREFIX}{digest.hexdigest()[:16]}.jsa"


def java_options(jars: Sequence[Path], *, dump_to: Path | None = None) -> str:
    """The driver's JVM options for the archive: use it if it is there, or (``dump_to``)
    write one there as the JVM exits."""
    if dump_to is not None:
        return f"-XX:ArchiveClassesAtExit={dump_to} {_QUIET}"
    found = archive(jars)
    return f"-XX:SharedArchiveFile={found} -Xshare:auto {_QUIET}" if found.is_file() else ""


def build() -> Path:
    """Build the archive (in a process of its own: the JVM writes it as it exits) unless
    the one for this ``java`` and these jars is there. Each archive notes the PySpark it
    was made for (another virtualenv has its own); the others of this PySpark, and those
    of a PySpark that is gone, are removed."""
    target = archive(driver_jars())
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.stem}.", suffix=".partial",
                                dir=target.parent)
    os.close(fd)
    partial = Path(name)
    partial.unlink()  # the JVM creates it; an empty file would not be an archive
    try:
        done = subprocess.run(  # noqa: S603 - this interpreter, this module
            [sys.executable, "-m", "gridstream.spark._class_data_warmup", str(partial)],
            capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
        if done.returncode != 0 or not partial.is_file():
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
            raise SparkError(f"building the Spark driver's class-data archive failed "
                             f"(exit {done.returncode}):\n{tail}")
        target.with_suffix(".source").write_text(f"{_pyspark_jars()}\n")
        os.replace(partial, target)
    except subprocess.TimeoutExpired as exc:
        raise SparkError(f"building the Spark driver's class-data archive took over "
                         f"{BUILD_TIMEOUT_S:.0f} s") from exc
    finally:
        partial.unlink(missing_ok=True)
    _remove_stale(target)
    return target


def _remove_stale(kept: Path) -> None:
    ours = str(_pyspark_jars())
    for old in kept.parent.glob(f"{_PREFIX}*.jsa"):
        note = old.with_suffix(".source")
        source = note.read_text().strip() if note.is_file() else ""
        if old != kept and (source in ("", ours) or not Path(source).is_dir()):
            old.unlink(missing_ok=True)
            note.unlink(missing_ok=True)
