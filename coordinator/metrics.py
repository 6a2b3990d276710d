"""Prometheus metrics. Labels stay bounded: API names, versions and error codes, never group or member ids."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from protocol.messages import ApiKey

_API_NAMES = {k.value: k.name.lower() for k in ApiKey}


def api_name(api_key: int) -> str:
    return _API_NAMES.get(api_key, f"api_{api_key}" if 0 <= api_key < 200 else "unknown")


def _error_code(response: Any) -> int:
    code = getattr(response, "error_code", 0)
    return code if isinstance(code, int) else 0


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "kcoord_requests", "Requests received, by API and version", ["api", "version"], registry=r
        )
        self.responses = Counter(
            "kcoord_responses", "Responses to group APIs, by API, version and top-level error code",
            ["api", "version", "error"], registry=r,
        )
        self.connections = Gauge("kcoord_connections", "Open client connections", registry=r)
        self.connections_total = Counter("kcoord_connections_accepted", "Client connections accepted", registry=r)
        self.upstream_bytes_total = Counter(
            "kcoord_upstream_bytes", "Bytes passed to and from upstream brokers", ["direction"], registry=r
        )
        self.upstream_errors = Counter("kcoord_upstream_errors", "Pass-through requests that failed", registry=r)
        self.append_latency = Histogram(
            "kcoord_storage_append_seconds", "Latency of shard log appends", registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )
        self.append_batch = Histogram(
            "kcoord_storage_append_batch_records", "Records per shard log append", registry=r,
            buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000),
        )
        self.shard_load_seconds = Histogram(
            "kcoord_shard_load_seconds", "Time to load a shard from its log", registry=r,
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60),
        )
        self.shard_load_records = Counter("kcoord_shard_loaded_records", "Records replayed while loading", registry=r)

    # connection hooks
    def request_received(self, api_key: int, version: int) -> None:
        self.requests.labels(api_name(api_key), str(version)).inc()

    def response_sent(self, api_key: int, version: int, response: Any) -> None:
        self.responses.labels(api_name(api_key), str(version), str(_error_code(response))).inc()

    def upstream_bytes(self, direction: str, n: int) -> None:
        self.upstream_bytes_total.labels(direction).inc(n)

    def upstream_error(self) -> None:
        self.upstream_errors.inc()

    # shard hooks (ShardObserver)
    def append_done(self, shard: int, records: int, seconds: float) -> None:
        self.append_latency.observe(seconds)
        self.append_batch.observe(records)

    def shard_loaded(self, shard: int, records: int, seconds: float) -> None:
        self.shard_load_seconds.observe(seconds)
        self.shard_load_records.inc(records)
