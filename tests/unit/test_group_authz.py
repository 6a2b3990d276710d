"""Kafka's authorization checks on kcoord's own group APIs (coordinator/net/group_authz.py), pure:
a decoded request and a decision function in, the answer's shape out."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kcoord.coordinator.net import group_authz
from kcoord.coordinator.net.acls import Acl, AclOperation, AclPermission, AclRules, PatternType, ResourceType
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey

Op, RT = AclOperation, ResourceType
GROUP_AUTH, TOPIC_AUTH = ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED
TXN_AUTH = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
OC, TX, OD, OF = m.OffsetCommitRequest, m.TxnOffsetCommitRequest, m.OffsetDeleteRequest, m.OffsetFetchRequest


def allow(*grants: tuple[int, int, str]) -> Callable[[int, int, str], bool]:
    """alice's rights: ALLOW ACLs for (resource type, operation, name), Kafka's rules otherwise."""
    acls = [
        Acl(rtype, PatternType.LITERAL, name, "User:alice", "*", op, AclPermission.ALLOW)
        for rtype, op, name in grants
    ]
    rules = AclRules(acls, frozenset(), False)
    return lambda op, rtype, name: rules.allowed("User:alice", "10.0.0.1", op, rtype, name)


def wire(api_key: int, version: int, response: Message) -> Message:
    framed = frames.encode_response(api_key, version, 3, response)
    return frames.decode_response(api_key, version, framed[4:])[1]


def commit(group: str = "g", topics: tuple[str, ...] = ("t1", "t2")) -> m.OffsetCommitRequest:
    return OC(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        OC.OffsetCommitRequestTopic(name=t, partitions=[OC.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])
        for t in topics])  # fmt: skip


def test_everything_allowed_serves_the_request_as_it_is() -> None:
    may = allow((RT.GROUP, Op.READ, "g"), (RT.TOPIC, Op.READ, "t1"), (RT.TOPIC, Op.READ, "t2"))
    assert group_authz.check(ApiKey.OFFSET_COMMIT, 8, commit(), may) is None


SINGLE_READ: list[tuple[int, int, Message]] = [
    (ApiKey.JOIN_GROUP, 9, m.JoinGroupRequest(group_id="g", protocol_type="consumer", protocols=[])),
    (ApiKey.SYNC_GROUP, 5, m.SyncGroupRequest(group_id="g", generation_id=1, member_id="x")),
    (ApiKey.HEARTBEAT, 4, m.HeartbeatRequest(group_id="g", generation_id=1, member_id="x")),
    (ApiKey.LEAVE_GROUP, 5, m.LeaveGroupRequest(group_id="g", members=[])),
    (ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, m.ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0)),
    (ApiKey.OFFSET_COMMIT, 8, commit()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("api_key", "version", "request_"), SINGLE_READ, ids=[str(a) for a, _, _ in SINGLE_READ]
)
def test_single_group_apis_need_read_on_the_group(api_key: int, version: int, request_: Message) -> None:
    # DESCRIBE is not enough, and READ on another group neither.
    denial = group_authz.check(
        api_key, version, request_, allow((RT.GROUP, Op.DESCRIBE, "g"), (RT.GROUP, Op.READ, "h"))
    )
    assert denial is not None and denial.rest is None and denial.denied == ("group:g",)
    answer = wire(api_key, version, denial.answer(None))
    codes = {getattr(answer, "error_code", None)} - {None} or {
        p.error_code for t in answer.topics for p in t.partitions
    }  # type: ignore[attr-defined]
    assert codes == {GROUP_AUTH}


def test_commit_topics_need_read_each_and_only_those_are_refused() -> None:
    may = allow((RT.GROUP, Op.READ, "g"), (RT.TOPIC, Op.READ, "t1"), (RT.TOPIC, Op.DESCRIBE, "t2"))
    denial = group_authz.check(ApiKey.OFFSET_COMMIT, 8, commit(), may)
    assert denial is not None and denial.denied == ("topic:t2",)
    assert denial.rest is not None and [t.name for t in denial.rest.topics] == ["t1"]  # type: ignore[attr-defined]
    R = m.OffsetCommitResponse
    served = R(
        topics=[
            R.OffsetCommitResponseTopic(
                name="t1", partitions=[R.OffsetCommitResponsePartition(partition_index=0)]
            )
        ]
    )
    answer = wire(ApiKey.OFFSET_COMMIT, 8, denial.answer(served))
    assert {(t.name, p.error_code) for t in answer.topics for p in t.partitions} == {
        ("t1", 0),
        ("t2", TOPIC_AUTH),
    }  # type: ignore[attr-defined]


def test_a_commit_of_refused_topics_only_does_not_reach_the_coordinator() -> None:
    denial = group_authz.check(ApiKey.OFFSET_COMMIT, 8, commit(), allow((RT.GROUP, Op.READ, "g")))
    assert denial is not None and denial.rest is None
    answer = wire(ApiKey.OFFSET_COMMIT, 8, denial.answer(None))
    assert {(t.name, p.error_code) for t in answer.topics for p in t.partitions} == {
        ("t1", TOPIC_AUTH),
        ("t2", TOPIC_AUTH),
    }  # type: ignore[attr-defined]


def test_transactional_apis_check_the_transactional_id_first() -> None:
    txn = TX(transactional_id="tx", group_id="g", producer_id=1, producer_epoch=0, topics=[])
    add = m.AddOffsetsToTxnRequest(transactional_id="tx", producer_id=1, producer_epoch=0, group_id="g")
    for api_key, request_ in ((ApiKey.TXN_OFFSET_COMMIT, txn), (ApiKey.ADD_OFFSETS_TO_TXN, add)):
        denial = group_authz.check(api_key, 3, request_, allow((RT.TRANSACTIONAL_ID, Op.DESCRIBE, "tx")))
        assert denial is not None and denial.denied == ("transactional_id:tx",)
        denial = group_authz.check(api_key, 3, request_, allow((RT.TRANSACTIONAL_ID, Op.WRITE, "tx")))
        assert denial is not None and denial.denied == ("group:g",)
    assert (
        group_authz.check(
            ApiKey.ADD_OFFSETS_TO_TXN,
            3,
            add,
            allow((RT.TRANSACTIONAL_ID, Op.WRITE, "tx"), (RT.GROUP, Op.READ, "g")),
        )
        is None
    )


def test_offset_delete_needs_delete_on_the_group_and_read_on_topics() -> None:
    request_ = OD(
        group_id="g",
        topics=[
            OD.OffsetDeleteRequestTopic(
                name="t", partitions=[OD.OffsetDeleteRequestPartition(partition_index=0)]
            )
        ],
    )
    denial = group_authz.check(ApiKey.OFFSET_DELETE, 0, request_, allow((RT.GROUP, Op.READ, "g")))
    assert denial is not None and denial.rest is None
    assert wire(ApiKey.OFFSET_DELETE, 0, denial.answer(None)).error_code == GROUP_AUTH  # type: ignore[attr-defined]
    denial = group_authz.check(ApiKey.OFFSET_DELETE, 0, request_, allow((RT.GROUP, Op.DELETE, "g")))
    assert denial is not None and denial.rest is not None and denial.rest.topics == []  # type: ignore[attr-defined]
    answer = wire(ApiKey.OFFSET_DELETE, 0, denial.answer(m.OffsetDeleteResponse(topics=[])))
    assert [(t.name, [p.error_code for p in t.partitions]) for t in answer.topics] == [("t", [TOPIC_AUTH])]  # type: ignore[attr-defined]


def test_offset_fetch_refuses_named_topics_and_hides_unnamed_ones() -> None:
    R = m.OffsetFetchResponse
    may = allow((RT.GROUP, Op.DESCRIBE, "g"), (RT.TOPIC, Op.DESCRIBE, "t1"))
    named = OF(
        group_id="g", topics=[OF.OffsetFetchRequestTopic(name=n, partition_indexes=[0]) for n in ("t1", "t2")]
    )
    denial = group_authz.check(ApiKey.OFFSET_FETCH, 7, named, may)
    assert denial is not None and denial.denied == ("topic:t2",)
    served = R(
        topics=[
            R.OffsetFetchResponseTopic(
                name="t1", partitions=[R.OffsetFetchResponsePartition(partition_index=0, committed_offset=5)]
            )
        ]
    )
    answer = wire(ApiKey.OFFSET_FETCH, 7, denial.answer(served))
    assert {(t.name, p.error_code) for t in answer.topics for p in t.partitions} == {
        ("t1", 0),
        ("t2", TOPIC_AUTH),
    }  # type: ignore[attr-defined]
    every = OF(group_id="g", topics=None)
    denial = group_authz.check(ApiKey.OFFSET_FETCH, 7, every, may)
    assert denial is not None and denial.rest is every and denial.denied == ()
    served = R(topics=[R.OffsetFetchResponseTopic(name=n, partitions=[]) for n in ("t1", "t2")])
    assert [t.name for t in denial.answer(served).topics] == ["t1"]  # type: ignore[attr-defined]


def test_offset_fetch_v8_per_group_then_per_topic() -> None:
    G, T = OF.OffsetFetchRequestGroup, OF.OffsetFetchRequestTopics
    R = m.OffsetFetchResponse
    request_ = OF(groups=[
        G(group_id="g", topics=[T(name="t1", partition_indexes=[0]), T(name="t2", partition_indexes=[1])]),
        G(group_id="h", topics=None),
        G(group_id="x", topics=None),
    ])  # fmt: skip
    may = allow((RT.GROUP, Op.DESCRIBE, "g"), (RT.GROUP, Op.READ, "h"), (RT.TOPIC, Op.READ, "t1"))
    denial = group_authz.check(ApiKey.OFFSET_FETCH, 8, request_, may)
    assert denial is not None and set(denial.denied) == {"group:x", "topic:t2"}
    rest = denial.rest
    assert rest is not None and [
        (g.group_id, g.topics and [t.name for t in g.topics]) for g in rest.groups
    ] == [("g", ["t1"]), ("h", None)]  # type: ignore[attr-defined]
    served = R(groups=[
        R.OffsetFetchResponseGroup(group_id="g", topics=[R.OffsetFetchResponseTopics(name="t1", partitions=[])]),
        R.OffsetFetchResponseGroup(group_id="h", topics=[R.OffsetFetchResponseTopics(name=n, partitions=[]) for n in ("t1", "t9")]),
    ])  # fmt: skip
    answer = wire(ApiKey.OFFSET_FETCH, 8, denial.answer(served))
    seen = {
        g.group_id: (g.error_code, [(t.name, [p.error_code for p in t.partitions]) for t in g.topics])
        for g in answer.groups
    }  # type: ignore[attr-defined]
    assert seen == {
        "g": (0, [("t1", []), ("t2", [TOPIC_AUTH])]),
        "h": (0, [("t1", [])]),
        "x": (GROUP_AUTH, []),
    }


def test_multi_group_apis_refuse_per_group() -> None:
    may = allow((RT.GROUP, Op.DESCRIBE, "a"), (RT.GROUP, Op.DELETE, "b"))
    denial = group_authz.check(ApiKey.DESCRIBE_GROUPS, 5, m.DescribeGroupsRequest(groups=["a", "b"]), may)
    # DELETE implies DESCRIBE: both are described.
    assert denial is None
    denial = group_authz.check(ApiKey.DELETE_GROUPS, 2, m.DeleteGroupsRequest(groups_names=["a", "b"]), may)
    assert denial is not None and denial.denied == ("group:a",)
    assert denial.rest is not None and denial.rest.groups_names == ["b"]  # type: ignore[attr-defined]
    R = m.DeleteGroupsResponse
    answer = denial.answer(R(results=[R.DeletableGroupResult(group_id="b")]))
    assert [(r.group_id, r.error_code) for r in answer.results] == [("b", 0), ("a", GROUP_AUTH)]  # type: ignore[attr-defined]
    find = m.FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "z"])
    denial = group_authz.check(ApiKey.FIND_COORDINATOR, 4, find, may)
    assert denial is not None and denial.denied == ("group:z",)
    old = group_authz.check(ApiKey.FIND_COORDINATOR, 3, m.FindCoordinatorRequest(key_type=0, key="z"), may)
    assert old is not None and old.rest is None and old.answer(None).error_code == GROUP_AUTH  # type: ignore[attr-defined]
    assert (
        group_authz.check(ApiKey.FIND_COORDINATOR, 3, m.FindCoordinatorRequest(key_type=1, key="z"), may)
        is None
    )


def test_list_groups_shows_all_with_cluster_describe_else_describable_ones() -> None:
    L = m.ListGroupsResponse
    served = L(groups=[L.ListedGroup(group_id=g, protocol_type="consumer") for g in ("a", "b")])
    assert (
        group_authz.check(
            ApiKey.LIST_GROUPS, 5, m.ListGroupsRequest(), allow((RT.CLUSTER, Op.DESCRIBE, "kafka-cluster"))
        )
        is None
    )
    denial = group_authz.check(ApiKey.LIST_GROUPS, 5, m.ListGroupsRequest(), allow((RT.GROUP, Op.READ, "b")))
    assert denial is not None and denial.denied == ()
    assert [g.group_id for g in denial.answer(served).groups] == ["b"]  # type: ignore[attr-defined]


def test_consumer_group_heartbeat_needs_describe_on_every_subscribed_topic() -> None:
    request_ = m.ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, subscribed_topic_names=["t1", "t2"]
    )
    denial = group_authz.check(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        0,
        request_,
        allow((RT.GROUP, Op.READ, "g"), (RT.TOPIC, Op.DESCRIBE, "t1")),
    )
    assert denial is not None and denial.rest is None and denial.denied == ("topic:t2",)
    assert denial.answer(None).error_code == TOPIC_AUTH  # type: ignore[attr-defined]
    may = allow((RT.GROUP, Op.READ, "g"), (RT.TOPIC, Op.DESCRIBE, "t1"), (RT.TOPIC, Op.WRITE, "t2"))
    assert group_authz.check(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, request_, may) is None


def test_authorized_operations_are_filled_as_kafka_fills_them() -> None:
    R = m.DescribeGroupsResponse
    may = allow((RT.GROUP, Op.READ, "a"), (RT.GROUP, Op.DELETE, "b"), (RT.GROUP, Op.ALTER_CONFIGS, "b"))
    request_ = m.DescribeGroupsRequest(groups=["a", "b", "c"], include_authorized_operations=True)
    denial = group_authz.check(ApiKey.DESCRIBE_GROUPS, 5, request_, may)
    assert denial is not None and denial.rest is not None and denial.rest.groups == ["a", "b"]  # type: ignore[attr-defined]
    served = R(groups=[R.DescribedGroup(group_id=g) for g in ("a", "b")])
    answer = wire(ApiKey.DESCRIBE_GROUPS, 5, denial.answer(served))
    read, describe, delete = 1 << Op.READ, 1 << Op.DESCRIBE, 1 << Op.DELETE
    configs = 1 << Op.DESCRIBE_CONFIGS | 1 << Op.ALTER_CONFIGS
    seen = {g.group_id: (g.error_code, g.authorized_operations) for g in answer.groups}  # type: ignore[attr-defined]
    assert seen == {
        "a": (0, read | describe),
        "b": (0, describe | delete | configs),
        "c": (GROUP_AUTH, -(2**31)),
    }
    # Not asked for: left as the coordinator answered.
    assert group_authz.check(ApiKey.DESCRIBE_GROUPS, 5, m.DescribeGroupsRequest(groups=["a"]), may) is None
