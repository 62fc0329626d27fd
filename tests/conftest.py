"""Checks that hold for every test of both suites."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _signal_mask_as_it_was() -> Iterator[None]:
    """No test leaves the main thread's signal mask changed: every process a later test
    starts inherits it, and a child with SIGTERM blocked never stops on one (the
    runner's signal tests timed out in one CI run in exactly that way)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    after = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    if after != before:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)  # the next test starts clean
        pytest.fail(f"the test left the main thread's signal mask changed: {sorted(before)} "
                    f"became {sorted(after)}")
