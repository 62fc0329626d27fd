"""The Spark driver's class-data archive: named by what it was made from, used only when
it is there, built in a process of its own, and a failed build is an error that says
what the process said."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gridstream.errors import SparkError
from gridstream.spark import class_data


@pytest.fixture()
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.chdir(tmp_path)  # nothing a fake writes lands in the working tree
    monkeypatch.setenv("GRIDSTREAM_HOME", str(tmp_path / "home"))
    jar = tmp_path / "pinned.jar"
    jar.write_bytes(b"one")
    monkeypatch.setattr(class_data, "driver_jars", lambda extra=(): [jar])
    return tmp_path


def test_the_archive_is_named_by_its_java_jars_and_warm_up(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = home / "pinned.jar"
    first = class_data.archive([jar])
    assert first.parent == home / "home" / "jvm"
    assert class_data.archive([jar]) == first
    jar.write_bytes(b"a jar of another size")
    assert class_data.archive([jar]) != first
    assert class_data.archive([jar, home / "pinned.jar"]) != class_data.archive([jar])
    warm_up = home / "warm_up.py"
    warm_up.write_text(class_data.WARM_UP.read_text())
    monkeypatch.setattr(class_data, "WARM_UP", warm_up)
    same = class_data.archive([jar])
    warm_up.write_text(warm_up.read_text() + "# one more query\n")
    assert class_data.archive([jar]) != same


def test_a_driver_uses_the_archive_only_when_it_is_there(home: Path) -> None:
    jars = class_data.driver_jars()
    assert class_data.java_options(jars) == ""
    found = class_data.archive(jars)
    found.parent.mkdir(parents=True)
    found.write_bytes(b"archive")
    options = class_data.java_options(jars)
    assert f'"-XX:SharedArchiveFile={found}"' in options  # quoted: a path may hold a space
    assert "-Xshare:auto" in options  # never -Xshare:on: a mismatch starts without it
    dump = class_data.java_options(jars, dump_to=home / "new.jsa")
    assert dump.startswith(f'"-XX:ArchiveClassesAtExit={home / "new.jsa"}"')
    assert "SharedArchiveFile" not in dump


def test_build_keeps_an_archive_that_is_there_and_removes_the_stale_ones(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = class_data.archive(class_data.driver_jars())
    target.parent.mkdir(parents=True)
    ours = str(class_data._pyspark_jars())
    another_venv = home / "other-venv-jars"
    another_venv.mkdir()
    kinds = {"older": ours, "gone": str(home / "removed-venv-jars"),
             "other": str(another_venv)}
    archives = {}
    for n, (kind, source) in enumerate(kinds.items()):
        archives[kind] = target.with_name(f"spark-driver-classes-{n:016d}.jsa")
        archives[kind].write_bytes(b"old")
        archives[kind].with_suffix(".source").write_text(f"{source}\n")

    def dump(partial: Path) -> None:
        partial.write_bytes(b"new archive")
        (target.parent / ".spark-driver-classes-killed.partial").write_bytes(b"half")

    monkeypatch.setattr(class_data, "_dump", dump)
    assert class_data.build() == target
    assert target.read_bytes() == b"new archive"
    assert target.with_suffix(".source").read_text() == f"{ours}\n"
    # this PySpark's older one and a removed virtualenv's go; another virtualenv's stays
    left = {archives["other"], archives["other"].with_suffix(".source"), target,
            target.with_suffix(".source"), target.parent / ".class-data.lock"}
    assert set(target.parent.iterdir()) == left  # no partial left either

    def never(partial: Path) -> None:
        raise AssertionError("an archive that is there is not built again")

    monkeypatch.setattr(class_data, "_dump", never)
    assert class_data.build() == target


def _fake_python(tmp: Path, body: str) -> Path:
    """An executable standing in for this interpreter: ``$3`` is the archive's path."""
    script = tmp / "python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


def _running(pid_file: Path) -> bool:
    """Whether the process whose pid the fake wrote still runs: gone, or a zombie that
    nothing reaped yet (state Z), is not running either way."""
    stat = Path(f"/proc/{int(pid_file.read_text())}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_failed_build_says_what_its_process_and_java_said_and_leaves_nothing(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_python(home, 'echo "the warm-up failed"; echo "java: no base archive" '
                              '> "${3:?}.log"; echo half > "$3"; exit 1')
    monkeypatch.setattr(sys, "executable", str(fake))
    with pytest.raises(SparkError, match=r"(?s)exit 1.*the warm-up failed.*no base archive"):
        class_data.build()
    assert [p.name for p in (home / "home" / "jvm").iterdir()] == [".class-data.lock"]


def test_a_build_that_takes_too_long_is_killed_with_its_jvm(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up's JVM is a grandchild: killed too (their process group), it writes no
    archive after the build has given up and cleaned up."""
    pid_file = home / "jvm.pid"
    fake = _fake_python(home, f'sleep 60 & echo $! > "{pid_file}"; wait')
    monkeypatch.setattr(sys, "executable", str(fake))
    monkeypatch.setattr(class_data, "BUILD_TIMEOUT_S", 1.0)
    with pytest.raises(SparkError, match="took over 1 s"):
        class_data.build()
    assert not _running(pid_file)


def test_a_build_told_to_stop_kills_its_warm_up_and_jvm_first(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM while the warm-up runs (a CI cancel, ``timeout``): the warm-up's process
    group is killed before this process goes on to stop, and the handler is restored."""
    import signal
    import threading

    pid_file = home / "jvm.pid"
    fake = _fake_python(home, f'sleep 60 & echo $! > "{pid_file}"; wait')
    monkeypatch.setattr(sys, "executable", str(fake))
    before = signal.getsignal(signal.SIGTERM)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        with pytest.raises(SparkError, match=r"was stopped \(SIGTERM\)"):
            class_data.build()
    finally:
        timer.cancel()
    assert signal.getsignal(signal.SIGTERM) == before
    assert not _running(pid_file)
    assert [p.name for p in (home / "home" / "jvm").iterdir()] == [".class-data.lock"]


def test_fetch_warns_and_goes_on_when_the_build_fails(
        home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gridstream import cli

    def fail() -> Path:
        raise SparkError("building the archive failed (exit 1):\nthe JVM said why")

    monkeypatch.setattr(class_data, "build", fail)
    cli._spark_class_data()
    err = capsys.readouterr().err
    assert "warning: building the archive failed (exit 1); Spark drivers start without it" \
        in err
    assert "  the JVM said why" in err
