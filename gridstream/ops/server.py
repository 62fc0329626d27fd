"""The run's loopback HTTP endpoint: ``/metrics`` (Prometheus text), ``/status`` (JSON),
``/healthz`` (200 while no flow failed, else 503) and ``/`` (the status page).

A ``ThreadingHTTPServer`` from the standard library on a daemon thread: a scrape never
waits for a batch, and nothing here can stop the run. It binds loopback only; the
status holds no secrets (flows describe themselves redacted).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST

from gridstream.errors import ConfigError
from gridstream.ops.status import Monitor

__all__ = ["DEFAULT_PORT", "StatusServer"]

DEFAULT_PORT = 8094
PAGE = Path(__file__).with_name("page.html")


class StatusServer:
    """Serves a ``Monitor`` on ``127.0.0.1:port`` (0: any free port) until ``close``."""

    def __init__(self, monitor: Monitor, port: int = DEFAULT_PORT, *,
                 host: str = "127.0.0.1") -> None:
        self.monitor = monitor
        handler = type("_Handler", (_Handler,), {"monitor": monitor})
        try:
            self._server = _Server((host, port), handler)
        except OSError as exc:
            raise ConfigError(f"cannot serve the run's status on {host}:{port}: "
                              f"{exc.strerror or exc}; choose another [run] status_port "
                              "(0: any free port)") from exc
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="gridstream-status", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Server(ThreadingHTTPServer):
    allow_reuse_port = False  # two runs never share a port (newer Pythons set it True)


class _Handler(BaseHTTPRequestHandler):
    monitor: Monitor
    server_version = "gridstream"

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, CONTENT_TYPE_LATEST, self.monitor.metrics.text())
        elif path == "/status":
            self._send(200, "application/json", orjson.dumps(self.monitor.status()))
        elif path == "/healthz":
            healthy = self.monitor.status()["healthy"]
            self._send(200 if healthy else 503, "text/plain",
                       b"ok\n" if healthy else b"a flow failed\n")
        elif path in ("/", "/index.html") and PAGE.exists():
            self._send(200, "text/html; charset=utf-8", PAGE.read_bytes())
        else:
            self._send(404, "text/plain", b"not found\n")

    def _send(self, code: int, kind: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - its signature
        return None  # a scrape a second is not news
