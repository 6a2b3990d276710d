"""Online migration through kcoord with stock clients: a librdkafka (confluent-kafka) member of a classic
group is joined by a librdkafka member of the consumer protocol (``group.protocol=consumer``), which
converts the group to a consumer group; both are given partitions by the coordinator, never the same
one; when the consumer-protocol member leaves, the group converts back and the classic member takes
every partition again. No record is lost on the way. kcoord stores its state on the upstream, tansu
and Apache Kafka in turn. (The full rolling upgrade and downgrade with Java and librdkafka clients,
counting duplicates and ownerless seconds against Kafka 4.0, is a harness of its own.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kafka import KafkaProducer

from kcoord.coordinator.tools.groups import GroupsAdmin, render_description
from kcoord.protocol import messages as m
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, produce_numbered, unique
from tests.support.fixtures import Upstream
from tests.support.members import PollingMember
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

PARTITIONS = 4


@pytest.fixture(scope="module")
def kcoord(upstream: Upstream) -> Iterator[KcoordProcess]:
    with KcoordProcess(
        "--shards", "1", "--storage", "kafka", "--internal-topic", unique("__kcoord_mig"),
        # the classic member joins alone, then the other joins a group that is not Empty: the
        # default 3 s initial rebalance delay only holds the first join back
        "--group-initial-rebalance-delay-ms", "0",
        bootstrap=upstream.bootstrap,
    ) as proc:  # fmt: skip
        yield proc


def wait_for(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.1)


def owners(client: WireClient, group: str) -> dict[int, list[str]] | None:
    """Partition -> the members the coordinator says own it (ConsumerGroupDescribe), or None when the
    group is not a consumer group (yet, or any more)."""
    described = client.request(69, 1, m.ConsumerGroupDescribeRequest(group_ids=[group])).groups[0]
    if described.error_code != 0:
        return None
    out: dict[int, list[str]] = {}
    for member in described.members:
        for topic in member.assignment.topic_partitions:
            for partition in topic.partitions:
                out.setdefault(partition, []).append(member.member_id)
    return out


def test_a_classic_member_and_a_consumer_protocol_member_share_a_group_and_convert_it_back(
    kcoord: KcoordProcess,
) -> None:
    topic, group = unique("mig"), unique("mig-group")
    create_topic(kcoord.bootstrap, topic, PARTITIONS)
    classic = PollingMember(kcoord.bootstrap, group, topic, "classic", tolerate_commit_errors=True)
    modern = PollingMember(kcoord.bootstrap, group, topic, "consumer", tolerate_commit_errors=True)
    produced = produce_numbered(kcoord.bootstrap, topic, 200, PARTITIONS)
    classic.start()
    try:
        wait_for(
            lambda: classic.assignment == set(range(PARTITIONS)), 30, "the classic member owns everything"
        )
        modern.start()
        wait_for(lambda: classic.assignment and modern.assignment, 30, "both members own partitions")
        with WireClient(kcoord.bootstrap) as client:
            # Sampled while the group settles: the coordinator never gives a partition to two members.
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                seen = owners(client, group)
                assert seen is not None, "the group is a consumer group while both are in it"
                assert all(len(holders) == 1 for holders in seen.values()), seen
                time.sleep(0.1)
        # `kcoord groups describe` shows which protocol each member speaks (ConsumerGroupDescribe v1).
        host, port = kcoord.bootstrap.rsplit(":", 1)
        with GroupsAdmin([(host, int(port))]) as admin:
            description = admin.describe(group)
        assert sorted(mem.protocol or "" for mem in description.members) == ["classic", "consumer"]
        assert "PROTOCOL" in render_description(description)
        wait_for(lambda: len(set(classic.values) | set(modern.values)) >= 200, 30, "every record read")
        modern.stop()  # the last consumer-protocol member leaves: the group is a classic one again
        wait_for(lambda: classic.assignment == set(range(PARTITIONS)), 30, "the classic member takes over")
        with WireClient(kcoord.bootstrap) as client:
            assert owners(client, group) is None
        more = {b"s%07d" % i for i in range(100)}
        producer = KafkaProducer(bootstrap_servers=kcoord.bootstrap, acks="all")
        for i, value in enumerate(sorted(more)):
            producer.send(topic, value=value, partition=i % PARTITIONS)
        producer.flush(30)
        producer.close()
        wait_for(lambda: more <= set(classic.values), 30, "the records after the downgrade")
    finally:
        classic.stop()
        if modern.is_alive():
            modern.stop()
    read = classic.values + modern.values
    assert set(read) == produced | more, "no record lost"
