"""The supervisor's one /metrics, /healthz and /readyz (the ``metrics`` address).

- /metrics: every running worker's metrics, each sample labelled ``worker="i"`` (scrape.py).
- /healthz: the supervisor's own liveness: it answers, so it runs (a dead worker is its job to
  replace, not a reason to restart the host's kcoord).
- /readyz: ready only when every worker runs and answers its own /readyz with 200; the body has
  each worker's answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from .scrape import http_get, merge_metrics

log = logging.getLogger("kcoord.http")

METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
JSON_TYPE = "application/json"
REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}

# index -> the worker's metrics port, or None while it is not running (started, not replaced yet)
WorkerPorts = Callable[[], dict[int, int | None]]


async def _ask(port: int | None, path: str) -> tuple[int, bytes] | None:
    if port is None:
        return None
    try:
        return await http_get("127.0.0.1", port, path)
    except (OSError, TimeoutError, ValueError, IndexError, asyncio.IncompleteReadError):
        return None


async def answer(path: str, worker_ports: WorkerPorts, stopping: bool) -> tuple[int, str, bytes]:
    """(status, content type, body) for a GET of ``path``."""
    path = path.split("?", 1)[0]
    ports = worker_ports()
    if path == "/metrics":
        answers = await asyncio.gather(*(_ask(port, "/metrics") for port in ports.values()))
        texts = {
            i: a[1].decode() for i, a in zip(ports, answers, strict=True) if a is not None and a[0] == 200
        }
        return 200, METRICS_TYPE, merge_metrics(texts).encode()
    if path in ("/healthz", "/livez"):
        ok = not stopping
        body: dict[str, Any] = {"status": "ok" if ok else "stopping", "workers": len(ports)}
        return (200 if ok else 503), JSON_TYPE, json.dumps(body).encode() + b"\n"
    if path == "/readyz":
        answers = await asyncio.gather(*(_ask(port, "/readyz") for port in ports.values()))
        workers: dict[str, Any] = {}
        for index, got in zip(ports, answers, strict=True):
            if got is None:
                workers[str(index)] = {"status": "not running"}
            else:
                with contextlib.suppress(ValueError):
                    workers[str(index)] = json.loads(got[1])
                workers.setdefault(str(index), {"status": f"HTTP {got[0]}"})
        ok = not stopping and all(got is not None and got[0] == 200 for got in answers)
        body = {"status": "ok" if ok else "unavailable", "workers": workers}
        return (200 if ok else 503), JSON_TYPE, json.dumps(body).encode() + b"\n"
    return 404, "text/plain; charset=utf-8", b"not found: try /metrics, /healthz or /readyz\n"


class SupervisorEndpoint:
    def __init__(self, worker_ports: WorkerPorts, stopping: Callable[[], bool]) -> None:
        self.worker_ports = worker_ports
        self.stopping = stopping
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self._open: set[asyncio.StreamWriter] = set()

    async def start(self, host: str, port: int) -> int:
        self.server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        self.port = self.server.sockets[0].getsockname()[1]
        log.info(
            "metrics of every worker on http://%s:%d/metrics, liveness on /healthz, readiness on /readyz",
            host,
            self.port,
        )
        return self.port

    async def close(self) -> None:
        if self.server is None:
            return
        self.server.close()
        for writer in list(self._open):
            writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.server.wait_closed(), 2.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.add(writer)
        try:
            while True:
                request_line = await asyncio.wait_for(reader.readline(), 30.0)
                if not request_line:
                    return
                while (await asyncio.wait_for(reader.readline(), 30.0)) not in (b"\r\n", b"\n", b""):
                    pass  # headers: nothing needed
                parts = request_line.decode("latin-1").split()
                status, ctype, body = await self._respond(parts)
                head = (
                    f"HTTP/1.1 {status} {REASONS[status]}\r\nContent-Type: {ctype}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n"
                )
                writer.write(head.encode("latin-1") + (b"" if parts[:1] == ["HEAD"] else body))
                await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass  # shutdown; ended quietly (see ops/observability.py)
        except Exception:
            log.exception("supervisor endpoint failed")
        finally:
            self._open.discard(writer)
            writer.close()

    async def _respond(self, parts: list[str]) -> tuple[int, str, bytes]:
        if len(parts) < 2:
            return 400, "text/plain; charset=utf-8", b"bad request\n"
        if parts[0] not in ("GET", "HEAD"):
            return 405, "text/plain; charset=utf-8", b"method not allowed\n"
        return await answer(parts[1], self.worker_ports, self.stopping())
