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

    def __init__(self) -> None:
        self.latency: dict[int, Histogram] = {}
        self.errors: Counter[tuple[int, int]] = Counter()
        self.window_start = time.perf_counter()

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
        h.record(int(seconds * 1_000_000))

    def failure(self, api_key: int, error: BaseException) -> None:
        """A heartbeat or commit got no answer: -1 the connection failed, -2 the response was malformed."""
        self.error(api_key, -2 if isinstance(error, CodecError) and not isinstance(error, KafkaClientError) else -1)

    def reset(self) -> None:
        """Start a measurement window: drop everything recorded during setup and warm-up."""
        for h in self.latency.values():
            h.reset()
        self.errors.clear()
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
        return {"window_s": round(seconds, 3), "apis": apis, "errors": errors}


async def open_connection(host: str, port: int, stats: Stats, client_id: str = "kcoord-loadgen", name: str = "") -> Connection:
    """A connection whose responses are timed into ``stats``; no connect timeout (a join storm opens thousands)."""
    return await Connection.open((host, port), timeout=None, client_id=client_id, name=name or None, observer=stats)
