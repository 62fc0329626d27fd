"""The Hazelcast health check gives up on a member that never answers."""

from __future__ import annotations

import socket
import threading
import time

from gridstream.stack.hazelcast import member_accepts_client


def test_a_member_that_takes_the_connection_and_never_answers_is_not_healthy() -> None:
    """A member stuck in garbage collection accepts TCP and says nothing: the client's
    connect waited for it without end (``gridstream stack status`` hung for minutes)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])  # kept open, never answered
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    result: list[bool] = []
    caller = threading.Thread(target=lambda: result.append(member_accepts_client(
        "dev", f"127.0.0.1:{server.getsockname()[1]}", timeout_s=1.0)), daemon=True)
    started = time.monotonic()
    try:
        caller.start()
        caller.join(15)
        assert result == [False], "the check did not return within 15 s"
        assert time.monotonic() - started < 5
    finally:
        stop.set()
        for conn in held:
            conn.close()
        server.close()
