"""OffsetCommit/OffsetFetch v10 by topic id: the request turned into names and the answer back
(coordinator/net/topic_ids.py)."""

from __future__ import annotations

import uuid

from kcoord.coordinator.net.topic_ids import by_id, by_name
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey

A, B, GONE = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
NAMES = {A: "a", B: "b"}
IDS = {"a": A, "b": B}


def commit(*topics: uuid.UUID) -> m.OffsetCommitRequest:
    R = m.OffsetCommitRequest
    return R(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
        R.OffsetCommitRequestTopic(topic_id=t, partitions=[R.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])
        for t in topics
    ])  # fmt: skip


def test_a_commit_keeps_request_order_and_answers_unknown_ids_itself() -> None:
    request = commit(GONE, A, B)
    named, unknown = by_name(ApiKey.OFFSET_COMMIT, request, NAMES)
    assert unknown == {GONE} and named is not None
    assert [t.name for t in named.topics] == ["a", "b"]
    assert [t.name for t in request.topics] == [
        "",
        "",
        "",
    ]  # the client's request is left alone (default name)
    R = m.OffsetCommitResponse
    answer = R(topics=[  # the coordinator answers in its own order
        R.OffsetCommitResponseTopic(name=n, partitions=[R.OffsetCommitResponsePartition(partition_index=0, error_code=c)])
        for n, c in (("b", ErrorCode.NONE), ("a", ErrorCode.ILLEGAL_GENERATION))
    ])  # fmt: skip
    out = by_id(ApiKey.OFFSET_COMMIT, request, answer, NAMES, IDS)
    assert [(t.topic_id, t.name, t.partitions[0].error_code) for t in out.topics] == [
        (GONE, None, ErrorCode.UNKNOWN_TOPIC_ID), (A, None, ErrorCode.ILLEGAL_GENERATION), (B, None, ErrorCode.NONE),
    ]  # fmt: skip


def test_a_commit_of_unknown_ids_only_is_not_sent() -> None:
    named, unknown = by_name(ApiKey.OFFSET_COMMIT, commit(GONE), NAMES)
    assert named is None and unknown == {GONE}
    out = by_id(ApiKey.OFFSET_COMMIT, commit(GONE), None, NAMES, IDS)
    assert out.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_fetch_all_topics_names_only_those_with_a_known_id() -> None:
    R, Q = m.OffsetFetchResponse, m.OffsetFetchRequest
    request = Q(groups=[Q.OffsetFetchRequestGroup(group_id="g", topics=None)])
    named, unknown = by_name(ApiKey.OFFSET_FETCH, request, NAMES)
    assert unknown == set() and named is not None and named.groups[0].topics is None
    part = R.OffsetFetchResponsePartitions(partition_index=0, committed_offset=9, committed_leader_epoch=-1,
                                           metadata="", error_code=0)  # fmt: skip
    answer = R(groups=[R.OffsetFetchResponseGroup(group_id="g", error_code=0, topics=[
        R.OffsetFetchResponseTopics(name="deleted-upstream", partitions=[part]),
        R.OffsetFetchResponseTopics(name="a", partitions=[part]),
    ])])  # fmt: skip
    out = by_id(ApiKey.OFFSET_FETCH, request, answer, NAMES, IDS)
    assert [(t.topic_id, t.partitions[0].committed_offset) for t in out.groups[0].topics] == [(A, 9)]
