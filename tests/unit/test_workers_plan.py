"""``kcoord serve --workers N``: each worker's settings, the restart back-off, the options' checks."""

from __future__ import annotations

import pytest

from kcoord.coordinator.cli import build_parser
from kcoord.coordinator.ops import config
from kcoord.coordinator.ops.settings import WORKER_PORT_OFFSET, Settings
from kcoord.coordinator.workers.plan import (
    FIRST_DELAY,
    MAX_DELAY,
    STABLE_RUN,
    RestartBackoff,
    worker_settings,
)

UPSTREAM = [("10.0.0.5", 9092)]


def resolve(*argv: str) -> Settings:
    return config.resolve(build_parser().parse_args(["serve", *argv]), {}).settings


def test_each_worker_is_a_cluster_node_of_its_own_behind_the_shared_port() -> None:
    base = resolve("--workers", "3", "--listen", "0.0.0.0:9092", "--advertised-host", "kc.example.com")
    workers = [worker_settings(base, i, UPSTREAM, embedded=False) for i in range(3)]
    assert [w.coordinator_node_id for w in workers] == [1_000_000, 1_000_001, 1_000_002]
    assert [w.listen for w in workers] == [("0.0.0.0", 9092 + WORKER_PORT_OFFSET + i) for i in range(3)]
    assert all(w.listen_port_derived for w in workers)
    assert {w.shared_listen for w in workers} == {("0.0.0.0", 9092)}
    assert {w.advertised for w in workers} == {"kc.example.com"}
    assert all(w.cluster_enabled and w.workers == 1 and w.bootstrap_servers == UPSTREAM for w in workers)
    assert all(w.cluster_static_membership for w in workers)  # Kafka: static members, KIP-345
    assert {w.upstream_latest_offset_from_fetch for w in workers} == {False}


def test_named_worker_ports_are_used_as_given() -> None:
    base = resolve("--workers", "2", "--worker-ports", "7001,7002", "--listen", "127.0.0.1:9092")
    workers = [worker_settings(base, i, UPSTREAM, embedded=False) for i in range(2)]
    assert [w.listen[1] for w in workers] == [7001, 7002]
    assert not any(w.listen_port_derived for w in workers)


def test_embedded_broker_workers_join_as_dynamic_members() -> None:
    """tansu mishandles static members (docs/tansu.md): the supervisor's embedded broker is tansu."""
    base = resolve("--workers", "2")
    worker = worker_settings(base, 1, [("127.0.0.1", 40000)], embedded=True)
    assert not worker.cluster_static_membership
    assert worker.upstream_latest_offset_from_fetch is True  # as one process decides for its embedded broker


def test_metrics_move_to_a_loopback_port_per_worker_only_when_the_supervisor_serves_them() -> None:
    with_metrics = resolve("--workers", "2", "--metrics", "0.0.0.0:9404")
    assert worker_settings(with_metrics, 0, UPSTREAM, False).metrics == ("127.0.0.1", 0)
    assert worker_settings(resolve("--workers", "2"), 0, UPSTREAM, False).metrics is None


def test_listen_port_zero_lets_the_os_pick_each_workers_port() -> None:
    base = resolve("--workers", "2", "--listen", "127.0.0.1:0")
    worker = worker_settings(base, 1, UPSTREAM, embedded=False)
    assert worker.listen == ("127.0.0.1", 0) and not worker.listen_port_derived


def test_workers_need_the_state_on_the_upstream() -> None:
    with pytest.raises(config.ConfigError, match="workers .*storage=kafka"):
        resolve("--workers", "2", "--storage", "memory")


def test_worker_ports_must_name_one_port_per_worker() -> None:
    with pytest.raises(config.ConfigError, match="worker.ports .*3 ports for 2 workers"):
        resolve("--workers", "2", "--worker-ports", "1,2,3")


def test_workers_default_to_one_process() -> None:
    assert resolve().workers == 1


def test_a_worker_that_ran_a_while_is_restarted_at_once() -> None:
    backoff = RestartBackoff()
    assert backoff.delay_after(STABLE_RUN + 1) == 0.0
    assert backoff.delay_after(STABLE_RUN * 10) == 0.0


def test_a_worker_that_keeps_dying_waits_longer_each_time_up_to_the_cap() -> None:
    backoff = RestartBackoff()
    delays = [backoff.delay_after(1.0) for _ in range(10)]
    assert delays[:4] == [FIRST_DELAY, FIRST_DELAY * 2, FIRST_DELAY * 4, FIRST_DELAY * 8]
    assert delays[-1] == MAX_DELAY and delays == sorted(delays)
    assert backoff.delay_after(STABLE_RUN) == 0.0  # a stable run forgives the earlier deaths
    assert backoff.delay_after(1.0) == FIRST_DELAY
