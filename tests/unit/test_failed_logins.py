"""Failed SASL logins are logged once per peer host a window, the rest counted: the pure limiter,
and the authentication series of the metrics."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kcoord.coordinator.net.failed_logins import FailedLogins, Unlogged
from kcoord.coordinator.ops.metrics import Metrics


def test_the_first_failure_of_a_host_is_logged_and_the_rest_of_its_window_counted() -> None:
    logins = FailedLogins(window_s=60)
    assert logins.failed("10.0.0.1", "PLAIN as User:alice", now=0) == Unlogged("10.0.0.1", 0, "")
    for i in range(999):
        assert logins.failed("10.0.0.1", f"PLAIN as User:u{i}", now=0.05 * i) is None
    # another host has a window of its own
    assert logins.failed("10.0.0.2", "SCRAM-SHA-512 as User:bob", now=10) == Unlogged("10.0.0.2", 0, "")
    assert logins.expired(now=59.9) == []
    assert logins.expired(now=60) == [Unlogged("10.0.0.1", 999, "PLAIN as User:u998")]
    assert logins.expired(now=70) == []  # 10.0.0.2 had nothing unlogged: forgotten quietly
    assert len(logins) == 0


def test_a_failure_after_the_window_is_logged_with_the_count_the_sweep_did_not_take() -> None:
    logins = FailedLogins(window_s=60)
    logins.failed("10.0.0.1", "PLAIN as User:alice", now=0)
    logins.failed("10.0.0.1", "PLAIN as User:alice", now=1)
    logins.failed("10.0.0.1", "PLAIN as User:mallory", now=2)
    assert logins.failed("10.0.0.1", "PLAIN as User:alice", now=61) == Unlogged(
        "10.0.0.1", 2, "PLAIN as User:mallory"
    )
    assert logins.failed("10.0.0.1", "PLAIN as User:alice", now=62) is None  # a new window began at 61


def test_memory_is_bounded_by_max_hosts_oldest_first() -> None:
    logins = FailedLogins(window_s=60, max_hosts=100)
    for i in range(1000):
        assert logins.failed(f"10.0.{i // 256}.{i % 256}", "PLAIN as User:x", now=i * 0.01) is not None
    assert len(logins) == 100
    # the survivors are the newest hosts: the next failure of one of them is counted, not logged
    assert logins.failed("10.0.3.231", "PLAIN as User:x", now=10.5) is None  # host 999
    assert logins.failed("10.0.0.0", "PLAIN as User:x", now=10.5) is not None  # host 0 was dropped


def test_authentication_series_bound_their_mechanism_label() -> None:
    metrics = Metrics()
    metrics.sasl_authentication("SCRAM-SHA-512", succeeded=True)
    metrics.sasl_authentication("PLAIN", succeeded=False)
    metrics.sasl_authentication("PLAIN", succeeded=False)
    metrics.sasl_authentication("X-MADE-UP-" + "A" * 100, succeeded=False)
    metrics.tls_handshake_failed("timeout")
    text = generate_latest(metrics.registry).decode()
    got = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert got[("kcoord_sasl_authentications_total", (("mechanism", "SCRAM-SHA-512"),))] == 1
    assert got[("kcoord_sasl_authentication_failures_total", (("mechanism", "PLAIN"),))] == 2
    assert got[("kcoord_sasl_authentication_failures_total", (("mechanism", "other"),))] == 1
    assert got[("kcoord_tls_handshake_failures_total", (("reason", "timeout"),))] == 1
    assert got[("kcoord_tls_handshake_failures_total", (("reason", "handshake"),))] == 0
