"""Child-process bookkeeping shared by the broker and peer helpers.

Integration tests start real processes (the tansu broker, Java peers). A test that fails, times out
or is interrupted must not leave them running: they hold ports and would make the next run flaky.
Every child started through this module is tracked and killed at interpreter exit, and on Linux it
also gets SIGKILL from the kernel if the thread that started it dies (PR_SET_PDEATHSIG), which covers
``kill -9`` of the test runner.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
from typing import Any

_LIVE: set[subprocess.Popen[Any]] = set()
_LOCK = threading.Lock()


def _set_pdeathsig() -> None:
    """Runs in the child between fork and exec: die with the parent instead of leaking."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def spawn(args: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """Popen in its own process group, tracked for cleanup.

    The death signal is armed only from the main thread: PR_SET_PDEATHSIG fires when the *thread*
    that forked exits, so a child started from a short-lived worker thread would die with it.
    """
    if threading.current_thread() is threading.main_thread():
        kwargs.setdefault("preexec_fn", _set_pdeathsig)
    kwargs.setdefault("start_new_session", True)
    proc: subprocess.Popen[Any] = subprocess.Popen(args, **kwargs)
    with _LOCK:
        _LIVE.add(proc)
    return proc


def _signal_group(proc: subprocess.Popen[Any], sig: int) -> None:
    """Signal the child's whole process group (it leads its own session), falling back to the child."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


def terminate(proc: subprocess.Popen[Any], timeout: float = 5.0) -> int | None:
    """SIGTERM, wait, then SIGKILL; always reaps. Returns the exit code."""
    try:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(timeout)
        return proc.returncode
    finally:
        forget(proc)


def forget(proc: subprocess.Popen[Any]) -> None:
    """Stop tracking a child that has been reaped by its owner."""
    with _LOCK:
        _LIVE.discard(proc)


def live() -> list[subprocess.Popen[Any]]:
    """Children started here that have not been reaped yet (for leak assertions)."""
    with _LOCK:
        return [p for p in _LIVE if p.poll() is None]


@atexit.register
def _kill_all() -> None:
    with _LOCK:
        procs = list(_LIVE)
    for proc in procs:
        with contextlib.suppress(Exception):
            terminate(proc, timeout=2.0)
