"""Start, watch and stop one local service process: PID files, ports, health, log tails.

A service process is recognised by a marker, one element of its command line
(``-Dgridstream.service=kafka`` for the JVM services), so a PID file left behind never
makes gridstream signal an unrelated process that reused the PID.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gridstream.errors import StackError
from gridstream.runtime.java import find_java

__all__ = [
    "alive",
    "find_java",
    "RunAs",
    "is_ours",
    "jvm_marker",
    "log_tail",
    "port_open",
    "read_pid",
    "require_free_port",
    "spawn",
    "stop_pid",
    "wait_until",
]

MARKER = "-Dgridstream.service="


@dataclass(frozen=True, slots=True)
class RunAs:
    """An unprivileged OS user a root caller runs a service process as."""

    name: str
    uid: int
    gid: int

    def popen_args(self) -> dict[str, Any]:
        """``subprocess`` arguments that switch to this user (and only its group)."""
        return {"user": self.uid, "group": self.gid, "extra_groups": []}




def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def require_free_port(service: str, host: str, port: int) -> None:
    """Fail with a clear message when a port we need is already taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise StackError(
                f"{service}: port {host}:{port} is already in use by another process"
            ) from exc


def read_pid(pid_file: Path) -> int | None:
    """The PID in ``pid_file``; None when absent. A garbled file is a corrupted state."""
    try:
        text = pid_file.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StackError(f"corrupted state: cannot read {pid_file}: {exc.strerror}") from exc
    if not text.isdigit():
        raise StackError(
            f"corrupted state: {pid_file} does not hold a process id; "
            "remove it (or the whole state directory) and retry"
        )
    return int(text)


def jvm_marker(service: str) -> str:
    """The command-line element that marks the JVM process of ``service``."""
    return f"{MARKER}{service}"


def is_ours(pid: int, marker: str) -> bool:
    """True when ``pid`` is alive and its command line holds the element ``marker``."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return marker.encode() in cmdline.split(b"\0")


def spawn(
    argv: Sequence[str],
    *,
    log_file: Path,
    pid_file: Path,
    env: dict[str, str],
    user: RunAs | None = None,
    cwd: Path | None = None,
) -> int:
    """Start a detached process (own session, survives the CLI), record its PID; as
    ``user`` when given (the caller is root)."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as out:
        proc = subprocess.Popen(  # noqa: S603 - argv is built by the project, no shell
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
            **(user.popen_args() if user is not None else {}),
        )
    tmp = pid_file.with_suffix(".tmp")
    tmp.write_text(str(proc.pid))
    tmp.replace(pid_file)
    return proc.pid


def wait_until(
    check: Callable[[], bool], *, timeout_s: float, alive: Callable[[], bool], what: str
) -> None:
    """Poll ``check`` until true; fail early when the process died, or at the timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        if not alive():
            raise StackError(f"{what} exited during start-up")
        time.sleep(0.5)
    raise StackError(f"{what} did not become healthy within {timeout_s:.0f}s")


def stop_pid(
    pid: int, marker: str, *, sig: signal.Signals = signal.SIGTERM, timeout_s: float = 30.0
) -> None:
    """Send ``sig`` to the service's process group, then SIGKILL after ``timeout_s``."""
    if not is_ours(pid, marker):
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not is_ours(pid, marker) or _is_zombie(pid):
            _reap(pid)
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    _reap(pid)


def alive(pid: int) -> bool:
    """True while ``pid`` exists and has not exited (a zombie counts as exited)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def log_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file, for error messages."""
    try:
        data = path.read_bytes()[-16384:]
    except OSError:
        return "(no log written)"
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])
