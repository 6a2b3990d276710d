"""The generator's connections and statistics.

Connections are kcoord's own client (:class:`client.Connection`): many requests in flight per
connection, every request sent in one loop iteration in ONE write, the hot path (heartbeats,
commits) on callbacks instead of futures. The steady-state scenario pushes tens of thousands of
heartbeats a second through a handful of sockets from one Python process that shares two cores
with the server under test.

Latency is measured from the moment a request is queued to the moment its response frame is
read, per API, into :class:`Stats` (the connections' observer).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from kcoord.client import Connection, KafkaClientError
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.primitives import CodecError

from .histogram import Histogram

API_NAMES: dict[int, str] = {
    ApiKey.FIND_COORDINATOR: "FindCoordinator",
    ApiKey.JOIN_GROUP: "JoinGroup",
    ApiKey.SYNC_GROUP: "SyncGroup",
    ApiKey.HEARTBEAT: "Heartbeat",
    ApiKey.LEAVE_GROUP: "LeaveGroup",
    ApiKey.OFFSET_COMMIT: "OffsetCommit",
    ApiKey.OFFSET_FETCH: "OffsetFetch",
    ApiKey.API_VERSIONS: "ApiVersions",
    ApiKey.METADATA: "Metadata",
    ApiKey.CONSUMER_GROUP_HEARTBEAT: "ConsumerGroupHeartbeat",
    ApiKey.CONSUMER_GROUP_DESCRIBE: "ConsumerGroupDescribe",
}


class Stats:
    """Per-API latency histograms, response counts and error codes for one run."""

    def __init__(self, timeline_api: int | None = None) -> None:
        self.latency: dict[int, Histogram] = {}
        self.errors: Counter[tuple[int, int]] = Counter()
        self.window_start = time.perf_counter()
        # second of the window -> [responses, max µs] for one API: are slow answers spread out or one stall?
        self.timeline_api = timeline_api
        self.timeline: dict[int, list[int]] = {}
        self.connections_opened = 0  # over the whole run (setup included): which shape really ran

    def histogram(self, api_key: int) -> Histogram:
        h = self.latency.get(api_key)
        if h is None:
            h = self.latency[api_key] = Histogram()
        return h

    def error(self, api_key: int, code: int) -> None:
        self.errors[(api_key, code)] += 1

    # client.Observer
    def response(self, api_key: int, seconds: float) -> None:
        h = self.latency.get(api_key)
        if h is None:
            h = self.histogram(api_key)
        us = int(seconds * 1_000_000)
        h.record(us)
        if api_key == self.timeline_api:
            sec = int(time.perf_counter() - self.window_start)
            row = self.timeline.get(sec)
            if row is None:
                self.timeline[sec] = [1, us]
            else:
                row[0] += 1
                if us > row[1]:
                    row[1] = us

    def failure(self, api_key: int, error: BaseException) -> None:
        """A heartbeat or commit got no answer: -1 the connection failed, -2 the response was malformed."""
        self.error(
            api_key, -2 if isinstance(error, CodecError) and not isinstance(error, KafkaClientError) else -1
        )

    def reset(self) -> None:
        """Start a measurement window: drop everything recorded during setup and warm-up."""
        for h in self.latency.values():
            h.reset()
        self.errors.clear()
        self.timeline.clear()
        self.window_start = time.perf_counter()

    def snapshot(self, seconds: float | None = None) -> dict[str, Any]:
        """{api: {count, rate_per_s, p50_ms, ...}} plus error counts by API and code."""
        seconds = seconds if seconds is not None else time.perf_counter() - self.window_start
        apis: dict[str, Any] = {}
        for key, h in sorted(self.latency.items()):
            if h.count:
                row = h.summary_ms()
                row["rate_per_s"] = round(h.count / seconds, 1) if seconds > 0 else 0.0
                apis[API_NAMES.get(key, str(key))] = row
        errors = {f"{API_NAMES.get(k, k)}:{code}": n for (k, code), n in sorted(self.errors.items())}
        out: dict[str, Any] = {"window_s": round(seconds, 3), "apis": apis, "errors": errors}
        if self.timeline_api is not None:
            rows = [(sec, n, us) for sec, (n, us) in self.timeline.items() if sec < int(seconds) + 1]
            worst = sorted(rows, key=lambda r: -r[2])[:5]
            out["timeline"] = {
                "api": API_NAMES.get(self.timeline_api, str(self.timeline_api)),
                "seconds_max_over_100ms": sum(1 for r in rows if r[2] > 100_000),
                "seconds": len(rows),
                "worst_seconds": [
                    {"second": sec, "responses": n, "max_ms": round(us / 1000, 1)}
                    for sec, n, us in sorted(worst)
                ],
            }
        return out


async def open_connection(
    host: str, port: int, stats: Stats, client_id: str = "kcoord-loadgen", name: str = ""
) -> Connection:
    """A connection whose responses are timed into ``stats``; no connect timeout (a join storm opens thousands)."""
    conn = await Connection.open(
        (host, port), timeout=None, client_id=client_id, name=name or None, observer=stats
    )
    stats.connections_opened += 1
    return conn
