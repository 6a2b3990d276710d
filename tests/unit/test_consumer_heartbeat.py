"""ConsumerGroupHeartbeat (KIP-848) through ``GroupCoordinatorShard.handle``: every request's records
are stored and replayed as the runtime does, timers fire from the injected clock, and the shard's
durable view always equals a fresh shard that replayed the log (the project's invariant)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kcoord.coordinator.core.consumer.group import ConsumerGroupState
from kcoord.coordinator.core.consumer.member import MemberState
from kcoord.coordinator.core.consumer.subscriptions import TopicMetadata
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.result import RequestContext
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
)
from tests.unit.consumer_context import BAR, FOO, ConsumerLog, compacted, new_shard

FOOD = uuid.UUID("f0000000-0000-0000-0000-00000000f00d")
TOPICS = {FOO: TopicMetadata("foo", 6), BAR: TopicMetadata("bar", 3)}
REQ = m.ConsumerGroupHeartbeatRequest
SESSION_MS = GroupConfig().consumer_session_timeout_ms

Owned = Mapping[uuid.UUID, Iterable[int]]


class Context(ConsumerLog):
    def __init__(
        self, config: GroupConfig | None = None, topics: Mapping[uuid.UUID, TopicMetadata] | None = None
    ):
        super().__init__("grp", config, dict(TOPICS if topics is None else topics))

    def heartbeat(
        self, version: int = 1, describable: Callable[[str], bool] | None = None, **fields: Any
    ) -> m.ConsumerGroupHeartbeatResponse:
        fields.setdefault("group_id", self.group_id)
        owned = fields.pop("owned", None)
        if owned is not None:
            fields["topic_partitions"] = [
                REQ.TopicPartitions(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(owned.items())
            ]
        response: m.ConsumerGroupHeartbeatResponse = self.send(
            ApiKey.CONSUMER_GROUP_HEARTBEAT, version, REQ(**fields), describable
        )
        return response

    def join(
        self, member_id: str, topics: Iterable[str] = ("foo",), **fields: Any
    ) -> m.ConsumerGroupHeartbeatResponse:
        fields.setdefault("rebalance_timeout_ms", 60_000)
        fields.setdefault("subscribed_topic_names", list(topics))
        return self.heartbeat(member_id=member_id, member_epoch=0, topic_partitions=[], **fields)

    def member_ids(self) -> set[str]:
        return set(self.group.members)

    def assert_replays(self) -> None:
        live = self.shard.durable_view()
        assert self.fresh_replay().durable_view() == live
        assert self.fresh_replay(compacted(self.records)).durable_view() == live


def assignment(response: m.ConsumerGroupHeartbeatResponse) -> dict[uuid.UUID, set[int]] | None:
    if response.assignment is None:
        return None
    return {tp.topic_id: set(tp.partitions) for tp in response.assignment.topic_partitions}


def ok(response: m.ConsumerGroupHeartbeatResponse) -> m.ConsumerGroupHeartbeatResponse:
    assert response.error_code == ErrorCode.NONE, (response.error_code, response.error_message)
    return response


# -- join, revoke before assign, leave --------------------------------------------------------------------------
def test_one_member_joins_and_gets_everything() -> None:
    ctx = Context()
    response = ok(ctx.join("a", ["foo", "bar"]))
    assert (response.member_id, response.member_epoch, response.heartbeat_interval_ms) == ("a", 1, 5_000)
    assert assignment(response) == {FOO: set(range(6)), BAR: set(range(3))}
    # Kafka's order: subscription, group epoch, target assignment, then the member's assignment.
    assert [type(r.key) for r in ctx.records] == [
        ConsumerGroupMemberMetadataKey,
        ConsumerGroupMetadataKey,
        ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupTargetAssignmentMetadataKey,
        ConsumerGroupCurrentMemberAssignmentKey,
    ]
    group = ctx.group
    assert (group.group_epoch, group.target_assignment_epoch, group.state) == (
        1,
        1,
        ConsumerGroupState.STABLE,
    )
    member = ctx.member("a")
    assert (member.client_id, member.rebalance_timeout_ms, member.state) == (
        "client",
        60_000,
        MemberState.STABLE,
    )

    # A plain heartbeat writes nothing and carries no assignment.
    before = len(ctx.records)
    response = ok(ctx.heartbeat(member_id="a", member_epoch=1))
    assert (response.member_epoch, response.assignment) == (1, None)
    assert len(ctx.records) == before
    # A full request (every field of one) gets the assignment again.
    owned = {FOO: range(6), BAR: range(3)}
    response = ok(ctx.heartbeat(member_id="a", member_epoch=1, rebalance_timeout_ms=60_000,
                                subscribed_topic_names=["foo", "bar"], owned=owned))  # fmt: skip
    assert assignment(response) == {FOO: set(range(6)), BAR: set(range(3))}
    ctx.assert_replays()


def test_a_heartbeat_repeating_the_members_fields_writes_nothing_and_a_change_writes_its_record() -> None:
    """Null fields and fields equal to the member's leave it as it is (the steady heartbeat keeps the
    member itself); a changed field the member's record holds writes that record, and nothing else."""
    ctx = Context()
    ok(ctx.join("a", ["foo"], rack_id="r1"))
    member = ctx.member("a")
    before = len(ctx.records)
    ok(ctx.heartbeat(member_id="a", member_epoch=1))
    ok(ctx.heartbeat(member_id="a", member_epoch=1, rack_id="r1", rebalance_timeout_ms=60_000,
                     subscribed_topic_names=["foo"]))  # fmt: skip
    assert len(ctx.records) == before
    assert ctx.member("a") is member

    ok(ctx.heartbeat(member_id="a", member_epoch=1, rack_id="r2"))
    assert [type(r.key) for r in ctx.records[before:]] == [ConsumerGroupMemberMetadataKey]
    changed = ctx.member("a")
    assert (changed.rack_id, changed.client_id, changed.assigned_partitions) == (
        "r2",
        "client",
        member.assigned_partitions,
    )
    ctx.assert_replays()


def test_v0_server_generates_the_member_id() -> None:
    ctx = Context()
    response = ok(ctx.join("", version=0))
    assert response.member_id and response.member_epoch == 1
    assert ctx.member(response.member_id).member_epoch == 1


def target_assignment_runs(ctx: Context) -> int:
    """How many target assignments were computed: one ConsumerGroupTargetAssignmentMetadata each."""
    return sum(
        isinstance(r.key, ConsumerGroupTargetAssignmentMetadataKey) and r.value is not None
        for r in ctx.records
    )


# Batching whatever the group's size: the interval's own rules.
ALWAYS_BATCH = GroupConfig(consumer_assignment_interval_ms=1000, consumer_assignment_batch_min_members=0)


def test_members_joining_within_the_assignment_interval_share_one_assignment() -> None:
    """KIP-1263 (Kafka 4.3's ``group.consumer.assignment.interval.ms``, 1 s by default): the group
    epoch is bumped by every join, but a new target assignment is computed at most once per
    interval; until then members reconcile to the last target (a newcomer: nothing yet), and are
    told to heartbeat again when the interval has passed."""
    ctx = Context(ALWAYS_BATCH, topics={FOO: TopicMetadata("foo", 6)})
    a = ok(ctx.join("a"))
    assert a.member_epoch == 1 and assignment(a) == {FOO: set(range(6))} and target_assignment_runs(ctx) == 1
    assert a.heartbeat_interval_ms == 5_000

    ctx.sleep(10)
    b = ok(ctx.join("b"))
    ctx.sleep(590)
    c = ok(ctx.join("c"))
    assert ctx.group.group_epoch == 3 and ctx.group.target_assignment_epoch == 1
    assert ctx.group.state is ConsumerGroupState.ASSIGNING
    # The newcomers are at the last target's epoch with nothing; a keeps everything meanwhile.
    assert (b.member_epoch, assignment(b), c.member_epoch, assignment(c)) == (1, {}, 1, {})
    # Each comes back when the interval since the last target has passed, not 5 s later.
    assert (b.heartbeat_interval_ms, c.heartbeat_interval_ms) == (990, 400)
    a = ok(ctx.heartbeat(member_id="a", member_epoch=1, owned={FOO: range(6)}))
    assert a.member_epoch == 1 and a.assignment is None  # nothing changed for it
    assert target_assignment_runs(ctx) == 1

    # The interval has passed: the next heartbeat computes one assignment for both newcomers.
    ctx.sleep(400)
    a = ok(ctx.heartbeat(member_id="a", member_epoch=1, owned={FOO: range(6)}))
    assert target_assignment_runs(ctx) == 2 and ctx.group.target_assignment_epoch == 3
    assert {len(ctx.group.target_assignment[m_id][FOO]) for m_id in "abc"} == {2}
    kept = assignment(a)
    assert kept == {FOO: ctx.group.target_assignment["a"][FOO]} and a.member_epoch == 1  # revoking first
    a = ok(ctx.heartbeat(member_id="a", member_epoch=1, owned={FOO: kept[FOO]}))
    b = ok(ctx.heartbeat(member_id="b", member_epoch=1, owned={}))
    c = ok(ctx.heartbeat(member_id="c", member_epoch=1, owned={}))
    assert (a.member_epoch, b.member_epoch, c.member_epoch) == (3, 3, 3)
    assert assignment(b) == {FOO: ctx.group.target_assignment["b"][FOO]}
    assert ctx.group.state is ConsumerGroupState.STABLE and target_assignment_runs(ctx) == 2
    ctx.assert_replays()


def test_a_leave_within_the_assignment_interval_reassigns_after_it() -> None:
    ctx = Context(ALWAYS_BATCH, topics={FOO: TopicMetadata("foo", 4)})
    ok(ctx.join("a"))
    ctx.sleep(1000)
    ok(ctx.join("b"))
    ok(ctx.heartbeat(member_id="a", member_epoch=1, owned={FOO: range(4)}))
    a = ok(ctx.heartbeat(member_id="a", member_epoch=1, owned={FOO: ctx.group.target_assignment["a"][FOO]}))
    assert a.member_epoch == 2
    ok(ctx.heartbeat(member_id="b", member_epoch=2, owned={}))
    assert ctx.group.state is ConsumerGroupState.STABLE
    ok(ctx.heartbeat(member_id="b", member_epoch=-1))
    # b's partitions are nobody's until the interval since the last assignment has passed.
    a = ok(ctx.heartbeat(member_id="a", member_epoch=2, owned={FOO: ctx.group.target_assignment["a"][FOO]}))
    assert a.assignment is None and ctx.group.target_assignment_epoch == 2 and ctx.group.group_epoch == 3
    ctx.sleep(1000)
    a = ok(ctx.heartbeat(member_id="a", member_epoch=2, owned={FOO: ctx.group.target_assignment["a"][FOO]}))
    assert a.member_epoch == 3 and assignment(a) == {FOO: set(range(4))}
    ctx.assert_replays()


def test_a_member_joining_a_small_group_gets_its_partitions_in_its_first_answer() -> None:
    """With the defaults (a 1 s interval), a group smaller than
    ``group.consumer.assignment.batch.min.members`` computes the target in the heartbeat that bumps
    the epoch, as Kafka 4.0 does: a member joining 10 ms after another gets the free partitions in
    its first answer, and a member that rejoins after a leave gets the partitions it released."""
    ctx = Context(GroupConfig(), topics={FOO: TopicMetadata("foo", 6), BAR: TopicMetadata("bar", 3)})
    ok(ctx.join("a", ["foo"]))
    ctx.sleep(10)
    b = ok(ctx.join("b", ["bar"]))
    assert (b.member_epoch, assignment(b), b.heartbeat_interval_ms) == (2, {BAR: {0, 1, 2}}, 5_000)
    assert target_assignment_runs(ctx) == 2

    ok(ctx.heartbeat(member_id="b", member_epoch=-1))  # b restarts: it leaves and joins again
    ctx.sleep(10)
    b = ok(ctx.join("b2", ["bar"]))
    assert (b.member_epoch, assignment(b)) == (4, {BAR: {0, 1, 2}})
    assert ctx.group.target_assignment_epoch == ctx.group.group_epoch == 4
    ctx.assert_replays()


def test_a_burst_of_joins_in_a_large_group_computes_the_target_once_per_interval() -> None:
    """Batching where it pays: from ``batch.min.members`` members on, 20 members joining 1 ms apart
    cost one assignor run per member below the threshold and one for all the others together, at
    the end of the interval, when every deferred member comes back (its answer said when)."""
    config = GroupConfig(consumer_assignment_interval_ms=1000, consumer_assignment_batch_min_members=5)
    ctx = Context(config, topics={FOO: TopicMetadata("foo", 40)})
    ids = [f"m{i:02}" for i in range(20)]
    answers = {}
    for member_id in ids:
        answers[member_id] = ok(ctx.join(member_id))
        ctx.sleep(1)
    # Members 1-4 made the group of 1-4 members: each computed at once. The 16 others waited.
    assert target_assignment_runs(ctx) == 4 and ctx.group.target_assignment_epoch == 4
    last_computed = 3  # ms after the first join: the fourth member's join
    for index, member_id in enumerate(ids[4:], start=4):
        assert answers[member_id].heartbeat_interval_ms == last_computed + 1000 - index
    ctx.sleep(1000 + last_computed - len(ids))  # the interval has passed: they come back
    for member_id in ids:
        ok(ctx.heartbeat(member_id=member_id, member_epoch=answers[member_id].member_epoch))
    assert target_assignment_runs(ctx) == 5 and ctx.group.target_assignment_epoch == 20
    assert set(ctx.group.target_assignment) == set(ids)
    assert all(len(target[FOO]) == 2 for target in ctx.group.target_assignment.values())
    ctx.assert_replays()


def test_second_member_gets_partitions_only_after_the_first_revokes() -> None:
    ctx = Context(topics={FOO: TopicMetadata("foo", 6)})
    a = ok(ctx.join("a"))
    a_owned = assignment(a)
    assert a_owned == {FOO: set(range(6))}

    b = ok(ctx.join("b"))
    assert b.member_epoch == 2
    assert assignment(b) == {}  # its target is still owned by a
    assert ctx.member("b").state is MemberState.UNRELEASED_PARTITIONS
    b_target = ctx.group.target_assignment["b"][FOO]
    assert len(b_target) == 3

    # a is asked to revoke: it keeps the rest, stays at epoch 1.
    a = ok(ctx.heartbeat(member_id="a", member_epoch=1, owned=a_owned))
    assert a.member_epoch == 1
    kept = assignment(a)
    assert kept == {FOO: set(range(6)) - b_target}
    assert ctx.member("a").state is MemberState.UNREVOKED_PARTITIONS

    # b still gets nothing while a has not revoked.
    b = ok(ctx.heartbeat(member_id="b", member_epoch=2, owned={}))
    assert b.member_epoch == 2 and assignment(b) is None

    # a revokes: it moves to epoch 2; then b gets its partitions.
    a = ok(ctx.heartbeat(member_id="a", member_epoch=1, owned=kept))
    assert a.member_epoch == 2 and ctx.member("a").state is MemberState.STABLE
    b = ok(ctx.heartbeat(member_id="b", member_epoch=2, owned={}))
    assert assignment(b) == {FOO: b_target}
    assert ctx.group.state is ConsumerGroupState.STABLE
    ctx.assert_replays()


def test_leave_and_rejoin() -> None:
    ctx = Context(topics={FOO: TopicMetadata("foo", 4)})
    a = ok(ctx.join("a"))
    ok(ctx.join("b"))
    a = ok(ctx.heartbeat(member_id="a", member_epoch=1, owned=assignment(a)))
    a = ok(ctx.heartbeat(member_id="a", member_epoch=1, owned=assignment(a)))
    assert a.member_epoch == 2

    left = ok(ctx.heartbeat(member_id="b", member_epoch=-1))
    assert (left.member_id, left.member_epoch) == ("b", -1)
    assert ctx.member_ids() == {"a"}
    assert ctx.group.group_epoch == 3
    assert [type(r.key) for r in ctx.records[-4:]] == [
        ConsumerGroupCurrentMemberAssignmentKey,
        ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupMemberMetadataKey,
        ConsumerGroupMetadataKey,
    ]
    assert not ctx.shard.timers.is_scheduled(("consumer-session", "grp", "b"))

    # The next heartbeat of a computes the new target: everything is a's again.
    a = ok(
        ctx.heartbeat(member_id="a", member_epoch=2, owned={FOO: ctx.member("a").assigned_partitions[FOO]})
    )
    assert a.member_epoch == 3 and assignment(a) == {FOO: set(range(4))}

    b = ok(ctx.join("b"))
    assert b.member_epoch == 4
    assert ctx.member_ids() == {"a", "b"}
    # Leaving again from an unknown member id is refused.
    assert ctx.heartbeat(member_id="zz", member_epoch=-1).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    ctx.assert_replays()


def test_static_member_restart_takes_its_partitions_back_without_a_rebalance() -> None:
    ctx = Context(topics={FOO: TopicMetadata("foo", 4)})
    s = ok(ctx.join("s1", instance_id="i1"))
    d = ok(ctx.join("d"))
    s = ok(ctx.heartbeat(member_id="s1", member_epoch=1, owned=assignment(s)))
    s = ok(ctx.heartbeat(member_id="s1", member_epoch=1, owned=assignment(s)))
    d = ok(ctx.heartbeat(member_id="d", member_epoch=2, owned={}))
    s_owned = {FOO: ctx.member("s1").assigned_partitions[FOO].keys()}
    assert ctx.group.state is ConsumerGroupState.STABLE and ctx.group.group_epoch == 2

    left = ok(ctx.heartbeat(member_id="s1", member_epoch=-2, instance_id="i1"))
    assert left.member_epoch == -2
    assert ctx.member("s1").member_epoch == -2
    assert ctx.group.group_epoch == 2

    # The instance id is released: its restart, within the session timeout, takes its place.
    ctx.sleep(SESSION_MS // 2)
    ok(ctx.heartbeat(member_id="d", member_epoch=2))
    restarted = ok(ctx.join("s2", instance_id="i1"))
    assert restarted.member_epoch == 2
    assert assignment(restarted) == {FOO: set(s_owned[FOO])}
    assert ctx.member_ids() == {"s2", "d"}
    assert ctx.group.group_epoch == 2 and ctx.group.static_members == {"i1": "s2"}
    # The other member sees no rebalance.
    d = ok(ctx.heartbeat(member_id="d", member_epoch=2))
    assert d.member_epoch == 2 and d.assignment is None
    # The old member id is fenced by the new one.
    fenced = ctx.heartbeat(member_id="s1", member_epoch=2, instance_id="i1")
    assert fenced.error_code == ErrorCode.FENCED_INSTANCE_ID
    # The old member's session timer went with it.
    assert not ctx.shard.timers.is_scheduled(("consumer-session", "grp", "s1"))
    ctx.assert_replays()


def test_static_instance_id_held_by_a_live_member_is_unreleased() -> None:
    ctx = Context()
    ok(ctx.join("s1", instance_id="i1"))
    response = ctx.join("s2", instance_id="i1")
    assert response.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    unknown = ctx.heartbeat(member_id="s3", member_epoch=1, instance_id="i9")
    assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert (
        ctx.heartbeat(member_id="s2", member_epoch=-2, instance_id="i1").error_code
        == ErrorCode.FENCED_INSTANCE_ID
    )


def test_static_member_that_left_expires_after_its_session_timeout() -> None:
    ctx = Context()
    ok(ctx.join("s1", instance_id="i1"))
    ok(ctx.heartbeat(member_id="s1", member_epoch=-2, instance_id="i1"))
    ctx.sleep(SESSION_MS)
    assert ctx.member_ids() == set()
    assert ctx.group.group_epoch == 2
    ctx.assert_replays()


# -- timeouts -------------------------------------------------------------------------------------------------
def test_session_timeout_fences_a_silent_member() -> None:
    ctx = Context()
    a = ok(ctx.join("a"))
    ok(ctx.join("b"))
    epoch, owned = 1, assignment(a)
    for _ in range(10):
        ctx.sleep(5_000)
        a = ok(ctx.heartbeat(member_id="a", member_epoch=epoch, owned=owned))
        epoch = a.member_epoch
        owned = assignment(a) if a.assignment is not None else owned
    assert ctx.member_ids() == {"a"}
    assert ctx.heartbeat(member_id="b", member_epoch=2).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    ctx.assert_replays()


def test_timers_are_rescheduled_on_load() -> None:
    ctx = Context(topics={FOO: TopicMetadata("foo", 4)})
    a = ok(ctx.join("a", rebalance_timeout_ms=10_000))
    ok(ctx.join("b"))
    ok(ctx.heartbeat(member_id="a", member_epoch=1, owned=assignment(a)))  # a must revoke
    ctx.sleep(1_000)
    loaded = new_shard(clock=ctx.clock)
    for record in ctx.records:
        loaded.replay(record)
    assert loaded.on_loaded().records == []
    now = ctx.clock.now_ms()
    assert loaded.timers.deadline(("consumer-session", "grp", "a")) == now + SESSION_MS
    assert loaded.timers.deadline(("consumer-session", "grp", "b")) == now + SESSION_MS
    assert loaded.timers.deadline(("consumer-rebalance", "grp", "a")) == now + 10_000
    assert not loaded.timers.is_scheduled(("consumer-rebalance", "grp", "b"))


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    ctx = Context(topics={FOO: TopicMetadata("foo", 4)})
    a = ok(ctx.join("a", rebalance_timeout_ms=10_000))
    owned = assignment(a)
    ok(ctx.join("b"))
    ok(ctx.heartbeat(member_id="a", member_epoch=1, owned=owned))
    assert ctx.member("a").state is MemberState.UNREVOKED_PARTITIONS
    assert ctx.shard.timers.is_scheduled(("consumer-rebalance", "grp", "a"))
    for _ in range(3):
        ctx.sleep(3_000)
        ok(ctx.heartbeat(member_id="a", member_epoch=1, owned=owned))  # still owns what it must revoke
        ok(ctx.heartbeat(member_id="b", member_epoch=2, owned={}))
    ctx.sleep(2_000)
    assert ctx.member_ids() == {"b"}
    assert ctx.heartbeat(member_id="a", member_epoch=1, owned=owned).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    b = ok(ctx.heartbeat(member_id="b", member_epoch=2, owned={}))
    assert assignment(b) == {FOO: set(range(4))}
    ctx.assert_replays()


def test_rebalance_timeout_is_cancelled_once_the_member_revokes() -> None:
    ctx = Context(topics={FOO: TopicMetadata("foo", 4)})
    a = ok(ctx.join("a", rebalance_timeout_ms=10_000))
    ok(ctx.join("b"))
    kept = assignment(ok(ctx.heartbeat(member_id="a", member_epoch=1, owned=assignment(a))))
    ok(ctx.heartbeat(member_id="a", member_epoch=1, owned=kept))
    assert not ctx.shard.timers.is_scheduled(("consumer-rebalance", "grp", "a"))
    ctx.sleep(20_000)
    assert ctx.member_ids() == {"a", "b"}


# -- epochs and members ---------------------------------------------------------------------------------------
def test_fenced_member_epochs() -> None:
    ctx = Context()
    ok(ctx.join("a", ["foo"]))
    ahead = ctx.heartbeat(member_id="a", member_epoch=5)
    assert ahead.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert "greater member epoch (5)" in (ahead.error_message or "")
    # A subscription change moves a to epoch 2.
    a = ok(ctx.heartbeat(member_id="a", member_epoch=1, subscribed_topic_names=["foo", "bar"]))
    assert a.member_epoch == 2 and assignment(a) == {FOO: set(range(6)), BAR: set(range(3))}
    assert ctx.member("a").previous_member_epoch == 1
    # The previous epoch is accepted when the client owns only partitions it is assigned (a lost response) ...
    ok(ctx.heartbeat(member_id="a", member_epoch=1, owned={FOO: range(6)}))
    # ... not when it does not say what it owns, nor an older epoch.
    assert ctx.heartbeat(member_id="a", member_epoch=1).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert ctx.heartbeat(member_id="a", member_epoch=0, owned={}).error_code == ErrorCode.INVALID_REQUEST
    # Epoch 0 is a rejoin (KAFKA-19233): the member gets its assignment back.
    rejoined = ok(ctx.join("a", ["foo", "bar"]))
    assert rejoined.member_epoch == 2 and assignment(rejoined) == {FOO: set(range(6)), BAR: set(range(3))}
    ctx.assert_replays()


def test_unknown_member_and_group() -> None:
    ctx = Context()
    missing = ctx.heartbeat(member_id="a", member_epoch=1)
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert ctx.heartbeat(member_id="a", member_epoch=-1).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    ok(ctx.join("a"))
    unknown = ctx.heartbeat(member_id="zz", member_epoch=1)
    assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert unknown.error_message == "Member zz is not a member of group grp."
    assert ctx.records and all(r.key.group_id == "grp" for r in ctx.records)


def test_group_max_size() -> None:
    ctx = Context(GroupConfig(consumer_max_size=1))
    ok(ctx.join("a"))
    full = ctx.join("b")
    assert full.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert full.error_message == "The consumer group has reached its maximum capacity of 1 members."
    ok(ctx.heartbeat(member_id="a", member_epoch=1))
    assert ctx.member_ids() == {"a"}


def _classic_join(ctx: Context, member_id: str = "") -> Any:
    join = m.JoinGroupRequest(
        group_id="grp", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id=member_id,
        protocol_type="consumer", protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
    )  # fmt: skip
    result = ctx.shard.handle(ApiKey.JOIN_GROUP, RequestContext(5, "client", "/127.0.0.1"), join)
    ctx.write(*result.records)
    return result.replies[0][1] if result.replies else None  # None: parked until the rebalance completes


def test_a_classic_group_in_use_is_not_a_consumer_group_when_upgrade_is_disabled() -> None:
    ctx = Context(GroupConfig(consumer_migration_policy="downgrade"))
    member_id = _classic_join(ctx).member_id
    _classic_join(ctx, member_id)
    response = ctx.join("a")
    assert response.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert response.error_message == "Group grp is not a consumer group."


def test_an_empty_classic_group_becomes_a_consumer_group() -> None:
    ctx = Context()
    member_id = _classic_join(ctx).member_id
    _classic_join(ctx, member_id)
    ctx.sleep(3_000)  # the initial rebalance delay: the classic generation completes
    leave = m.LeaveGroupRequest(
        group_id="grp", members=[m.LeaveGroupRequest.MemberIdentity(member_id=member_id)]
    )
    assert ctx.send(ApiKey.LEAVE_GROUP, 3, leave).error_code == ErrorCode.NONE
    assert ctx.shard.classic.groups["grp"].is_empty and not ctx.shard.classic.groups["grp"].is_simple
    before = len(ctx.records)
    ok(ctx.join("a"))
    first = ctx.records[before]
    assert first.key.group == "grp" and first.value is None  # the classic group's tombstone first
    assert "grp" not in ctx.shard.classic.groups and ctx.member_ids() == {"a"}
    ctx.assert_replays()


@pytest.mark.parametrize(
    ("version", "fields", "code", "message"),
    [
        (1, {"member_id": "", "member_epoch": 0}, ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
        (0, {"member_id": "", "member_epoch": 1}, ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
        (0, {"member_id": "", "member_epoch": -1}, ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
        (1, {"group_id": ""}, ErrorCode.INVALID_REQUEST, "GroupId can't be empty."),
        (1, {"instance_id": ""}, ErrorCode.INVALID_REQUEST, "InstanceId can't be empty."),
        (1, {"rack_id": ""}, ErrorCode.INVALID_REQUEST, "RackId can't be empty."),
        (1, {"rebalance_timeout_ms": -1}, ErrorCode.INVALID_REQUEST,
         "RebalanceTimeoutMs must be provided in first request."),
        (1, {"topic_partitions": None}, ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."),
        (1, {"topic_partitions": [REQ.TopicPartitions(topic_id=FOO, partitions=[0])]}, ErrorCode.INVALID_REQUEST,
         "TopicPartitions must be empty when (re-)joining."),
        (1, {"subscribed_topic_names": None}, ErrorCode.INVALID_REQUEST,
         "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
        (1, {"member_epoch": -2}, ErrorCode.INVALID_REQUEST, "InstanceId can't be null."),
        (1, {"member_epoch": -3}, ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid."),
        (1, {"server_assignor": "sticky"}, ErrorCode.UNSUPPORTED_ASSIGNOR,
         "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
        (1, {"subscribed_topic_names": None, "subscribed_topic_regex": "("}, ErrorCode.INVALID_REGULAR_EXPRESSION, None),
    ],
)  # fmt: skip
def test_invalid_requests(version: int, fields: dict[str, Any], code: ErrorCode, message: str | None) -> None:
    ctx = Context()
    request = {
        "group_id": "grp", "member_id": "a", "member_epoch": 0, "rebalance_timeout_ms": 60_000,
        "subscribed_topic_names": ["foo"], "topic_partitions": [], **fields,
    }  # fmt: skip
    response = ctx.heartbeat(version, **request)
    assert response.error_code == code
    if message is not None:
        assert response.error_message == message
    assert response.member_id is None and ctx.records == []


def test_server_assignor_is_the_members_choice() -> None:
    ctx = Context(GroupConfig(consumer_assignors=("range",)))
    assert ctx.join("a", server_assignor="uniform").error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    ok(ctx.join("a", server_assignor="range"))
    assert ctx.member("a").server_assignor == "range"


# -- subscriptions and metadata ----------------------------------------------------------------------------------
def test_regex_subscription() -> None:
    ctx = Context(topics={**TOPICS, FOOD: TopicMetadata("food", 2)})
    a = ok(ctx.join("a", subscribed_topic_names=None, subscribed_topic_regex="fo+.*"))
    assert assignment(a) == {FOO: set(range(6)), FOOD: set(range(2))}
    resolved = ctx.group.resolved_regular_expressions["fo+.*"]
    assert resolved.topics == {"foo", "food"}
    assert any(isinstance(r.key, ConsumerGroupRegularExpressionKey) for r in ctx.records)

    # A new topic that matches: resolved again, group epoch bumped, its partitions assigned.
    new_topic = uuid.UUID("f0000000-0000-0000-0000-0000000000aa")
    ctx.topics[new_topic] = TopicMetadata("fooz", 1)
    a = ok(ctx.heartbeat(member_id="a", member_epoch=1))
    assert a.member_epoch == 2 and assignment(a) == {FOO: set(range(6)), FOOD: {0, 1}, new_topic: {0}}
    assert ctx.group.resolved_regular_expressions["fo+.*"].topics == {"foo", "food", "fooz"}

    # A second member with the same regex shares the resolution; the regex goes with its last member.
    ok(ctx.join("b", subscribed_topic_names=None, subscribed_topic_regex="fo+.*"))
    ok(ctx.heartbeat(member_id="b", member_epoch=-1))
    assert "fo+.*" in ctx.group.resolved_regular_expressions
    a = ok(ctx.heartbeat(member_id="a", member_epoch=ctx.member("a").member_epoch, subscribed_topic_regex="",
                         subscribed_topic_names=["bar"], owned={}))  # fmt: skip
    assert ctx.group.resolved_regular_expressions == {}
    assert ctx.member("a").subscribed_regex is None
    ctx.assert_replays()


def test_regex_keeps_only_topics_the_heartbeating_member_may_describe() -> None:
    """Kafka resolves a group's regular expressions with the rights of the member whose heartbeat
    asked for it (topics it may not DESCRIBE are left out), and does it again only when the topics
    matched change: members with other rights do not turn the resolution back and forth."""
    ctx = Context(topics={**TOPICS, FOOD: TopicMetadata("food", 2)})
    not_food = lambda topic: topic != "food"  # noqa: E731
    everything = lambda topic: True  # noqa: E731
    a = ok(ctx.join("a", subscribed_topic_names=None, subscribed_topic_regex="fo+.*", describable=not_food))
    assert ctx.group.resolved_regular_expressions["fo+.*"].topics == {"foo"}
    assert assignment(a) == {FOO: set(range(6))}

    # A member that may describe every topic joins with the same regex: the resolution stays.
    ok(ctx.join("b", subscribed_topic_names=None, subscribed_topic_regex="fo+.*", describable=everything))
    epoch = ctx.group.group_epoch
    for _ in range(3):
        for member in ("a", "b"):
            rights = not_food if member == "a" else everything
            ok(
                ctx.heartbeat(
                    member_id=member, member_epoch=ctx.member(member).member_epoch, describable=rights
                )
            )
    assert ctx.group.resolved_regular_expressions["fo+.*"].topics == {"foo"}
    assert ctx.group.group_epoch == epoch

    # A new matching topic: resolved again with the rights of the member that heartbeats next.
    new_topic = uuid.UUID("f0000000-0000-0000-0000-0000000000aa")
    ctx.topics[new_topic] = TopicMetadata("fooz", 1)
    ok(ctx.heartbeat(member_id="b", member_epoch=ctx.member("b").member_epoch, describable=everything))
    assert ctx.group.resolved_regular_expressions["fo+.*"].topics == {"foo", "food", "fooz"}
    assert ctx.group.group_epoch == epoch + 1
    ctx.assert_replays()

    # Without ACLs (no predicate) every matching topic is kept, as before.
    plain = Context(topics={**TOPICS, FOOD: TopicMetadata("food", 2)})
    ok(plain.join("a", subscribed_topic_names=None, subscribed_topic_regex="fo+.*"))
    assert plain.group.resolved_regular_expressions["fo+.*"].topics == {"foo", "food"}


def test_invalid_regex_writes_nothing() -> None:
    ctx = Context()
    ok(ctx.join("a"))
    before = list(ctx.records)
    response = ctx.heartbeat(member_id="a", member_epoch=1, subscribed_topic_regex="[a-")
    assert response.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert "not a valid regular expression" in (response.error_message or "")
    assert ctx.records == before


def test_partitions_added_to_a_topic() -> None:
    ctx = Context(topics={FOO: TopicMetadata("foo", 2)})
    a = ok(ctx.join("a"))
    assert assignment(a) == {FOO: {0, 1}}
    hash_before = ctx.group.metadata_hash
    assert hash_before != 0
    ok(ctx.heartbeat(member_id="a", member_epoch=1))
    assert ctx.group.group_epoch == 1  # nothing changed, no bump
    ctx.topics[FOO] = TopicMetadata("foo", 4)
    a = ok(ctx.heartbeat(member_id="a", member_epoch=1))
    assert ctx.group.group_epoch == 2 and ctx.group.metadata_hash != hash_before
    assert a.member_epoch == 2 and assignment(a) == {FOO: {0, 1, 2, 3}}
    # Topics the group does not subscribe to change nothing.
    ctx.topics[BAR] = TopicMetadata("bar", 9)
    ok(ctx.heartbeat(member_id="a", member_epoch=2))
    assert ctx.group.group_epoch == 2
    ctx.assert_replays()


def test_unsubscribed_topic_is_revoked() -> None:
    ctx = Context()
    a = ok(ctx.join("a", ["foo", "bar"]))
    a = ok(ctx.heartbeat(member_id="a", member_epoch=1, subscribed_topic_names=["bar"], owned=assignment(a)))
    # It must give foo up before it gets the new epoch.
    assert a.member_epoch == 1 and assignment(a) == {BAR: {0, 1, 2}}
    a = ok(ctx.heartbeat(member_id="a", member_epoch=1, owned=assignment(a)))
    assert a.member_epoch == 2
    ctx.assert_replays()


# -- the invariant, for random sequences ------------------------------------------------------------------------
MEMBERS = ("m1", "m2", "m3", "s1")


class HeartbeatMachine(RuleBasedStateMachine):
    """Clients that behave (they report what they own, revoke what they are told to) or crash, with
    topics that grow; after every step the live durable view equals a fresh replay of the log."""

    def __init__(self) -> None:
        super().__init__()
        self.ctx = Context(
            GroupConfig(consumer_max_size=3),
            topics={FOO: TopicMetadata("foo", 3), BAR: TopicMetadata("bar", 2)},
        )
        self.clients: dict[
            str, tuple[str, int, dict[uuid.UUID, set[int]]]
        ] = {}  # name -> (member id, epoch, owned)
        self.generation = 0

    def _instance(self, name: str) -> str | None:
        return "instance-" + name if name.startswith("s") else None

    def _apply(self, name: str, member_id: str, response: m.ConsumerGroupHeartbeatResponse) -> None:
        if response.error_code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            self.clients.pop(name, None)
            return
        if response.error_code != ErrorCode.NONE:
            return
        _, _, owned = self.clients.get(name, (member_id, 0, {}))
        new_owned = assignment(response)
        self.clients[name] = (member_id, response.member_epoch, owned if new_owned is None else new_owned)

    @rule(name=st.sampled_from(MEMBERS), topics=st.sampled_from([("foo",), ("bar",), ("foo", "bar")]),
          regex=st.booleans())  # fmt: skip
    def join(self, name: str, topics: tuple[str, ...], regex: bool) -> None:
        if name in self.clients:
            return
        self.generation += 1
        member_id = f"{name}-{self.generation}"
        fields: dict[str, Any] = {"subscribed_topic_regex": "ba.*"} if regex else {}
        response = self.ctx.join(member_id, topics, instance_id=self._instance(name), **fields)
        if response.error_code == ErrorCode.UNRELEASED_INSTANCE_ID:
            return
        self._apply(name, member_id, response)

    @rule(name=st.sampled_from(MEMBERS), full=st.booleans())
    def heartbeat(self, name: str, full: bool) -> None:
        if name not in self.clients:
            return
        member_id, epoch, owned = self.clients[name]
        fields: dict[str, Any] = {"owned": owned} if full else {}
        response = self.ctx.heartbeat(
            member_id=member_id, member_epoch=epoch, instance_id=self._instance(name), **fields
        )
        self._apply(name, member_id, response)

    @rule(name=st.sampled_from(MEMBERS), static=st.booleans())
    def leave(self, name: str, static: bool) -> None:
        if name not in self.clients:
            return
        member_id, _, _ = self.clients.pop(name)
        instance = self._instance(name)
        epoch = -2 if static and instance is not None else -1
        self.ctx.heartbeat(member_id=member_id, member_epoch=epoch, instance_id=instance)

    @rule(name=st.sampled_from(MEMBERS))
    def crash(self, name: str) -> None:
        self.clients.pop(name, None)

    @rule(ms=st.sampled_from([1_000, 10_000, 30_000, SESSION_MS]))
    def sleep(self, ms: int) -> None:
        self.ctx.sleep(ms)

    @rule(topic=st.sampled_from([FOO, BAR]))
    def add_partition(self, topic: uuid.UUID) -> None:
        old = self.ctx.topics[topic]
        self.ctx.topics[topic] = TopicMetadata(old.name, old.partition_count + 1)

    @invariant()
    def replay_rebuilds_the_live_state(self) -> None:
        live = self.ctx.shard.durable_view()
        assert self.ctx.fresh_replay().durable_view() == live

    @invariant()
    def the_group_state_is_kafkas(self) -> None:
        """The state kept by counting on replay equals Kafka's ``maybeUpdateGroupState`` walk."""
        group = self.ctx.shard.consumer.get("grp")
        if group is None:
            return
        if not group.members:
            expected = ConsumerGroupState.EMPTY
        elif group.group_epoch > group.target_assignment_epoch:
            expected = ConsumerGroupState.ASSIGNING
        elif all(mb.is_reconciled_to(group.target_assignment_epoch) for mb in group.members.values()):
            expected = ConsumerGroupState.STABLE
        else:
            expected = ConsumerGroupState.RECONCILING
        assert group.state is expected

    @invariant()
    def a_partition_has_one_owner(self) -> None:
        group = self.ctx.shard.consumer.get("grp")
        if group is None:
            return
        seen: set[tuple[uuid.UUID, int]] = set()
        for member in group.members.values():
            held = member.held_partitions()
            assert not held & seen
            seen |= held


TestHeartbeatMachine = HeartbeatMachine.TestCase
TestHeartbeatMachine.settings = settings(
    max_examples=80, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def test_static_member_rejoining_with_a_new_subscription_rebalances() -> None:
    ctx = Context()
    s = ok(ctx.join("s1", ["foo"], instance_id="i1"))
    ok(ctx.heartbeat(member_id="s1", member_epoch=-2, instance_id="i1"))
    s = ok(ctx.join("s2", ["foo", "bar"], instance_id="i1"))
    assert ctx.group.group_epoch == 2 and s.member_epoch == 2
    assert assignment(s) == {FOO: set(range(6)), BAR: set(range(3))}
    assert ctx.member_ids() == {"s2"} and set(ctx.group.target_assignment) == {"s2"}
    # The same member id may come back too (its own place, epoch 0).
    ok(ctx.heartbeat(member_id="s2", member_epoch=-2, instance_id="i1"))
    s = ok(ctx.join("s2", ["foo", "bar"], instance_id="i1"))
    assert s.member_epoch == 2 and assignment(s) == {FOO: set(range(6)), BAR: set(range(3))}
    assert ctx.shard.timers.is_scheduled(("consumer-session", "grp", "s2"))
    ctx.assert_replays()
