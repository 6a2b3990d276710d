"""JoinGroup: dynamic members, the initial rebalance delay, join-phase completion and timeouts."""

from __future__ import annotations

from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.records import GroupMetadataKey, GroupMetadataValue, Record
from tests.unit.classic_context import RANGE, ROUNDROBIN, ClassicContext, protocols, subscription

START = 1_700_000_000_000


def test_v4_join_without_member_id_gets_member_id_required_and_writes_the_new_empty_group() -> None:
    c = ClassicContext()
    response = c.reply(c.join("g", version=4, client_id="app"))
    assert response.error_code == E.MEMBER_ID_REQUIRED
    assert response.member_id == "app-1"
    assert c.group("g").is_pending_member("app-1") and c.group("g").num_members == 0
    assert c.last_records == [
        Record(
            GroupMetadataKey(group="g"),
            GroupMetadataValue(protocol_type="", generation=0, protocol=None, leader=None,
                               current_state_timestamp=START, members=[]),
        )
    ]  # fmt: skip


def test_pending_member_expires_after_its_session_timeout() -> None:
    c = ClassicContext()
    member_id = c.reply(c.join("g", session_timeout_ms=10_000)).member_id
    c.sleep(9_999)
    assert c.group("g").is_pending_member(member_id)
    c.sleep(1)
    assert not c.group("g").is_pending_member(member_id)
    late = c.reply(c.join("g", member_id))
    assert late.error_code == E.UNKNOWN_MEMBER_ID and late.member_id == member_id


def test_below_v4_a_new_member_is_added_directly_and_the_initial_delay_completes_the_join() -> None:
    c = ClassicContext()
    ctx = c.join("g", version=3, client_id="old")
    assert c.reply(ctx) is None  # parked
    group = c.group("g")
    assert group.state_name == "PreparingRebalance" and group.has_member("old-1")
    c.sleep(2_999)
    assert c.reply(ctx) is None
    c.sleep(1)
    response = c.reply(ctx)
    assert (response.error_code, response.generation_id, response.leader, response.member_id) == (
        0,
        1,
        "old-1",
        "old-1",
    )
    assert response.protocol_name == RANGE
    assert [(mb.member_id, mb.metadata) for mb in response.members] == [("old-1", subscription())]
    assert group.state_name == "CompletingRebalance"


def test_initial_rebalance_delay_is_extended_by_new_members_up_to_the_rebalance_timeout() -> None:
    c = ClassicContext()
    first = c.join("g", version=3, rebalance_timeout_ms=10_000)
    joins = [first]
    for at in (1_000, 4_000, 7_000):  # each lands inside a delay window, so each extends it
        c.sleep(at - (c.clock.now_ms() - START))
        joins.append(c.join("g", version=3, rebalance_timeout_ms=10_000))
    c.sleep(9_999 - (c.clock.now_ms() - START))
    assert not any(c.answered(j) for j in joins)
    c.sleep(1)  # delays 3000 -> 6000 -> 9000 -> capped by the 10 s rebalance timeout
    responses = [c.reply(j) for j in joins]
    assert {r.generation_id for r in responses} == {1} and all(r.error_code == 0 for r in responses)


def test_initial_rebalance_completes_after_one_delay_when_nobody_else_joins() -> None:
    c = ClassicContext(GroupConfig(initial_rebalance_delay_ms=500))
    ctx = c.join_dynamic("g")
    c.sleep(500)
    assert c.reply(ctx).generation_id == 1


def test_leader_gets_the_members_and_followers_do_not_and_versions_shape_the_response() -> None:
    c = ClassicContext()
    leader = c.join_dynamic("g", version=7)
    follower = c.join_dynamic("g", version=6)
    c.complete_initial_rebalance([leader, follower])
    lr, fr = c.reply(leader), c.reply(follower)
    assert lr.leader == lr.member_id == fr.leader
    assert [mb.member_id for mb in lr.members] == [lr.member_id, fr.member_id]
    assert fr.members == []
    assert lr.protocol_type == "consumer" and fr.protocol_type is None  # ProtocolType is v7+
    assert lr.protocol_name == fr.protocol_name == RANGE


def test_join_v0_uses_the_session_timeout_as_rebalance_timeout() -> None:
    c = ClassicContext()
    c.join("g", version=0, session_timeout_ms=7_000, rebalance_timeout_ms=99_999)
    member = next(iter(c.group("g").members.values()))
    assert member.rebalance_timeout_ms == 7_000 and member.session_timeout_ms == 7_000


def test_session_timeout_outside_the_configured_range_is_rejected() -> None:
    c = ClassicContext()
    assert c.reply(c.join("g", session_timeout_ms=5_999)).error_code == E.INVALID_SESSION_TIMEOUT
    assert c.reply(c.join("g", session_timeout_ms=1_800_001)).error_code == E.INVALID_SESSION_TIMEOUT
    assert c.group("g") is None and c.records == []


def test_empty_group_id_is_invalid() -> None:
    c = ClassicContext()
    assert c.reply(c.join("")).error_code == E.INVALID_GROUP_ID


def test_empty_protocol_type_or_protocols_is_inconsistent() -> None:
    c = ClassicContext()
    assert c.reply(c.join("g", protocol_type="")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert c.reply(c.join("g", protos=[])).error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_a_member_with_another_protocol_type_or_no_common_protocol_is_inconsistent() -> None:
    c = ClassicContext()
    c.stable_group("g", 1)
    assert c.reply(c.join("g", protocol_type="connect")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert c.reply(c.join("g", protos=protocols(ROUNDROBIN))).error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_protocol_is_chosen_by_vote_among_protocols_every_member_supports() -> None:
    c = ClassicContext()
    a = c.join_dynamic("g", protos=protocols(ROUNDROBIN, RANGE, "sticky"))
    b = c.join_dynamic("g", protos=protocols(ROUNDROBIN, RANGE))
    d = c.join_dynamic("g", protos=protocols(RANGE, ROUNDROBIN))
    c.complete_initial_rebalance([a, b, d])
    assert {c.reply(x).protocol_name for x in (a, b, d)} == {ROUNDROBIN}  # 2 votes to 1; sticky not common


def test_unknown_member_id_for_an_unknown_group() -> None:
    c = ClassicContext()
    response = c.reply(c.join("nope", "ghost"))
    assert response.error_code == E.UNKNOWN_MEMBER_ID and response.member_id == "ghost"
    assert c.group("nope") is None


def test_group_max_size_turns_new_members_away() -> None:
    c = ClassicContext(GroupConfig(max_size=2))
    c.stable_group("g", 2)
    response = c.reply(c.join("g"))  # turned away before it even gets a member id
    assert response.error_code == E.GROUP_MAX_SIZE_REACHED and response.member_id == ""
    assert c.group("g").num_members == 2 and c.group("g").state_name == "Stable"


def test_rebalance_timeout_removes_dynamic_members_that_did_not_rejoin() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group("g", 2, session_timeout_ms=120_000, rebalance_timeout_ms=30_000)
    rejoin = c.join("g", leader, session_timeout_ms=120_000, rebalance_timeout_ms=30_000)
    assert c.group("g").state_name == "PreparingRebalance" and not c.answered(rejoin)
    c.sleep(30_000)
    response = c.reply(rejoin)
    assert (response.error_code, response.generation_id, response.leader) == (0, gen + 1, leader)
    assert [mb.member_id for mb in response.members] == [leader]
    assert c.heartbeat("g", follower, gen).error_code == E.UNKNOWN_MEMBER_ID


def test_session_expiry_removes_a_member_and_the_rest_rebalance() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group("g", 2)
    for _ in range(2):
        c.sleep(4_000)
        assert c.heartbeat("g", leader, gen).error_code == E.NONE
    c.sleep(1_999)
    assert c.group("g").has_member(follower)
    c.sleep(1)  # the follower's session (10 s from the end of the join phase) is over
    assert not c.group("g").has_member(follower)
    assert c.group("g").state_name == "PreparingRebalance"
    assert c.heartbeat("g", leader, gen).error_code == E.REBALANCE_IN_PROGRESS
    response = c.reply(c.join("g", leader))  # the only member rejoined: completes at once
    assert response.generation_id == gen + 1 and [mb.member_id for mb in response.members] == [leader]


def test_new_member_join_timeout_expires_a_parked_new_member() -> None:
    c = ClassicContext()
    (old,), gen = c.stable_group("g", 1, rebalance_timeout_ms=600_000)
    newcomer = c.join_dynamic("g", rebalance_timeout_ms=600_000)
    assert c.group("g").state_name == "PreparingRebalance"
    for _ in range(299_000 // 5_000):
        c.sleep(5_000)
        c.heartbeat("g", old, gen)
    assert not c.answered(newcomer)
    c.sleep(300_000 - 295_000)
    response = c.reply(newcomer)
    assert response.error_code == E.UNKNOWN_MEMBER_ID and response.member_id == ""
    assert c.group("g").num_members == 1


def test_stable_follower_rejoining_with_same_metadata_gets_the_current_generation() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group("g", 2)
    response = c.reply(c.join("g", follower))
    assert (response.error_code, response.generation_id, response.leader, response.members) == (
        0,
        gen,
        leader,
        [],
    )
    assert c.group("g").state_name == "Stable"


def test_stable_follower_with_changed_metadata_or_leader_rejoin_triggers_a_rebalance() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group("g", 2)
    changed = c.join("g", follower, protos=protocols(RANGE, metadata=subscription("t", "u")))
    assert not c.answered(changed) and c.group("g").state_name == "PreparingRebalance"
    rejoin = c.join("g", leader)
    assert c.reply(rejoin).generation_id == gen + 1 and c.reply(changed).generation_id == gen + 1
    c2 = ClassicContext()
    (leader2, _), _ = c2.stable_group("h", 2)
    assert not c2.answered(c2.join("h", leader2)) and c2.group("h").state_name == "PreparingRebalance"


def test_rejoin_in_completing_rebalance_with_same_metadata_repeats_the_join_response() -> None:
    c = ClassicContext()
    a = c.join_dynamic("g")
    b = c.join_dynamic("g")
    c.complete_initial_rebalance([a, b])
    ra, rb = c.reply(a), c.reply(b)
    again = c.reply(c.join("g", ra.member_id))
    assert (again.generation_id, again.leader, len(again.members)) == (ra.generation_id, ra.leader, 2)
    assert c.group("g").state_name == "CompletingRebalance"
    assert c.reply(c.join("g", rb.member_id)).members == []


def test_a_superseded_parked_join_is_answered_rebalance_in_progress() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group("g", 2)
    first = c.join("g", leader)
    second = c.join("g", leader)
    assert c.reply(first).error_code == E.REBALANCE_IN_PROGRESS
    c.join("g", follower)
    assert c.reply(second).generation_id == gen + 1


def test_group_becoming_empty_writes_an_empty_generation() -> None:
    c = ClassicContext()
    (only,), gen = c.stable_group("g", 1)
    c.leave("g", [(only, None)])
    assert c.group("g").state_name == "Empty"
    [record] = c.last_records
    value = record.value
    assert (value.generation, value.protocol, value.leader, value.members) == (gen + 1, None, None, [])
    assert value.protocol_type == "consumer"
