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

from kcoord.coordinator.ops.http_endpoint import HttpEndpoint

from .scrape import http_get, merge_metrics

log = logging.getLogger("kcoord.http")

METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
JSON_TYPE = "application/json"

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
        self._http = HttpEndpoint(self._respond, log)

    @property
    def port(self) -> int:
        return self._http.port

    async def start(self, host: str, port: int) -> int:
        bound = await self._http.start(host, port)
        log.info(
            "metrics of every worker on http://%s:%d/metrics, liveness on /healthz, readiness on /readyz",
            host,
            bound,
        )
        return bound

    async def close(self) -> None:
        await self._http.close()

    async def _respond(self, method: str, path: str) -> tuple[int, str, bytes]:
        if method not in ("GET", "HEAD"):
            return 405, "text/plain; charset=utf-8", b"method not allowed\n"
        return await answer(path, self.worker_ports, self.stopping())
