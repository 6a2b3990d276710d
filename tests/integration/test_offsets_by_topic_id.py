"""OffsetCommit and OffsetFetch v10 name topics by id (KIP-848): kcoord resolves them through the
upstream's metadata, as a Kafka broker does, against a real tansu."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from support.broker import TansuBroker
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, unique
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kcoord_address(tansu: TansuBroker) -> Iterator[str]:
    with KcoordProcess("--shards", "3", "--storage", "memory", bootstrap=tansu.bootstrap) as kcoord:
        yield kcoord.bootstrap


def topic_id(address: str, topic: str) -> uuid.UUID:
    T = m.MetadataRequest.MetadataRequestTopic
    with WireClient(address) as client:
        response = client.request(
            3, 12, m.MetadataRequest(topics=[T(name=topic)], allow_auto_topic_creation=False)
        )
    found = response.topics[0]
    assert found.error_code == 0 and found.topic_id.int != 0
    return found.topic_id


def commit_v10(address: str, group: str, offsets: dict[uuid.UUID, dict[int, int]]) -> m.OffsetCommitResponse:
    R = m.OffsetCommitRequest
    request = R(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        topics=[R.OffsetCommitRequestTopic(topic_id=tid, partitions=[
            R.OffsetCommitRequestPartition(partition_index=p, committed_offset=o) for p, o in parts.items()
        ]) for tid, parts in offsets.items()],
    )  # fmt: skip
    with WireClient(address) as client:
        return client.request(8, 10, request)


def fetch_v10(address: str, group: str, topics: dict[uuid.UUID, list[int]] | None) -> m.OffsetFetchResponse:
    R = m.OffsetFetchRequest
    wanted = (
        None
        if topics is None
        else [R.OffsetFetchRequestTopics(topic_id=t, partition_indexes=ps) for t, ps in topics.items()]
    )
    request = R(groups=[R.OffsetFetchRequestGroup(group_id=group, topics=wanted)])
    with WireClient(address) as client:
        return client.request(9, 10, request)


def test_commit_and_fetch_by_topic_id(kcoord_address: str) -> None:
    topic, group = unique("by-id"), unique("by-id-group")
    create_topic(kcoord_address, topic, 2)
    tid = topic_id(kcoord_address, topic)
    missing = uuid.uuid4()
    answer = commit_v10(kcoord_address, group, {tid: {0: 5, 1: 7}, missing: {0: 1}})
    assert [
        (t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.topics
    ] == [
        (tid, [(0, ErrorCode.NONE), (1, ErrorCode.NONE)]),
        (missing, [(0, ErrorCode.UNKNOWN_TOPIC_ID)]),
    ]
    fetched = fetch_v10(kcoord_address, group, {tid: [0, 1], missing: [0]}).groups[0]
    assert fetched.error_code == 0
    assert [(t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
            for t in fetched.topics] == [
        (tid, [(0, 5, 0), (1, 7, 0)]),
        (missing, [(0, -1, ErrorCode.UNKNOWN_TOPIC_ID)]),
    ]  # fmt: skip
    everything = fetch_v10(kcoord_address, group, None).groups[0]
    assert [(t.topic_id, sorted(p.committed_offset for p in t.partitions)) for t in everything.topics] == [
        (tid, [5, 7])
    ]


def test_a_commit_of_unknown_ids_only_never_reaches_the_group(kcoord_address: str) -> None:
    group = unique("by-id-unknown")
    answer = commit_v10(kcoord_address, group, {uuid.uuid4(): {0: 1, 1: 2}})
    assert [p.error_code for t in answer.topics for p in t.partitions] == [ErrorCode.UNKNOWN_TOPIC_ID] * 2
    with WireClient(kcoord_address) as client:
        described = client.request(15, 5, m.DescribeGroupsRequest(groups=[group]))
    assert described.groups[0].group_state == "Dead"  # no group was created for it


def test_a_topic_id_first_seen_in_a_commit_is_looked_up(kcoord_address: str, tansu: TansuBroker) -> None:
    """The topic is created directly on the upstream, so kcoord's catalog has never seen its id."""
    topic, group = unique("by-id-fresh"), unique("by-id-fresh-group")
    create_topic(tansu.bootstrap, topic, 1)
    tid = topic_id(tansu.bootstrap, topic)
    answer = commit_v10(kcoord_address, group, {tid: {0: 3}})
    assert [p.error_code for t in answer.topics for p in t.partitions] == [ErrorCode.NONE]
    assert (
        fetch_v10(kcoord_address, group, {tid: [0]}).groups[0].topics[0].partitions[0].committed_offset == 3
    )
