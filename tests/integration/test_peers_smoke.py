"""Smoke tests of the test infrastructure itself: the tansu broker helper and the client peers.

Every peer here talks to tansu directly (tansu has its own group coordinator), so a failure in
this file points at the harness, not at kcoord. The kcoord tests then swap the bootstrap address.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

import tests.conftest as _conftest
from support import procs
from support.broker import BrokerStartError, TansuBroker
from support.java import run_admin
from tests.support.connect_scenario import two_workers_share_work

if not hasattr(_conftest, "tansu"):  # until tests/conftest.py star-imports tests.support.fixtures
    from tests.support.fixtures import java_peer, java_peers, tansu  # noqa: F401

pytestmark = pytest.mark.integration

RECORDS = 100
PARTITIONS = 3


def unique(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns()}"


def produce(bootstrap: str, topic: str, count: int = RECORDS, partitions: int = PARTITIONS) -> set[bytes]:
    """Create the topic and write ``count`` distinct values round-robin over its partitions."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    values = {f"value-{i}".encode() for i in range(count)}
    for i, value in enumerate(sorted(values)):
        producer.send(topic, value, partition=i % partitions)
    producer.flush(30)
    producer.close()
    return values


def test_broker_start_failure_reports_log_tail(tmp_path, monkeypatch) -> None:
    fake = tmp_path / "fake-tansu"
    fake.write_text("#!/bin/sh\necho 'fake tansu: will not listen'\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CALF_TANSU_BIN", str(fake))
    broker = TansuBroker(log_dir=tmp_path)
    with pytest.raises(BrokerStartError, match="will not listen"):
        broker.start(timeout=1.0)
    assert not broker.running
    assert not [p for p in procs.live() if str(fake) in p.args]


def test_broker_round_trip(tansu: TansuBroker) -> None:
    assert tansu.running
    assert tansu.api_versions[18][1] >= 3  # ApiVersions
    assert tansu.api_versions[11] == (0, 9)  # JoinGroup


def test_java_consumer_peer_against_tansu(tansu: TansuBroker, java_peer) -> None:
    topic, group = unique("java-smoke"), unique("java-group")
    produce(tansu.bootstrap, topic)
    peer = java_peer(
        "ConsumerPeer",
        ["--bootstrap", tansu.bootstrap, "--group", group, "--topic", topic, "--commit",
         "--max-records", str(RECORDS), "--session-timeout-ms", "6000", "--max-seconds", "90"],
    )  # fmt: skip
    assigned = peer.wait_for("assigned", timeout=60)
    assert assigned["partitions"] == [f"{topic}-{p}" for p in range(PARTITIONS)]
    peer.wait_for("records", lambda e: e["total"] >= RECORDS, timeout=60)
    closed = peer.wait_for("closed", timeout=30)
    assert closed["exitCode"] == 0
    committed = [e for e in peer.events if e["event"] == "committed"][-1]["offsets"]
    assert sum(committed.values()) == RECORDS
    offsets = run_admin(tansu.bootstrap, "list-offsets", group)
    assert {tp: o["offset"] for tp, o in offsets["offsets"].items()} == committed
    assert peer.process.wait(10) == 0


def test_admin_peer_describe_and_remove_members(tansu: TansuBroker, java_peers) -> None:
    # tansu's DescribeGroups content is unreliable (docs/tansu.md), so only the shape is checked here.
    group = unique("admin-group")
    described = run_admin(tansu.bootstrap, "describe", group)
    assert [g["groupId"] for g in described["groups"]] == [group]
    assert isinstance(described["groups"][0]["members"], list)
    removed = run_admin(tansu.bootstrap, "remove-members", group, "ghost-1", "ghost-2")
    assert set(removed["results"]) == {"ghost-1", "ghost-2"}
    assert all(r != "OK" for r in removed["results"].values())


def test_confluent_consumer_against_tansu(tansu: TansuBroker) -> None:
    topic, group = unique("rdkafka-smoke"), unique("rdkafka-group")
    expected = produce(tansu.bootstrap, topic)
    consumer = Consumer({
        "bootstrap.servers": tansu.bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,  # tansu holds the first JoinGroup for about half of it
    })  # fmt: skip
    seen: set[bytes] = set()
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while seen != expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.add(msg.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert seen == expected


def test_connect_worker_peers_share_work(tansu: TansuBroker, java_peer) -> None:
    # tansu holds a first join for about half the session timeout, so keep it short here.
    two_workers_share_work(tansu.bootstrap, unique("connect-smoke"), java_peer, session_ms=6000)
