"""A local service on loopback: the shared up / down / status life cycle.

``LocalService`` runs any process (``argv``); ``JvmService`` builds that command line
from Java and the service's resolved jars.
"""

from __future__ import annotations

import os
import signal
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from gridstream.errors import StackError
from gridstream.runtime.artifacts import classpath
from gridstream.stack import _process

__all__ = ["JvmService", "LocalService", "ServiceStatus"]

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class ServiceStatus:
    name: str
    state: str  # "up", "down" or "unhealthy"
    address: str
    pid: int | None = None
    url: str | None = None
    """Where clients connect, when more than ``address`` (no secret in it)."""

    def line(self) -> str:
        pid = f"  pid {self.pid}" if self.pid else ""
        url = f"  {self.url}" if self.url else ""
        return f"{self.name:<10}{self.state:<10}{self.address}{pid}{url}"


class LocalService(ABC):
    """One service: its config and data under ``$GRIDSTREAM_HOME/services/<name>``."""

    name: str = ""
    start_timeout_s: float = 120.0
    stop_signal: signal.Signals = signal.SIGTERM
    """Sent to the process group by ``down`` (SIGKILL follows after 30 s)."""

    def __init__(self, home: Path) -> None:
        self.dir = home / "services" / self.name
        self.pid_file = self.dir / f"{self.name}.pid"
        self.log_file = self.dir / "logs" / f"{self.name}.out"

    @classmethod
    def instances(cls, home: Path) -> list[LocalService]:
        """The processes the service's name stands for (one; a cluster may run more)."""
        return [cls(home)]

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

    @property
    def marker(self) -> str:
        """One element of ``argv`` that identifies this service's process."""
        return _process.jvm_marker(self.name)

    @abstractmethod
    def argv(self) -> list[str]:
        """The service's command line; must hold ``marker`` as one element."""

    @abstractmethod
    def healthy(self) -> bool:
        """True when clients can use the service."""

    def run_as(self) -> _process.RunAs | None:
        """The OS user the process runs as (``None``: the caller's)."""
        return None

    def workdir(self) -> Path:
        """The process's working directory (it must be able to enter it)."""
        return self.dir

    def after_start(self) -> None:
        """Idempotent set-up once the service is healthy (on every ``up``)."""
        return None

    def url(self) -> str | None:
        """Where clients connect, shown by ``status`` (``None``: ``address`` says it)."""
        return None

    def _pid(self) -> int | None:
        pid = _process.read_pid(self.pid_file)
        if pid is not None and _process.is_ours(pid, self.marker):
            return pid
        return None

    def status(self) -> ServiceStatus:
        pid = self._pid()
        if pid is None:
            return ServiceStatus(self.name, "down", self.address)
        state = "up" if self.healthy() else "unhealthy"
        return ServiceStatus(self.name, state, self.address, pid, self.url())

    def up(self) -> ServiceStatus:
        """Start the service unless it already runs; wait until healthy."""
        pid = self._pid()
        if pid is None:
            for port in self.ports():
                _process.require_free_port(self.name, LOOPBACK, port)
            self.prepare()
            pid = _process.spawn(
                self.argv(), log_file=self.log_file, pid_file=self.pid_file,
                env=dict(os.environ), user=self.run_as(), cwd=self.workdir(),
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
        self.after_start()
        return self.status()

    def down(self) -> ServiceStatus:
        """Stop the service if it is ours and running; leave data in place."""
        pid = _process.read_pid(self.pid_file)
        if pid is not None:
            _process.stop_pid(pid, self.marker, sig=self.stop_signal)
        self.pid_file.unlink(missing_ok=True)
        return ServiceStatus(self.name, "down", self.address)


class JvmService(LocalService):
    """A service run by Java from the jars of its artifact set."""

    artifact_set: str = ""

    def argv(self) -> list[str]:
        return self.command(_process.find_java(), classpath(self.artifact_set))

    @abstractmethod
    def command(self, java: Path, jars: list[Path]) -> list[str]:
        """The JVM command line; must carry ``-Dgridstream.service=<name>``."""
