"""Run ``kcoord serve`` as a real child process: for an integration test, or pinned for a benchmark."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from support import REPO, procs
from support.ports import free_port_block

SERVING_LINE = "kcoord serving on"  # what kcoord logs once its listeners accept


def serve_command(
    listen: str,
    upstream: str | None,
    extra_args: list[str],
    python: str = sys.executable,
    module: str = "kcoord.coordinator",
) -> list[str]:
    """``python -m kcoord.coordinator serve`` on ``listen`` in front of ``upstream`` (None: embedded).

    ``python``: another venv's interpreter runs the kcoord tree installed there (a benchmark's base build).
    ``module``: what runs kcoord's command line (support.loop_trace: with its event loop traced).
    """
    args = [python, "-m", module, "serve", "--listen", listen, *extra_args]
    if upstream:
        args += ["--bootstrap-server", upstream]
    return args


def pinned_kcoord(name: str, upstream: str, cpu: int | None, *extra: str) -> tuple[procs.Child, str]:
    """A benchmark's kcoord in front of ``upstream``, pinned to ``cpu``; (child, its listener address)."""
    listen = f"127.0.0.1:{free_port_block(4)}"
    child = procs.Child(name, serve_command(listen, upstream, list(extra)), cpu).start()
    child.wait_for_log(SERVING_LINE, 60)
    return child, listen


class KcoordProcess:
    """``python -m kcoord.coordinator serve`` with its log in a temp file; stop() asserts a clean exit."""

    def __init__(
        self,
        *extra_args: str,
        bootstrap: str | None = None,
        port: int | None = None,
        python: str = sys.executable,
        module: str = "kcoord.coordinator",
    ) -> None:
        self.python = python  # another venv's interpreter runs the kcoord tree installed there
        self.module = module  # what runs its command line (see serve_command)
        self.port = port or free_port_block()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.upstream = bootstrap
        self.extra_args = list(extra_args)
        self.log_path = Path(tempfile.mkstemp(prefix="kcoord-", suffix=".log")[1])
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 40.0) -> KcoordProcess:
        args = serve_command(self.bootstrap, self.upstream, self.extra_args, self.python, self.module)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        # Tests pick a free block of ports for listen + brokers, but another process may still take
        # one before kcoord binds it: they opt into an OS-picked port then (an error by default).
        env.setdefault("KCOORD_BROKER_PORTS_AUTO", "true")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"kcoord exited with {self.process.returncode}:\n{self.log_tail()}")
            if SERVING_LINE in self.log_path.read_text(errors="replace"):
                return self
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"kcoord did not start within {timeout}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def log_lines(self, text: str) -> list[str]:
        """The lines of kcoord's log that contain ``text``."""
        return [line for line in self.log_path.read_text(errors="replace").splitlines() if text in line]

    def wait_for_log(self, text: str, timeout: float = 5.0) -> list[str]:
        """The log lines containing ``text``, once there is one; AssertionError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.log_lines(text)
            if found:
                return found
            time.sleep(0.05)
        raise AssertionError(f"no log line with {text!r}:\n{self.log_tail()}")

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(
                f"kcoord did not stop on SIGTERM within {timeout}s:\n{self.log_tail()}"
            ) from None

    def kill(self) -> None:
        """SIGKILL: no chance to flush — what a crash looks like."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> KcoordProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.alive:
            try:
                self.stop()
            finally:
                self.kill()
