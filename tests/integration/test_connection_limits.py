"""Connection limits of a real kcoord (back-pressure, output caps), over real sockets.

- Back-pressure: a client that pipelines requests and never reads its responses holds kcoord's
  memory to a bound (reading from it pauses), a second client is still answered promptly, and the
  accounting of unsent output returns to zero once the bad client leaves; a connection whose unsent
  output passes ``connection.output.max.bytes`` is closed.
- Partial frames: large frames being received share ``queued.max.request.bytes``; connections
  beyond it wait (and all finish once memory is released).
- ``request.receive.timeout.ms`` closes connections that send a frame a byte at a time (slowloris);
  ``connections.max.idle.ms`` closes idle ones; ``max.connections``, ``max.connections.per.ip`` and
  ``max.connections.per.ip.overrides`` refuse connections beyond them.

The limits are given to kcoord through its environment (``KCOORD_...``), which a kcoord without
them ignores with a warning: on such a kcoord these tests fail on behaviour, not on startup.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey
from support.kcoord_process import KcoordProcess
from support.ports import free_port
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

MiB = 1024 * 1024


# -- helpers ----------------------------------------------------------------------------------------------
@contextmanager
def kcoord_with(env: dict[str, str], *args: str) -> Iterator[KcoordProcess]:
    """A kcoord (memory storage, embedded tansu) with ``env`` added to its environment and /metrics on."""
    port = free_port()
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        proc = KcoordProcess(
            "--shards",
            "2",
            "--storage",
            "memory",
            "--group-initial-rebalance-delay-ms",
            "0",
            "--metrics",
            f"127.0.0.1:{port}",
            *args,
        )
        proc.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    proc.metrics_url = f"http://127.0.0.1:{port}/metrics"  # type: ignore[attr-defined]
    try:
        yield proc
    finally:
        proc.__exit__()


def rss_mib(proc: KcoordProcess) -> float:
    assert proc.process is not None
    with open(f"/proc/{proc.process.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def metric(proc: KcoordProcess, name: str, **labels: str) -> float | None:
    """The sum of a metric's samples with these labels; None if kcoord does not export it."""
    with urllib.request.urlopen(proc.metrics_url, timeout=10) as resp:  # type: ignore[attr-defined]
        text = resp.read().decode()
    found = None
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and labels.items() <= s.labels.items():
                found = (found or 0.0) + s.value
    return found


def wait_for(predicate: object, timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(step)
    return bool(predicate())  # type: ignore[operator]


def raw(proc: KcoordProcess, source: str = "127.0.0.1", rcvbuf: int | None = None) -> socket.socket:
    s = socket.socket()
    if rcvbuf is not None:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.bind((source, 0))
    s.connect(("127.0.0.1", proc.port))
    return s


def closed_by_server(s: socket.socket, timeout: float = 0.0) -> bool:
    """True once the server closed ``s`` (EOF or reset); response bytes waiting are read and dropped."""
    deadline = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([s], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return False
        try:
            if not s.recv(1 << 16):
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True


def api_versions_frame(correlation_id: int = 1, padding: int = 0) -> bytes:
    """An ApiVersions v0 request; ``padding`` bytes after it make it as large as we like (kcoord
    reads nothing of an ApiVersions request past its header)."""
    return frames.frame(struct.pack(">hhih", ApiKey.API_VERSIONS, 0, correlation_id, -1) + b"\x00" * padding)


def answered(s: socket.socket, timeout: float = 5.0) -> bool:
    """Read one whole response frame from ``s``."""
    s.settimeout(timeout)
    try:
        head = b""
        while len(head) < 4:
            chunk = s.recv(4 - len(head))
            if not chunk:
                return False
            head += chunk
        (size,) = struct.unpack(">i", head)
        while size:
            chunk = s.recv(min(size, 1 << 16))
            if not chunk:
                return False
            size -= len(chunk)
        return True
    except (OSError, TimeoutError):
        return False
    finally:
        s.settimeout(None)


def push(s: socket.socket, data: memoryview) -> int:
    """Send what the socket takes now, without blocking; returns how many bytes went."""
    try:
        return s.send(data, socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return 0


def big_group(address: str, group: str, blob: int) -> None:
    """A Stable classic group of one member whose subscription and assignment are ``blob`` bytes each:
    each DescribeGroups of it is answered with about 2 * ``blob`` bytes."""
    with WireClient(address) as c:
        join = c.request(
            11,
            3,
            m.JoinGroupRequest(
                group_id=group,
                session_timeout_ms=120_000,
                rebalance_timeout_ms=120_000,
                member_id="",
                protocol_type="consumer",
                protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"s" * blob)],
            ),
        )
        assert join.error_code == 0, join
        sync = c.request(
            14,
            2,
            m.SyncGroupRequest(
                group_id=group,
                generation_id=join.generation_id,
                member_id=join.member_id,
                assignments=[
                    m.SyncGroupRequest.SyncGroupRequestAssignment(
                        member_id=join.member_id, assignment=b"a" * blob
                    )
                ],
            ),
        )
        assert sync.error_code == 0, sync


# -- item 3: back-pressure and output caps -----------------------------------------------------------------
def test_a_client_that_never_reads_is_held_to_a_bound_and_others_are_still_served() -> None:
    with kcoord_with({}) as proc:
        big_group(proc.bootstrap, "big", 16 * 1024)  # ~32 KiB per DescribeGroups answer
        describe = frames.encode_request(15, 5, 7, "bad", m.DescribeGroupsRequest(groups=["big"]))
        batch = describe * 2000
        with WireClient(proc.bootstrap) as good:
            good.api_versions()
            baseline = rss_mib(proc)
            peak = baseline
            slowest = 0.0
            sent = 0
            bad = raw(proc, rcvbuf=4096)
            try:
                deadline = time.monotonic() + 5.0
                while time.monotonic() < deadline:
                    view = memoryview(batch)
                    while view:  # as much as kcoord takes right now
                        n = push(bad, view)
                        if not n:
                            break
                        sent += n
                        view = view[n:]
                    started = time.monotonic()
                    answer = good.request(15, 5, m.DescribeGroupsRequest(groups=["big"]))
                    slowest = max(slowest, time.monotonic() - started)
                    assert answer.groups[0].group_state == "Stable"
                    peak = max(peak, rss_mib(proc))
                    if peak - baseline > 250:
                        break  # enough: kcoord is not holding it back
                    time.sleep(0.05)
                # Pipelined DescribeGroups of ~40 bytes each: a stopped reader takes in a bounded number.
                assert peak - baseline < 250, (
                    f"kcoord grew from {baseline:.0f} to {peak:.0f} MiB while a client sent {sent} bytes of "
                    "requests and read nothing"
                )
                assert slowest < 2.0, f"another client waited {slowest:.2f}s for an answer"
                held = metric(proc, "kcoord_buffered_bytes", kind="output")
                assert held is not None and 0 < held < 64 * MiB, held
            finally:
                bad.close()
            assert wait_for(lambda: metric(proc, "kcoord_buffered_bytes", kind="output") == 0, 10), (
                "unsent output is still accounted for after its connection closed"
            )
            assert wait_for(lambda: metric(proc, "kcoord_connections") == 1, 10)
            assert (
                good.request(15, 5, m.DescribeGroupsRequest(groups=["big"])).groups[0].group_state == "Stable"
            )
        print(
            f"\nnever-reading client: sent {sent} bytes; kcoord RSS {baseline:.0f} -> peak {peak:.0f} MiB, "
            f"after close {rss_mib(proc):.0f} MiB; slowest other request {slowest * 1000:.0f} ms"
        )


def test_a_connection_whose_unsent_output_passes_the_cap_is_closed() -> None:
    with kcoord_with({"KCOORD_CONNECTION_OUTPUT_MAX_BYTES": str(4 * MiB)}) as proc:
        big_group(proc.bootstrap, "big", 32 * 1024)  # ~64 KiB per answer: 1000 in flight is ~64 MiB
        describe = frames.encode_request(15, 5, 7, "bad", m.DescribeGroupsRequest(groups=["big"]))
        bad = raw(proc, rcvbuf=4096)
        try:
            view = memoryview(describe * 1500)
            deadline = time.monotonic() + 8
            while time.monotonic() < deadline and rss_mib(proc) < 1500:
                try:
                    while view and (n := push(bad, view)):
                        view = view[n:]
                except OSError:
                    break  # closed by kcoord
                if metric(proc, "kcoord_connections_closed_total", reason="output_cap"):
                    break
                time.sleep(0.1)
            assert metric(proc, "kcoord_connections_closed_total", reason="output_cap") == 1
            assert closed_by_server(bad, 5), "kcoord kept a connection holding over 4 MiB it cannot send"
        finally:
            bad.close()
        assert "connection.output.max.bytes" in proc.log_tail(200)
        assert wait_for(lambda: metric(proc, "kcoord_buffered_bytes", kind="output") == 0, 10)


def test_large_partial_frames_share_one_budget_and_all_finish() -> None:
    frame_size = 16 * MiB
    cap = 32 * MiB
    with kcoord_with(
        {"KCOORD_QUEUED_MAX_REQUEST_BYTES": str(cap)}, "--max-frame-size", str(frame_size + 64)
    ) as proc:
        conns = [raw(proc) for _ in range(10)]
        frame = api_versions_frame(padding=frame_size - 10)
        views = [memoryview(frame) for _ in conns]
        try:
            baseline = rss_mib(proc)
            peak = baseline
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline:  # every connection sends all but the last MiB it can
                for i, s in enumerate(conns):
                    if len(views[i]) > MiB:
                        views[i] = views[i][push(s, views[i][: len(views[i]) - MiB]) :]
                peak = max(peak, rss_mib(proc))
                time.sleep(0.02)
            time.sleep(0.3)
            peak = max(peak, rss_mib(proc))
            # Ten 16 MiB frames, 15 MiB of each sent: without a budget kcoord holds ~150 MiB of them.
            assert peak - baseline < 80, f"partial frames took kcoord from {baseline:.0f} to {peak:.0f} MiB"
            reserved = metric(proc, "kcoord_buffered_bytes", kind="partial_frames")
            assert reserved is not None and 0 < reserved <= cap, reserved
            # All finish: each frame completes, its memory goes to the next waiting connection.
            done = [False] * len(conns)
            deadline = time.monotonic() + 30.0
            while not all(done) and time.monotonic() < deadline:
                for i, s in enumerate(conns):
                    if views[i]:
                        views[i] = views[i][push(s, views[i]) :]
                    elif not done[i] and select.select([s], [], [], 0)[0]:
                        done[i] = answered(s)
                peak = max(peak, rss_mib(proc))
                time.sleep(0.01)
            assert all(done), f"{done.count(False)} of {len(conns)} large frames never completed"
            assert wait_for(lambda: metric(proc, "kcoord_buffered_bytes", kind="partial_frames") == 0, 5)
            print(
                f"\n10 x 16 MiB partial frames, cap 32 MiB: kcoord RSS {baseline:.0f} -> peak {peak:.0f} MiB"
            )
        finally:
            for s in conns:
                s.close()
        assert wait_for(lambda: metric(proc, "kcoord_buffered_bytes", kind="partial_frames") == 0, 5)


# -- item 4: slow, idle and too many connections --------------------------------------------------------------
def test_frames_sent_a_byte_at_a_time_are_cut_off_after_the_receive_timeout() -> None:
    with kcoord_with({"KCOORD_REQUEST_RECEIVE_TIMEOUT_MS": "1000"}) as proc:
        frame = api_versions_frame()
        slow = [raw(proc) for _ in range(50)]
        prompt = raw(proc)
        try:
            started = time.monotonic()
            sent = 0
            while time.monotonic() - started < 3.0 and sent < len(frame) - 1:
                for s in slow:
                    with suppress(BrokenPipeError, ConnectionResetError):
                        s.send(frame[sent : sent + 1])
                sent += 1
                # A frame sent in two parts 300 ms apart is within the timeout and is answered.
                prompt.sendall(frame[:5])
                time.sleep(0.3)
                prompt.sendall(frame[5:])
                assert answered(prompt)
            still_open = [s for s in slow if not closed_by_server(s, 0.2)]
            assert not still_open, f"{len(still_open)} of {len(slow)} slowloris connections are still open"
            assert not closed_by_server(prompt)
            assert time.monotonic() - started < 10
        finally:
            for s in [*slow, prompt]:
                s.close()
        assert metric(proc, "kcoord_connections_closed_total", reason="slow_frame") == len(slow)
        assert "request.receive.timeout.ms" in proc.log_tail(400)


def test_idle_connections_are_closed_after_connections_max_idle_ms() -> None:
    with kcoord_with({"KCOORD_CONNECTIONS_MAX_IDLE_MS": "1500"}) as proc:
        idle, busy = raw(proc), raw(proc)
        silent = raw(proc)  # never sends a byte
        try:
            for s in (idle, busy):
                s.sendall(api_versions_frame())
                assert answered(s)
            started = time.monotonic()
            while time.monotonic() - started < 3.5:  # busy asks every 0.5 s, idle never again
                busy.sendall(api_versions_frame())
                assert answered(busy), "a connection in use was closed"
                time.sleep(0.5)
            assert closed_by_server(idle, 2.0), "an idle connection is still open"
            assert closed_by_server(silent, 0.5), "a connection that never sent anything is still open"
            assert not closed_by_server(busy)
        finally:
            for s in (idle, busy, silent):
                s.close()
        assert metric(proc, "kcoord_connections_closed_total", reason="idle") == 2


def test_max_connections_and_per_ip_limits() -> None:
    env = {
        "KCOORD_MAX_CONNECTIONS": "4",
        "KCOORD_MAX_CONNECTIONS_PER_IP": "2",
        "KCOORD_MAX_CONNECTIONS_PER_IP_OVERRIDES": "127.0.0.2:3",
    }
    with kcoord_with(env) as proc:
        opened: list[socket.socket] = []

        def connect(source: str) -> socket.socket:
            s = raw(proc, source)
            opened.append(s)
            return s

        def serves(s: socket.socket) -> bool:
            try:
                s.sendall(api_versions_frame())
            except OSError:
                return False
            return answered(s, 2.0)

        try:
            a1, a2 = connect("127.0.0.1"), connect("127.0.0.1")
            assert serves(a1) and serves(a2)
            assert closed_by_server(connect("127.0.0.1"), 2.0), "a third connection from 127.0.0.1 (limit 2)"
            b1, b2 = connect("127.0.0.2"), connect("127.0.0.2")
            assert serves(b1) and serves(b2)
            assert closed_by_server(connect("127.0.0.2"), 2.0), "a fifth connection in all (limit 4)"
            a1.close()
            assert wait_for(lambda: metric(proc, "kcoord_connections") == 3, 5)
            b3 = connect("127.0.0.2")  # 127.0.0.2 may have 3 (override), and there is room now
            assert serves(b3)
            assert closed_by_server(connect("127.0.0.2"), 2.0)
            assert serves(a2) and serves(b1)
        finally:
            for s in opened:
                s.close()
        assert metric(proc, "kcoord_connections_closed_total", reason="limit") == 3
        log = proc.log_tail(400)
        assert "max.connections.per.ip" in log and "max.connections" in log
