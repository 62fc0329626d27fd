"""The stack command as a user meets it: up/down in a private home, and bad input."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gridstream.stack._process import port_open

GRIDSTREAM = [sys.executable, "-m", "gridstream.cli"]


def _run(
    args: list[str], env: dict[str, str], timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GRIDSTREAM, *args], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=timeout, check=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _our_processes(home: Path) -> list[int]:
    """PIDs of gridstream services whose command line names ``home``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"-Dgridstream.service=" in cmdline and str(home).encode() in cmdline:
            found.append(int(proc.name))
    return found


@pytest.fixture()
def private_home(tmp_path: Path) -> dict[str, str]:
    return {"GRIDSTREAM_HOME": str(tmp_path / "home"),
            "GRIDSTREAM_KAFKA_PORT": str(_free_port()),
            "GRIDSTREAM_KAFKA_CONTROLLER_PORT": str(_free_port())}


def test_up_status_down_leaves_nothing_running(private_home: dict[str, str]) -> None:
    home = Path(private_home["GRIDSTREAM_HOME"])
    port = int(private_home["GRIDSTREAM_KAFKA_PORT"])
    up = _run(["stack", "up", "--services", "kafka"], private_home)
    assert up.returncode == 0, up.stderr
    assert f"kafka     up        127.0.0.1:{port}" in up.stdout
    again = _run(["stack", "up", "--services", "kafka"], private_home)  # idempotent
    assert again.returncode == 0, again.stderr
    status = _run(["stack", "status", "--services", "kafka"], private_home)
    assert status.returncode == 0 and "kafka     up" in status.stdout
    assert len(_our_processes(home)) == 1
    down = _run(["stack", "down", "--services", "kafka"], private_home)
    assert down.returncode == 0, down.stderr
    assert _our_processes(home) == []
    assert not port_open("127.0.0.1", port)
    status = _run(["stack", "status", "--services", "kafka"], private_home)
    assert status.returncode == 3 and "kafka     down" in status.stdout


def test_postgres_up_status_down(private_home: dict[str, str]) -> None:
    env = {**private_home, "GRIDSTREAM_POSTGRES_PORT": str(_free_port())}
    port = int(env["GRIDSTREAM_POSTGRES_PORT"])
    url = f"postgresql://gridstream@127.0.0.1:{port}/gridstream?passfile="
    up = _run(["stack", "up", "--services", "postgres"], env)
    assert up.returncode == 0, up.stderr
    assert f"postgres  up        127.0.0.1:{port}" in up.stdout and url in up.stdout
    again = _run(["stack", "up", "--services", "postgres"], env)  # idempotent
    assert again.returncode == 0 and url in again.stdout, again.stderr
    status = _run(["stack", "status"], env)  # a running extra service is listed
    assert "postgres  up" in status.stdout and url in status.stdout
    down = _run(["stack", "down", "--services", "postgres"], env)
    assert down.returncode == 0, down.stderr
    assert not port_open("127.0.0.1", port)
    status = _run(["stack", "status", "--services", "postgres"], env)
    assert status.returncode == 3 and "postgres  down" in status.stdout
    restarted = _run(["stack", "up", "--services", "postgres"], env)  # same data, same password
    assert restarted.returncode == 0 and url in restarted.stdout, restarted.stderr
    assert _run(["stack", "down"], env).returncode == 0  # down stops the running extra
    assert not port_open("127.0.0.1", port)
    server = Path(env["GRIDSTREAM_HOME"]) / "services" / "postgres" / "server"
    shutil.rmtree(server.resolve())  # relocated out of the private home when run as root


def test_unknown_service_is_one_clear_line(private_home: dict[str, str]) -> None:
    result = _run(["stack", "up", "--services", "kafka,zookeeper"], private_home)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "gridstream: error: unknown service 'zookeeper'; known: kafka, cassandra, postgres"
    ]


def test_occupied_port_is_refused(private_home: dict[str, str]) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        result = _run(["stack", "up", "--services", "kafka"],
                      {**private_home, "GRIDSTREAM_KAFKA_PORT": str(port)})
    assert result.returncode == 2
    assert f"kafka: port 127.0.0.1:{port} is already in use" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_missing_java_is_refused(private_home: dict[str, str], tmp_path: Path) -> None:
    result = _run(["stack", "up", "--services", "kafka"],
                  {**private_home, "JAVA_HOME": str(tmp_path / "no-jdk")})
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"gridstream: error: Java not found: JAVA_HOME={tmp_path / 'no-jdk'} "
        "has no executable bin/java"
    )


def test_corrupted_state_is_refused(private_home: dict[str, str]) -> None:
    pid_file = Path(private_home["GRIDSTREAM_HOME"]) / "services" / "kafka" / "kafka.pid"
    pid_file.parent.mkdir(parents=True)
    pid_file.write_text("not-a-pid\x00\x13")
    for action in ("status", "up", "down"):
        result = _run(["stack", action, "--services", "kafka"], private_home)
        assert result.returncode == 2, action
        assert "corrupted state" in result.stderr and str(pid_file) in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
