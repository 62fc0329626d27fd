"""What ``gridstream run`` sets up around its flows: the run's log file (Spark's log, every
failure's whole trace and Python's log records: py4j's, pyspark's), the ``Monitor`` and
the loopback status endpoint."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from gridstream.ops.failures import LogFile
from gridstream.ops.server import DEFAULT_PORT, StatusServer
from gridstream.ops.status import Monitor

__all__ = ["Operated", "log_path"]


def log_path(log_dir: str | None, stem: str) -> Path:
    """``<log_dir or $GRIDSTREAM_HOME/logs>/run-<stem>-<time>-<pid>.log``."""
    if log_dir:
        folder = Path(log_dir).expanduser()
    else:
        from gridstream.runtime.home import gridstream_home

        folder = gridstream_home() / "logs"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return folder / f"run-{stem}-{stamp}-{os.getpid()}.log"


class Operated:
    """``with Operated(run_settings, stem) as ops``: ``ops.log``, ``ops.monitor`` and
    ``ops.server`` (None when ``[run] status = false``) for the run's duration."""

    def __init__(self, run: Any, stem: str) -> None:
        from gridstream.errors import ConfigError

        path = log_path(run.log_dir, stem)
        try:
            self.log = LogFile(path)
        except OSError as exc:
            raise ConfigError(f"cannot write the run's log file {path}: {exc.strerror or exc}; "
                              "set [run] log_dir to a directory this user may write") from exc
        self.monitor = Monitor()
        self.monitor.log_file = str(self.log.path)
        self.server: StatusServer | None = None
        if run.status:
            self.server = self._serve(run.status_port)
        self._handler = logging.FileHandler(self.log.path, encoding="utf-8")
        self._handler.setFormatter(logging.Formatter(
            "%(asctime)s %(levelname)s %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S"))

    def _serve(self, port: int | None) -> StatusServer:
        from gridstream.errors import ConfigError

        try:
            return StatusServer(self.monitor, DEFAULT_PORT if port is None else port)
        except ConfigError:
            if port is not None:
                raise  # a port the file sets: the operator scrapes that one
            server = StatusServer(self.monitor, 0)  # another run holds the default port
            print(f"status port {DEFAULT_PORT} is taken (another run?): serving on "
                  f"{server.url} instead; set [run] status_port for a fixed one", flush=True)
            return server

    def announce(self) -> None:
        """Print where the log file is and where the status is served."""
        print(f"log file: {self.log.path}", flush=True)
        if self.server is not None:
            print(f"status: {self.server.url}/ (metrics: {self.server.url}/metrics)",
                  flush=True)

    def __enter__(self) -> Operated:
        # Python's own log records (py4j's, pyspark's) go to the file; with a handler on
        # the root logger, none reaches the terminal through logging's last resort
        logging.getLogger().addHandler(self._handler)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        logging.getLogger().removeHandler(self._handler)
        self._handler.close()
        if self.server is not None:
            self.server.close()
