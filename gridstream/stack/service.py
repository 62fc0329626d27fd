"""A local JVM service on loopback: the shared up / down / status life cycle."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from gridstream.errors import StackError
from gridstream.stack import _process
from gridstream.stack.artifacts import classpath

__all__ = ["LocalService", "ServiceStatus"]

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class ServiceStatus:
    name: str
    state: str  # "up", "down" or "unhealthy"
    address: str
    pid: int | None = None

    def line(self) -> str:
        pid = f"  pid {self.pid}" if self.pid else ""
        return f"{self.name:<10}{self.state:<10}{self.address}{pid}"


class LocalService(ABC):
    """One service: its config and data under ``$GRIDSTREAM_HOME/services/<name>``."""

    name: str = ""
    artifact_set: str = ""
    start_timeout_s: float = 120.0

    def __init__(self, home: Path) -> None:
        self.dir = home / "services" / self.name
        self.pid_file = self.dir / f"{self.name}.pid"
        self.log_file = self.dir / "logs" / f"{self.name}.out"

    @property
    @abstractmethod
    def address(self) -> str:
        """host:port clients connect to."""

    @abstractmethod
    def ports(self) -> list[int]:
        """Every loopback port the service binds."""

    @abstractmethod
    def prepare(self) -> None:
        """Write configuration and initialise storage (idempotent)."""

    @abstractmethod
    def command(self, java: Path, jars: list[Path]) -> list[str]:
        """The JVM command line; must carry ``-Dgridstream.service=<name>``."""

    @abstractmethod
    def healthy(self) -> bool:
        """True when clients can use the service."""

    def _pid(self) -> int | None:
        pid = _process.read_pid(self.pid_file)
        if pid is not None and _process.is_ours(pid, self.name):
            return pid
        return None

    def status(self) -> ServiceStatus:
        pid = self._pid()
        if pid is None:
            return ServiceStatus(self.name, "down", self.address)
        state = "up" if self.healthy() else "unhealthy"
        return ServiceStatus(self.name, state, self.address, pid)

    def up(self) -> ServiceStatus:
        """Start the service unless it already runs; wait until healthy."""
        java = _process.find_java()
        pid = self._pid()
        if pid is None:
            for port in self.ports():
                _process.require_free_port(self.name, LOOPBACK, port)
            jars = classpath(self.artifact_set)
            self.prepare()
            env = dict(os.environ)
            pid = _process.spawn(
                self.command(java, jars), log_file=self.log_file, pid_file=self.pid_file, env=env
            )
        started_pid = pid
        try:
            _process.wait_until(
                self.healthy,
                timeout_s=self.start_timeout_s,
                alive=lambda: _process.alive(started_pid),
                what=self.name,
            )
        except StackError as exc:
            tail = _process.log_tail(self.log_file)
            self.down()
            raise StackError(f"{exc}; last lines of {self.log_file}:\n{tail}") from exc
        return self.status()

    def down(self) -> ServiceStatus:
        """Stop the service if it is ours and running; leave data in place."""
        pid = _process.read_pid(self.pid_file)
        if pid is not None:
            _process.stop_pid(pid, self.name)
        self.pid_file.unlink(missing_ok=True)
        return ServiceStatus(self.name, "down", self.address)
