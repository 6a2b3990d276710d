"""Run ``kcoord serve`` as a real child process for integration tests."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_PORT_RNG = random.Random()  # not the global one, which tests may seed


def _ephemeral_range_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port_block(count: int = 4, host: str = "127.0.0.1") -> int:
    """A base port such that base..base+count-1 are all free right now.

    Picked below the kernel's ephemeral range: a port in it can be handed to any outgoing
    connection between this check and the moment kcoord binds it.
    """
    top = _ephemeral_range_start() - count
    bottom = max(1024, top - 12_000)
    if top <= bottom:  # an unusual ephemeral range: take our chances in the middle of the ports
        bottom, top = 20_000, 30_000
    for _ in range(200):
        base = _PORT_RNG.randrange(bottom, top)
        ok = True
        for p in range(base, base + count):
            with socket.socket() as t:
                try:
                    t.bind((host, p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port block")


class KcoordProcess:
    """``python -m kcoord.coordinator serve`` with its log in a temp file; stop() asserts a clean exit."""

    def __init__(self, *extra_args: str, bootstrap: str | None = None, port: int | None = None) -> None:
        self.port = port or free_port_block()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.upstream = bootstrap
        self.extra_args = list(extra_args)
        self.log_path = Path(tempfile.mkstemp(prefix="kcoord-", suffix=".log")[1])
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 40.0) -> KcoordProcess:
        args = [
            sys.executable,
            "-m",
            "kcoord.coordinator",
            "serve",
            "--listen",
            self.bootstrap,
            *self.extra_args,
        ]
        if self.upstream:
            args += ["--bootstrap-server", self.upstream]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"kcoord exited with {self.process.returncode}:\n{self.log_tail()}")
            if "kcoord serving on" in self.log_path.read_text(errors="replace"):
                return self
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"kcoord did not start within {timeout}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

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
