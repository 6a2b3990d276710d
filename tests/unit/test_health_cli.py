"""``kcoord health`` (the image's HEALTHCHECK) asks /readyz (``--live``: /healthz) where the serving
process was told to serve it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from kcoord.coordinator.cli import build_parser, main
from kcoord.coordinator.tools.health import serve_argv


class _Healthz(BaseHTTPRequestHandler):
    status = 200  # of /readyz
    live_status = 200  # of /healthz

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        codes = {"/readyz": self.status, "/healthz": self.live_status}
        self.send_response(codes.get(self.path, 404))
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def healthz() -> Iterator[HTTPServer]:
    server = HTTPServer(("127.0.0.1", 0), _Healthz)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def fake_serving_process(*serve_args: str) -> subprocess.Popen[bytes]:
    """A process whose command line reads like ``kcoord serve ...`` (what PID 1 is in the image)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "serve", *serve_args])
    # Popen can return before the child's exec shows in /proc/PID/cmdline (it still reads as pytest's).
    deadline = time.monotonic() + 10
    while b"\0serve\0" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)
    return proc


def test_health_follows_the_metrics_flag_of_the_serving_process(healthz: HTTPServer) -> None:
    port = healthz.server_address[1]
    proc = fake_serving_process("--listen", "0.0.0.0:1", "--metrics", f"0.0.0.0:{port}")
    try:
        assert serve_argv(proc.pid) == ["serve", "--listen", "0.0.0.0:1", "--metrics", f"0.0.0.0:{port}"]
        assert main(["health", "--pid", str(proc.pid)]) == 0
        _Healthz.status = 503  # shards still loading, or the upstream silent
        assert main(["health", "--pid", str(proc.pid)]) == 1
        assert main(["health", "--live", "--pid", str(proc.pid)]) == 0  # alive all the same
        _Healthz.live_status = 503
        assert main(["health", "--live", "--pid", str(proc.pid)]) == 1
    finally:
        _Healthz.status = _Healthz.live_status = 200
        proc.kill()
        proc.wait()


def test_health_reads_the_environment_when_the_flags_say_nothing(
    healthz: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = healthz.server_address[1]
    proc = fake_serving_process()
    try:
        monkeypatch.setenv("KCOORD_METRICS", f"127.0.0.1:{port}")
        assert main(["health", "--pid", str(proc.pid)]) == 0
        monkeypatch.setenv("KCOORD_METRICS", "127.0.0.1:1")  # nothing listens on port 1
        assert main(["health", "--pid", str(proc.pid)]) == 1
    finally:
        proc.kill()
        proc.wait()


def test_health_is_a_subcommand() -> None:
    assert build_parser().parse_args(["health"]).command == "health"
