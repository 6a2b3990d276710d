"""The KIP-848 consumer-group model (coordinator/core/consumer): members and groups built only by
replaying records, each invariant Kafka's replay keeps, and the assignment/revocation epoch
bookkeeping of :meth:`ConsumerGroupMember.with_assignment`."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kcoord.coordinator.core import records as builders
from kcoord.coordinator.core.consumer.group import (
    ConsumerGroupState,
    GroupStateError,
    ResolvedRegularExpression,
)
from kcoord.coordinator.core.consumer.member import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from kcoord.coordinator.core.consumer.target_assignment import preferred_server_assignor
from kcoord.protocol.records import (
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    Record,
)
from tests.unit.consumer_context import BAR, FOO, ConsumerLog

# -- members from their two records ---------------------------------------------------------------------------


def test_a_member_is_created_by_either_of_its_records() -> None:
    """A compacted log may hold a member's current assignment before its subscription (Kafka 4.x
    creates the member from either), and the member is the merge of both."""
    log = ConsumerLog()
    log.write(builders.consumer_group_current_assignment_record(
        "grp", ConsumerGroupMember("m1", member_epoch=3, previous_member_epoch=2, assigned_partitions={FOO: {0: 3}})
    ))  # fmt: skip
    assert log.member("m1").member_epoch == 3 and log.member("m1").subscribed_topic_names == frozenset()
    log.subscribe("m1", ["foo"], instance_id="i1", rack_id="r1", server_assignor="range")
    member = log.member("m1")
    assert (member.member_epoch, member.assigned_partitions) == (3, {FOO: {0: 3}})
    assert (member.instance_id, member.rack_id, member.server_assignor) == ("i1", "r1", "range")
    assert member.subscribed_topic_names == frozenset({"foo"})
    assert log.group.static_member_id("i1") == "m1"


def test_member_removal_in_kafkas_order() -> None:
    """Current assignment, target assignment, then subscription tombstone: the member is gone,
    with its partitions, its instance id and its target."""
    log = ConsumerLog()
    log.bump_group_epoch(1)
    log.subscribe("m1", instance_id="i1")
    log.target(1, {"m1": {FOO: [0, 1]}})
    log.reconcile("m1", epoch=1, assigned={FOO: [0, 1]})
    assert log.group.current_partition_epoch(FOO, 0) == 1
    log.remove_member("m1")
    assert log.group.members == {} and log.group.static_members == {} and log.group.target_assignment == {}
    assert log.group.current_partition_epoch(FOO, 0) == -1
    assert log.group.state is ConsumerGroupState.EMPTY


def test_a_subscription_tombstone_before_the_assignment_tombstones_is_an_error() -> None:
    """Kafka's replay throws IllegalStateException: a member leaves through its current-assignment
    tombstone (epoch -1) and its target-assignment tombstone first."""
    log = ConsumerLog()
    log.subscribe("m1")
    log.reconcile("m1", epoch=1, assigned={})
    with pytest.raises(GroupStateError, match="current assignment tombstone"):
        log.write(builders.consumer_group_member_subscription_tombstone("grp", "m1"))
    log.write(builders.consumer_group_current_assignment_tombstone("grp", "m1"))
    log.write(builders.consumer_group_target_assignment_record("grp", "m1", {FOO: [0]}))
    with pytest.raises(GroupStateError, match="target assignment tombstone"):
        log.write(builders.consumer_group_member_subscription_tombstone("grp", "m1"))


def test_tombstones_for_unknown_members_and_groups_are_ignored() -> None:
    """A compacted log keeps tombstones whose values are gone: replaying them changes nothing."""
    log = ConsumerLog()
    log.write(*builders.consumer_group_member_tombstones("grp", "gone"))
    log.write(builders.consumer_group_epoch_tombstone("grp"))
    assert log.shard.consumer.groups == {}
    log.bump_group_epoch(1)
    log.write(*builders.consumer_group_member_tombstones("grp", "gone"))
    assert log.group.members == {}


def test_deleting_a_group_needs_every_other_record_tombstoned_first() -> None:
    log = ConsumerLog()
    log.bump_group_epoch(2)
    log.subscribe("m1", subscribed_topic_regex="foo.*")
    log.target(2, {"m1": {FOO: [0]}})
    log.reconcile("m1", epoch=2, assigned={FOO: [0]})
    log.write(builders.consumer_group_regular_expression_record(
        "grp", "foo.*", ResolvedRegularExpression(frozenset({"foo"}), version=1, timestamp_ms=5)
    ))  # fmt: skip
    with pytest.raises(GroupStateError, match="members"):
        log.fresh_replay([*log.records, builders.consumer_group_epoch_tombstone("grp")])
    with pytest.raises(GroupStateError, match="still have a target assignment"):
        log.fresh_replay([*log.records, builders.consumer_group_target_assignment_epoch_tombstone("grp")])
    group = log.group
    log.write(*builders.consumer_group_tombstones(group))
    assert log.shard.consumer.groups == {}
    assert group.state is ConsumerGroupState.DEAD


def test_two_members_owning_one_partition_is_an_error() -> None:
    """Kafka's partition epochs: a partition is owned (or pending revocation) by one member at a time."""
    log = ConsumerLog()
    log.reconcile("m1", epoch=1, assigned={FOO: [0]})
    with pytest.raises(GroupStateError, match="still owned at epoch 1"):
        log.reconcile("m2", epoch=1, assigned={FOO: [0]})


def test_partition_epochs_follow_the_owner() -> None:
    log = ConsumerLog()
    log.reconcile("m1", epoch=1, assigned={FOO: [0, 1]})
    log.reconcile(
        "m1", epoch=1, assigned={FOO: [0]}, pending={FOO: [1]}, state=MemberState.UNREVOKED_PARTITIONS
    )
    assert (log.group.current_partition_epoch(FOO, 0), log.group.current_partition_epoch(FOO, 1)) == (1, 1)
    log.reconcile("m1", epoch=2, assigned={FOO: [0]})
    assert (log.group.current_partition_epoch(FOO, 0), log.group.current_partition_epoch(FOO, 1)) == (2, -1)
    log.reconcile("m2", epoch=2, assigned={FOO: [1]})
    assert log.group.current_partition_epoch(FOO, 1) == 2


# -- the group's own records ------------------------------------------------------------------------------------


def test_group_state_is_computed_as_kafka_does() -> None:
    """EMPTY without members; ASSIGNING while the group epoch is ahead of the target assignment;
    RECONCILING while a member is not STABLE at the target epoch; STABLE otherwise."""
    log = ConsumerLog()
    log.bump_group_epoch(1)
    assert log.group.state is ConsumerGroupState.EMPTY
    log.subscribe("m1")
    assert log.group.state is ConsumerGroupState.ASSIGNING
    log.target(1, {"m1": {FOO: [0, 1]}})
    assert log.group.state is ConsumerGroupState.RECONCILING  # m1 is at epoch 0
    log.reconcile("m1", epoch=1, assigned={FOO: [0, 1]})
    assert log.group.state is ConsumerGroupState.STABLE
    log.bump_group_epoch(2)
    log.subscribe("m2")
    assert log.group.state is ConsumerGroupState.ASSIGNING
    log.target(2, {"m1": {FOO: [0]}, "m2": {FOO: [1]}})
    log.reconcile(
        "m1", epoch=1, assigned={FOO: [0]}, pending={FOO: [1]}, state=MemberState.UNREVOKED_PARTITIONS
    )
    assert log.group.state is ConsumerGroupState.RECONCILING
    log.reconcile("m1", epoch=2, assigned={FOO: [0]})
    log.reconcile("m2", epoch=2, assigned={}, state=MemberState.UNRELEASED_PARTITIONS)
    assert log.group.state is ConsumerGroupState.RECONCILING
    log.reconcile("m2", epoch=2, assigned={FOO: [1]})
    assert log.group.state is ConsumerGroupState.STABLE
    assert log.group.state_name == "Stable"


def test_group_metadata_and_target_assignment_epoch_records() -> None:
    log = ConsumerLog()
    log.write(builders.consumer_group_epoch_record("grp", 4, metadata_hash=99))
    log.write(builders.consumer_group_target_assignment_epoch_record("grp", 3, assignment_timestamp_ms=7))
    group = log.group
    assert (group.group_epoch, group.metadata_hash, group.target_assignment_epoch, group.assignment_timestamp_ms) == (
        4, 99, 3, 7,
    )  # fmt: skip
    log.write(builders.consumer_group_target_assignment_record("grp", "m1", {FOO: [2, 0], BAR: [1]}))
    assert group.target_assignment_of("m1") == {FOO: frozenset({0, 2}), BAR: frozenset({1})}
    log.write(builders.consumer_group_target_assignment_tombstone("grp", "m1"))
    assert group.target_assignment_of("m1") == {}


def test_partition_metadata_record_is_remembered_only_to_be_tombstoned() -> None:
    """Kafka 4.1+ (KIP-1101) ignores a ConsumerGroupPartitionMetadata value's contents and notes
    that one is in the log, so its next epoch bump writes the tombstone."""
    log = ConsumerLog()
    log.write(
        Record(
            ConsumerGroupPartitionMetadataKey(group_id="grp"), ConsumerGroupPartitionMetadataValue(topics=[])
        )
    )
    assert log.group.has_subscription_metadata_record
    log.write(builders.consumer_group_subscription_metadata_tombstone("grp"))
    assert not log.group.has_subscription_metadata_record


def test_regular_expressions_and_subscriptions() -> None:
    log = ConsumerLog()
    log.subscribe("m1", ["foo"], subscribed_topic_regex="ba.*", server_assignor="range")
    log.subscribe("m2", ["foo", "baz"], subscribed_topic_regex="", server_assignor="uniform")
    log.subscribe("m3", [], subscribed_topic_regex="ba.*", server_assignor="range")
    log.write(builders.consumer_group_regular_expression_record(
        "grp", "ba.*", ResolvedRegularExpression(frozenset({"bar", "baz"}), version=3, timestamp_ms=10)
    ))  # fmt: skip
    group = log.group
    assert group.subscribed_regex_count("ba.*") == 2 and group.subscribed_regex_count("") == 0
    assert group.subscribed_topic_names() == {"foo", "baz", "bar"}
    assert preferred_server_assignor(group.members.values()) == "range"
    log.subscribe("m1", ["foo"], subscribed_topic_regex=None, server_assignor="uniform")
    assert group.subscribed_regex_count("ba.*") == 1
    assert preferred_server_assignor(group.members.values()) == "uniform"
    log.write(builders.consumer_group_regular_expression_tombstone("grp", "ba.*"))
    assert group.resolved_regular_expressions == {}


def test_a_replaced_static_member_keeps_its_instance_id_for_its_successor() -> None:
    """Kafka writes the old member's tombstones, then the new member's records."""
    log = ConsumerLog()
    log.subscribe("old", instance_id="i1")
    log.reconcile("old", epoch=1, assigned={FOO: [0]})
    log.write(builders.consumer_group_current_assignment_record("grp", log.member("old").as_static_leave()))
    successor = log.member("old").replaced_by("new")
    log.remove_member("old")
    log.write(builders.consumer_group_member_subscription_record("grp", successor))
    log.write(builders.consumer_group_current_assignment_record("grp", successor))
    assert log.group.static_members == {"i1": "new"}
    assert log.member("new").assigned_partitions == {FOO: {0: 0}}


def test_unknown_member_state_values_read_as_unknown() -> None:
    assert MemberState.of(2) is MemberState.UNRELEASED_PARTITIONS
    assert MemberState.of(9) is MemberState.UNKNOWN


# -- epoch bookkeeping ------------------------------------------------------------------------------------------


def test_with_assignment_keeps_the_epoch_a_partition_was_assigned_at() -> None:
    """KIP-1251: kept partitions keep their assignment epoch, new ones get the new member epoch,
    and partitions to revoke keep theirs; nothing was revoked, so the revocation epoch stays."""
    member = ConsumerGroupMember("m1", member_epoch=4, assigned_partitions={FOO: {0: 2, 1: 4}})
    next_member = member.with_assignment(
        member_epoch=5, previous_member_epoch=4, state=MemberState.STABLE, assigned={FOO: [0, 1, 2], BAR: [0]}
    )
    assert next_member.assigned_partitions == {FOO: {0: 2, 1: 4, 2: 5}, BAR: {0: 5}}
    assert next_member.revocation_epoch == 0
    unrevoked = next_member.with_assignment(
        member_epoch=5, previous_member_epoch=4, state=MemberState.UNREVOKED_PARTITIONS,
        assigned={FOO: [0]}, pending_revocation={FOO: [1, 2], BAR: [0]},
    )  # fmt: skip
    assert unrevoked.assigned_partitions == {FOO: {0: 2}}
    assert unrevoked.partitions_pending_revocation == {FOO: {1: 4, 2: 5}, BAR: {0: 5}}
    assert unrevoked.revocation_epoch == 0  # nothing let go yet


def test_revocation_epoch_moves_to_the_last_epoch_the_member_held_what_it_lost() -> None:
    """KAFKA-19779: leaving UNREVOKED_PARTITIONS for a new epoch sets it to the old epoch. Losing
    partitions without a new epoch sets it one below the epoch (the current epoch stays valid)."""
    member = ConsumerGroupMember(
        "m1", member_epoch=5, state=MemberState.UNREVOKED_PARTITIONS,
        assigned_partitions={FOO: {0: 2}}, partitions_pending_revocation={FOO: {1: 3}},
    )  # fmt: skip
    bumped = member.with_assignment(
        member_epoch=6, previous_member_epoch=5, state=MemberState.STABLE, assigned={FOO: [0]}
    )
    assert bumped.revocation_epoch == 5
    dropped_in_place = member.with_assignment(
        member_epoch=5, previous_member_epoch=4, state=MemberState.STABLE, assigned={FOO: [0]}
    )
    assert dropped_in_place.revocation_epoch == 4
    unknown = ConsumerGroupMember(
        "m1", member_epoch=5, assigned_partitions={FOO: {0: 5}}, revocation_epoch=-1
    )
    assert unknown.with_assignment(member_epoch=6, previous_member_epoch=5, state=MemberState.STABLE,
                                   assigned={FOO: [0]}).revocation_epoch == -1  # fmt: skip
    assert unknown.with_assignment(member_epoch=6, previous_member_epoch=5, state=MemberState.STABLE,
                                   assigned={}).revocation_epoch == 5  # fmt: skip


def test_static_leave_resets_assignment_epochs_to_zero() -> None:
    """Kafka's consumerGroupStaticMemberGroupLeave: epoch -2, nothing pending, every partition kept
    at assignment epoch 0 (resetAssignedPartitionsEpochsToZero); and the successor starts at epoch 0."""
    member = ConsumerGroupMember(
        "m1", instance_id="i1", member_epoch=7, previous_member_epoch=6, revocation_epoch=4,
        assigned_partitions={FOO: {0: 3, 1: 7}}, partitions_pending_revocation={BAR: {0: 2}},
    )  # fmt: skip
    left = member.as_static_leave()
    assert left.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
    assert (left.assigned_partitions, left.partitions_pending_revocation) == ({FOO: {0: 0, 1: 0}}, {})
    assert left.revocation_epoch == 0
    successor = left.replaced_by("m2")
    assert (successor.member_id, successor.member_epoch, successor.previous_member_epoch) == ("m2", 0, 0)
    assert successor.assigned_partitions == {FOO: {0: 0, 1: 0}} and successor.instance_id == "i1"


def test_subscriptions_after_a_change_read_from_the_counts_equal_a_walk_over_the_members() -> None:
    """What a heartbeat asks of the group (what it will subscribe to once a member is added,
    changed or removed) comes from subscriber counts kept by replay; it must equal what walking
    the members as they will be gives, and the version must move whenever the answer may."""
    log = ConsumerLog()
    log.subscribe("m1", ["foo"], subscribed_topic_regex="ba.*")
    log.subscribe("m2", ["foo", "qux"])
    log.write(builders.consumer_group_regular_expression_record(
        "grp", "ba.*", ResolvedRegularExpression(frozenset({"bar", "baz"}), version=0, timestamp_ms=1)
    ))  # fmt: skip
    group = log.group
    resolved = group.resolved_regular_expressions

    def walked(members: list[ConsumerGroupMember]) -> set[str]:
        names: set[str] = set()
        for mb in members:
            names |= mb.subscribed_topic_names
            if mb.subscribed_regex is not None and mb.subscribed_regex in resolved:
                names |= resolved[mb.subscribed_regex].topics
        return names

    m1, m2 = group.members["m1"], group.members["m2"]
    assert group.subscribed_names_after(resolved) == walked([m1, m2]) == set(group.subscribed_topic_names())
    changed = replace(m2, subscribed_topic_names=frozenset({"new"}))
    assert (
        group.subscribed_names_after(resolved, added=changed)
        == walked([m1, changed])
        == {"foo", "bar", "baz", "new"}
    )
    assert group.subscribed_names_after(resolved, removed=(m1,)) == walked([m2]) == {"foo", "qux"}
    # A static member rejoining under its own member id is removed and added: counted out once.
    assert group.subscribed_names_after(resolved, removed=(m2,), added=changed) == walked([m1, changed])
    newcomer = ConsumerGroupMember("m3", subscribed_topic_regex="ba.*")
    assert group.subscribed_regexes_after(removed=(m1,), added=newcomer) == {"ba.*"}
    assert group.subscribed_regexes_after(removed=(m1,)) == set()
    # Nothing in the group changed on the way.
    assert group.subscribed_topic_names() == {"foo", "qux", "bar", "baz"}

    version = group.subscriptions_version
    log.subscribe("m2", ["foo", "qux"], client_id="other")  # not a subscription change
    assert group.subscriptions_version == version
    log.subscribe("m2", ["foo"])
    assert group.subscriptions_version > version and group.subscribed_topic_names() == {"foo", "bar", "baz"}
