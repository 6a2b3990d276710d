"""A real KIP-848 consumer group (librdkafka, ``group.protocol=consumer``) in kcoord's scrape: counted
in the group and member gauges by type and state, its epoch bumps as consumer-protocol rebalances,
and its members' hand-over as reconciliation time. kcoord stores its state on tansu and on Apache
Kafka in turn."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.kcoord_process import KcoordProcess
from support.ports import free_port
from support.workload import create_topic, unique
from tests.support.fixtures import Upstream
from tests.support.members import PollingMember as Member

pytestmark = pytest.mark.integration

PARTITIONS = 4
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def kcoord(upstream: Upstream) -> Iterator[KcoordProcess]:
    port = free_port()
    with KcoordProcess(
        "--shards", "2", "--storage", "kafka", "--internal-topic", unique("__kcoord_metrics848"),
        "--metrics", f"127.0.0.1:{port}", "--log-format", "json",
        bootstrap=upstream.bootstrap,
    ) as proc:  # fmt: skip
        proc.metrics_url = f"http://127.0.0.1:{port}/metrics"  # type: ignore[attr-defined]
        yield proc


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.1)


def scrape(proc: KcoordProcess) -> Samples:
    with urllib.request.urlopen(proc.metrics_url, timeout=10) as resp:  # type: ignore[attr-defined]
        text = resp.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def total(samples: Samples, name: str, **labels: str) -> float:
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def test_a_kip848_group_is_counted_and_its_hand_over_measured(kcoord: KcoordProcess) -> None:
    topic, group = unique("metrics848"), unique("metrics848-group")
    create_topic(kcoord.bootstrap, topic, PARTITIONS)
    first, second = Member(kcoord.bootstrap, group, topic), Member(kcoord.bootstrap, group, topic)
    first.start()
    try:
        wait_for(
            lambda: first.assignment == set(range(PARTITIONS)), 30, "the first member gets every partition"
        )
        second.start()
        # The coordinator moves half to the newcomer, which gets them once the first revoked them.
        wait_for(
            lambda: len(first.assignment) == 2 and len(second.assignment) == 2, 30, "two partitions each"
        )
        wait_for(
            lambda: total(scrape(kcoord), "kcoord_groups", type="consumer", state="Stable") == 1,
            15,
            "the group Stable in the scrape",
        )
        samples = scrape(kcoord)
    finally:
        first.stop()
        second.stop()

    assert total(samples, "kcoord_groups", type="consumer", state="Stable", protocol_type="consumer") == 1
    assert total(samples, "kcoord_groups", type="classic") == 0
    assert total(samples, "kcoord_group_members", type="consumer", state="Stable", protocol="consumer") == 2
    assert total(samples, "kcoord_mixed_groups") == 0
    assert total(samples, "kcoord_rebalances_total", protocol="consumer", reason="member_joined") >= 2
    assert total(samples, "kcoord_rebalances_total", protocol="classic") == 0
    assert total(samples, "kcoord_rebalance_duration_seconds_count", protocol="consumer") >= 2
    # The first member's lone join (0 s) and the hand-over, which waits for a revocation round trip.
    assert total(samples, "kcoord_consumer_group_reconciliation_seconds_count") >= 2
    assert total(samples, "kcoord_consumer_group_reconciliation_seconds_sum") > 0

    lines = [
        json.loads(line) for line in Path(kcoord.log_path).read_text().splitlines() if line.startswith("{")
    ]
    reconciled = [e for e in lines if e.get("event") == "group.reconciled" and e.get("group") == group]
    assert [e["members"] for e in reconciled][:2] == [1, 2], reconciled
    assert reconciled[1]["duration_ms"] > 0 and reconciled[1]["epoch"] >= 2
    started = [e for e in lines if e.get("event") == "rebalance.started" and e.get("group") == group]
    assert started and all(e["type"] == "consumer" for e in started)
