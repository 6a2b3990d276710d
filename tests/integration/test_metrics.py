"""/metrics, /healthz and /readyz of a real kcoord while a stock consumer group works through it.

The operations acceptance check: non-zero counters for joins, syncs, heartbeats and
commits with correct labels, read by prometheus-client's own exposition parser; label values never
carry group or member ids; lifecycle events reach the (JSON) log.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from support.kcoord_process import KcoordProcess
from support.ports import free_port
from support.workload import create_topic, produce_numbered, unique
from tests.support.monitoring import (
    PROMETHEUS_SERIES,
    dashboard_expressions,
    documented_metrics,
    exported_metrics,
    exported_series,
    rule_expressions,
    series_named,
)
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is a test extra")

SHARDS = 4
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def kcoord() -> Iterator[KcoordProcess]:
    port = free_port()
    with KcoordProcess(
        "--shards",
        str(SHARDS),
        "--metrics",
        f"127.0.0.1:{port}",
        "--log-format",
        "json",
        "--group-initial-rebalance-delay-ms",
        "0",
    ) as proc:
        proc.metrics_url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
        yield proc


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def scrape(proc: KcoordProcess) -> tuple[str, Samples]:
    status, ctype, text = get(proc.metrics_url + "/metrics")  # type: ignore[attr-defined]
    assert status == 200 and ctype.startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return text, samples


def total(samples: Samples, name: str, **labels: str) -> float:
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def label_values(samples: Samples, name: str, label: str) -> set[str]:
    return {dict(ls)[label] for (n, ls), _ in samples.items() if n == name and label in dict(ls)}


def test_readyz_reports_every_shard_loaded_and_the_upstream_answering(kcoord: KcoordProcess) -> None:
    status, ctype, body = get(kcoord.metrics_url + "/readyz")  # type: ignore[attr-defined]
    assert (status, ctype) == (200, "application/json")
    ready = json.loads(body)
    upstream = ready.pop("upstream")
    assert ready == {
        "status": "ok", "listening": True, "shards": SHARDS, "loaded": SHARDS, "not_loaded": [],
        "fenced": [], "log_lost": {}, "log_lost_total": 0,
    }  # fmt: skip
    assert (
        upstream["state"] == "answering" and upstream["seconds_since_answer"] <= upstream["timeout_seconds"]
    )
    status, _, body = get(kcoord.metrics_url + "/healthz")  # type: ignore[attr-defined]
    assert status == 200 and json.loads(body) == {"status": "ok"}
    assert get(kcoord.metrics_url + "/nope")[0] == 404  # type: ignore[attr-defined]


def heartbeat_answers(samples: Samples) -> dict[str, float]:
    """kcoord's Heartbeat responses by error code."""
    answers: dict[str, float] = {}
    for (name, labels), value in samples.items():
        if name == "kcoord_responses_total" and dict(labels).get("api") == "heartbeat":
            error = dict(labels)["error"]
            answers[error] = answers.get(error, 0.0) + value
    return answers


def test_a_consumer_group_shows_up_in_the_metrics_with_bounded_labels(kcoord: KcoordProcess) -> None:
    topic, group = unique("metrics-topic"), unique("metrics-group")
    create_topic(kcoord.bootstrap, topic, 2)
    produce_numbered(kcoord.bootstrap, topic, 200, 2)
    # librdkafka, not kafka-python 3.0.12. In a CI run (its debug log captured) kafka-python's
    # consumer sat in "rebalancing" with its heartbeats off for good: its leader assigned before the
    # topic's metadata was in its snapshot and rejoined once it was, and a poll's timeout ran out
    # during that join. The join finished after the poll returned, which made need_rejoin() false,
    # so no later poll completed it. kcoord had answered each of its requests at once. (An earlier
    # CI run's failure here, no heartbeat answered NONE, fits the same.)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kcoord.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
        }
    )
    consumer.subscribe([topic])
    try:
        consumed = 0
        deadline = time.monotonic() + 60
        while consumed < 200 and time.monotonic() < deadline:
            batch = consumer.consume(num_messages=100, timeout=0.2)
            assert not [msg.error() for msg in batch if msg.error()]
            consumed += len(batch)
            if batch:
                consumer.commit(asynchronous=False)
        assert consumed == 200
        member_id = consumer.memberid()  # to prove it is not a label
        assert member_id
        # Heartbeats every 200 ms: wait until kcoord has answered three of them NONE (a bound, not a
        # fixed window, for a loaded machine).
        deadline = time.monotonic() + 30
        while heartbeat_answers(scrape(kcoord)[1]).get("NONE", 0) < 3 and time.monotonic() < deadline:
            consumer.poll(0.2)
        answers = heartbeat_answers(scrape(kcoord)[1])
        assert answers.get("NONE", 0) >= 3, answers
        with WireClient(kcoord.bootstrap) as wire:  # a heartbeat from a member the group does not know
            fenced = wire.request(ApiKey.HEARTBEAT, 4, m.HeartbeatRequest(
                group_id=group, generation_id=1, member_id="ghost", group_instance_id=None))  # fmt: skip
            assert fenced.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        text, during = scrape(kcoord)
    finally:
        consumer.close()  # LeaveGroup

    for api in ("join_group", "sync_group", "heartbeat", "offset_commit", "offset_fetch", "find_coordinator"):
        assert total(during, "kcoord_requests_total", api=api) > 0, api
        ok = total(during, "kcoord_responses_total", api=api, error="NONE")
        assert ok > 0, api
        versions = label_values(during, "kcoord_responses_total", "version")
        assert all(v.isdigit() for v in versions)
        assert total(during, "kcoord_request_latency_seconds_count", api=api) > 0, api
    assert total(during, "kcoord_offset_commits_total", api="offset_commit", result="NONE") > 0
    assert total(during, "kcoord_fenced_requests_total", api="heartbeat", reason="UNKNOWN_MEMBER_ID") >= 1
    assert total(during, "kcoord_groups", state="Stable", protocol_type="consumer") >= 1
    assert total(during, "kcoord_group_members", kind="dynamic") >= 1
    assert total(during, "kcoord_member_joins_total", kind="dynamic") >= 1
    assert total(during, "kcoord_rebalances_total", reason="member_joined") >= 1
    assert total(during, "kcoord_rebalance_duration_seconds_count") >= 1
    assert total(during, "kcoord_storage_append_seconds_count") > 0
    assert total(during, "kcoord_storage_append_batch_records_count") > 0
    assert total(during, "kcoord_shard_load_seconds_count") == SHARDS
    assert total(during, "kcoord_shards", status="loaded") == SHARDS
    assert total(during, "kcoord_connections") >= 1
    assert total(during, "kcoord_upstream_bytes_total", direction="out") > 0
    assert total(during, "kcoord_upstream_bytes_total", direction="in") > 0
    # Bounded labels: neither the group, the member nor the topic appears anywhere in the exposition.
    for unbounded in (group, member_id, topic):
        assert unbounded not in text

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        _, after = scrape(kcoord)
        if total(after, "kcoord_member_removals_total", reason="leave_group") >= 1:
            break
        time.sleep(0.2)
    assert total(after, "kcoord_member_removals_total", reason="leave_group") >= 1
    assert total(after, "kcoord_rebalances_total", reason="member_left") >= 1

    events = [
        json.loads(line) for line in Path(kcoord.log_path).read_text().splitlines() if line.startswith("{")
    ]
    mine = [e for e in events if e.get("group") == group]
    kinds = {e["event"] for e in mine}
    assert {
        "member.joined",
        "rebalance.started",
        "rebalance.completed",
        "member.left",
        "member.fenced",
    } <= kinds
    completed = next(e for e in mine if e["event"] == "rebalance.completed")
    assert completed["generation"] >= 1 and completed["duration_ms"] >= 0 and completed["members"] == 1
    fenced_line = next(e for e in mine if e["event"] == "member.fenced")
    assert (fenced_line["member"], fenced_line["reason"], fenced_line["level"]) == ("ghost", "UNKNOWN_MEMBER_ID",
                                                                                    "WARNING")  # fmt: skip
    assert sum(1 for e in events if e.get("event") == "shard.loaded") == SHARDS


def test_the_dashboard_and_the_alerts_name_only_metrics_kcoord_exports(kcoord: KcoordProcess) -> None:
    """deploy/grafana/kcoord.json and deploy/prometheus/alerts.yml against a real scrape."""
    text, _samples = scrape(kcoord)
    exported = exported_series(text) | PROMETHEUS_SERIES
    expressions = rule_expressions() + dashboard_expressions()
    unknown = {name: expr for expr in expressions for name in series_named(expr) if name not in exported}
    assert not unknown, unknown
    named = set().union(*(series_named(e) for e in expressions))
    assert len(named) >= 25, sorted(named)  # the dashboard covers the metrics table, not a few of them


def test_the_metrics_table_in_the_docs_names_what_a_running_kcoord_exports(kcoord: KcoordProcess) -> None:
    """docs/operations.md's table against a real scrape, both ways (tests/unit/test_metrics_documented.py
    checks an App's registry the same way without a process)."""
    text, _samples = scrape(kcoord)
    exported, documented = exported_metrics(text), documented_metrics()
    assert sorted(exported - documented) == [], "exported but not documented"
    assert sorted(documented - exported) == [], "documented but not exported"
