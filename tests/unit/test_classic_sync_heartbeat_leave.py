"""SyncGroup, Heartbeat and LeaveGroup on classic groups."""

from __future__ import annotations

from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.records import GroupMetadataKey
from tests.unit.classic_context import (
    RANGE,
    ClassicContext,
    assigned_partitions,
    assignment,
    protocols,
    subscription,
)


def _completing(c: ClassicContext, n: int = 2) -> tuple[list[str], int]:
    ctxs = [c.join_dynamic("g") for _ in range(n)]
    c.complete_initial_rebalance(ctxs)
    responses = [c.reply(x) for x in ctxs]
    leader = responses[0].leader
    return [leader] + [r.member_id for r in responses if r.member_id != leader], responses[0].generation_id


def test_followers_wait_for_the_leader_and_everyone_gets_its_assignment_once_persisted() -> None:
    c = ClassicContext()
    (leader, follower), gen = _completing(c)
    parked = c.sync("g", follower, gen)
    assert not c.answered(parked) and c.records[-1].value.generation == 0
    plan = {leader: assignment([0, 1, 2]), follower: assignment([3, 4, 5])}
    leader_sync = c.sync("g", leader, gen, assignments=plan)
    [record] = c.last_records
    assert record.key == GroupMetadataKey(group="g")
    assert (record.value.generation, record.value.leader, record.value.protocol) == (gen, leader, RANGE)
    assert {mm.member_id: mm.assignment for mm in record.value.members} == plan
    lr, fr = c.reply(leader_sync), c.reply(parked)
    assert assigned_partitions(fr.assignment) == [("t", 3), ("t", 4), ("t", 5)]
    assert lr.assignment == plan[leader] and (lr.protocol_type, lr.protocol_name) == ("consumer", RANGE)
    assert c.group("g").state_name == "Stable" and c.shard.rebalances_completed == 1
    assert c.shard.durable_view() == c.fresh_replay_view()


def test_members_missing_from_the_leaders_assignment_get_an_empty_one() -> None:
    c = ClassicContext()
    (leader, follower), gen = _completing(c)
    c.reply(c.sync("g", leader, gen, assignments={leader: assignment([0])}))
    response = c.reply(c.sync("g", follower, gen))
    assert response.error_code == 0 and response.assignment == b""


def test_sync_errors() -> None:
    c = ClassicContext()
    assert c.reply(c.sync("", "m", 1)).error_code == E.INVALID_GROUP_ID
    assert c.reply(c.sync("nope", "m", 1)).error_code == E.UNKNOWN_MEMBER_ID
    (leader, follower), gen = c.stable_group("g", 2)
    assert c.reply(c.sync("g", "ghost", gen)).error_code == E.UNKNOWN_MEMBER_ID
    assert c.reply(c.sync("g", follower, gen + 1)).error_code == E.ILLEGAL_GENERATION
    assert (
        c.reply(c.sync("g", follower, gen, protocol_name="roundrobin")).error_code
        == E.INCONSISTENT_GROUP_PROTOCOL
    )
    assert (
        c.reply(c.sync("g", follower, gen, protocol_type="connect")).error_code
        == E.INCONSISTENT_GROUP_PROTOCOL
    )
    # Below v5 the request carries no protocol type/name, so nothing to check.
    assert c.reply(c.sync("g", follower, gen, version=4, protocol_name="roundrobin")).error_code == 0
    c.join("g", leader)
    assert c.reply(c.sync("g", follower, gen)).error_code == E.REBALANCE_IN_PROGRESS


def test_sync_to_an_empty_group_is_unknown_member() -> None:
    c = ClassicContext()
    c.commit("simple", {("t", 0): 5})
    assert c.reply(c.sync("simple", "m", 0)).error_code == E.UNKNOWN_MEMBER_ID


def test_a_new_join_while_followers_wait_for_sync_answers_them_rebalance_in_progress() -> None:
    c = ClassicContext()
    (leader, follower), gen = _completing(c)
    parked = c.sync("g", follower, gen)
    c.join_dynamic("g")
    response = c.reply(parked)
    assert response.error_code == E.REBALANCE_IN_PROGRESS and response.assignment == b""
    assert c.group("g").state_name == "PreparingRebalance"


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout() -> None:
    c = ClassicContext()
    (leader, follower), gen = _completing(c)
    c.reply(c.sync("g", leader, gen, assignments={leader: assignment([0])}))
    for _ in range(11):  # keep the leader's session alive while the follower never syncs
        c.sleep(5_000)
        c.heartbeat("g", leader, gen)
    c.sleep(5_000)
    assert not c.group("g").has_member(follower)
    assert c.group("g").state_name == "PreparingRebalance"


def test_heartbeat_answers_by_state() -> None:
    c = ClassicContext()
    assert c.heartbeat("", "m", 0).error_code == E.INVALID_GROUP_ID
    assert c.heartbeat("nope", "m", 0).error_code == E.UNKNOWN_MEMBER_ID
    (leader, follower), gen = _completing(c)
    assert c.heartbeat("g", follower, gen).error_code == E.NONE  # CompletingRebalance: as Kafka
    c.reply(c.sync("g", leader, gen))
    assert c.heartbeat("g", follower, gen).error_code == E.NONE
    assert c.heartbeat("g", follower, gen - 1).error_code == E.ILLEGAL_GENERATION
    assert c.heartbeat("g", "ghost", gen).error_code == E.UNKNOWN_MEMBER_ID
    c.join("g", leader)
    assert c.heartbeat("g", follower, gen).error_code == E.REBALANCE_IN_PROGRESS


def test_heartbeats_keep_a_session_alive() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group("g", 2)
    for _ in range(10):
        c.sleep(9_000)
        assert c.heartbeat("g", leader, gen).error_code == 0
        assert c.heartbeat("g", follower, gen).error_code == 0
    assert c.group("g").num_members == 2 and c.group("g").state_name == "Stable"


def test_leave_v0_to_v2_reports_the_member_error_at_the_top() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group("g", 2)
    assert c.leave("g", "ghost", version=1).error_code == E.UNKNOWN_MEMBER_ID
    assert c.leave("nope", "ghost", version=0).error_code == E.UNKNOWN_MEMBER_ID
    ok = c.leave("g", follower, version=2)
    assert ok.error_code == 0 and ok.members == []
    assert not c.group("g").has_member(follower) and c.group("g").state_name == "PreparingRebalance"


def test_batched_leave_reports_per_member_errors_and_rebalances_once() -> None:
    c = ClassicContext()
    (a, b, d), gen = c.stable_group("g", 3)
    prepared = c.shard.rebalances_prepared
    response = c.leave("g", [(b, None), ("ghost", None), (d, None)], version=3)
    assert response.error_code == 0
    assert [(mr.member_id, mr.error_code) for mr in response.members] == [
        (b, 0),
        ("ghost", E.UNKNOWN_MEMBER_ID),
        (d, 0),
    ]
    assert c.shard.rebalances_prepared == prepared + 1
    assert list(c.group("g").members) == [a]


def test_leave_answers_the_leavers_parked_join_and_completes_the_join_phase() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group("g", 2)
    parked = c.join("g", follower, protos=protocols(RANGE, metadata=subscription("t", "u")))
    assert not c.answered(parked)
    c.leave("g", [(follower, None)])
    gone = c.reply(parked)
    assert gone.error_code == E.UNKNOWN_MEMBER_ID and gone.member_id == ""
    rejoin = c.reply(c.join("g", leader))
    assert rejoin.generation_id == gen + 1 and [mb.member_id for mb in rejoin.members] == [leader]


def test_leave_of_a_pending_member() -> None:
    c = ClassicContext()
    pending = c.reply(c.join("g")).member_id
    response = c.leave("g", [(pending, None)])
    assert response.members[0].error_code == 0 and not c.group("g").is_pending_member(pending)


def test_leader_leaving_hands_leadership_to_a_remaining_member() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group("g", 2)
    c.leave("g", [(leader, None)], reason="shutdown")
    response = c.reply(c.join("g", follower))
    assert response.leader == follower and response.generation_id == gen + 1
