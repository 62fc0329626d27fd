"""The PostgreSQL service's pure parts: binaries, command line, URL, reachability."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from gridstream import stack
from gridstream.errors import StackError
from gridstream.stack import _process
from gridstream.stack.postgres import PostgresService, _reachable, find_bin_dir


def _fake_version(root: Path, version: str, *, complete: bool = True) -> Path:
    bin_dir = root / version / "bin"
    bin_dir.mkdir(parents=True)
    for exe in ("initdb", "postgres") if complete else ("postgres",):
        (bin_dir / exe).write_text("#!/bin/sh\n")
        (bin_dir / exe).chmod(0o755)
    return bin_dir


def test_the_newest_complete_version_is_used(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRIDSTREAM_POSTGRES_BIN", raising=False)
    _fake_version(tmp_path, "9.6")
    fifteen = _fake_version(tmp_path, "15")
    _fake_version(tmp_path, "16", complete=False)
    assert find_bin_dir(tmp_path) == fifteen


def test_missing_postgresql_names_the_package(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRIDSTREAM_POSTGRES_BIN", raising=False)
    with pytest.raises(StackError, match="apt-get install postgresql"):
        find_bin_dir(tmp_path)


def test_the_bin_directory_can_be_configured(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = _fake_version(tmp_path / "elsewhere", "17")
    monkeypatch.setenv("GRIDSTREAM_POSTGRES_BIN", str(chosen))
    assert find_bin_dir(tmp_path / "none") == chosen


def test_command_line_listens_on_loopback_only(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRIDSTREAM_POSTGRES_BIN", str(_fake_version(tmp_path / "pg", "15")))
    monkeypatch.setenv("GRIDSTREAM_POSTGRES_PORT", "25432")
    service = PostgresService(tmp_path)
    argv = service.argv()
    assert service.marker in argv
    assert argv[argv.index("-p") + 1] == "25432"
    settings = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    assert "listen_addresses=127.0.0.1" in settings
    sockets = [s for s in settings if s.startswith("unix_socket_directories=")]
    run = tmp_path / "services" / "postgres" / "server" / "run"
    assert sockets == [f"unix_socket_directories={run}"]


def test_url_names_the_password_file_not_the_password(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRIDSTREAM_POSTGRES_PORT", "25432")
    service = PostgresService(tmp_path / "a home")
    password = service._password()
    assert service.url() == (
        "postgresql://gridstream@127.0.0.1:25432/gridstream"
        f"?passfile={tmp_path}/a%20home/services/postgres/pgpass"
    )
    assert password not in service.url() and password not in repr(service.status())
    assert (service.passfile.stat().st_mode & 0o777) == 0o600
    assert service._password() == password  # kept, not made again


def test_reachability_follows_the_mode_bits() -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as base:
        _check_reachability(Path(base))


def _check_reachability(base: Path) -> None:
    nobody = _process.RunAs("nobody", 65534, 65534)
    private = base / "private"
    (private / "inner").mkdir(parents=True)
    base.chmod(0o755)
    private.chmod(0o700)
    assert not _reachable(private / "inner" / "server", nobody)
    private.chmod(0o711)
    assert _reachable(private / "inner" / "server", nobody)
    owner = _process.RunAs("me", os.getuid(), os.getgid())
    private.chmod(0o700)
    assert _reachable(private / "inner" / "server", owner)


def test_default_services_are_kafka_and_cassandra(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRIDSTREAM_HOME", str(tmp_path))
    assert [s.name for s in stack.services()] == ["kafka", "cassandra"]
    assert [s.name for s in stack.services(["postgres"])] == ["postgres"]
