"""Health that tells the truth: /healthz (liveness), /readyz (readiness) and shutdown, on real brokers.

- the embedded broker killed (-9): kcoord exits at once, non-zero, with one line saying why;
- the upstream paused (SIGSTOP): /readyz answers 503 within readiness.upstream.timeout.ms plus a
  probe interval while /healthz stays 200, and 200 again after SIGCONT; SIGTERM with the upstream
  still paused ends in under 2 s;
- the upstream killed: one line for the outage, not one per client connection that fails;
- SIGTERM with a Prometheus keep-alive connection open logs no error.

Each test prints its timings (``pytest -s`` shows them; docs/operations.md has the figures).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kcoord.protocol import messages as m
from support.broker import TansuBroker
from support.kcoord_process import KcoordProcess
from support.ports import free_port
from support.workload import unique
from tests.support.fixtures import Upstream
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

SHARDS = 4
READINESS_TIMEOUT_S = 2.0  # readiness.upstream.timeout.ms in these tests, to keep the pauses short
PROBE_INTERVAL_S = 0.5  # a quarter of it (net/upstream_probe.py)
# How long after the upstream stops answering /readyz may still say 200: the timeout, one probe
# interval, and slack for a loaded 2-core machine.
READINESS_BOUND_S = READINESS_TIMEOUT_S + PROBE_INTERVAL_S + 1.5
STOP_BOUND_S = 2.0


def status(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def wait_for_status(url: str, want: int, timeout: float) -> float:
    """Seconds until ``url`` answers ``want``; AssertionError after ``timeout``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if status(url)[0] == want:
            return time.monotonic() - start
        time.sleep(0.05)
    raise AssertionError(f"{url} did not answer {want} within {timeout}s: {status(url)}")


def wait_for_lines(kcoord: KcoordProcess, text: str, count: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while len(kcoord.log_lines(text)) < count:
        assert time.monotonic() < deadline, f"fewer than {count} lines with {text!r}:\n{kcoord.log_tail()}"
        time.sleep(0.05)


def timed_stop(kcoord: KcoordProcess) -> tuple[int, float]:
    start = time.monotonic()
    code = kcoord.stop(timeout=20)
    return code, time.monotonic() - start


@contextmanager
def serving(*args: str, bootstrap: str | None = None) -> Iterator[tuple[KcoordProcess, str]]:
    metrics = f"127.0.0.1:{free_port()}"
    if bootstrap is not None:  # the session's brokers are shared: a topic of this test's own
        args = ("--internal-topic", unique("__kcoord_health"), *args)
    with KcoordProcess("--shards", str(SHARDS), "--metrics", metrics, *args, bootstrap=bootstrap) as kcoord:
        base = f"http://{metrics}"
        wait_for_status(base + "/readyz", 200, 30)
        yield kcoord, base


@contextmanager
def paused(pid: int) -> Iterator[Callable[[], None]]:
    """SIGSTOP ``pid``; SIGCONT on leaving, whatever happens (the broker is the session's). The
    yielded function resumes it early."""
    os.kill(pid, signal.SIGSTOP)
    resumed = False

    def resume() -> None:
        nonlocal resumed
        if not resumed:
            resumed = True
            os.kill(pid, signal.SIGCONT)

    try:
        yield resume
    finally:
        resume()


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def test_embedded_broker_killed_stops_kcoord_at_once_with_one_line() -> None:
    with serving() as (kcoord, base):
        assert kcoord.process is not None
        (broker_pid,) = children(kcoord.process.pid)
        killed = time.monotonic()
        os.kill(broker_pid, signal.SIGKILL)
        code = kcoord.process.wait(10)
        exited = time.monotonic() - killed
    print(f"\nembedded broker killed: kcoord exited with {code} after {exited:.3f} s")
    assert code == 3
    assert exited < STOP_BOUND_S
    errors = kcoord.log_lines("level=ERROR")
    assert len(errors) == 1, errors
    assert "the embedded broker was killed by SIGKILL" in errors[0]


def test_paused_upstream_turns_readiness_off_and_on_and_sigterm_is_quick(upstream: Upstream) -> None:
    assert upstream.process is not None
    timeout_ms = str(int(READINESS_TIMEOUT_S * 1000))
    with serving("--readiness-upstream-timeout-ms", timeout_ms, bootstrap=upstream.bootstrap) as (
        kcoord,
        base,
    ):
        with paused(upstream.process.pid) as resume:
            not_ready = wait_for_status(base + "/readyz", 503, 15)
            assert status(base + "/healthz")[0] == 200  # alive: a restart would not help
            body = status(base + "/readyz")[1]
            assert body["status"] == "unavailable" and body["loaded"] == SHARDS, body
            resume()
            ready = wait_for_status(base + "/readyz", 200, 15)
        kcoord.wait_for_log("upstream silent", 10)
        kcoord.wait_for_log("upstream answers again", 10)
        # Paused again: once kcoord knows (503, and its line), SIGTERM must not wait for the upstream.
        with paused(upstream.process.pid):
            wait_for_status(base + "/readyz", 503, 15)
            wait_for_lines(kcoord, "upstream silent", 2)
            code, stopped = timed_stop(kcoord)
    print(
        f"\nupstream paused: /readyz 503 after {not_ready:.2f} s (timeout {READINESS_TIMEOUT_S} s); "
        f"resumed: 200 after {ready:.2f} s; SIGTERM with it paused: exit {code} in {stopped:.2f} s"
    )
    assert not_ready < READINESS_BOUND_S
    assert code == 0
    assert stopped < STOP_BOUND_S
    assert len(kcoord.log_lines("upstream silent")) == 2
    assert len(kcoord.log_lines("upstream answers again")) == 1


def test_killed_upstream_is_one_log_line_not_one_per_connection(tmp_path: Path) -> None:
    with (
        TansuBroker(log_dir=str(tmp_path)) as broker,
        serving(
            "--readiness-upstream-timeout-ms",
            str(int(READINESS_TIMEOUT_S * 1000)),
            bootstrap=broker.bootstrap,
        ) as (kcoord, base),
    ):
        broker_port = kcoord.port + 1  # the first upstream broker's listener: listen port + 1
        assert broker.process is not None
        os.kill(broker.process.pid, signal.SIGKILL)
        broker.process.wait(10)
        kcoord.wait_for_log("upstream failing", 10)
        before = len(kcoord.log_lines("closing connection"))
        for _ in range(20):  # clients that reconnect and fail, as every client would
            client = WireClient(f"127.0.0.1:{broker_port}", timeout=5)
            with client, pytest.raises(Exception):  # noqa: B017 - closed by kcoord, however reported
                client.request(m.ApiKey.METADATA, 1, m.MetadataRequest(topics=[]))
        wait_for_status(base + "/readyz", 503, 15)
        wait_for_lines(kcoord, "upstream silent", 1)
        warnings = kcoord.log_lines("level=WARNING")
        code, stopped = timed_stop(kcoord)
    print(f"\nupstream killed: SIGTERM exit {code} in {stopped:.2f} s; warnings: {warnings}")
    assert len(kcoord.log_lines("closing connection")) == before  # the 20 went to DEBUG
    assert len(kcoord.log_lines("upstream failing")) == 1
    assert len(kcoord.log_lines("upstream silent")) == 1
    assert code == 0 and stopped < STOP_BOUND_S, kcoord.log_tail()


def test_sigterm_with_a_prometheus_keep_alive_connection_logs_no_error() -> None:
    with serving() as (kcoord, base):
        scraper = http.client.HTTPConnection(base.removeprefix("http://"), timeout=5)
        scraper.request("GET", "/metrics")
        resp = scraper.getresponse()
        resp.read()
        assert resp.status == 200 and resp.getheader("Connection") == "keep-alive"
        code, stopped = timed_stop(kcoord)  # the connection is still open
        scraper.close()
    print(f"\nSIGTERM, upstream fine, scraper connected: exit {code} in {stopped:.2f} s")
    assert code == 0
    assert stopped < STOP_BOUND_S
    assert kcoord.log_lines("level=ERROR") == []
    assert kcoord.log_lines("CancelledError") == []
