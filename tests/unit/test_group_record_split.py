"""A classic group too large for one GroupMetadata record is stored split, and replays whole.

A group of thousands of members (every member's subscription and assignment are in its record)
passes the internal topic's max.message.bytes; Kafka 4.0's coordinator then fails the leader's
SyncGroup for good. kcoord writes the members in part records and the group's record last, naming
them (``kcoord.coordinator.core.records.group_metadata_records``); replay
(``kcoord.coordinator.core.classic.parts``) builds the same group an unsplit record would. These
tests check the pure logic: the split (every record within the limit), the replay round trip (a
20,000-member group included), a write cut short (its parts are never a generation), the
tombstones of parts no record names, and compaction.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcoord.coordinator.core.classic.group import ClassicGroupState
from kcoord.coordinator.core.classic.parts import MissingPartError
from kcoord.coordinator.core.classic.store import ClassicGroups
from kcoord.coordinator.core.clock import ManualClock
from kcoord.coordinator.core.records import group_metadata_record
from kcoord.coordinator.core.shard_state import GroupCoordinatorShard
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.record_batch import DEFAULT_MAX_RECORD_BYTES
from kcoord.protocol.records import (
    GroupMetadataKey,
    GroupMetadataPartKey,
    MemberMetadata,
    Record,
    decode_record,
    encode_record,
    group_metadata_record_size,
    group_parts_of,
)
from tests.unit.classic_context import ClassicContext, assignment

S = ClassicGroupState
A = m.ConsumerProtocolAssignment


def realistic_members(n: int, seed: int = 7) -> list[MemberMetadata]:
    """Members as Java consumers make them: ``consumer-<group>-<n>-<uuid>`` ids, a per-host client
    address, a subscription of one or two topics, a ~100-byte assignment of scattered partitions."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        topics = ["orders-events", "payments-v2"] if i % 3 else ["orders-events"]
        partitions = sorted(rng.sample(range(100_000), 19))
        out.append(MemberMetadata(
            member_id=f"consumer-big-{i}-{uuid.UUID(int=rng.getrandbits(128))}", group_instance_id=None,
            client_id=f"consumer-big-{i}", client_host=f"/10.0.{i // 250}.{i % 250}",
            rebalance_timeout=300_000, session_timeout=45_000,
            subscription=b"\x00\x01" + m.ConsumerProtocolSubscription(topics=topics, user_data=None).encode(1),
            assignment=b"\x00\x00" + A(assigned_partitions=[A.TopicPartition(topic="orders-events",
                                                                              partitions=partitions)],
                                       user_data=None).encode(0),
        ))  # fmt: skip
    return out


def big_record(members: list[MemberMetadata], generation: int = 3) -> Record:
    return group_metadata_record(
        "big", protocol_type="consumer", generation=generation, protocol="range",
        leader=members[0].member_id, current_state_timestamp=1_700_000_000_000, members=members,
    )  # fmt: skip


def stored(records: list[Record]) -> list[tuple[bytes, bytes | None]]:
    return [encode_record(r) for r in records]


def replay_bytes(groups: ClassicGroups, log: list[tuple[bytes, bytes | None]]) -> None:
    """Replay stored bytes as a shard load does: decode, then route by key type."""
    for key, value in log:
        record = decode_record(key, value)
        assert record is not None
        if isinstance(record.key, GroupMetadataPartKey):
            groups.replay_part(record.key, record.value)
        else:
            groups.replay(record.key, record.value)


def compacted(log: list[tuple[bytes, bytes | None]]) -> list[tuple[bytes, bytes | None]]:
    """What Kafka's log cleaner leaves: the last record of each key, in log order, tombstones gone."""
    last = {key: offset for offset, (key, _) in enumerate(log)}
    return [(k, v) for offset, (k, v) in enumerate(log) if last[k] == offset and v is not None]


@pytest.mark.parametrize("n", [5_000, 20_000])
def test_a_group_of_thousands_is_split_within_the_limit_and_replays_whole(n: int) -> None:
    members = realistic_members(n)
    record = big_record(members)
    assert group_metadata_record_size(record) > DEFAULT_MAX_RECORD_BYTES  # what Kafka cannot write

    writer = ClassicGroups(lambda: 0)
    written = writer.records_for(record, DEFAULT_MAX_RECORD_BYTES)
    assert written is not None
    log = stored(written)
    assert all(len(k) + len(v or b"") <= DEFAULT_MAX_RECORD_BYTES for k, v in log)
    parts, head = written[:-1], written[-1]
    assert all(isinstance(r.key, GroupMetadataPartKey) for r in parts)
    assert len(parts) <= group_metadata_record_size(record) // DEFAULT_MAX_RECORD_BYTES + 2  # few, full parts
    assert [r.key.index for r in parts] == list(range(len(parts)))
    # The group's record comes last: Kafka's type 2, value v4 (flexible), no members, the parts' tag.
    assert isinstance(head.key, GroupMetadataKey) and head.value.members == []
    assert log[-1][1] is not None and log[-1][1][:2] == b"\x00\x04"
    tag = group_parts_of(head.value)
    assert tag is not None and tag.count == len(parts) and {r.key.write_id for r in parts} == {tag.write_id}

    loaded = ClassicGroups(lambda: 0)
    replay_bytes(loaded, log)
    group = loaded.get("big")
    assert group is not None and group.state is S.STABLE and group.generation_id == 3
    assert group.snapshot.to_dict() == record.value.to_dict()  # exactly what one record would hold
    assert [mb.member_id for mb in group.members.values()] == [mb.member_id for mb in members]
    assert all(group.members[mb.member_id].assignment == mb.assignment for mb in members)


def test_a_write_cut_short_is_never_a_generation_and_the_next_write_tombstones_its_parts() -> None:
    limit = 60_000
    groups = ClassicGroups(lambda: 0)
    log: list[tuple[bytes, bytes | None]] = []

    def write(record: Record, keep: int | None = None) -> list[Record]:
        written = groups.records_for(record, limit)
        assert written is not None
        log.extend(stored(written[:keep]))
        replay_bytes(groups, stored(written[:keep]))
        return written

    first = write(big_record(realistic_members(1_000, seed=1), generation=1))
    assert len(first) > 2
    # Generation 2's parts reach the log, its group record does not (the append failed after them).
    cut = write(big_record(realistic_members(1_000, seed=2), generation=2), keep=2)
    reloaded = ClassicGroups(lambda: 0)
    replay_bytes(reloaded, log)
    for state in (groups, reloaded):
        group = state.get("big")
        assert group is not None and group.generation_id == 1
        assert group.snapshot.to_dict() == first[-1].value.to_dict() | {
            "members": [mb.to_dict() for r in first[:-1] for mb in r.value.members]
        }  # fmt: skip

    # The next write takes a write id above every part in the log and tombstones all the others.
    third = write(big_record(realistic_members(1_000, seed=3), generation=3))
    head = next(r for r in third if isinstance(r.key, GroupMetadataKey))
    parts_tag = group_parts_of(head.value)
    assert parts_tag is not None
    assert parts_tag.write_id > max(r.key.write_id for r in first[:-1] + cut[:2])
    tombstoned = {(r.key.write_id, r.key.index) for r in third if r.value is None}
    assert tombstoned == {(r.key.write_id, r.key.index) for r in first[:-1] + cut[:2]}
    assert third.index(head) < min(i for i, r in enumerate(third) if r.value is None)

    # Replaying the log, or what compaction leaves of it, gives the same group and parts.
    for replayed in (log, compacted(log)):
        fresh = ClassicGroups(lambda: 0)
        replay_bytes(fresh, replayed)
        assert fresh.view() == groups.view()
        assert fresh.parts_view() == groups.parts_view() == {"big": [(parts_tag.write_id, i)
                                                                     for i in range(parts_tag.count)]}  # fmt: skip
    assert groups.get("big").generation_id == 3  # type: ignore[union-attr]

    # An unsplit record (the group emptied) tombstones the last parts; deleting it leaves nothing.
    empty = write(group_metadata_record("big", protocol_type="consumer", generation=4, protocol=None,
                                        leader=None, current_state_timestamp=5, members=[]))  # fmt: skip
    assert [type(r.key) for r in empty] == [GroupMetadataKey] + [GroupMetadataPartKey] * parts_tag.count
    assert groups.parts_view() == {}
    assert groups.tombstone_records("big") == [Record(GroupMetadataKey(group="big"), None)]


def test_a_record_naming_a_part_the_log_lacks_is_refused_on_replay() -> None:
    written = ClassicGroups(lambda: 0).records_for(big_record(realistic_members(500)), 30_000)
    assert written is not None and len(written) > 2
    groups = ClassicGroups(lambda: 0)
    with pytest.raises(MissingPartError):
        replay_bytes(groups, stored(written[1:]))  # part 0 lost


def test_one_member_too_large_for_a_record_is_not_split() -> None:
    members = realistic_members(3)
    members[1].assignment = b"\x00\x00" + b"x" * 30_000
    assert ClassicGroups(lambda: 0).records_for(big_record(members), 30_000) is None
    assert ClassicGroups(lambda: 0).records_for(big_record(members), 31_000) is not None


@given(group=st.text(max_size=30), write_id=st.integers(-(2**31), 2**31 - 1), index=st.integers(0, 2**31 - 1))
def test_part_keys_round_trip(group: str, write_id: int, index: int) -> None:
    key = GroupMetadataPartKey(group, write_id, index)
    key_bytes, value_bytes = encode_record(Record(key, None))
    assert key_bytes[:2] == b"\x4b\x47" and value_bytes is None
    assert decode_record(key_bytes, None) == Record(key, None)


# -- the state machine: a large group reaches Stable, survives a reload, and moves on ------------------
LIMIT = 20_000


def join_all(ctx: ClassicContext, group_id: str, member_ids: list[str]) -> tuple[str, int]:
    joins = [ctx.join(group_id, mid) for mid in member_ids]  # parked until the last one joins
    answers = [ctx.reply(j) for j in joins]
    assert all(a is not None and a.error_code == ErrorCode.NONE for a in answers), answers
    return answers[0].leader, answers[0].generation_id  # type: ignore[union-attr]


def sync_all(
    ctx: ClassicContext, group_id: str, leader: str, generation: int, plan: dict[str, bytes]
) -> list[Any]:
    ctxs = [ctx.sync(group_id, mid, generation, assignments=plan if mid == leader else None) for mid in plan]
    return [ctx.reply(c) for c in ctxs]


def test_a_group_too_large_for_one_record_is_stable_after_a_reload() -> None:
    ctx = ClassicContext(max_record_bytes=LIMIT)
    members, _ = ctx.stable_group("big", 60)
    leader, generation = join_all(ctx, "big", members)
    plan = {
        mid: assignment(list(range(i * 100, i * 100 + 100))) for i, mid in enumerate(members)
    }  # ~420 B each
    before = len(ctx.records)
    answers = sync_all(ctx, "big", leader, generation, plan)
    assert [a.error_code for a in answers] == [ErrorCode.NONE] * 60
    assert [a.assignment for a in answers] == list(plan.values())
    written = ctx.records[before:]
    assert [type(r.key) for r in written][-1] is GroupMetadataKey and len(written) >= 3
    assert all(sum(len(b or b"") for b in encode_record(r)) <= LIMIT for r in written)
    assert ctx.fresh_replay_view() == ctx.shard.durable_view()

    ctx.reload()
    group = ctx.group("big")
    assert group.state is S.STABLE and group.generation_id == generation
    assert {mid: group.members[mid].assignment for mid in members} == plan
    assert all(ctx.heartbeat("big", mid, generation).error_code == ErrorCode.NONE for mid in members)

    # The next generation fits in one record: its record is written whole, the parts tombstoned.
    leader, generation = join_all(ctx, "big", members)
    small = {mid: assignment([i]) for i, mid in enumerate(members)}
    before = len(ctx.records)
    assert [a.error_code for a in sync_all(ctx, "big", leader, generation, small)] == [ErrorCode.NONE] * 60
    written = ctx.records[before:]
    assert type(written[0].key) is GroupMetadataKey and written[0].value.members
    assert len(written) > 1
    assert all(isinstance(r.key, GroupMetadataPartKey) and r.value is None for r in written[1:])
    assert ctx.shard.durable_view()["group_parts"] == {}

    fresh = GroupCoordinatorShard(ctx.config, ManualClock(ctx.clock.now_ms()))
    for key, value in compacted(stored(ctx.records)):
        record = decode_record(key, value)
        assert record is not None
        fresh.replay(record)
    assert fresh.durable_view() == ctx.shard.durable_view() == ctx.fresh_replay_view()
