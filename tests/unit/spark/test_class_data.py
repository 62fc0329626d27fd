"""The Spark driver's class-data archive: named by what it was made from, used only when
it is there, built in a process of its own, and a failed build is an error that says
what the process said."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from gridstream.errors import SparkError
from gridstream.spark import class_data


@pytest.fixture()
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("GRIDSTREAM_HOME", str(tmp_path / "home"))
    jar = tmp_path / "pinned.jar"
    jar.write_bytes(b"one")
    monkeypatch.setattr(class_data, "driver_jars", lambda extra=(): [jar])
    return tmp_path


def test_the_archive_is_named_by_its_java_and_jars(home: Path) -> None:
    jar = home / "pinned.jar"
    first = class_data.archive([jar])
    assert first.parent == home / "home" / "jvm"
    assert class_data.archive([jar]) == first
    jar.write_bytes(b"a jar of another size")
    assert class_data.archive([jar]) != first
    assert class_data.archive([jar, home / "pinned.jar"]) != class_data.archive([jar])


def test_a_driver_uses_the_archive_only_when_it_is_there(home: Path) -> None:
    jars = class_data.driver_jars()
    assert class_data.java_options(jars) == ""
    found = class_data.archive(jars)
    found.parent.mkdir(parents=True)
    found.write_bytes(b"archive")
    options = class_data.java_options(jars)
    assert f"-XX:SharedArchiveFile={found}" in options
    assert "-Xshare:auto" in options  # never -Xshare:on: a mismatch starts without it
    dump = class_data.java_options(jars, dump_to=home / "new.jsa")
    assert dump.startswith(f"-XX:ArchiveClassesAtExit={home / 'new.jsa'}")
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

    def dump(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        Path(cmd[-1]).write_bytes(b"new archive")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(class_data.subprocess, "run", dump)
    assert class_data.build() == target
    assert target.read_bytes() == b"new archive"
    assert target.with_suffix(".source").read_text() == f"{ours}\n"
    # this PySpark's older one and a removed virtualenv's go; another virtualenv's stays
    left = {archives["other"], archives["other"].with_suffix(".source"), target,
            target.with_suffix(".source")}
    assert set(target.parent.iterdir()) == left  # no partial left either

    def never(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        raise AssertionError("an archive that is there is not built again")

    monkeypatch.setattr(class_data.subprocess, "run", never)
    assert class_data.build() == target


def test_a_failed_build_says_what_its_process_said_and_leaves_nothing(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        Path(cmd[-1]).write_bytes(b"half")
        return subprocess.CompletedProcess(cmd, 1, "", "the JVM could not start\n")

    monkeypatch.setattr(class_data.subprocess, "run", fail)
    with pytest.raises(SparkError, match=r"(?s)exit 1.*the JVM could not start"):
        class_data.build()
    assert list((home / "home" / "jvm").iterdir()) == []
