"""The Spark driver's class-data archive: the classes a driver JVM loads to start a session
and run its first queries, parsed and verified once and mapped from a file at every
later start (Java's application class-data sharing, a dynamic archive).

A driver started with it is ready sooner (its session in 0.64× the time, a short
process in 0.72×: ``docs/benchmarks.md``, "Spark's start-up"). ``gridstream stack
fetch`` (which both README commands run) builds it once, in ``$GRIDSTREAM_HOME/jvm/``:
a driver JVM runs a small warm-up (a batch job, a Python pass, a streaming query, the
Kafka, Avro and Delta plans) and writes the archive as it exits. The file's name holds
a digest of what it was made from (the Java runtime, PySpark's jars and the pinned
ones, the warm-up): after a change of any of them a driver starts without it until
``gridstream stack fetch`` builds a new one, and a driver never starts with an archive
of other jars (Java checks the class path again and starts without it on any mismatch,
silently). Nothing else changes: the classes are the same and so is everything the
driver does after its start.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from gridstream._optional import require
from gridstream.errors import SparkError
from gridstream.runtime.home import gridstream_home
from gridstream.runtime.java import find_java

__all__ = ["archive", "build", "driver_jars", "java_options"]

_PREFIX = "spark-driver-classes-"
WARM_UP = Path(__file__).with_name("_class_data_warmup.py")
"""What the build's driver runs (``python -m gridstream.spark._class_data_warmup``)."""
_QUIET = "-Xlog:cds*=off"
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


def _runtime_files() -> list[Path]:
    """The Java runtime's files an archive depends on: the launcher, the JVM library and
    the runtime's release note (a new JVM under the same launcher is another runtime)."""
    java = find_java().resolve()
    home = java.parents[1]
    return [java, *(p for p in (home / "lib" / "server" / "libjvm.so", home / "release")
                    if p.is_file())]


def archive(jars: Sequence[Path]) -> Path:
    """Where the archive for this Java runtime, PySpark and ``jars`` (the pinned jars,
    which the driver's class path has before PySpark's own), made by this warm-up, is,
    or would be."""
    digest = hashlib.sha256(WARM_UP.read_bytes())
    for path in (*_runtime_files(), *sorted(_pyspark_jars().glob("*.jar")), *jars):
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return gridstream_home() / "jvm" / f"{_PREFIX}{digest.hexdigest()[:16]}.jsa"


def java_options(jars: Sequence[Path], *, dump_to: Path | None = None) -> str:
    """The driver's JVM options for the archive: use it if it is there, or (``dump_to``)
    write one there as the JVM exits (Java's notes on that go to ``<dump_to>.log``)."""
    if dump_to is not None:
        return (f'"-XX:ArchiveClassesAtExit={dump_to}" '
                f'"-Xlog:cds*=warning:file={dump_to}.log"')
    found = archive(jars)
    return f'"-XX:SharedArchiveFile={found}" -Xshare:auto {_QUIET}' if found.is_file() else ""


def build() -> Path:
    """Build the archive (in a process of its own: the JVM writes it as it exits) unless
    the one for this runtime and these jars is there; one build at a time. Each archive
    notes the PySpark it was made for (another virtualenv has its own); the others of
    this PySpark, and those of a PySpark that is gone, are removed. Any failure is a
    ``SparkError``."""
    try:
        target = archive(driver_jars())
        if target.is_file():
            _note(target)
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        with _lock(target.parent / ".class-data.lock"):
            if not target.is_file():  # else built by another process meanwhile
                _build(target)
            _note(target)
            _remove_stale(target)
    except OSError as exc:
        raise SparkError(f"building the Spark driver's class-data archive failed: "
                         f"{exc}") from exc
    return target


def _note(target: Path) -> None:
    """The note of the PySpark an archive was made for (which ``_remove_stale`` reads)."""
    note = target.with_suffix(".source")
    if not note.is_file():
        note.write_text(f"{_pyspark_jars()}\n")


def _build(target: Path) -> None:
    fd, name = tempfile.mkstemp(prefix=f".{_PREFIX}", suffix=".partial", dir=target.parent)
    os.close(fd)
    partial = Path(name)
    partial.unlink()  # the JVM creates it; an empty file would not be an archive
    try:
        _dump(partial)
        _note(target)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
        Path(f"{partial}.log").unlink(missing_ok=True)


class _Stopped(Exception):
    """SIGTERM or SIGHUP while the warm-up runs: its process group is killed first."""


def _stop(signum: int, _frame: object) -> None:
    raise _Stopped(signal.Signals(signum).name)


def _dump(partial: Path) -> None:
    """The warm-up driver writes ``partial``; it and its JVM (their process group) are
    killed if it takes too long or this process is interrupted or told to stop
    (SIGTERM, SIGHUP: handled while it runs, when this is the main thread), so no JVM
    writes a file after it is gone."""
    main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGHUP)
                } if main else {}
    try:
        with subprocess.Popen(  # noqa: S603 - this interpreter, this module
                [sys.executable, "-m", "gridstream.spark._class_data_warmup", str(partial)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                start_new_session=True) as child:
            try:
                output, _ = child.communicate(timeout=BUILD_TIMEOUT_S)
            except BaseException as exc:
                _kill_group(child)
                if isinstance(exc, subprocess.TimeoutExpired):
                    raise SparkError(f"building the Spark driver's class-data archive took "
                                     f"over {BUILD_TIMEOUT_S:.0f} s") from exc
                if isinstance(exc, _Stopped):
                    raise SparkError(f"building the Spark driver's class-data archive was "
                                     f"stopped ({exc})") from None
                raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if child.returncode != 0 or not partial.is_file():
        notes = Path(f"{partial}.log")
        java = notes.read_text(errors="replace") if notes.is_file() else ""
        tail = "\n".join((output + java).splitlines()[-15:])
        raise SparkError(f"building the Spark driver's class-data archive failed "
                         f"(exit {child.returncode}):\n{tail}")


def _kill_group(child: subprocess.Popen[str]) -> None:
    """SIGKILL the child's process group (the warm-up and its JVM), then wait until none
    of it is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    for _ in range(500):
        try:
            os.killpg(child.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_stale(kept: Path) -> None:
    ours = str(_pyspark_jars())
    for partial in kept.parent.glob(f".{_PREFIX}*.partial*"):
        partial.unlink(missing_ok=True)  # of a build killed before its clean-up
    for old in kept.parent.glob(f"{_PREFIX}*.jsa"):
        note = old.with_suffix(".source")
        source = note.read_text().strip() if note.is_file() else ""
        if old != kept and (source in ("", ours) or not Path(source).is_dir()):
            old.unlink(missing_ok=True)
            note.unlink(missing_ok=True)
