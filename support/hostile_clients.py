"""Hostile clients against a running kcoord, and a probe that times an honest client meanwhile.

Shared by the connection-limits integration test and ``bench/hostile_clients.py``:
- :class:`NeverReaders`: N connections pipelining DescribeGroups requests that each name many
  group ids (answers of ~0.5 MB each) as fast as kcoord takes them, never reading an answer;
- :class:`PipeliningReader`: one connection that sends many such requests at once and reads
  every answer (a heavy but well-behaved admin client);
- :class:`Probe`: an honest member heartbeating on a connection of its own, its round trips timed;
- :func:`rss_mib`: a process's resident memory, from /proc (its CPU time: support.loadgen.procstat);
- :func:`describe_groups_dispatched`: the DescribeGroups requests kcoord dispatched (its /metrics).

The hostile clients run in child processes and the probe in a thread of this one: the probe's
round trips measure kcoord, not this process's own work.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import select
import socket
import struct
import threading
import time
import urllib.request
from dataclasses import dataclass, field

from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey

DESCRIBE_VERSION = 5
HEARTBEAT_VERSION = 4


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def describe_groups_dispatched(metrics: str) -> int:
    """DescribeGroups requests kcoord dispatched so far (``kcoord_requests_total`` on its /metrics at
    ``metrics``, HOST:PORT): each is an answer it computed or is computing."""
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found = re.findall(r'^kcoord_requests_total\{api="describe_groups",version="\d+"\} (\S+)$', text, re.M)
    return int(sum(float(n) for n in found))


def describe_groups_frame(ids: int, prefix: str, correlation_id: int = 1) -> bytes:
    """A DescribeGroups v5 request naming ``ids`` group ids that do not exist (each answered Dead)."""
    request = m.DescribeGroupsRequest(groups=[f"{prefix}-{i:07d}" for i in range(ids)])
    return frames.encode_request(ApiKey.DESCRIBE_GROUPS, DESCRIBE_VERSION, correlation_id, prefix, request)


def connect(address: str, rcvbuf: int | None = None) -> socket.socket:
    host, port = address.rsplit(":", 1)
    s = socket.socket()
    if rcvbuf is not None:  # before connect, so the window stays small
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect((host, int(port)))
    return s


def read_frame(s: socket.socket) -> bytes:
    """One whole response frame (without its size prefix); ConnectionError on EOF."""
    head = _read_exact(s, 4)
    (size,) = struct.unpack(">i", head)
    return _read_exact(s, size)


def _read_exact(s: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = s.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("closed by the server")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class NeverReaders:
    """``count`` connections sending pipelined ``frame`` copies whenever kcoord takes them, never reading.

    They run in a child process (one thread pumps them all: select for writable, non-blocking
    sends), so the probe's timings in this process do not wait on their work for the GIL.
    ``sent``: bytes kcoord took; ``closed_by_server``: connections kcoord closed (a send failed).
    """

    def __init__(self, address: str, count: int, frame: bytes, niceness: int = 0) -> None:
        ctx = multiprocessing.get_context("fork")
        self._niceness = niceness  # their process's nice increment: attackers on other machines
        self._sent = ctx.Value("q", 0, lock=False)
        self._closed = ctx.Value("i", 0, lock=False)
        self._ready = ctx.Event()
        self._stop = ctx.Event()
        self._process = ctx.Process(target=self._pump, args=(address, count, frame), daemon=True)

    def start(self) -> NeverReaders:
        self._process.start()
        if not self._ready.wait(30):
            raise RuntimeError("the never-reading connections did not connect")
        return self

    @property
    def sent(self) -> int:
        return int(self._sent.value)

    @property
    def closed_by_server(self) -> int:
        return int(self._closed.value)

    def _pump(self, address: str, count: int, frame: bytes) -> None:
        if self._niceness:
            os.nice(self._niceness)
        sockets = [connect(address, rcvbuf=4096) for _ in range(count)]
        self._ready.set()
        views = {s: memoryview(frame) for s in sockets}
        while views and not self._stop.is_set():
            _, writable, _ = select.select([], list(views), [], 0.1)
            for s in writable:
                try:
                    n = s.send(views[s], socket.MSG_DONTWAIT)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    del views[s]
                    self._closed.value += 1
                    continue
                self._sent.value += n
                rest = views[s][n:]
                views[s] = rest if rest else memoryview(frame)
        self._stop.wait()
        for s in sockets:
            s.close()

    def close(self) -> None:
        """Close every connection (returns once they are closed)."""
        self._stop.set()
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()


class PipeliningReader:
    """One connection that sends ``requests`` copies of ``frame`` back to back and reads every answer,
    in a child process (as :class:`NeverReaders`). ``answered`` counts the answers read so far."""

    def __init__(self, address: str, requests: int, frame: bytes) -> None:
        ctx = multiprocessing.get_context("fork")
        self.requests = requests
        self._answered = ctx.Value("q", 0, lock=False)
        self._answer_bytes = ctx.Value("q", 0, lock=False)
        self._seconds = ctx.Value("d", 0.0, lock=False)
        self._failed = ctx.Value("i", 0, lock=False)
        self._process = ctx.Process(target=self._run, args=(address, frame), daemon=True)

    def start(self) -> PipeliningReader:
        self._process.start()
        return self

    @property
    def answered(self) -> int:
        return int(self._answered.value)

    @property
    def answer_bytes(self) -> int:
        return int(self._answer_bytes.value)

    @property
    def seconds(self) -> float:
        """From the first request sent to the last answer read."""
        return float(self._seconds.value)

    @property
    def error(self) -> str | None:
        return "the connection failed" if self._failed.value else None

    def _run(self, address: str, frame: bytes) -> None:
        sock = connect(address)
        started = time.monotonic()

        def send() -> None:
            try:
                for _ in range(self.requests):
                    sock.sendall(frame)
            except OSError:
                self._failed.value = 1

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        try:
            while self._answered.value < self.requests:
                self._answer_bytes.value += len(read_frame(sock))
                self._answered.value += 1
        except OSError:
            self._failed.value = 1
        self._seconds.value = time.monotonic() - started
        sock.close()

    def wait(self, timeout: float) -> bool:
        """True once every answer came (within ``timeout`` seconds)."""
        self._process.join(timeout)
        return self.answered == self.requests

    def close(self) -> None:
        if self._process.is_alive():
            self._process.kill()
        self._process.join(5)


@dataclass
class Latencies:
    """Round trips in seconds (failures: a timeout or a closed connection); ``sent_at``: when each
    began (``time.perf_counter``), for latencies over time."""

    seconds: list[float] = field(default_factory=list)
    sent_at: list[float] = field(default_factory=list)
    failures: int = 0

    def quantile(self, q: float) -> float:
        if not self.seconds:
            return float("inf")
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def summary(self) -> str:
        return (
            f"n={len(self.seconds)} p50={self.quantile(0.5) * 1000:.1f}ms "
            f"p99={self.quantile(0.99) * 1000:.1f}ms max={max(self.seconds, default=0) * 1000:.1f}ms "
            f"failures={self.failures}"
        )


class Probe:
    """An honest classic-group member heartbeating every ``interval`` seconds on its own connection.

    :meth:`window` starts a new set of latencies (idle, under attack, ...); a heartbeat that takes
    longer than ``timeout`` counts as a failure and the probe reconnects.
    """

    def __init__(self, address: str, group: str, interval: float = 0.005, timeout: float = 10.0) -> None:
        self.address = address
        self.group = group
        self.interval = interval
        self.timeout = timeout
        self._correlation = 0
        self._sock = self._connect()
        self._member_id, self._generation = self._join()
        self.current = Latencies()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="probe", daemon=True)

    def _connect(self) -> socket.socket:
        s = connect(self.address)
        s.settimeout(self.timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def _request(self, api_key: int, version: int, request: m.Message) -> m.Message:
        self._correlation += 1
        self._sock.sendall(frames.encode_request(api_key, version, self._correlation, "probe", request))
        _, response = frames.decode_response(api_key, version, read_frame(self._sock))
        return response

    def _join(self) -> tuple[str, int]:
        protocol = m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")
        join = m.JoinGroupRequest(
            group_id=self.group, session_timeout_ms=300_000, rebalance_timeout_ms=300_000,
            member_id="", protocol_type="consumer", protocols=[protocol],
        )  # fmt: skip
        answer = self._request(ApiKey.JOIN_GROUP, 3, join)
        assert answer.error_code == 0, answer  # type: ignore[attr-defined]
        member_id, generation = answer.member_id, answer.generation_id  # type: ignore[attr-defined]
        assignment = m.SyncGroupRequest.SyncGroupRequestAssignment(member_id=member_id, assignment=b"")
        sync = m.SyncGroupRequest(
            group_id=self.group, generation_id=generation, member_id=member_id, assignments=[assignment]
        )
        synced = self._request(ApiKey.SYNC_GROUP, 2, sync)
        assert synced.error_code == 0, synced  # type: ignore[attr-defined]
        return member_id, generation

    def start(self) -> Probe:
        self._thread.start()
        return self

    def window(self) -> Latencies:
        """Close the current window (returned) and start a new one."""
        done, self.current = self.current, Latencies()
        return done

    def _run(self) -> None:
        heartbeat = m.HeartbeatRequest(
            group_id=self.group, generation_id=self._generation, member_id=self._member_id
        )
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                answer = self._request(ApiKey.HEARTBEAT, HEARTBEAT_VERSION, heartbeat)
                assert answer.error_code == 0, answer  # type: ignore[attr-defined]
                current = self.current
                current.seconds.append(time.perf_counter() - started)
                current.sent_at.append(started)
            except (OSError, ConnectionError):
                self.current.failures += 1
                self._sock.close()
                try:
                    self._sock = self._connect()
                except OSError:
                    time.sleep(self.timeout)
            self._stop.wait(self.interval)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(self.timeout + 5)
        self._sock.close()
