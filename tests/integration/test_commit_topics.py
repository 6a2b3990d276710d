"""Offset commits for topics that do not exist, against real kcoord and tansu.

Kafka 4.0 (KafkaApis.handleOffsetCommitRequest / handleTxnOffsetCommitRequest) answers each
partition of a topic it does not have, and each partition a topic does not have, with
UNKNOWN_TOPIC_OR_PARTITION, and commits the rest of the request. kcoord used to store them all.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from support.broker import TansuBroker
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, unique
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.fixture(scope="module")
def kcoord(tansu: TansuBroker) -> Iterator[KcoordProcess]:
    with KcoordProcess("--shards", "2", "--storage", "memory", bootstrap=tansu.bootstrap) as proc:
        yield proc


def commit(group: str, offsets: dict[tuple[str, int], int]) -> Any:
    R = m.OffsetCommitRequest
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            R.OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset)
        )
    return R(group_id=group, generation_id_or_member_epoch=-1, member_id="",
             topics=[R.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()])  # fmt: skip


def errors(response: Any) -> list[tuple[str, int, int]]:
    return [(t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions]


def fetched(client: WireClient, group: str, topics: dict[str, list[int]]) -> dict[tuple[str, int], int]:
    F = m.OffsetFetchRequest
    resp = client.request(ApiKey.OFFSET_FETCH, 7, F(group_id=group, topics=[
        F.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in topics.items()]))  # fmt: skip
    return {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions}


@pytest.mark.parametrize("version", [2, 7, 8, 9])
def test_unknown_topics_and_partitions_get_unknown_topic_or_partition(
    kcoord: KcoordProcess, version: int
) -> None:
    topic, ghost, group = unique("real"), unique("ghost"), unique("g")
    create_topic(kcoord.bootstrap, topic, 2)
    with WireClient(kcoord.bootstrap) as client:
        request = commit(group, {(ghost, 0): 5, (topic, 0): 7, (topic, 1): 8, (topic, 2): 9, (ghost, 3): 5})
        answer = client.request(ApiKey.OFFSET_COMMIT, version, request)
        assert errors(answer) == [(ghost, 0, UNKNOWN), (ghost, 3, UNKNOWN), (topic, 0, 0), (topic, 1, 0),
                                  (topic, 2, UNKNOWN)]  # fmt: skip
        assert fetched(client, group, {topic: [0, 1, 2], ghost: [0]}) == {
            (topic, 0): 7,
            (topic, 1): 8,
            (topic, 2): -1,
            (ghost, 0): -1,
        }
        # Asking did not create the topic (the lookup sends allow_auto_topic_creation=false).
        again = client.request(ApiKey.OFFSET_COMMIT, version, commit(group, {(ghost, 0): 6}))
        assert errors(again) == [(ghost, 0, UNKNOWN)]


def test_a_topic_created_through_kcoord_is_committable_at_once(kcoord: KcoordProcess) -> None:
    topic, group = unique("later"), unique("g")
    with WireClient(kcoord.bootstrap) as client:
        assert errors(client.request(ApiKey.OFFSET_COMMIT, 8, commit(group, {(topic, 0): 1}))) == [
            (topic, 0, UNKNOWN)
        ]
        create_topic(kcoord.bootstrap, topic, 1)  # its Metadata passes through kcoord
        assert errors(client.request(ApiKey.OFFSET_COMMIT, 8, commit(group, {(topic, 0): 2}))) == [
            (topic, 0, 0)
        ]
        assert fetched(client, group, {topic: [0]}) == {(topic, 0): 2}


def test_txn_offset_commit_answers_unknown_topics(kcoord: KcoordProcess) -> None:
    topic, ghost = unique("real"), unique("ghost")
    create_topic(kcoord.bootstrap, topic, 1)
    T = m.TxnOffsetCommitRequest
    request = T(transactional_id="tx", group_id=unique("g"), producer_id=1, producer_epoch=0, topics=[
        T.TxnOffsetCommitRequestTopic(name=ghost, partitions=[T.TxnOffsetCommitRequestPartition(partition_index=0)]),
        T.TxnOffsetCommitRequestTopic(name=topic, partitions=[T.TxnOffsetCommitRequestPartition(partition_index=0)]),
    ])  # fmt: skip
    with WireClient(kcoord.bootstrap) as client:
        answer = client.request(ApiKey.TXN_OFFSET_COMMIT, 3, request)
    # The rest reaches the shard, where this producer opened no transaction (no AddOffsetsToTxn).
    assert errors(answer) == [(ghost, 0, UNKNOWN), (topic, 0, ErrorCode.INVALID_TXN_STATE)]


def test_confluent_kafka_sees_the_per_partition_error(kcoord: KcoordProcess) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic, ghost, group = unique("real"), unique("ghost"), unique("g")
    create_topic(kcoord.bootstrap, topic, 1)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": kcoord.bootstrap, "group.id": group,
                                         "enable.auto.commit": False})  # fmt: skip
    TP = confluent_kafka.TopicPartition
    try:
        with pytest.raises(confluent_kafka.KafkaException) as failed:
            consumer.commit(offsets=[TP(topic, 0, 11), TP(ghost, 0, 12)], asynchronous=False)
        assert failed.value.args[0].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART, failed.value
        deadline = time.monotonic() + 10
        while True:  # the known topic's offset was committed all the same
            committed = consumer.committed([TP(topic, 0)], timeout=10)
            if committed[0].offset == 11 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert committed[0].offset == 11
    finally:
        consumer.close()
