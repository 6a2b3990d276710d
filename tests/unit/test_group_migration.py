"""Online migration between classic and consumer (KIP-848) groups through ``GroupCoordinatorShard.handle``,
as Kafka 4.0 serves it: a consumer-protocol member joining a classic group in use converts it, the
classic members are served inside the consumer group, and the group converts back when the last
consumer-protocol member leaves. Every step's records are stored and replayed as the runtime does;
after each step a fresh shard that replays the log holds the same durable state, and no partition
is owned by two members."""

from __future__ import annotations

import uuid
from types import MappingProxyType
from typing import Any

import pytest

from kcoord.coordinator.core.consumer.subscriptions import TopicMetadata
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.records import (
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    GroupMetadataKey,
)
from tests.unit.classic_context import PARTITIONS, TOPIC, ClassicContext, assigned_partitions, subscription

TOPIC_ID = uuid.UUID("70000000-0000-0000-0000-000000000007")
IMAGE = MappingProxyType({TOPIC_ID: TopicMetadata(TOPIC, PARTITIONS)})
GROUP = "g"
REQ = m.ConsumerGroupHeartbeatRequest


class Migration(ClassicContext):
    def __init__(self, config: GroupConfig | None = None) -> None:
        super().__init__(
            config or GroupConfig(consumer_assignment_interval_ms=0),
            topic_image=lambda: IMAGE,
            resolve_topic_id={TOPIC: TOPIC_ID}.get,
        )

    def consumer_heartbeat(
        self, member_id: str, epoch: int, owned: set[int] | None = None, **fields: Any
    ) -> Any:
        if epoch == 0:
            fields.setdefault("rebalance_timeout_ms", 60_000)
            fields.setdefault("subscribed_topic_names", [TOPIC])
            owned = set()
        topic_partitions = None if owned is None else (
            [REQ.TopicPartitions(topic_id=TOPIC_ID, partitions=sorted(owned))] if owned else []
        )  # fmt: skip
        request = REQ(
            group_id=GROUP,
            member_id=member_id,
            member_epoch=epoch,
            topic_partitions=topic_partitions,
            **fields,
        )
        return self.reply(self.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, request))

    def consumer_group(self) -> Any:
        return self.shard.consumer.groups.get(GROUP)

    def owners(self) -> dict[int, list[str]]:
        """Partition -> every member that owns it or must still revoke it."""
        owners: dict[int, list[str]] = {}
        group = self.consumer_group()
        for member in group.members.values():
            for topic_id, partition in member.held_partitions():
                assert topic_id == TOPIC_ID
                owners.setdefault(partition, []).append(member.member_id)
        return owners

    def check(self) -> None:
        """The invariants after every step: the log rebuilds the live state, no partition has two owners."""
        assert self.fresh_replay_view() == self.shard.durable_view()
        if self.consumer_group() is not None:
            assert all(len(holders) == 1 for holders in self.owners().values()), self.owners()


def stable_classic_group(ctx: Migration, n: int = 2, *, static: bool = False) -> tuple[list[str], int]:
    members, generation = ctx.stable_group(GROUP, n, static=static)
    ctx.check()
    return members, generation


def test_a_consumer_member_converts_a_classic_group_in_use_and_the_classic_members_keep_their_partitions() -> (
    None
):
    ctx = Migration()
    (leader, follower), generation = stable_classic_group(ctx)
    before = len(ctx.records)
    joined = ctx.consumer_heartbeat("new", 0)
    assert joined.error_code == ErrorCode.NONE, joined
    written = ctx.records[before:]
    # Kafka's order: the classic group's tombstone, then the consumer group at the classic generation.
    assert isinstance(written[0].key, GroupMetadataKey) and written[0].value is None
    assert isinstance(written[1].key, ConsumerGroupMemberMetadataKey)
    assert isinstance(written[3].key, ConsumerGroupMetadataKey) and written[3].value.epoch == generation
    assert GROUP not in ctx.shard.classic.groups
    group = ctx.consumer_group()
    assert set(group.members) == {leader, follower, "new"}
    for member_id, partitions in ((leader, [0, 2, 4]), (follower, [1, 3, 5])):
        member = group.members[member_id]
        assert member.uses_classic_protocol
        assert member.classic_member_metadata.session_timeout_ms == 10_000
        assert {p for _, p in member.held_partitions()} == set(partitions)
    # The new member waits for partitions the classic members still own: nobody owns one twice.
    assert group.group_epoch == generation + 1
    assert joined.member_epoch == generation + 1
    assert not (
        joined.assignment
        and joined.assignment.topic_partitions
        and joined.assignment.topic_partitions[0].partitions
    )
    ctx.check()


def classic_rejoin(ctx: Migration, member_id: str, generation: int, owned: list[int] | None = None) -> Any:
    """A classic member's JoinGroup then SyncGroup inside the consumer group; returns (join, partitions)."""
    metadata = subscription(TOPIC) if owned is None else _subscription_v1(owned)
    join = ctx.reply(ctx.join(GROUP, member_id, protos=[("range", metadata)]))
    assert join is not None and join.error_code == ErrorCode.NONE, join
    assert join.leader == "" and join.members == [] and join.protocol_name == "range"
    sync = ctx.reply(ctx.sync(GROUP, member_id, join.generation_id))
    assert sync is not None and sync.error_code == ErrorCode.NONE, sync
    return join, sorted(p for _, p in assigned_partitions(sync.assignment))


def _subscription_v1(owned: list[int]) -> bytes:
    TP = m.ConsumerProtocolSubscription.TopicPartition
    body = m.ConsumerProtocolSubscription(
        topics=[TOPIC], user_data=None, owned_partitions=[TP(topic=TOPIC, partitions=owned)] if owned else []
    )
    return b"\x00\x01" + body.encode(1)


def test_classic_members_rejoin_give_up_partitions_and_the_consumer_member_gets_them() -> None:
    ctx = Migration()
    (leader, follower), generation = stable_classic_group(ctx)
    joined = ctx.consumer_heartbeat("new", 0)
    epoch = joined.member_epoch
    # The epoch moved past the classic members: their heartbeats ask them to rejoin.
    assert ctx.heartbeat(GROUP, leader, generation).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert ctx.heartbeat(GROUP, follower, generation).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    # An older generation is fenced like a classic group fences it.
    assert ctx.heartbeat(GROUP, leader, generation - 1).error_code == ErrorCode.ILLEGAL_GENERATION
    # Eager members revoked everything before rejoining (a v0 subscription owns nothing).
    kept = {}
    for member_id in (leader, follower):
        join, partitions = classic_rejoin(ctx, member_id, generation)
        assert join.generation_id == epoch
        kept[member_id] = partitions
        ctx.check()
        assert ctx.heartbeat(GROUP, member_id, epoch).error_code == ErrorCode.NONE
    owned_by_new = ctx.consumer_heartbeat("new", epoch, owned=set())
    new_partitions = {p for tp in owned_by_new.assignment.topic_partitions for p in tp.partitions}
    everything = sorted([*kept[leader], *kept[follower], *new_partitions])
    assert everything == list(range(PARTITIONS)), (kept, new_partitions)
    assert new_partitions and kept[leader] and kept[follower]
    ctx.check()


def test_a_cooperative_member_keeps_what_it_still_owns_until_it_revokes() -> None:
    ctx = Migration()
    (leader, follower), generation = stable_classic_group(ctx)
    ctx.consumer_heartbeat("new", 0)
    # The cooperative member rejoins still owning its partitions: it is told to revoke (the sync
    # leaves them out) and stays at its generation until it has.
    join, partitions = classic_rejoin(ctx, leader, generation, owned=[0, 2, 4])
    member = ctx.consumer_group().members[leader]
    assert member.partitions_pending_revocation  # the new target moves one of them to "new"
    assert join.generation_id == generation
    assert set(partitions) < {0, 2, 4}
    ctx.check()
    assert ctx.heartbeat(GROUP, leader, generation).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    join, kept = classic_rejoin(ctx, leader, generation, owned=partitions)
    assert join.generation_id == ctx.consumer_group().group_epoch and kept == partitions
    ctx.check()


def test_offset_commits_of_classic_members_are_fenced_by_generation() -> None:
    ctx = Migration()
    (leader, _), generation = stable_classic_group(ctx)
    ctx.consumer_heartbeat("new", 0)
    ok = ctx.commit(GROUP, {(TOPIC, 0): 10}, member_id=leader, generation_id=generation, version=8)
    assert ctx.commit_errors(ok) == {(TOPIC, 0): ErrorCode.NONE}
    stale = ctx.commit(GROUP, {(TOPIC, 0): 11}, member_id=leader, generation_id=generation - 1, version=8)
    assert ctx.commit_errors(stale) == {(TOPIC, 0): ErrorCode.ILLEGAL_GENERATION}
    ctx.check()


def test_the_last_consumer_member_leaving_converts_the_group_back_and_a_rebalance_follows() -> None:
    ctx = Migration()
    (leader, follower), generation = stable_classic_group(ctx)
    joined = ctx.consumer_heartbeat("new", 0)
    epoch = joined.member_epoch
    for member_id in (leader, follower):
        classic_rejoin(ctx, member_id, generation)
    before = len(ctx.records)
    left = ctx.consumer_heartbeat("new", -1)
    assert left.error_code == ErrorCode.NONE
    written = ctx.records[before:]
    assert isinstance(written[-1].key, GroupMetadataKey) and written[-1].value is not None
    assert written[-1].value.generation == epoch
    assert ctx.consumer_group() is None
    classic = ctx.group(GROUP)
    assert set(classic.members) == {leader, follower} and classic.protocol_name == "range"
    ctx.check()
    ctx.sleep(0)  # the rebalance the downgrade prepares, once its records are replayed
    assert ctx.group(GROUP).state_name == "PreparingRebalance"
    assert ctx.heartbeat(GROUP, leader, epoch).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    joins = [ctx.join(GROUP, member_id) for member_id in (leader, follower)]
    responses = [ctx.reply(j) for j in joins]
    assert all(r is not None and r.error_code == ErrorCode.NONE for r in responses), responses
    assert {r.generation_id for r in responses} == {epoch + 1}
    ctx.check()


def test_downgrade_is_refused_by_the_policy_and_the_group_stays_a_consumer_group() -> None:
    ctx = Migration(GroupConfig(consumer_assignment_interval_ms=0, consumer_migration_policy="upgrade"))
    (leader, follower), generation = stable_classic_group(ctx)
    ctx.consumer_heartbeat("new", 0)
    ctx.consumer_heartbeat("new", -1)
    group = ctx.consumer_group()
    assert group is not None and set(group.members) == {leader, follower}
    ctx.check()


@pytest.mark.parametrize("policy", ["downgrade", "disabled"])
def test_upgrade_is_refused_by_the_policy_with_group_id_not_found(policy: str) -> None:
    ctx = Migration(GroupConfig(consumer_assignment_interval_ms=0, consumer_migration_policy=policy))
    stable_classic_group(ctx)
    refused = ctx.consumer_heartbeat("new", 0)
    assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert ctx.group(GROUP).num_members == 2 and ctx.consumer_group() is None
    ctx.check()


def test_a_connect_group_never_converts() -> None:
    ctx = Migration()
    ctx.stable_group(GROUP, 1, protocol_type="connect")
    assert ctx.consumer_heartbeat("new", 0).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert ctx.group(GROUP).protocol_type == "connect"


def test_a_classic_join_never_replaces_a_consumer_group_in_use() -> None:
    ctx = Migration()
    assert ctx.consumer_heartbeat("cm", 0).error_code == ErrorCode.NONE
    connect = ctx.reply(ctx.join(GROUP, protocol_type="connect"))
    assert connect.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert set(ctx.consumer_group().members) == {"cm"} and ctx.group(GROUP) is None
    # A consumer-protocol classic member joins it instead (v4+: first its member id).
    first = ctx.reply(ctx.join(GROUP))
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    join = ctx.reply(ctx.join(GROUP, first.member_id))
    assert join.error_code == ErrorCode.NONE
    assert set(ctx.consumer_group().members) == {"cm", first.member_id}
    ctx.check()


def test_a_classic_join_takes_the_id_of_an_empty_consumer_group() -> None:
    ctx = Migration()
    ctx.consumer_heartbeat("cm", 0)
    ctx.consumer_heartbeat("cm", -1)
    assert ctx.consumer_group().is_empty
    first = ctx.reply(ctx.join(GROUP))
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert ctx.consumer_group() is None and ctx.group(GROUP) is not None
    ctx.check()


def test_static_classic_members_keep_their_partitions_across_the_switch_and_a_restart() -> None:
    ctx = Migration()
    members, generation = stable_classic_group(ctx, static=True)
    ctx.consumer_heartbeat("new", 0)
    group = ctx.consumer_group()
    for i, member_id in enumerate(members):
        assert group.members[member_id].instance_id == f"instance-{i}"
    held = {mid: group.members[mid].held_partitions() for mid in members}
    ctx.reload()  # a restart in the middle of the migration
    group = ctx.consumer_group()
    assert {mid: group.members[mid].held_partitions() for mid in members} == held
    # A static member that restarts (no member id) takes its own place back, partitions kept.
    join = ctx.reply(ctx.join(GROUP, instance_id="instance-0"))
    assert join.error_code == ErrorCode.NONE
    group = ctx.consumer_group()
    assert members[0] not in group.members and join.member_id in group.members
    assert group.members[join.member_id].instance_id == "instance-0"
    ctx.check()


def test_a_restart_mid_migration_serves_the_classic_members_from_the_log() -> None:
    ctx = Migration()
    (leader, follower), generation = stable_classic_group(ctx)
    ctx.consumer_heartbeat("new", 0)
    view = ctx.shard.durable_view()
    ctx.reload()
    assert ctx.shard.durable_view() == view
    assert ctx.heartbeat(GROUP, leader, generation).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    join, _ = classic_rejoin(ctx, leader, generation)
    assert join.generation_id == ctx.consumer_group().group_epoch
    ctx.check()


def test_a_classic_static_member_replacing_the_last_consumer_static_member_converts_the_group_back() -> None:
    ctx = Migration()
    members, generation = stable_classic_group(ctx, n=1, static=True)
    (classic_member,) = members
    joined = ctx.consumer_heartbeat("cm", 0, instance_id="instance-c")
    assert joined.error_code == ErrorCode.NONE
    classic_rejoin(ctx, classic_member, generation)
    assert ctx.consumer_group().members[classic_member].instance_id == "instance-0"
    ok = ctx.consumer_heartbeat("cm", joined.member_epoch, owned=set(), instance_id="instance-c")
    assert ok.error_code == ErrorCode.NONE and ok.assignment.topic_partitions  # released to it
    # The consumer-protocol member leaves for a restart (epoch -2) and comes back speaking classic.
    ctx.consumer_heartbeat("cm", -2, instance_id="instance-c")
    held = ctx.consumer_group().members["cm"].held_partitions()
    assert held
    join = ctx.reply(ctx.join(GROUP, instance_id="instance-c"))
    assert join.error_code == ErrorCode.NONE
    assert ctx.consumer_group() is None
    classic = ctx.group(GROUP)
    assert set(classic.members) == {classic_member, join.member_id}
    assert classic.generation_id == join.generation_id and classic.state_name == "Stable"
    ctx.check()
    ctx.sleep(0)  # no rebalance: the members keep what they hold
    assert ctx.group(GROUP).state_name == "Stable"
    sync = ctx.reply(ctx.sync(GROUP, join.member_id, join.generation_id, instance_id="instance-c"))
    assert sync.error_code == ErrorCode.NONE
    assert {p for _, p in assigned_partitions(sync.assignment)} == {p for _, p in held}
    ctx.check()


def test_a_consumer_static_member_takes_the_instance_id_of_a_classic_static_member_that_did_not_leave() -> (
    None
):
    """A rolling upgrade of static members: each classic member stops without a LeaveGroup (static
    members do) and comes back with ``group.protocol=consumer`` and its instance id. Kafka replaces
    the classic member at once (UNRELEASED_INSTANCE_ID is only between consumer-protocol members)."""
    ctx = Migration()
    members, generation = stable_classic_group(ctx, static=True)
    ctx.consumer_heartbeat("new", 0)  # converts the group; the classic static members keep theirs
    held = ctx.consumer_group().members[members[0]].held_partitions()
    assert held
    joined = ctx.consumer_heartbeat("c0-consumer", 0, instance_id="instance-0")
    assert joined.error_code == ErrorCode.NONE, joined
    group = ctx.consumer_group()
    assert members[0] not in group.members
    replacement = group.members["c0-consumer"]
    assert replacement.instance_id == "instance-0" and not replacement.uses_classic_protocol
    # It carries on with the classic member's partitions (less what the group's new target moves).
    kept = {p for _, p in replacement.held_partitions()}
    assert kept and kept <= {p for _, p in held}
    ctx.check()
    # Between consumer-protocol members the instance id stays refused until its holder left.
    again = ctx.consumer_heartbeat("c0-other", 0, instance_id="instance-0")
    assert again.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    ctx.check()
