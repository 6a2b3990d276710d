"""A shard holding classic and consumer groups: one group id, one group, with Kafka's rules where
records of both types meet (GroupMetadataManager.replay / getOrMaybeCreatePersistedConsumerGroup)."""

from __future__ import annotations

import pytest

from kcoord.coordinator.core import records as builders
from kcoord.coordinator.core.consumer.group import ConsumerGroupState, GroupStateError
from kcoord.coordinator.core.consumer.member import ConsumerGroupMember
from kcoord.coordinator.core.records import group_metadata_record, offset_commit_record
from kcoord.protocol.records import MemberMetadata
from tests.unit.consumer_context import FOO, ConsumerLog, compacted


def classic_record(group_id: str, members: int = 1) -> object:
    return group_metadata_record(
        group_id, protocol_type="consumer", generation=3, protocol="range", leader="c-0",
        current_state_timestamp=1, members=[
            MemberMetadata(member_id=f"c-{i}", group_instance_id=None, client_id="c", client_host="h",
                           rebalance_timeout=1000, session_timeout=1000, subscription=b"", assignment=b"")
            for i in range(members)
        ],
    )  # fmt: skip


def commit(group_id: str, partition: int = 0) -> object:
    return offset_commit_record(
        group_id, "foo", partition, offset=5, leader_epoch=-1, metadata="", commit_timestamp=1
    )


def consumer_group_records(log: ConsumerLog) -> None:
    log.bump_group_epoch(1)
    log.subscribe("m1", ["foo"], instance_id="i1")
    log.target(1, {"m1": {FOO: [0, 1]}})
    log.reconcile("m1", epoch=1, assigned={FOO: [0, 1]})


def test_a_shard_with_classic_and_consumer_groups_loads_to_the_same_durable_view() -> None:
    log = ConsumerLog("cg")
    log.write(classic_record("classic"), commit("classic"), commit("simple"))
    consumer_group_records(log)
    log.write(commit("cg", 1))
    live = log.shard.durable_view()
    assert set(live["groups"]) == {"classic", "simple"}
    assert set(live["consumer_groups"]) == {"cg"}
    assert live["consumer_groups"]["cg"]["state"] == "Stable"
    assert log.fresh_replay().durable_view() == live
    assert log.fresh_replay(compacted(log.records)).durable_view() == live


def test_an_offset_commit_to_a_consumer_group_does_not_create_a_simple_group() -> None:
    log = ConsumerLog("cg")
    consumer_group_records(log)
    log.write(commit("cg"))
    assert "cg" not in log.shard.classic.groups
    assert log.shard.offsets.store.get("cg", "foo", 0) is not None


def test_consumer_group_records_take_the_place_of_a_simple_group() -> None:
    """Offsets committed before the group existed made a simple classic group; Kafka replaces it
    ("replaying consumer group records after offset commit records would not work" otherwise)."""
    log = ConsumerLog("cg")
    log.write(commit("cg"))
    simple = log.shard.classic.groups["cg"]
    assert simple.is_simple
    consumer_group_records(log)
    assert "cg" not in log.shard.classic.groups and simple.state_name == "Dead"
    assert log.group.state is ConsumerGroupState.STABLE
    assert log.shard.offsets.store.get("cg", "foo", 0) is not None


def test_a_consumer_group_tombstone_turns_a_simple_group_into_an_empty_consumer_group() -> None:
    """As Kafka's getOrMaybeCreatePersistedConsumerGroup does for any consumer-group record."""
    log = ConsumerLog("cg")
    log.write(commit("cg"))
    log.write(builders.consumer_group_current_assignment_tombstone("cg", "m1"))
    assert "cg" not in log.shard.classic.groups
    assert log.group.state is ConsumerGroupState.EMPTY and log.group.members == {}


def test_consumer_group_records_for_a_classic_group_are_an_error() -> None:
    """Kafka's replay: IllegalStateException "Group %s is not a consumer group" (the load fails)."""
    log = ConsumerLog("g")
    log.write(classic_record("g"))
    with pytest.raises(GroupStateError, match="classic group"):
        log.write(builders.consumer_group_epoch_record("g", 1))
    empty_classic = ConsumerLog("e")
    empty_classic.write(classic_record("e", members=0))  # has a protocol type: not simple
    with pytest.raises(GroupStateError, match="classic group"):
        empty_classic.write(builders.consumer_group_member_subscription_tombstone("e", "m1"))


def test_a_group_metadata_value_replaces_a_consumer_group_and_its_tombstone_deletes_one() -> None:
    """Kafka's replay(GroupMetadataKey): a value puts the classic group in place of any group with
    the id (a downgrade writes the consumer group's tombstones first); a tombstone removes any."""
    log = ConsumerLog("cg")
    consumer_group_records(log)
    group = log.group
    log.write(classic_record("cg"))
    assert "cg" not in log.shard.consumer.groups and group.state is ConsumerGroupState.DEAD
    assert log.shard.classic.groups["cg"].num_members == 1
    other = ConsumerLog("cg2")
    consumer_group_records(other)
    other.write(builders.group_tombstone("cg2"))
    assert other.shard.consumer.groups == {} and other.shard.classic.groups == {}


def test_upgrade_and_downgrade_sequences_load() -> None:
    """The records Kafka writes to convert a group: classic tombstone then consumer records
    (upgrade); consumer tombstones then a classic record (downgrade). Loading the log, compacted
    or not, gives the live state."""
    log = ConsumerLog("g")
    log.write(classic_record("g"), commit("g"))
    log.write(builders.group_tombstone("g"))
    consumer_group_records(log)
    assert log.group.state is ConsumerGroupState.STABLE
    log.write(*builders.consumer_group_tombstones(log.group))
    log.write(classic_record("g", members=2))
    assert log.shard.consumer.groups == {} and log.shard.classic.groups["g"].num_members == 2
    live = log.shard.durable_view()
    assert log.fresh_replay().durable_view() == live
    assert log.fresh_replay(compacted(log.records)).durable_view() == live


def test_member_of_a_consumer_group_round_trips_through_the_durable_view() -> None:
    log = ConsumerLog("cg")
    consumer_group_records(log)
    view = log.shard.durable_view()["consumer_groups"]["cg"]["members"]["m1"]
    assert view["assigned_partitions"] == {str(FOO): {0: 1, 1: 1}}
    assert view["instance_id"] == "i1" and view["revocation_epoch"] == 0
    assert log.member("m1") == ConsumerGroupMember(
        "m1", instance_id="i1", client_id="c", client_host="h", subscribed_topic_names=frozenset({"foo"}),
        rebalance_timeout_ms=45_000, member_epoch=1, previous_member_epoch=0, assigned_partitions={FOO: {0: 1, 1: 1}},
    )  # fmt: skip
