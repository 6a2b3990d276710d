"""ConsumerGroupDescribe v0-1 (KIP-848) through ``GroupCoordinatorShard.handle`` and the router.

Groups are built only by replaying records (tests/unit/consumer_context.py); each describe runs on a
fresh shard that replayed the log, with a topic id -> name resolver. Expected answers are Kafka 4.x's
(``GroupCoordinatorService.consumerGroupDescribe``, ``GroupMetadataManager.consumerGroupDescribe``,
``ConsumerGroup.asDescribedGroup``, ``ConsumerGroupMember.asConsumerGroupDescribeMember``).
"""

from __future__ import annotations

import uuid
from typing import Any

from kcoord.coordinator.core.clock import ManualClock
from kcoord.coordinator.core.consumer.assignors.registry import DEFAULT_ASSIGNOR
from kcoord.coordinator.core.consumer.describe import MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER
from kcoord.coordinator.core.consumer.member import ClassicMemberMetadata, MemberState
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.records import group_metadata_record, offset_commit_record
from kcoord.coordinator.core.result import RequestContext
from kcoord.coordinator.core.shard_state import GroupCoordinatorShard
from kcoord.coordinator.runtime.router import GROUP_APIS, Router, shard_for_group
from kcoord.coordinator.runtime.shard import ShardRuntime
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.messages import KCOORD_VERSIONS, ApiKey
from kcoord.protocol.records import Record
from kcoord.storage.memory import MemoryShardLog
from tests.unit.consumer_context import BAR, FOO, TOPIC_IDS, ConsumerLog

TOPIC_NAMES = {topic_id: name for name, topic_id in TOPIC_IDS.items()}
GONE = uuid.UUID("d0000000-0000-0000-0000-000000000003")  # a topic the resolver does not know
INT_MIN = -(2**31)


def shard_of(records: list[Record], names: dict[uuid.UUID, str] | None = None) -> GroupCoordinatorShard:
    shard = GroupCoordinatorShard(
        GroupConfig(),
        ManualClock(),
        resolve_topic_id=TOPIC_IDS.get,
        resolve_topic_name=(names or TOPIC_NAMES).get,
    )
    for record in records:
        shard.replay(record)
    return shard


def describe(log: ConsumerLog, *group_ids: Any, version: int = 1, **kw: Any) -> list[Any]:
    """The described groups, as a client of ``version`` reads them, from a shard that replayed the log."""
    request = m.ConsumerGroupDescribeRequest(group_ids=list(group_ids), include_authorized_operations=True)
    decoded = type(request).decode(request.encode(version), version)
    ctx = RequestContext(version, "client", "/127.0.0.1")
    result = shard_of(log.records, **kw).handle(ApiKey.CONSUMER_GROUP_DESCRIBE, ctx, decoded)
    assert result.records == [] and result.events == []
    [(replied, response)] = result.replies
    assert replied is ctx
    return m.ConsumerGroupDescribeResponse.decode(response.encode(version), version).groups


def assignment(a: Any) -> dict[str, tuple[uuid.UUID, list[int]]]:
    return {t.topic_name: (t.topic_id, t.partitions) for t in a.topic_partitions}


def with_classic_groups(log: ConsumerLog) -> None:
    """A classic consumer group "classic" (Empty) and a simple group "simple" (offsets only)."""
    log.write(
        group_metadata_record("classic", protocol_type="consumer", generation=1, protocol=None, leader=None,
                              current_state_timestamp=1, members=[]),
        offset_commit_record("simple", "foo", 0, offset=1, leader_epoch=-1, metadata="", commit_timestamp=1),
    )  # fmt: skip


def reconciling_group(log: ConsumerLog) -> None:
    """m1 owned foo 0-2 at epoch 1; m2 joined at epoch 2 and the new target gives m1 foo 0-1 and
    bar 0, m2 foo 2: m1 must revoke foo 2 first (still at epoch 1), m2 waits for it (epoch 2)."""
    log.bump_group_epoch(1)
    log.subscribe(
        "m1", ["foo", "bar"], instance_id="i1", rack_id="r1", client_id="c1", client_host="/10.0.0.1"
    )
    log.target(1, {"m1": {FOO: [0, 1, 2]}})
    log.reconcile("m1", epoch=1, assigned={FOO: [2, 0, 1]})
    log.bump_group_epoch(2)
    log.subscribe("m2", ["foo"], subscribed_topic_regex="ba.*", server_assignor="range")
    log.target(2, {"m1": {FOO: [0, 1], BAR: [0]}, "m2": {FOO: [2]}})
    log.reconcile(
        "m1", epoch=1, assigned={FOO: [0, 1]}, pending={FOO: [2]}, state=MemberState.UNREVOKED_PARTITIONS
    )
    log.reconcile("m2", epoch=2, assigned={}, state=MemberState.UNRELEASED_PARTITIONS)


# -- errors ------------------------------------------------------------------------------------------------------


def test_unknown_and_classic_groups_are_not_found_with_kafkas_messages() -> None:
    log = ConsumerLog()
    with_classic_groups(log)
    described = describe(log, "nope", "classic", "simple")
    assert [(g.group_id, g.error_code, g.error_message) for g in described] == [
        ("nope", E.GROUP_ID_NOT_FOUND, "Group nope not found."),
        ("classic", E.GROUP_ID_NOT_FOUND, "Group classic is not a consumer group."),
        ("simple", E.GROUP_ID_NOT_FOUND, "Group simple is not a consumer group."),
    ]
    for g in described:
        assert (g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name, g.members) == (
            "",
            0,
            0,
            "",
            [],
        )
        assert g.authorized_operations == INT_MIN


def test_an_empty_group_id_is_invalid() -> None:
    [g] = describe(ConsumerLog(), "")
    assert (g.group_id, g.error_code, g.error_message) == ("", E.INVALID_GROUP_ID, None)


# -- consumer groups ---------------------------------------------------------------------------------------------


def test_an_empty_consumer_group() -> None:
    log = ConsumerLog()
    log.bump_group_epoch(5)
    log.target(5, {})
    [g] = describe(log, "grp")
    assert (g.group_id, g.error_code, g.error_message) == ("grp", E.NONE, None)
    assert (g.group_state, g.group_epoch, g.assignment_epoch) == ("Empty", 5, 5)
    assert g.assignor_name == DEFAULT_ASSIGNOR == "uniform"
    assert g.members == [] and g.authorized_operations == INT_MIN


def test_a_group_whose_last_member_left_is_empty_with_its_epochs() -> None:
    log = ConsumerLog()
    log.bump_group_epoch(1)
    log.subscribe("m1", ["foo"])
    log.target(1, {"m1": {FOO: [0]}})
    log.reconcile("m1", epoch=1, assigned={FOO: [0]})
    assert describe(log, "grp")[0].group_state == "Stable"
    log.remove_member("m1")
    [g] = describe(log, "grp")
    assert (g.group_state, g.group_epoch, g.assignment_epoch, g.members) == ("Empty", 1, 1, [])


def test_a_group_mid_reconciliation_shows_current_and_target_assignments() -> None:
    log = ConsumerLog()
    reconciling_group(log)
    [g] = describe(log, "grp")
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch) == (E.NONE, "Reconciling", 2, 2)
    assert g.assignor_name == "range"  # the server assignor its members name
    m1, m2 = g.members
    assert (m1.member_id, m1.instance_id, m1.rack_id, m1.member_epoch) == ("m1", "i1", "r1", 1)
    assert (m1.client_id, m1.client_host) == ("c1", "/10.0.0.1")
    assert (m1.subscribed_topic_names, m1.subscribed_topic_regex) == (["bar", "foo"], None)
    # The current assignment is what the member owns: foo 2, pending revocation, is not in it.
    assert assignment(m1.assignment) == {"foo": (FOO, [0, 1])}
    assert assignment(m1.target_assignment) == {"foo": (FOO, [0, 1]), "bar": (BAR, [0])}
    assert (m2.member_id, m2.instance_id, m2.rack_id, m2.member_epoch) == ("m2", None, None, 2)
    assert (m2.subscribed_topic_names, m2.subscribed_topic_regex) == (["foo"], "ba.*")
    assert assignment(m2.assignment) == {}
    assert assignment(m2.target_assignment) == {"foo": (FOO, [2])}
    assert m1.member_type == m2.member_type == MEMBER_TYPE_CONSUMER == 1


def test_an_assigning_group_and_a_member_without_a_target() -> None:
    log = ConsumerLog()
    log.bump_group_epoch(1)
    log.subscribe("m1", ["foo"])
    [g] = describe(log, "grp")
    assert (g.group_state, g.group_epoch, g.assignment_epoch) == ("Assigning", 1, 0)
    [m1] = g.members
    assert (m1.member_epoch, assignment(m1.assignment), assignment(m1.target_assignment)) == (0, {}, {})


def test_a_topic_without_a_name_is_left_out_as_kafka_leaves_out_a_topic_it_does_not_know() -> None:
    log = ConsumerLog()
    log.bump_group_epoch(1)
    log.subscribe("m1", ["foo"])
    log.target(1, {"m1": {FOO: [0], GONE: [0, 1]}})
    log.reconcile("m1", epoch=1, assigned={GONE: [1, 0], FOO: [0]})
    [m1] = describe(log, "grp")[0].members
    assert assignment(m1.assignment) == assignment(m1.target_assignment) == {"foo": (FOO, [0])}
    # The default resolver knows no topic: every assignment is described empty.
    request = m.ConsumerGroupDescribeRequest(group_ids=["grp"])
    bare = GroupCoordinatorShard(GroupConfig(), ManualClock())
    for record in log.records:
        bare.replay(record)
    [(_, response)] = bare.handle(ApiKey.CONSUMER_GROUP_DESCRIBE, RequestContext(1), request).replies
    [m1] = response.groups[0].members
    assert m1.assignment.topic_partitions == m1.target_assignment.topic_partitions == []


def test_member_type_is_v1_only_and_tells_classic_from_consumer_members() -> None:
    log = ConsumerLog()
    log.bump_group_epoch(1)
    log.subscribe("consumer", ["foo"])
    log.subscribe(
        "classic", ["foo"], classic_member_metadata=ClassicMemberMetadata(45_000, (("range", b"x"),))
    )
    v1 = {member.member_id: member.member_type for member in describe(log, "grp", version=1)[0].members}
    assert v1 == {"consumer": MEMBER_TYPE_CONSUMER, "classic": MEMBER_TYPE_CLASSIC}
    assert (MEMBER_TYPE_CONSUMER, MEMBER_TYPE_CLASSIC) == (1, 0)
    # v0 has no MemberType: a v0 client reads the schema default, -1 (unknown).
    v0 = {member.member_id: member.member_type for member in describe(log, "grp", version=0)[0].members}
    assert v0 == {"consumer": -1, "classic": -1}


def grp_other_and_classic_groups() -> ConsumerLog:
    """ "grp" reconciling, "other" Empty at epoch 7, and the classic groups, in one log."""
    log = ConsumerLog()
    reconciling_group(log)
    with_classic_groups(log)
    other = ConsumerLog("other")
    other.bump_group_epoch(7)
    log.write(*other.records)
    return log


def test_several_groups_in_one_request_answer_in_request_order() -> None:
    log = grp_other_and_classic_groups()
    described = describe(log, "other", "nope", "grp", "classic", "grp")
    assert [(g.group_id, g.error_code, g.group_state) for g in described] == [
        ("other", E.NONE, "Empty"),
        ("nope", E.GROUP_ID_NOT_FOUND, ""),
        ("grp", E.NONE, "Reconciling"),
        ("classic", E.GROUP_ID_NOT_FOUND, ""),
        ("grp", E.NONE, "Reconciling"),
    ]
    assert described[0].group_epoch == 7


def test_describe_does_not_change_the_shard() -> None:
    log = ConsumerLog()
    reconciling_group(log)
    shard = shard_of(log.records)
    before = shard.durable_view()
    deadline = shard.next_deadline()
    shard.handle(
        ApiKey.CONSUMER_GROUP_DESCRIBE, RequestContext(1), m.ConsumerGroupDescribeRequest(group_ids=["grp"])
    )
    assert shard.durable_view() == before and shard.next_deadline() == deadline


def group_of(record: Record) -> str:
    key: Any = record.key
    return str(key.group_id if hasattr(key, "group_id") else key.group)


# -- routing -----------------------------------------------------------------------------------------------------


def test_the_net_layer_serves_it_through_the_router() -> None:
    assert ApiKey.CONSUMER_GROUP_DESCRIBE in GROUP_APIS
    assert KCOORD_VERSIONS[ApiKey.CONSUMER_GROUP_DESCRIBE] == (0, 1)


async def test_the_router_splits_a_request_across_shards_and_answers_in_request_order() -> None:
    shards = 2
    ids = ["grp", "other", "nope", "", "classic"]
    assert {shard_for_group(g, shards) for g in ids} == {0, 1}
    log = grp_other_and_classic_groups()
    runtimes = []
    for index in range(shards):
        shard_log = MemoryShardLog()
        await shard_log.append([r for r in log.records if shard_for_group(group_of(r), shards) == index])
        runtime = ShardRuntime(index, lambda: shard_of([]), shard_log, ManualClock())
        await runtime.load()
        runtimes.append(runtime)
    router = Router(runtimes)
    request = m.ConsumerGroupDescribeRequest(group_ids=ids)
    response = await router._multi_group(ApiKey.CONSUMER_GROUP_DESCRIBE, RequestContext(1), request)
    assert isinstance(response, m.ConsumerGroupDescribeResponse)
    assert [(g.group_id, g.error_code, g.group_state) for g in response.groups] == [
        ("grp", E.NONE, "Reconciling"),
        ("other", E.NONE, "Empty"),
        ("nope", E.GROUP_ID_NOT_FOUND, ""),
        ("", E.INVALID_GROUP_ID, ""),
        ("classic", E.GROUP_ID_NOT_FOUND, ""),
    ]
    assert assignment(response.groups[0].members[0].target_assignment) == {
        "foo": (FOO, [0, 1]),
        "bar": (BAR, [0]),
    }
