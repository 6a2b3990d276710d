"""Child processes of the tests and benchmarks: tracked, optionally pinned to a CPU, always cleaned up.

Tests and benchmarks start real processes (brokers, kcoord, Java peers). A run that fails, times out
or is interrupted must not leave them running: they hold ports and would make the next run flaky.
Every child started through this module is tracked and killed at interpreter exit, and on Linux it
also gets SIGKILL from the kernel if the thread that started it dies (PR_SET_PDEATHSIG), which covers
``kill -9`` of the runner.

Why pinning (``Child(cpu=...)``, ``taskset_prefix``): in a benchmark kcoord and the load generator
share two cores. Left alone the scheduler moves them around and the generator steals the server's
CPU mid-measurement; ``taskset -c 0`` for the servers and ``-c 1`` for the generator gives each a core.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from support import REPO

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


def taskset_prefix(cpu: int | None) -> list[str]:
    """``taskset -c CPU`` to put before a command, or nothing where that CPU or taskset is missing."""
    if cpu is None or shutil.which("taskset") is None or (os.cpu_count() or 1) <= cpu:
        return []
    return ["taskset", "-c", str(cpu)]


class Child:
    """A tracked child process logging to a temp file, optionally pinned to a CPU.

    ``stop()`` sends SIGTERM, then SIGKILL after a grace period.
    """

    def __init__(self, name: str, args: list[str], cpu: int | None = None) -> None:
        self.name = name
        self.args = taskset_prefix(cpu) + args
        self.log_path = Path(tempfile.mkstemp(prefix=f"bench-{name}-", suffix=".log")[1])
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid  # taskset execs the command: same pid

    def start(self) -> Child:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(self.log_path, "wb") as log:
            self.proc = spawn(self.args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env)
        return self

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def _exited(self) -> str | None:
        """Why waiting is pointless: the child's exit code and log tail, or None while it runs."""
        if self.proc is not None and self.proc.poll() is not None:
            return f"{self.name} exited with {self.proc.returncode}:\n{self.log_text()[-3000:]}"
        return None

    def wait_for_log(self, needle: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if exited := self._exited():
                raise RuntimeError(exited)
            if needle in self.log_text():
                return
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not ready in {timeout}s:\n{self.log_text()[-3000:]}")

    def wait_for_port(self, port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if exited := self._exited():
                raise RuntimeError(exited)
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not listen on {port} in {timeout}s")

    def stop(self, grace: float = 10.0) -> None:
        if self.proc is not None:
            terminate(self.proc, timeout=grace)
