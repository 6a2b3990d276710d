"""Random sequences of consumer-group (KIP-848) changes, written as the records a coordinator
writes for them (Hypothesis).

Members of group "grp" join (some static), change their subscriptions, get target assignments and
reconcile towards them (keeping, gaining and revoking partitions, with the epoch bookkeeping of
``with_assignment``), leave for a while (static, epoch -2), are replaced by a new member id for
their instance id, or are removed; the group epoch and target assignment epoch move; regular
expressions resolve; a deprecated partition-metadata record comes and goes; offsets are committed;
the group is deleted (with its offsets, as DeleteGroups does) and comes back. A classic group and
a simple group share the shard. Every change is a record from :mod:`kcoord.coordinator.core.records`,
replayed into the live shard; as in Kafka, a group begins with its epoch record, the one record of a
group that a compacted log always keeps while the group lives.

Invariants after every step:
- the durable view of the live shard equals that of a fresh shard replaying every record so far,
  and that of a fresh shard replaying the log as compaction leaves it (the last record of each key);
- a partition is held by at most one member (replay would raise otherwise), the static members are
  exactly the members with an instance id, and the state is Kafka's function of epochs and members.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kcoord.coordinator.core import records as builders
from kcoord.coordinator.core.consumer.group import (
    ConsumerGroup,
    ConsumerGroupState,
    ResolvedRegularExpression,
)
from kcoord.coordinator.core.consumer.member import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from kcoord.coordinator.core.records import group_metadata_record, offset_commit_record, offset_tombstone
from kcoord.protocol.records import (
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    Record,
)
from tests.unit.consumer_context import BAR, FOO, ConsumerLog, compacted

GROUP = "grp"
PARTITIONS: list[tuple[uuid.UUID, int]] = [(FOO, p) for p in range(4)] + [(BAR, p) for p in range(2)]
INSTANCE_IDS = ["i0", "i1", "i2"]
REGEXES = ["fo.*", "ba.*"]
TOPICS = ["foo", "bar", "baz"]


def by_topic(partitions: list[tuple[uuid.UUID, int]]) -> dict[uuid.UUID, list[int]]:
    out: dict[uuid.UUID, list[int]] = {}
    for topic_id, partition in partitions:
        out.setdefault(topic_id, []).append(partition)
    return out


class ConsumerGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.log = ConsumerLog(GROUP)
        self.ids = 0

    @property
    def group(self) -> ConsumerGroup | None:
        return self.log.shard.consumer.get(GROUP)

    def members(self) -> list[str]:
        group = self.group
        return sorted(group.members) if group else []

    def write_member(self, member: ConsumerGroupMember) -> None:
        self.log.write(builders.consumer_group_current_assignment_record(GROUP, member))

    # -- the group ----------------------------------------------------------------------------------------
    @initialize()
    def create_group(self) -> None:
        self.bump_group_epoch(0)

    @rule(metadata_hash=st.integers(0, 2))
    def bump_group_epoch(self, metadata_hash: int) -> None:
        epoch = (self.group.group_epoch if self.group else 0) + 1
        self.log.write(builders.consumer_group_epoch_record(GROUP, epoch, metadata_hash))

    @precondition(lambda self: self.group is not None)
    @rule(data=st.data())
    def new_target_assignment(self, data: st.DataObject) -> None:
        assert self.group is not None
        for member_id in (
            data.draw(st.lists(st.sampled_from(self.members()), unique=True)) if self.members() else []
        ):
            partitions = data.draw(st.lists(st.sampled_from(PARTITIONS), unique=True))
            self.log.write(
                builders.consumer_group_target_assignment_record(GROUP, member_id, by_topic(partitions))
            )
        epoch = data.draw(st.integers(max(0, self.group.group_epoch - 1), self.group.group_epoch))
        self.log.write(
            builders.consumer_group_target_assignment_epoch_record(GROUP, epoch, data.draw(st.integers(0, 9)))
        )

    @precondition(lambda self: self.group is not None)
    @rule(regex=st.sampled_from(REGEXES), topics=st.none() | st.frozensets(st.sampled_from(TOPICS)))
    def resolve_regex(self, regex: str, topics: frozenset[str] | None) -> None:
        if topics is None:
            self.log.write(builders.consumer_group_regular_expression_tombstone(GROUP, regex))
        else:
            resolved = ResolvedRegularExpression(topics, version=len(self.log.records), timestamp_ms=7)
            self.log.write(builders.consumer_group_regular_expression_record(GROUP, regex, resolved))

    @precondition(lambda self: self.group is not None)
    @rule(present=st.booleans())
    def partition_metadata(self, present: bool) -> None:
        key = ConsumerGroupPartitionMetadataKey(group_id=GROUP)
        value = ConsumerGroupPartitionMetadataValue(topics=[]) if present else None
        self.log.write(Record(key, value))

    @rule(partition=st.integers(0, 3), offset=st.integers(0, 9))
    def commit_offset(self, partition: int, offset: int) -> None:
        self.log.write(offset_commit_record(GROUP, "foo", partition, offset=offset, leader_epoch=-1, metadata="",
                                            commit_timestamp=1))  # fmt: skip

    @precondition(lambda self: self.group is not None)
    @rule(now=st.integers(0, 5))
    def delete_group(self, now: int) -> None:
        """DeleteGroups (now and then): the group's offsets, then the group's records."""
        assert self.group is not None
        if now:
            return
        store = self.log.shard.offsets.store
        self.log.write(*(offset_tombstone(GROUP, t, p) for t, p, _ in store.partitions(GROUP)))
        self.log.write(*builders.consumer_group_tombstones(self.group))

    @rule(members=st.integers(0, 2), now=st.integers(0, 3))
    def other_groups(self, members: int, now: int) -> None:
        if now:
            return
        self.log.write(group_metadata_record(
            "classic", protocol_type="consumer", generation=members, protocol=None, leader=None,
            current_state_timestamp=1, members=[],
        ))  # fmt: skip
        self.log.write(offset_commit_record("simple", "foo", 0, offset=members, leader_epoch=-1, metadata="",
                                            commit_timestamp=1))  # fmt: skip

    # -- members ------------------------------------------------------------------------------------------
    def subscription(self, member: ConsumerGroupMember, data: st.DataObject) -> None:
        member = replace(
            member,
            subscribed_topic_names=data.draw(st.frozensets(st.sampled_from(TOPICS))),
            subscribed_topic_regex=data.draw(st.sampled_from([None, "", *REGEXES])),
            server_assignor=data.draw(st.sampled_from([None, "range", "uniform"])),
            rack_id=data.draw(st.sampled_from([None, "r1"])),
        )
        self.log.write(builders.consumer_group_member_subscription_record(GROUP, member))

    @precondition(lambda self: self.group is not None and len(self.group.members) < 5)
    @rule(data=st.data())
    def member_joins(self, data: st.DataObject) -> None:
        """A new member id, static or not, and the group epoch bump its join causes."""
        assert self.group is not None
        self.ids += 1
        free = [i for i in INSTANCE_IDS if i not in self.group.static_members]
        instance_id = data.draw(st.none() | st.sampled_from(free)) if free else None
        member = ConsumerGroupMember(f"m{self.ids}", instance_id=instance_id, client_id="c", client_host="h",
                                     rebalance_timeout_ms=30_000)  # fmt: skip
        self.subscription(member, data)
        self.bump_group_epoch(0)

    @precondition(lambda self: self.members())
    @rule(data=st.data())
    def member_changes_its_subscription(self, data: st.DataObject) -> None:
        assert self.group is not None
        self.subscription(self.group.members[data.draw(st.sampled_from(self.members()))], data)

    @precondition(lambda self: self.members())
    @rule(data=st.data())
    def reconcile(self, data: st.DataObject) -> None:
        """The member's next current assignment: it keeps some of what it holds, revokes some,
        gains partitions no other member holds, at its epoch or a newer one."""
        group = self.group
        assert group is not None
        member = group.members[data.draw(st.sampled_from(self.members()))]
        held = sorted(member.held_partitions())
        others = set().union(*(m.held_partitions() for m in group.members.values() if m is not member))
        free = [tp for tp in PARTITIONS if tp not in others and tp not in held]
        kept = data.draw(st.lists(st.sampled_from(held), unique=True)) if held else []
        pending = data.draw(st.lists(st.sampled_from([tp for tp in held if tp not in kept]), unique=True)) \
            if len(kept) < len(held) else []  # fmt: skip
        gained = data.draw(st.lists(st.sampled_from(free), unique=True)) if free else []
        epoch = data.draw(st.sampled_from(sorted({max(member.member_epoch, 0), member.member_epoch + 1,
                                                  group.target_assignment_epoch, group.group_epoch})))  # fmt: skip
        state = data.draw(st.sampled_from([MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS,
                                           MemberState.UNRELEASED_PARTITIONS]))  # fmt: skip
        self.write_member(member.with_assignment(
            member_epoch=epoch, previous_member_epoch=member.member_epoch, state=state,
            assigned=by_topic(kept + gained), pending_revocation=by_topic(pending),
        ))  # fmt: skip

    @precondition(lambda self: self.members())
    @rule()
    def group_converges(self) -> None:
        """The target catches up with the group epoch and every member reaches it, STABLE, keeping
        what it owns and letting go of what it had to revoke."""
        assert self.group is not None
        epoch = self.group.group_epoch
        self.log.write(builders.consumer_group_target_assignment_epoch_record(GROUP, epoch))
        for member in list(self.group.members.values()):
            self.write_member(member.with_assignment(
                member_epoch=epoch, previous_member_epoch=member.member_epoch, state=MemberState.STABLE,
                assigned={t: list(ps) for t, ps in member.assigned_partitions.items()},
            ))  # fmt: skip
        assert self.group.state is ConsumerGroupState.STABLE

    @precondition(lambda self: self.members())
    @rule(data=st.data())
    def another_member_reconciles(self, data: st.DataObject) -> None:
        self.reconcile(data)

    @precondition(
        lambda self: self.group is not None and any(m.is_static for m in self.group.members.values())
    )
    @rule(data=st.data())
    def static_member_leaves_for_a_while(self, data: st.DataObject) -> None:
        assert self.group is not None
        static = [m for m in self.group.members.values() if m.is_static]
        self.write_member(data.draw(st.sampled_from(static)).as_static_leave())

    @precondition(
        lambda self: self.group is not None and any(m.is_static for m in self.group.members.values())
    )
    @rule(data=st.data())
    def static_member_is_replaced(self, data: st.DataObject) -> None:
        """Its instance id rejoins with a new member id: the old member's tombstones, then the new one's records."""
        assert self.group is not None
        old = data.draw(st.sampled_from([m for m in self.group.members.values() if m.is_static]))
        target = self.group.target_assignment_of(old.member_id)
        self.ids += 1
        successor = old.replaced_by(f"m{self.ids}")
        self.log.remove_member(old.member_id)
        self.log.write(builders.consumer_group_member_subscription_record(GROUP, successor))
        self.log.write(builders.consumer_group_target_assignment_record(GROUP, successor.member_id, target))
        self.write_member(successor)

    @precondition(lambda self: self.members())
    @rule(data=st.data())
    def member_is_removed(self, data: st.DataObject) -> None:
        self.log.remove_member(data.draw(st.sampled_from(self.members())))

    # -- invariants ---------------------------------------------------------------------------------------
    @invariant()
    def replaying_the_log_rebuilds_the_durable_state(self) -> None:
        live = self.log.shard.durable_view()
        assert self.log.fresh_replay().durable_view() == live

    @invariant()
    def replaying_the_compacted_log_rebuilds_the_durable_state(self) -> None:
        live = self.log.shard.durable_view()
        assert self.log.fresh_replay(compacted(self.log.records)).durable_view() == live

    @invariant()
    def derived_state_matches_the_members(self) -> None:
        group = self.group
        if group is None:
            return
        assert group.static_members == {
            m.instance_id: m.member_id for m in group.members.values() if m.is_static
        }
        held = [tp for m in group.members.values() for tp in m.held_partitions()]
        assert len(held) == len(set(held))
        for member in group.members.values():
            for topic_id, partition in member.held_partitions():
                assert group.current_partition_epoch(topic_id, partition) == member.member_epoch
        if not group.members:
            assert group.state is ConsumerGroupState.EMPTY
        elif group.group_epoch > group.target_assignment_epoch:
            assert group.state is ConsumerGroupState.ASSIGNING
        elif all(m.is_reconciled_to(group.target_assignment_epoch) for m in group.members.values()):
            assert group.state is ConsumerGroupState.STABLE
        else:
            assert group.state is ConsumerGroupState.RECONCILING
        for member in group.members.values():
            if member.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                assert all(e == 0 for epochs in member.assigned_partitions.values() for e in epochs.values())


ConsumerGroupMachine.TestCase.settings = settings(
    max_examples=80,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestConsumerGroupReplay = ConsumerGroupMachine.TestCase
