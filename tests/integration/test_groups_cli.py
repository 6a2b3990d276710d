"""``kcoord groups`` against a live kcoord with a working consumer group."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer

from support import REPO
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, produce_numbered, unique

pytestmark = pytest.mark.integration

PARTITIONS = 3
RECORDS = 90


@pytest.fixture(scope="module")
def kcoord() -> Iterator[KcoordProcess]:
    with KcoordProcess("--shards", "4", "--group-initial-rebalance-delay-ms", "0") as proc:
        yield proc


def groups_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kcoord.coordinator", "groups", "--bootstrap-server", bootstrap, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )


def test_list_and_describe_a_static_consumer_group_with_lag(kcoord: KcoordProcess) -> None:
    topic, group = unique("cli-topic"), unique("cli-group")
    create_topic(kcoord.bootstrap, topic, PARTITIONS)
    produce_numbered(kcoord.bootstrap, topic, RECORDS, PARTITIONS)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=kcoord.bootstrap,
        group_id=group,
        group_instance_id="worker-1",
        client_id="cli-test-client",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=10000,
        heartbeat_interval_ms=500,
    )
    try:
        # metadata before the first join: a leader that assigned before its first metadata answer
        # took nothing and stayed so in a CI run (test_sasl_ssl.kafka_python_consume)
        consumer.partitions_for_topic(topic)
        consumed = 0
        deadline = time.monotonic() + 60
        while consumed < RECORDS and time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=200)
            consumed += sum(len(records) for records in batch.values())
            if batch:
                consumer.commit()
        assert consumed == RECORDS
        produce_numbered(kcoord.bootstrap, topic, 30, PARTITIONS)  # lag: produced, not consumed

        listed = groups_cli(kcoord.bootstrap, "list")
        assert listed.returncode == 0, listed.stderr
        row = next(line.split() for line in listed.stdout.splitlines() if line.startswith(group))
        assert row == [group, "Classic", "consumer", "Stable"]  # kafka-groups.sh's TYPE and PROTOCOL

        described = groups_cli(kcoord.bootstrap, "--json", "describe", group)
        assert described.returncode == 0, described.stderr
        [d] = json.loads(described.stdout)
        assert (d["group"], d["state"], d["protocol_type"], d["protocol"]) == (
            group,
            "Stable",
            "consumer",
            "range",
        )
        [member] = d["members"]
        assert member["group_instance_id"] == "worker-1" and member["client_id"] == "cli-test-client"
        assert member["member_id"].startswith("worker-1") and member["host"].endswith("127.0.0.1")
        assert member["assignment"] == {topic: list(range(PARTITIONS))}
        offsets = {o["partition"]: o for o in d["offsets"]}
        assert sorted(offsets) == list(range(PARTITIONS))
        assert sum(o["committed"] for o in offsets.values()) == RECORDS
        for o in offsets.values():
            assert o["topic"] == topic and o["member_id"] == member["member_id"]
            assert o["log_end"] >= o["committed"] and o["lag"] == o["log_end"] - o["committed"]
        assert sum(o["lag"] for o in offsets.values()) > 0  # the 30 new records are not consumed

        table = groups_cli(kcoord.bootstrap, "describe", group, "no-such-group")
        assert table.returncode == 1  # one of the groups does not exist
        assert "CURRENT-OFFSET  LOG-END-OFFSET  LAG" in table.stdout
        assert "GROUP-INSTANCE-ID" in table.stdout and "worker-1" in table.stdout
        assert f"{topic}(0,1,2)" in table.stdout
        assert "Consumer group 'no-such-group': group does not exist." in table.stdout
    finally:
        consumer.close()


def test_unreachable_bootstrap_is_an_error_not_a_traceback() -> None:
    result = groups_cli("127.0.0.1:1", "--timeout", "2", "list")
    assert result.returncode == 1
    assert result.stderr.startswith("kcoord groups: error: cannot connect to 127.0.0.1:1")


def test_describe_a_consumer_protocol_group(kcoord: KcoordProcess) -> None:
    """A KIP-848 group is described through ConsumerGroupDescribe (DescribeGroups answers it as
    "not a classic group", as Kafka does)."""
    from confluent_kafka import Consumer

    topic, group = unique("cli-848-topic"), unique("cli-848-group")
    create_topic(kcoord.bootstrap, topic, PARTITIONS)
    produce_numbered(kcoord.bootstrap, topic, RECORDS, PARTITIONS)
    consumer = Consumer(
        {
            "bootstrap.servers": kcoord.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "client.id": "cli-848-client",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        consumed = 0
        deadline = time.monotonic() + 60
        while consumed < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                consumed += 1
        consumer.commit(asynchronous=False)
        assert consumed == RECORDS
        listed = groups_cli(kcoord.bootstrap, "list")
        assert listed.returncode == 0, listed.stderr
        row = next(line.split() for line in listed.stdout.splitlines() if line.startswith(group))
        assert row == [group, "Consumer", "consumer", "Stable"]  # same protocol, another group type
        described = groups_cli(kcoord.bootstrap, "--json", "describe", group)
        assert described.returncode == 0, described.stderr
        [d] = json.loads(described.stdout)
        assert (d["group"], d["state"], d["protocol_type"], d["protocol"]) == (
            group,
            "Stable",
            "consumer",
            "uniform",
        )
        [member] = d["members"]
        assert member["client_id"] == "cli-848-client"
        assert member["assignment"] == {topic: list(range(PARTITIONS))}
        assert sum(o["committed"] for o in d["offsets"]) == RECORDS
    finally:
        consumer.close()
