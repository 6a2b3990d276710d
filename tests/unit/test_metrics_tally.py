"""The per-request series are plain tallies exported at scrape time: the exposition must read as
prometheus_client's own Counter and Histogram would (names, labels, cumulative buckets)."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kcoord.coordinator.ops.metrics import LATENCY_BUCKETS, Metrics
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_requests_and_responses_are_counted_by_api_version_and_error() -> None:
    metrics = Metrics()
    for _ in range(3):
        metrics.request_received(ApiKey.HEARTBEAT, 4)
    metrics.response_sent(ApiKey.HEARTBEAT, 4, m.HeartbeatResponse())
    metrics.response_sent(
        ApiKey.HEARTBEAT, 4, m.HeartbeatResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS)
    )
    got = samples(metrics)
    assert got[("kcoord_requests_total", (("api", "heartbeat"), ("version", "4")))] == 3
    assert got[("kcoord_responses_total", (("api", "heartbeat"), ("error", "NONE"), ("version", "4")))] == 1
    assert (
        got[
            (
                "kcoord_responses_total",
                (("api", "heartbeat"), ("error", "REBALANCE_IN_PROGRESS"), ("version", "4")),
            )
        ]
        == 1
    )


def test_latency_histogram_buckets_are_cumulative_with_inf_sum_and_count() -> None:
    metrics = Metrics()
    observed = [0.00005, 0.0001, 0.003, 0.003, 2.0, 1_000.0]
    for seconds in observed:
        metrics.request_done(ApiKey.OFFSET_COMMIT, seconds)
    got = samples(metrics)

    def bucket(le: str) -> float:
        return got[("kcoord_request_latency_seconds_bucket", (("api", "offset_commit"), ("le", le)))]

    for bound in LATENCY_BUCKETS:
        le = str(float(bound))
        assert bucket(le) == sum(1 for s in observed if s <= bound), le
    assert bucket("+Inf") == len(observed)
    assert got[("kcoord_request_latency_seconds_count", (("api", "offset_commit"),))] == len(observed)
    assert (
        abs(got[("kcoord_request_latency_seconds_sum", (("api", "offset_commit"),))] - sum(observed)) < 1e-9
    )
