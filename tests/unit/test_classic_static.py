"""Static membership (KIP-345) and KIP-814 on JoinGroup, SyncGroup, Heartbeat, OffsetCommit, LeaveGroup."""

from __future__ import annotations

from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.records import GroupMetadataKey, GroupMetadataValue, MemberMetadata, Record
from tests.unit.classic_context import RANGE, ROUNDROBIN, ClassicContext, protocols


def test_static_member_ids_are_prefixed_with_the_instance_id_and_join_without_member_id_required() -> None:
    c = ClassicContext()
    ctx = c.join("g", instance_id="i-0")
    c.complete_initial_rebalance([ctx])
    response = c.reply(ctx)
    assert response.error_code == 0 and response.member_id == "i-0-1"
    assert [(mb.member_id, mb.group_instance_id) for mb in response.members] == [("i-0-1", "i-0")]
    assert c.group("g").static_members == {"i-0": "i-0-1"}


def test_static_rejoin_in_stable_gets_a_new_id_without_rebalance_and_persists_it_first() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group("g", 2, static=True)
    before = c.group("g").member(follower).assignment
    ctx = c.join("g", instance_id="instance-1", client_id="restarted", host="/10.0.0.9")
    response = c.reply(ctx)
    new_id = response.member_id
    assert new_id.startswith("instance-1-") and new_id != follower
    assert (response.error_code, response.generation_id, response.leader, response.members) == (
        0,
        gen,
        leader,
        [],
    )
    assert response.skip_assignment is False
    assert c.group("g").state_name == "Stable"
    g = c.group("g")
    leader_member = g.member(leader)
    assert c.last_records == [
        Record(
            GroupMetadataKey(group="g"),
            GroupMetadataValue(
                protocol_type="consumer", generation=gen, protocol=RANGE, leader=leader,
                current_state_timestamp=g.current_state_timestamp,
                members=[
                    MemberMetadata(member_id=leader, group_instance_id="instance-0", client_id="client",
                                   client_host="/127.0.0.1", rebalance_timeout=60_000, session_timeout=10_000,
                                   subscription=leader_member.protocols[0][1], assignment=leader_member.assignment),
                    MemberMetadata(member_id=new_id, group_instance_id="instance-1", client_id="restarted",
                                   client_host="/10.0.0.9", rebalance_timeout=60_000, session_timeout=10_000,
                                   subscription=leader_member.protocols[0][1], assignment=before),
                ],
            ),
        )
    ]  # fmt: skip
    sync = c.reply(c.sync("g", new_id, gen, instance_id="instance-1"))
    assert sync.error_code == 0 and sync.assignment == before
    assert c.heartbeat("g", follower, gen, instance_id="instance-1").error_code == E.FENCED_INSTANCE_ID
    assert c.heartbeat("g", new_id, gen, instance_id="instance-1").error_code == E.NONE
    assert c.shard.durable_view() == c.fresh_replay_view()


def test_static_leader_rejoin_v9_skips_assignment_and_learns_it_leads() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group("g", 2, static=True)
    response = c.reply(c.join("g", instance_id="instance-0", version=9))
    assert response.skip_assignment is True
    assert response.leader == response.member_id != leader
    assert sorted(mb.group_instance_id for mb in response.members) == ["instance-0", "instance-1"]
    assert c.group("g").state_name == "Stable" and c.group("g").generation_id == gen


def test_static_leader_rejoin_below_v9_is_told_the_old_leader_id() -> None:
    c = ClassicContext()
    (leader, _), gen = c.stable_group("g", 2, static=True)
    response = c.reply(c.join("g", instance_id="instance-0", version=8))
    assert response.leader == leader and response.member_id != leader
    assert response.members == [] and response.skip_assignment is False
    assert c.group("g").leader_id == response.member_id  # the group knows the new id leads


def test_static_rejoin_that_changes_the_selected_protocol_rebalances() -> None:
    c = ClassicContext()
    (old_id,), gen = c.stable_group("g", 1, static=True, protos=protocols(RANGE, ROUNDROBIN))
    records_before = len(c.records)
    response = c.reply(c.join("g", instance_id="instance-0", protos=protocols(ROUNDROBIN, RANGE)))
    # The only member rejoined, so the rebalance completes at once, with the new protocol.
    assert (response.generation_id, response.protocol_name) == (gen + 1, ROUNDROBIN)
    assert response.member_id != old_id and response.skip_assignment is False
    assert c.group("g").state_name == "CompletingRebalance"
    assert len(c.records) == records_before  # nothing persisted until the leader's SyncGroup


def test_static_rejoin_updates_timeouts() -> None:
    c = ClassicContext()
    c.stable_group("g", 2, static=True)
    new_id = c.reply(
        c.join("g", instance_id="instance-1", session_timeout_ms=20_000, rebalance_timeout_ms=90_000)
    ).member_id
    member = c.group("g").member(new_id)
    assert (member.session_timeout_ms, member.rebalance_timeout_ms) == (20_000, 90_000)


def test_unknown_instance_id_with_a_member_id_is_unknown_member() -> None:
    c = ClassicContext()
    (leader, _), gen = c.stable_group("g", 2, static=True)
    assert c.reply(c.join("g", leader, instance_id="other")).error_code == E.UNKNOWN_MEMBER_ID
    assert c.reply(c.sync("g", leader, gen, instance_id="other")).error_code == E.UNKNOWN_MEMBER_ID
    assert c.heartbeat("g", leader, gen, instance_id="other").error_code == E.UNKNOWN_MEMBER_ID
    commit = c.commit("g", {("t", 0): 1}, member_id=leader, generation_id=gen, instance_id="other")
    assert c.commit_errors(commit) == {("t", 0): E.UNKNOWN_MEMBER_ID}


def test_instance_id_mapped_to_another_member_is_fenced_everywhere() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group("g", 2, static=True)
    assert c.reply(c.join("g", follower, instance_id="instance-0")).error_code == E.FENCED_INSTANCE_ID
    assert c.reply(c.sync("g", follower, gen, instance_id="instance-0")).error_code == E.FENCED_INSTANCE_ID
    assert c.heartbeat("g", follower, gen, instance_id="instance-0").error_code == E.FENCED_INSTANCE_ID
    commit = c.commit("g", {("t", 0): 1}, member_id=follower, generation_id=gen, instance_id="instance-0")
    assert c.commit_errors(commit) == {("t", 0): E.FENCED_INSTANCE_ID}
    leave = c.leave("g", [(follower, "instance-0")])
    assert [(mr.member_id, mr.group_instance_id, mr.error_code) for mr in leave.members] == [
        (follower, "instance-0", E.FENCED_INSTANCE_ID)
    ]
    assert c.group("g").num_members == 2


def test_rebalance_timeout_keeps_static_members_and_session_timeout_removes_them() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group(
        "g", 2, static=True, session_timeout_ms=100_000, rebalance_timeout_ms=30_000
    )
    rejoin = c.join(
        "g", leader, instance_id="instance-0", session_timeout_ms=100_000, rebalance_timeout_ms=30_000
    )
    c.sleep(30_000)
    response = c.reply(rejoin)
    assert response.generation_id == gen + 1
    assert sorted(mb.member_id for mb in response.members) == sorted(
        [leader, follower]
    )  # the static one stays
    assert c.group("g").has_member(follower)
    c.sleep(100_000)
    assert not c.group("g").has_member(follower)  # its session did run out


def test_static_rejoin_during_completing_rebalance_fences_the_old_id_and_rebalances() -> None:
    c = ClassicContext()
    a = c.join("g", instance_id="a")
    b = c.join("g", instance_id="b")
    c.complete_initial_rebalance([a, b])
    ra, rb = c.reply(a), c.reply(b)
    follower = rb.member_id if ra.leader == ra.member_id else ra.member_id
    follower_instance = "b" if follower == rb.member_id else "a"
    leader = ra.leader
    leader_instance = "a" if follower_instance == "b" else "b"
    parked_sync = c.sync("g", follower, ra.generation_id, instance_id=follower_instance)
    assert not c.answered(parked_sync)
    replacement = c.join("g", instance_id=follower_instance)
    assert c.reply(parked_sync).error_code == E.FENCED_INSTANCE_ID
    assert c.group("g").state_name == "PreparingRebalance" and not c.answered(replacement)
    c.join("g", leader, instance_id=leader_instance)
    response = c.reply(replacement)
    assert response.error_code == 0 and response.generation_id == ra.generation_id + 1
    assert response.member_id not in (follower, leader)


def test_a_parked_join_of_a_replaced_static_member_is_fenced() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group("g", 2, static=True)
    old_join = c.join("g", follower, instance_id="instance-1", protos=protocols(RANGE, ROUNDROBIN))
    assert not c.answered(old_join)
    c.join("g", instance_id="instance-1")
    fenced = c.reply(old_join)
    assert fenced.error_code == E.FENCED_INSTANCE_ID and fenced.member_id == follower


def test_leader_on_an_old_version_gets_a_response_without_instance_ids() -> None:
    c = ClassicContext()
    old = c.join_dynamic("g", version=4)
    new = c.join("g", instance_id="s", version=5)
    c.complete_initial_rebalance([old, new])
    leader_response = c.reply(old)  # round-tripped at v4 by the context
    assert [mb.group_instance_id for mb in leader_response.members] == [None, None]
    assert len(leader_response.members) == 2 and c.reply(new).error_code == 0


def test_leave_by_instance_id_removes_the_static_member_in_one_rebalance() -> None:
    c = ClassicContext()
    leader = c.stable_group("g", 3, static=True)[0][0]
    prepared = c.shard.rebalances_prepared
    response = c.leave("g", [("", "instance-1"), ("", "instance-2"), ("", "nope")], reason="scale down")
    assert [(mr.group_instance_id, mr.error_code) for mr in response.members] == [
        ("instance-1", 0),
        ("instance-2", 0),
        ("nope", E.UNKNOWN_MEMBER_ID),
    ]
    assert c.shard.rebalances_prepared == prepared + 1
    assert list(c.group("g").members) == [leader]


def test_loaded_group_gives_members_a_fresh_session_and_static_members_rejoin_without_rebalance() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group("g", 2, static=True)
    written = list(c.records)
    # kcoord is down for a minute, then loads the shard from its log.
    loaded = ClassicContext(start_ms=c.clock.now_ms() + 60_000)
    for record in written:
        loaded.records.append(record)
        loaded.shard.replay(record)
    loaded.apply(loaded.shard.on_loaded())
    group = loaded.group("g")
    assert group.state_name == "Stable" and group.generation_id == gen
    response = loaded.reply(loaded.join("g", instance_id="instance-1"))
    assert response.error_code == 0 and response.generation_id == gen and group.state_name == "Stable"
    loaded.sleep(5_000)
    assert loaded.heartbeat("g", response.member_id, gen, instance_id="instance-1").error_code == 0
    loaded.sleep(4_999)
    assert group.has_member(leader)
    loaded.sleep(1)
    assert not group.has_member(leader) and group.state_name == "PreparingRebalance"
