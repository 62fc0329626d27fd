"""Stopping a long-running loop from a signal handler, without taking any lock.

A Python signal handler runs in the main thread between two bytecodes, possibly while
that thread holds a lock: ``threading.Event.wait`` holds the event's (non-reentrant)
condition lock around its checks, so a handler that calls ``Event.set`` can block on a
lock its own thread holds, forever. ``StopFlag`` is set by assigning an attribute and
writing a byte to a pipe, neither of which takes a lock; ``wait`` sleeps in ``poll`` on
that pipe, so a ``set`` from a handler or from another thread wakes it at once.

``stop_on_signals`` installs SIGINT/SIGTERM handlers that call such a stop function for
the duration of a ``with`` block; the CLIs that run until stopped (``gridstream mirror``,
``gridstream run``) both use it.
"""

from __future__ import annotations

import math
import os
import select
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any

__all__ = ["STOP_SIGNALS", "StopFlag", "stop_on_signals"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _close(*fds: int) -> None:
    for fd in fds:
        with suppress(OSError):
            os.close(fd)


class StopFlag:
    """A one-way flag (``set`` once, never cleared) that is safe to set from a signal
    handler; ``wait`` and ``is_set`` as ``threading.Event`` has them."""

    def __init__(self) -> None:
        self._set = False
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._closer = weakref.finalize(self, _close, self._read, self._write)

    def set(self) -> None:
        """Raise the flag and wake every ``wait`` (no lock: safe in a signal handler)."""
        self._set = True
        if not self._closer.alive:  # closed: its descriptor number may be another file's now
            return
        # a full pipe means waiters are woken already
        with suppress(OSError):
            os.write(self._write, b"\0")

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep until the flag is set or ``timeout`` seconds have passed; the flag."""
        if not self._closer.alive and not self._set:
            raise ValueError("wait on a closed StopFlag")
        deadline = None if timeout is None else time.monotonic() + timeout
        poller = select.poll()
        poller.register(self._read, select.POLLIN)
        while not self._set:
            if deadline is None:
                poller.poll()
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                poller.poll(max(1, math.ceil(remaining * 1000)))
        return self._set

    def close(self) -> None:
        """Release the pipe (``set`` afterwards is harmless; ``wait`` then raises unless
        the flag is set)."""
        self._closer()


@contextmanager
def stop_on_signals(stop: Callable[[], None],
                    signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> Iterator[None]:
    """Call ``stop`` on each of ``signals`` inside the block, then restore the previous
    handlers. ``stop`` runs inside the handler, so it must take no lock
    (``StopFlag.set`` takes none). Outside the main thread nothing is installed (Python
    only runs handlers there).

    The signals are also unblocked in this thread for the block (the previous mask is
    restored after it): a process inherits its parent's signal mask, and one started
    with them blocked (by a parent thread that had them blocked, as some native
    libraries do while they start threads) would otherwise never see a SIGTERM, and
    its loop would sleep on through every stop request."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        stop()

    previous: dict[signal.Signals, Any] = {}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])  # as it is: nothing changed
    try:
        for sig in signals:
            previous[sig] = signal.signal(sig, handler)
        # after the handlers: a signal pending while blocked is delivered here, to them
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
        yield
    finally:
        try:  # the mask first: a signal arriving now waits for the handler restored next
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
