"""A record the log cannot take is refused for its own request, never written.

A topic takes batches up to its ``max.message.bytes``; a group whose GroupMetadata record would be
larger (thousands of members, big assignments) can never be written. Kafka 4.0's coordinator
runtime refuses such a write on its own (``RecordTooLargeException`` before anything is appended,
CoordinatorRuntime.append), and the classic SyncGroup maps the failure through
``appendGroupMetadataErrorToResponseError`` (MESSAGE_TOO_LARGE -> UNKNOWN_SERVER_ERROR), answers
every waiting member with it (``resetAndPropagateAssignmentWithError``) and rebalances
(``maybePrepareRebalanceOrCompleteJoin``). The group lives on, and so does every other group of the
shard: the shard must not reload. kcoord splits a group's record that is too large because of its
many members (tests/unit/test_group_record_split.py); what remains refused is a record that cannot
be split small enough, one member alone over the limit.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcoord.coordinator.core.classic.group import ClassicGroupState
from kcoord.coordinator.core.clock import SystemClock
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.records import group_metadata_record, group_tombstone
from kcoord.coordinator.core.result import RequestContext
from kcoord.coordinator.core.shard_state import GroupCoordinatorShard
from kcoord.coordinator.runtime.shard import ShardRuntime
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.records import (
    GroupMetadataKey,
    GroupMetadataPartKey,
    MemberMetadata,
    encode_record,
    group_metadata_record_size,
)
from kcoord.storage.base import (
    DEFAULT_MAX_RECORD_BYTES,
    KAFKA_DEFAULT_MAX_MESSAGE_BYTES,
    max_record_bytes_for,
)
from kcoord.storage.memory import MemoryShardLog, MemoryStorage
from tests.unit.classic_context import ClassicContext, assignment

S = ClassicGroupState
LIMIT = 20_000  # bytes of one record (key + value) the test log takes
BIG = b"\x00\x00" + b"a" * LIMIT  # one member's assignment alone too large for a record: no split fits


def big_plan(member_ids: list[str]) -> dict[str, bytes]:
    return dict.fromkeys(member_ids, BIG)


def rejoin_all(ctx: ClassicContext, group_id: str, member_ids: list[str]) -> tuple[str, int, list[str]]:
    joins = [ctx.join(group_id, mid) for mid in member_ids]
    answers = [ctx.reply(j) for j in joins]
    assert all(a is not None and a.error_code == ErrorCode.NONE for a in answers), answers
    return answers[0].leader, answers[0].generation_id, [a.member_id for a in answers]


_text = st.text(max_size=40)


@given(
    group=_text, protocol_type=_text, protocol=st.none() | _text, leader=st.none() | _text,
    members=st.lists(st.tuples(_text, st.none() | _text, _text, _text, st.binary(max_size=300),
                               st.binary(max_size=300)), max_size=5),
)  # fmt: skip
def test_group_record_size_from_lengths_is_the_encoded_size(
    group: str, protocol_type: str, protocol: str | None, leader: str | None, members: list[Any]
) -> None:
    record = group_metadata_record(
        group, protocol_type=protocol_type, generation=7, protocol=protocol, leader=leader,
        current_state_timestamp=123, members=[
            MemberMetadata(member_id=mid, group_instance_id=iid, client_id=cid, client_host=host,
                           rebalance_timeout=1, session_timeout=2, subscription=sub, assignment=asg)
            for mid, iid, cid, host, sub, asg in members],
    )  # fmt: skip
    key, value = encode_record(record)
    assert group_metadata_record_size(record) == len(key) + len(value or b"")
    tombstone = group_tombstone(group)
    assert group_metadata_record_size(tombstone) == len(encode_record(tombstone)[0])


def test_kafka_default_max_message_bytes_sets_the_default_limit() -> None:
    assert KAFKA_DEFAULT_MAX_MESSAGE_BYTES == 1_048_588
    # The batch header (61 bytes) and one record's framing at its widest (23) come off.
    assert DEFAULT_MAX_RECORD_BYTES == max_record_bytes_for(1_048_588) == 1_048_588 - 61 - 23
    assert MemoryStorage().max_record_bytes == DEFAULT_MAX_RECORD_BYTES
    assert MemoryStorage(max_record_bytes=5000).max_record_bytes == 5000


def test_sync_that_would_write_an_oversized_record_fails_every_member_and_rebalances() -> None:
    ctx = ClassicContext(max_record_bytes=LIMIT)
    small, small_generation = ctx.stable_group("small", 2)  # another group of the same shard
    members, generation = ctx.stable_group("big", 3)
    leader = members[0]
    records_before = len(ctx.records)

    # A new generation whose assignment is too large for the log.
    leader, generation, members = rejoin_all(ctx, "big", members)
    followers = [ctx.sync("big", mid, generation) for mid in members if mid != leader]
    assert not any(ctx.answered(f) for f in followers)  # parked until the leader's assignment
    lead = ctx.sync("big", leader, generation, assignments=big_plan(members))

    # Every member learns the generation failed; nothing was written; the group rebalances.
    for c in [lead, *followers]:
        response = ctx.reply(c)
        assert response is not None and response.error_code == ErrorCode.UNKNOWN_SERVER_ERROR, response
        assert response.assignment == b""
    assert len(ctx.records) == records_before
    group = ctx.group("big")
    assert group.state is S.PREPARING_REBALANCE
    assert all(member.assignment == b"" for member in group.members.values())
    assert ctx.heartbeat("big", leader, generation).error_code == ErrorCode.REBALANCE_IN_PROGRESS

    # The other group of the shard is served as before, and its offsets are kept.
    committed = ctx.commit("small", {("t", 0): 42}, member_id=small[0], generation_id=small_generation)
    assert ctx.commit_errors(committed) == {("t", 0): ErrorCode.NONE}
    assert ctx.fetched("small", {"t": [0]}) == {("t", 0): 42}
    assert ctx.group("small").state is S.STABLE

    # The same members rejoin; a writable assignment completes the next generation.
    leader, generation, members = rejoin_all(ctx, "big", members)
    plan = {mid: assignment([i]) for i, mid in enumerate(members)}
    syncs = [ctx.sync("big", mid, generation, assignments=plan if mid == leader else None) for mid in members]
    assert [ctx.reply(s).error_code for s in syncs] == [ErrorCode.NONE] * 3  # type: ignore[union-attr]
    assert ctx.group("big").state is S.STABLE
    assert ctx.fresh_replay_view() == ctx.shard.durable_view()


def test_a_record_that_fits_exactly_is_written() -> None:
    """The limit is on the stored record's bytes (key + value), nothing else."""
    probe = ClassicContext(max_record_bytes=LIMIT)
    members, _ = probe.stable_group("g", 1)
    leader, generation, members = rejoin_all(probe, "g", members)
    probe.reply(probe.sync("g", leader, generation, assignments={leader: b"\x00\x00"}))
    key, value = encode_record(probe.records[-1])
    overhead = len(key) + len(value or b"") - 2  # everything but the assignment bytes
    exact = {leader: b"\x00\x00" + b"x" * (LIMIT - overhead - 2)}

    # At the limit: one GroupMetadata record of exactly LIMIT bytes. One byte under: the record is
    # split (a part and the group's record, each within the limit), never refused.
    for limit, written_types in (
        (LIMIT, [GroupMetadataKey]),
        (LIMIT - 1, [GroupMetadataPartKey, GroupMetadataKey]),
    ):
        ctx = ClassicContext(max_record_bytes=limit)
        members, _ = ctx.stable_group("g", 1)
        leader, generation, _ = rejoin_all(ctx, "g", members)
        response = ctx.reply(ctx.sync("g", leader, generation, assignments=exact))
        assert response is not None and response.error_code == ErrorCode.NONE, (limit, response)
        assert [type(r.key) for r in ctx.last_records] == written_types
        sizes = [sum(len(b or b"") for b in encode_record(r)) for r in ctx.last_records]
        assert max(sizes) <= limit
        if limit == LIMIT:
            assert sizes == [LIMIT]
        assert ctx.fresh_replay_view() == ctx.shard.durable_view()
        assert ctx.group("g").members[leader].assignment == exact[leader]


def test_static_member_replacement_that_would_write_an_oversized_record_is_refused() -> None:
    """Kafka's updateStaticMemberThenRebalanceOrCompleteJoin (Stable, protocol unchanged) writes
    the group with the new member id; when that write fails it reverts to the old member id and
    answers the join with the mapped error, an empty member id and the current generation."""
    ctx = ClassicContext(max_record_bytes=LIMIT)
    members, generation = ctx.stable_group("s", 2, static=True)
    group = ctx.group("s")
    old_id = group.static_member_id("instance-1")
    records_before = len(ctx.records)

    # Same protocol, but metadata so large the group's record would not fit.
    huge = b"\x00\x00" + b"m" * LIMIT
    response = ctx.reply(ctx.join("s", instance_id="instance-1", protos=[("range", huge)]))

    assert response is not None and response.error_code == ErrorCode.UNKNOWN_SERVER_ERROR, response
    assert response.member_id == ""
    assert response.generation_id == generation
    assert response.leader == group.leader_id
    assert len(ctx.records) == records_before
    # The old member id is still the instance's, with a live session; nothing rebalanced.
    assert group.static_member_id("instance-1") == old_id
    assert group.state is S.STABLE
    assert ctx.heartbeat("s", old_id, generation, instance_id="instance-1").error_code == ErrorCode.NONE
    ctx.sleep(9_000)  # within the old member's session, renewed above
    assert ctx.heartbeat("s", old_id, generation, instance_id="instance-1").error_code == ErrorCode.NONE
    assert ctx.fresh_replay_view() == ctx.shard.durable_view()


@pytest.mark.parametrize("version", [3, 9])
def test_a_new_group_whose_first_record_would_be_oversized_is_not_created(version: int) -> None:
    """A JoinGroup that creates a group writes its empty record (Kafka's newEmptyGroupMetadataRecord);
    when that write fails Kafka reverts the group and answers the join with the mapped error. Only
    a group id (or protocol type) of nearly the whole limit can make it so."""
    ctx = ClassicContext(max_record_bytes=LIMIT)
    huge = "g" * LIMIT
    response = ctx.reply(ctx.join(huge, version=version))
    assert response is not None and response.error_code == ErrorCode.UNKNOWN_SERVER_ERROR, response
    assert ctx.group(huge) is None and ctx.last_records == []
    ctx.join("g" * 100, version=version)  # an ordinary group id: created, its record written
    assert ctx.group("g" * 100) is not None and len(ctx.last_records) == 1


def test_offset_commit_whose_record_would_be_oversized_is_refused_whole() -> None:
    """Kafka writes a commit's records atomically: one record over the limit fails the write, and
    GroupCoordinatorService maps MESSAGE_TOO_LARGE to UNKNOWN_SERVER_ERROR for every partition."""
    ctx = ClassicContext(GroupConfig(offset_metadata_max_bytes=30_000), max_record_bytes=LIMIT)
    response = ctx.commit("simple", {("t", 0): 1, ("t", 1): 2}, metadata="x" * LIMIT)
    assert ctx.commit_errors(response) == {("t", 0): ErrorCode.UNKNOWN_SERVER_ERROR,
                                           ("t", 1): ErrorCode.UNKNOWN_SERVER_ERROR}  # fmt: skip
    assert ctx.last_records == []
    # Ordinary commits of the same group go through.
    ok = ctx.commit("simple", {("t", 0): 1}, metadata="fine")
    assert ctx.commit_errors(ok) == {("t", 0): ErrorCode.NONE}


# -- the runtime: an oversized group costs its own rebalance, never a shard reload -----------------
def join_request(member_id: str = "") -> m.JoinGroupRequest:
    P = m.JoinGroupRequest.JoinGroupRequestProtocol
    return m.JoinGroupRequest(group_id="big", session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                              member_id=member_id, protocol_type="consumer",
                              protocols=[P(name="range", metadata=b"\x00\x00")])  # fmt: skip


def sync_request(member_id: str, generation: int, plan: dict[str, bytes]) -> m.SyncGroupRequest:
    A = m.SyncGroupRequest.SyncGroupRequestAssignment
    return m.SyncGroupRequest(group_id="big", generation_id=generation, member_id=member_id,
                              protocol_type="consumer", protocol_name="range",
                              assignments=[A(member_id=k, assignment=v) for k, v in plan.items()])  # fmt: skip


def commit_request(group: str, offset: int) -> m.OffsetCommitRequest:
    R = m.OffsetCommitRequest
    return R(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        R.OffsetCommitRequestTopic(name="t", partitions=[
            R.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])])  # fmt: skip


async def test_runtime_answers_the_oversized_sync_and_keeps_the_shard_loaded() -> None:
    clock = SystemClock()
    config = GroupConfig(initial_rebalance_delay_ms=0)
    storage = MemoryStorage(max_record_bytes=LIMIT)
    await storage.open(1)
    log: MemoryShardLog = storage.shard_log(0)
    rt = ShardRuntime(0, lambda: GroupCoordinatorShard(config, clock, max_record_bytes=storage.max_record_bytes),
                      log, clock)  # fmt: skip
    await rt.load()
    assert (await rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request("other", 1))).topics[
        0
    ].partitions[0].error_code == ErrorCode.NONE

    first = await rt.submit(ApiKey.JOIN_GROUP, RequestContext(9, "c"), join_request())
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    joined = await asyncio.wait_for(
        rt.submit(ApiKey.JOIN_GROUP, RequestContext(9, "c"), join_request(first.member_id)), 5
    )
    assert joined.error_code == ErrorCode.NONE
    member = joined.member_id

    # The oversized sync and another group's commit arrive in the same loop iteration.
    sync = rt.submit(
        ApiKey.SYNC_GROUP,
        RequestContext(5),
        sync_request(member, joined.generation_id, {member: b"\x00\x00" + b"a" * LIMIT}),
    )
    commit = rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request("other", 2))
    synced, committed = await asyncio.wait_for(asyncio.gather(sync, commit), 5)
    assert synced.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert committed.topics[0].partitions[0].error_code == ErrorCode.NONE
    await asyncio.sleep(0.05)
    assert rt.loaded  # no reload: nothing failed in the log
    R = m.OffsetFetchRequest
    fetched = await rt.submit(ApiKey.OFFSET_FETCH, RequestContext(6), R(group_id="other", topics=[
        R.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]))  # fmt: skip
    assert fetched.topics[0].partitions[0].committed_offset == 2
    assert not any(isinstance(r.key, GroupMetadataKey) and r.value is not None and r.value.members
                   for batch in [b async for b in log.read()] for r in batch)  # fmt: skip
