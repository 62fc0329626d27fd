"""The stop flag and the signal handlers of the CLIs that run until stopped."""

from __future__ import annotations

import _thread
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from gridstream._stopping import StopFlag, stop_on_signals

LOCK_TYPES = (_thread.LockType, _thread.RLock)


def lock_calls(action: Callable[[], None]) -> list[str]:
    """The lock methods (acquire, ``__enter__``, ...) that ``action`` calls, in this thread."""
    seen: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and isinstance(getattr(arg, "__self__", None), LOCK_TYPES):
            seen.append(f"{type(arg.__self__).__name__}.{arg.__name__}")

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return seen


def test_lock_calls_sees_an_event_being_set() -> None:
    """The probe itself: setting a threading.Event takes its condition's lock."""
    assert "lock.__enter__" in lock_calls(threading.Event().set)


def test_setting_the_flag_takes_no_lock() -> None:
    flag = StopFlag()
    assert lock_calls(flag.set) == []
    assert flag.is_set() and flag.wait(0) and flag.wait(None)


def test_the_installed_handler_takes_no_lock() -> None:
    flag = StopFlag()
    with stop_on_signals(flag.set):
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler)
        assert lock_calls(lambda: handler(signal.SIGTERM, None)) == []
    assert flag.is_set()


def test_wait_times_out_and_wakes_when_set_from_another_thread() -> None:
    flag = StopFlag()
    started = time.monotonic()
    assert flag.wait(0.05) is False
    assert time.monotonic() - started >= 0.05
    threading.Timer(0.1, flag.set).start()
    started = time.monotonic()
    assert flag.wait(30) is True
    assert time.monotonic() - started < 5


def test_a_signal_wakes_a_wait_in_the_main_thread() -> None:
    flag = StopFlag()
    previous = signal.getsignal(signal.SIGUSR1)
    with stop_on_signals(flag.set, (signal.SIGUSR1,)):
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        started = time.monotonic()
        assert flag.wait(30) is True
        assert time.monotonic() - started < 5
    assert signal.getsignal(signal.SIGUSR1) is previous  # restored


def test_handlers_are_restored_and_not_installed_off_the_main_thread() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_signals(StopFlag().set):
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before
    inside: list[Any] = []

    def elsewhere() -> None:
        with stop_on_signals(StopFlag().set):
            inside.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert inside == [before]


def test_closed_flag_can_still_be_set() -> None:
    flag = StopFlag()
    flag.close()
    with pytest.raises(ValueError, match="closed"):
        flag.wait(0.01)  # never a busy loop on a closed pipe
    flag.set()  # a late signal after shutdown must not raise
    assert flag.is_set() and flag.wait(0.01)


def test_setting_a_closed_flag_writes_to_no_other_file() -> None:
    flag = StopFlag()
    old_write = flag._write
    flag.close()
    read_end, write_end = os.pipe()
    os.dup2(write_end, old_write)  # the number is reused, as the next open may do
    try:
        os.set_blocking(read_end, False)
        flag.set()
        with pytest.raises(BlockingIOError):  # nothing was written into the new pipe
            os.read(read_end, 1)
        assert flag.is_set()
    finally:
        for fd in {read_end, write_end, old_write}:
            os.close(fd)


def test_the_signals_are_unblocked_inside_and_the_mask_restored_after() -> None:
    """A process started with the stop signals blocked (an inherited mask) still gets
    them inside the block: the one pending since before it is delivered on entry."""
    flag = StopFlag()
    outer = signal.signal(signal.SIGUSR1, lambda signum, frame: None)  # never the default
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
    try:
        # to this thread: a signal to the process would go to another thread of it that
        # has the signal unblocked (a test's leftover thread), and run the outer handler
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)  # pending: blocked
        assert not flag.is_set()
        with stop_on_signals(flag.set, (signal.SIGUSR1,)):
            assert signal.SIGUSR1 not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
            assert flag.wait(5) is True
        assert signal.SIGUSR1 in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
        signal.signal(signal.SIGUSR1, outer)
