"""Pure logic of the stack: PID files, ports, CQL readiness probe, service names."""

from __future__ import annotations

import socket
import struct
import threading
from pathlib import Path

import pytest

from gridstream import stack
from gridstream.errors import StackError
from gridstream.stack import _process
from gridstream.stack.cassandra import cql_ready


def test_read_pid_absent_valid_and_garbled(tmp_path: Path) -> None:
    pid_file = tmp_path / "x.pid"
    assert _process.read_pid(pid_file) is None
    pid_file.write_text("1234\n")
    assert _process.read_pid(pid_file) == 1234
    pid_file.write_text("12ab")
    with pytest.raises(StackError, match="corrupted state"):
        _process.read_pid(pid_file)


def test_is_ours_rejects_foreign_process() -> None:
    import os

    assert not _process.is_ours(os.getpid(), _process.jvm_marker("kafka"))
    assert not _process.is_ours(2**22 + 12345, _process.jvm_marker("kafka"))


def test_is_ours_wants_the_marker_as_one_argument(tmp_path: Path) -> None:
    import subprocess
    import sys

    marker = f"--gridstream-test-marker={tmp_path.name}"
    code = "import time; print('ready', flush=True); time.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", code, marker], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"  # exec done
        assert _process.is_ours(proc.pid, marker)
        assert not _process.is_ours(proc.pid, marker[:-1])
    finally:
        proc.kill()
        proc.wait()


def test_require_free_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(StackError, match=f"port 127.0.0.1:{port} is already in use"):
            _process.require_free_port("kafka", "127.0.0.1", port)


def test_unknown_service_names() -> None:
    known = "kafka, cassandra, postgres, hazelcast, registry"
    with pytest.raises(StackError, match=f"unknown service 'zk'; known: {known}$"):
        stack.services(["kafka", "zk"])


def _serve_once(reply: bytes) -> int:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(9)
            conn.sendall(reply)
        server.close()

    threading.Thread(target=answer, daemon=True).start()
    return int(server.getsockname()[1])


def test_cql_probe_wants_supported() -> None:
    supported = struct.pack(">BBhBi", 0x84, 0, 0, 0x06, 0)
    assert cql_ready("127.0.0.1", _serve_once(supported))
    error = struct.pack(">BBhBi", 0x84, 0, 0, 0x00, 0)
    assert not cql_ready("127.0.0.1", _serve_once(error))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    assert not cql_ready("127.0.0.1", closed, timeout=0.5)


def test_kafka_jvm_options_from_the_environment(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from gridstream.stack.kafka import KafkaService

    java, jars = Path("/usr/bin/java"), [tmp_path / "a.jar"]
    monkeypatch.delenv("GRIDSTREAM_KAFKA_JVM_OPTS", raising=False)
    default = KafkaService(tmp_path).command(java, jars)
    assert "-XX:+UseG1GC" in default and "-XX:MaxGCPauseMillis=20" in default

    monkeypatch.setenv("GRIDSTREAM_KAFKA_JVM_OPTS", "-Xlog:gc:file='/tmp/a b.log' -Xmn64m")
    logged = KafkaService(tmp_path).command(java, jars)
    assert "-XX:+UseG1GC" in logged and "-Xlog:gc:file=/tmp/a b.log" in logged
    assert logged.index("-Xmn64m") < logged.index("kafka.Kafka")

    monkeypatch.setenv("GRIDSTREAM_KAFKA_JVM_OPTS", "-XX:+UseParallelGC")
    parallel = KafkaService(tmp_path).command(java, jars)
    assert "-XX:+UseParallelGC" in parallel
    assert not any(o.startswith(("-XX:+UseG1GC", "-XX:MaxGCPauseMillis")) for o in parallel)


def test_a_cluster_id_starting_with_a_dash_still_formats(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """One random cluster id in 64 starts with "-": given as "-t ID", Kafka's storage tool
    read it as an option and failed ("argument --cluster-id/-t: expected one argument"),
    failing `gridstream stack up` on a fresh machine now and then."""
    import subprocess
    import uuid

    from gridstream.runtime import artifacts
    from gridstream.stack import _process
    from gridstream.stack.kafka import KafkaService

    seen: list[list[str]] = []
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(bytes=b"\xf8" + b"\x00" * 15))
    monkeypatch.setattr(_process, "find_java", lambda: Path("/usr/bin/java"))
    monkeypatch.setattr(artifacts, "classpath", lambda name: [tmp_path / "a.jar"])
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: seen.append(cmd) or
                        subprocess.CompletedProcess(cmd, 0, "", ""))
    KafkaService(tmp_path)._format()
    (cmd,) = seen
    ids = [a for a in cmd if a.startswith("--cluster-id=")]
    assert ids == ["--cluster-id=-AAAAAAAAAAAAAAAAAAAAA"]
    assert "-t" not in cmd
