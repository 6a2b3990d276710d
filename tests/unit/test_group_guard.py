"""kcoord's cluster group is refused to clients (coordinator/net/group_guard.py), pure: a decoded
group request in, the decision out."""

from __future__ import annotations

import pytest

from kcoord.coordinator.net import group_guard
from kcoord.coordinator.runtime.membership import group_id_for
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey

CLUSTER_GROUP = group_id_for("__kcoord_offsets")
GROUP_AUTH = ErrorCode.GROUP_AUTHORIZATION_FAILED


def wire(api_key: int, version: int, response: Message) -> Message:
    """The answer as a client decodes it."""
    framed = frames.encode_response(api_key, version, 3, response)
    return frames.decode_response(api_key, version, framed[4:])[1]


def error_codes(answer: Message) -> set[int]:
    """Every error code in an answer: its own, or its partitions' for the offset-commit APIs."""
    code = getattr(answer, "error_code", None)
    if code is not None:
        return {code}
    return {p.error_code for t in answer.topics for p in t.partitions}  # type: ignore[attr-defined]


def test_the_cluster_group_id_is_the_one_membership_joins() -> None:
    assert CLUSTER_GROUP == "kcoord-cluster.__kcoord_offsets"


OC, TX = m.OffsetCommitRequest, m.TxnOffsetCommitRequest
SINGLE: list[tuple[int, int, Message]] = [
    (ApiKey.JOIN_GROUP, 9, m.JoinGroupRequest(group_id=CLUSTER_GROUP, protocol_type="consumer", protocols=[])),
    (ApiKey.SYNC_GROUP, 5, m.SyncGroupRequest(group_id=CLUSTER_GROUP, generation_id=1, member_id="x")),
    (ApiKey.HEARTBEAT, 4, m.HeartbeatRequest(group_id=CLUSTER_GROUP, generation_id=1, member_id="x")),
    (ApiKey.LEAVE_GROUP, 5, m.LeaveGroupRequest(group_id=CLUSTER_GROUP, members=[])),
    (ApiKey.OFFSET_COMMIT, 8, m.OffsetCommitRequest(group_id=CLUSTER_GROUP, generation_id_or_member_epoch=-1, member_id="", topics=[OC.OffsetCommitRequestTopic(name="t", partitions=[OC.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])),
    (ApiKey.OFFSET_FETCH, 7, m.OffsetFetchRequest(group_id=CLUSTER_GROUP, topics=None)),
    (ApiKey.OFFSET_DELETE, 0, m.OffsetDeleteRequest(group_id=CLUSTER_GROUP, topics=[])),
    (ApiKey.TXN_OFFSET_COMMIT, 3, m.TxnOffsetCommitRequest(transactional_id="t", group_id=CLUSTER_GROUP, producer_id=1, producer_epoch=0, topics=[TX.TxnOffsetCommitRequestTopic(name="t", partitions=[TX.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])),
    (ApiKey.ADD_OFFSETS_TO_TXN, 3, m.AddOffsetsToTxnRequest(transactional_id="t", producer_id=1, producer_epoch=0, group_id=CLUSTER_GROUP)),
    (ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, m.ConsumerGroupHeartbeatRequest(group_id=CLUSTER_GROUP, member_id="m", member_epoch=0)),
    (ApiKey.FIND_COORDINATOR, 3, m.FindCoordinatorRequest(key=CLUSTER_GROUP, key_type=0)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("api_key", "version", "request_"), SINGLE, ids=[group_guard.API_NAMES[a] for a, _, _ in SINGLE]
)
def test_single_group_requests_naming_the_cluster_group_are_refused(
    api_key: int, version: int, request_: Message
) -> None:
    refusal = group_guard.check(api_key, version, request_, CLUSTER_GROUP)
    assert refusal is not None and refusal.rest is None
    assert error_codes(wire(api_key, version, refusal.answer(None))) == {GROUP_AUTH}
    # The same request for any other group is served as usual.
    setattr(request_, "key" if api_key == ApiKey.FIND_COORDINATOR else "group_id", "orders-app")
    assert group_guard.check(api_key, version, request_, CLUSTER_GROUP) is None


def test_a_transaction_coordinator_lookup_with_the_same_key_is_not_a_group() -> None:
    request = m.FindCoordinatorRequest(key=CLUSTER_GROUP, key_type=1)
    assert group_guard.check(ApiKey.FIND_COORDINATOR, 3, request, CLUSTER_GROUP) is None


def test_offset_commit_refused_per_partition_as_kafka_answers_it() -> None:
    R = m.OffsetCommitRequest
    request = R(
        group_id=CLUSTER_GROUP, generation_id_or_member_epoch=-1, member_id="",
        topics=[R.OffsetCommitRequestTopic(name="__kcoord_offsets", partitions=[R.OffsetCommitRequestPartition(partition_index=17, committed_offset=1)])],
    )  # fmt: skip
    refusal = group_guard.check(ApiKey.OFFSET_COMMIT, 8, request, CLUSTER_GROUP)
    assert refusal is not None
    answer = wire(ApiKey.OFFSET_COMMIT, 8, refusal.answer(None))
    assert [(p.partition_index, p.error_code) for t in answer.topics for p in t.partitions] == [
        (17, GROUP_AUTH)
    ]


MULTI: list[tuple[int, int, Message, str, str]] = [
    (ApiKey.DESCRIBE_GROUPS, 5, m.DescribeGroupsRequest(groups=["a", CLUSTER_GROUP, "b"]), "groups", "group_id"),
    (ApiKey.DELETE_GROUPS, 2, m.DeleteGroupsRequest(groups_names=["a", CLUSTER_GROUP, "b"]), "results", "group_id"),
    (ApiKey.CONSUMER_GROUP_DESCRIBE, 0, m.ConsumerGroupDescribeRequest(group_ids=["a", CLUSTER_GROUP, "b"]), "groups", "group_id"),
    (ApiKey.FIND_COORDINATOR, 4, m.FindCoordinatorRequest(key_type=0, coordinator_keys=["a", CLUSTER_GROUP, "b"]), "coordinators", "key"),
    (ApiKey.OFFSET_FETCH, 9, m.OffsetFetchRequest(groups=[m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g, topics=None) for g in ("a", CLUSTER_GROUP, "b")]), "groups", "group_id"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("api_key", "version", "request_", "field", "key"),
    MULTI,
    ids=[group_guard.API_NAMES[c[0]] for c in MULTI],
)
def test_multi_group_requests_serve_the_other_groups(
    api_key: int, version: int, request_: Message, field: str, key: str
) -> None:
    from kcoord.coordinator.core.responses import error_response

    refusal = group_guard.check(api_key, version, request_, CLUSTER_GROUP)
    assert refusal is not None and refusal.rest is not None
    # What is served: the other groups only (a stand-in answer for them: NONE per group).
    served = error_response(api_key, version, refusal.rest, ErrorCode.NONE)
    assert [getattr(e, key) for e in getattr(served, field)] == ["a", "b"]
    answer = wire(api_key, version, refusal.answer(served))
    assert {getattr(e, key): e.error_code for e in getattr(answer, field)} == {
        "a": 0,
        "b": 0,
        CLUSTER_GROUP: GROUP_AUTH,
    }


def test_a_multi_group_request_of_the_cluster_group_alone_is_answered_without_serving() -> None:
    refusal = group_guard.check(
        ApiKey.DESCRIBE_GROUPS, 5, m.DescribeGroupsRequest(groups=[CLUSTER_GROUP]), CLUSTER_GROUP
    )
    assert refusal is not None and refusal.rest is None
    [group] = wire(ApiKey.DESCRIBE_GROUPS, 5, refusal.answer(None)).groups
    assert (group.group_id, group.error_code) == (CLUSTER_GROUP, GROUP_AUTH)
    assert (
        group_guard.check(ApiKey.DESCRIBE_GROUPS, 5, m.DescribeGroupsRequest(groups=["a"]), CLUSTER_GROUP)
        is None
    )
