"""KIP-848's consumer protocol through kcoord with stock clients: librdkafka (confluent-kafka,
``group.protocol=consumer``) and the Java consumer 4.3 (``group.protocol=consumer``). The
coordinator assigns (server-side uniform assignor), members revoke before others get partitions, and
every record is delivered once across a member leaving. kcoord stores its state on the upstream,
tansu and Apache Kafka in turn.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from kcoord.protocol import frames, storage_messages
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, produce_numbered, unique
from tests.support.fixtures import Upstream
from tests.support.members import PollingMember as Member
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

PARTITIONS = 4


@pytest.fixture(scope="module")
def kcoord(upstream: Upstream) -> Iterator[KcoordProcess]:
    with KcoordProcess(
        "--shards",
        "3",
        "--storage",
        "kafka",
        "--internal-topic",
        unique("__kcoord_cgh"),
        bootstrap=upstream.bootstrap,
    ) as proc:
        yield proc


def wait_for(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.1)


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return {
            tp.partition: tp.offset
            for tp in probe.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        }
    finally:
        probe.close()


def test_librdkafka_members_share_partitions_and_hand_them_over(kcoord: KcoordProcess) -> None:
    topic, group = unique("cgh-rdkafka"), unique("cgh-rdkafka-group")
    create_topic(kcoord.bootstrap, topic, PARTITIONS)
    first, second = Member(kcoord.bootstrap, group, topic), Member(kcoord.bootstrap, group, topic)
    first.start()
    wait_for(lambda: first.assignment == set(range(PARTITIONS)), 20, "the first member gets every partition")
    second.start()
    # The coordinator moves half to the newcomer; the first revokes them before the second gets them.
    wait_for(lambda: len(first.assignment) == 2 and len(second.assignment) == 2, 20, "two partitions each")
    assert first.assignment.isdisjoint(second.assignment)
    produced = produce_numbered(kcoord.bootstrap, topic, 400, PARTITIONS)
    wait_for(lambda: len(first.values) + len(second.values) >= 400, 30, "every record consumed")
    first.stop()  # leaves: its partitions go to the second, from the committed offsets
    wait_for(lambda: second.assignment == set(range(PARTITIONS)), 20, "the second member takes over")
    more = produce_numbered(kcoord.bootstrap, topic, 100, PARTITIONS)
    wait_for(lambda: len(first.values) + len(second.values) >= 500, 30, "the records after the hand-over")
    second.stop()
    # produce_numbered numbers from 0 each time: the second batch repeats the first 100 values.
    assert Counter(first.values + second.values) == Counter([*produced, *more]), "each record exactly once"
    assert not first.errors and not second.errors
    assert sum(committed(kcoord.bootstrap, group, topic).values()) == 500


def test_consumer_group_describe_shows_the_members_and_their_assignments(kcoord: KcoordProcess) -> None:
    from kcoord.protocol import messages as m

    topic, group = unique("cgh-describe"), unique("cgh-describe-group")
    create_topic(kcoord.bootstrap, topic, PARTITIONS)
    member = Member(kcoord.bootstrap, group, topic)
    member.start()
    try:
        wait_for(lambda: member.assignment == set(range(PARTITIONS)), 20, "the member gets every partition")
        with WireClient(kcoord.bootstrap) as client:
            described = client.request(69, 1, m.ConsumerGroupDescribeRequest(group_ids=[group])).groups[0]
        assert described.error_code == 0 and described.group_state == "Stable"
        assert described.assignor_name == "uniform"
        (only,) = described.members
        assert only.member_type == 1  # the consumer protocol
        assert [(t.topic_name, sorted(t.partitions)) for t in only.assignment.topic_partitions] == [
            (topic, list(range(PARTITIONS)))
        ]
    finally:
        member.stop()


def test_java_consumers_of_the_consumer_protocol(kcoord: KcoordProcess, java_peer) -> None:  # type: ignore[no-untyped-def]
    topic, group = unique("cgh-java"), unique("cgh-java-group")
    create_topic(kcoord.bootstrap, topic, PARTITIONS)
    produce_numbered(kcoord.bootstrap, topic, 300, PARTITIONS)
    args = ["--bootstrap", kcoord.bootstrap, "--group", group, "--topic", topic, "--max-seconds", "120",
            "--group-protocol", "consumer", "--commit"]  # fmt: skip
    first = java_peer("ConsumerPeer", args, name="java-cgh-1")
    second = java_peer("ConsumerPeer", args, name="java-cgh-2")

    def split() -> bool:
        a, b = first.latest("assigned"), second.latest("assigned")
        if a is None or b is None:
            return False
        owned_a, owned_b = set(a["current"]), set(b["current"])
        return len(owned_a) == 2 and len(owned_b) == 2 and not owned_a & owned_b

    try:
        wait_for(split, 60, "two Java members of the consumer protocol split the partitions")
    except AssertionError as exc:
        seen = {
            peer.name: [(e.get("event"), e.get("current", e.get("partitions"))) for e in peer.events[-8:]]
            for peer in (first, second)
        }
        group_lines = "\n".join(kcoord.log_lines(group)[-30:])
        stderr = {peer.name: peer.stderr_tail(5) for peer in (first, second)}
        raise AssertionError(
            f"{exc}\nlast events: {seen}\npeers' stderr: {stderr}\nkcoord on the group:\n{group_lines}"
        ) from None
    # Either may read first: the one whose JVM joins first gets all four partitions and can read
    # and commit all 300 records before it hands two over (the other then has nothing to read).
    wait_for(lambda: bool(first.latest("records") or second.latest("records")), 60, "a member reads records")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if sum(committed(kcoord.bootstrap, group, topic).values()) == 300:
            break
        time.sleep(0.5)
    assert sum(committed(kcoord.bootstrap, group, topic).values()) == 300


def test_a_regular_expression_subscription_is_resolved_by_the_coordinator(kcoord: KcoordProcess) -> None:
    """librdkafka sends a subscription starting with ^ as SubscribedTopicRegex; kcoord resolves it
    (RE2) against the cluster's topics and assigns the matching topics' partitions only."""
    prefix = unique("cgh-regex")
    matching = [f"{prefix}-a", f"{prefix}-b"]
    for topic in [*matching, f"other-{prefix}"]:
        create_topic(kcoord.bootstrap, topic, 2)
        produce_numbered(kcoord.bootstrap, topic, 10, 2)
    consumer = Consumer(
        {
            "bootstrap.servers": kcoord.bootstrap,
            "group.id": unique("cgh-regex-group"),
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([f"^{prefix}-.*"])
        seen: set[str] = set()
        deadline = time.monotonic() + 30
        while len(seen) < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                seen.add(f"{message.topic()}/{message.partition()}/{message.offset()}")
        assignment = {(tp.topic, tp.partition) for tp in consumer.assignment()}
    finally:
        consumer.close()
    assert assignment == {(t, p) for t in matching for p in range(2)}
    assert len(seen) == 20 and all(s.startswith(prefix) for s in seen)


def test_a_join_right_after_the_topic_was_created_around_kcoord_gets_its_partitions(
    kcoord: KcoordProcess, upstream: Upstream
) -> None:
    """A topic created on the cluster directly (kcoord relayed no Metadata about it) and joined at
    once by name: kcoord looks the name up before it serves the join, so the first answer carries
    every partition, as Kafka's coordinator (which reads the metadata image) would give them."""
    topic = unique("fresh")
    create_topic(upstream.bootstrap, topic, 4)
    with WireClient(kcoord.bootstrap) as client:
        response = client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, m.ConsumerGroupHeartbeatRequest(
            group_id=unique("g-fresh"), member_id=str(uuid.uuid4()), member_epoch=0, rebalance_timeout_ms=30_000,
            subscribed_topic_names=[topic], topic_partitions=[]))  # fmt: skip
    assert response.error_code == 0 and response.member_epoch == 1
    assert response.assignment is not None
    assert [sorted(tp.partitions) for tp in response.assignment.topic_partitions] == [[0, 1, 2, 3]]


def test_a_regex_join_right_after_a_topic_was_created_through_kcoord_gets_its_partitions(
    kcoord: KcoordProcess,
) -> None:
    """CreateTopics (v7+ answers carry the topic id and partition count) relayed through kcoord
    teaches kcoord the topic before its creator hears back, so a regular expression subscription
    matches it at once rather than after the catalog's next listing (up to 15 s)."""
    prefix = unique("rx")
    topic = f"{prefix}-orders"
    R = storage_messages.CreateTopicsRequest
    with WireClient(kcoord.bootstrap) as client:
        raw = client.conn.send_frame(frames.encode_request(19, 7, 1, "wire-test", R(  # 19: CreateTopics
            topics=[R.CreatableTopic(name=topic, num_partitions=3, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=10_000, validate_only=False)))  # fmt: skip
        _, created = storage_messages.decode_response(storage_messages.CreateTopicsResponse, 7, raw)
        assert [(t.name, t.error_code, t.num_partitions) for t in created.topics] == [(topic, 0, 3)]
        response = client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, m.ConsumerGroupHeartbeatRequest(
            group_id=unique("g-rx"), member_id=str(uuid.uuid4()), member_epoch=0, rebalance_timeout_ms=30_000,
            subscribed_topic_regex=f"{prefix}-.*", topic_partitions=[]))  # fmt: skip
    assert response.error_code == 0 and response.assignment is not None
    assert [sorted(tp.partitions) for tp in response.assignment.topic_partitions] == [[0, 1, 2]]
