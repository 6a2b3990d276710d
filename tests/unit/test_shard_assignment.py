"""The cluster's shard assignor: one owner per node id, cooperative hand-off, sticky and balanced."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.coordinator.core.shard_assignment import NO_OWNER, NodeClaim, assign_shards


def claim(
    node: int, owned: set[int] = frozenset(), shards: int = 12, started: int = 0, member: str = ""
) -> NodeClaim:
    return NodeClaim(member or f"m{node}", node, "h", 9000 + node, shards, started, frozenset(owned))


def test_fresh_cluster_splits_every_shard_evenly() -> None:
    result = assign_shards([claim(1), claim(2), claim(3)], 12)
    counts = sorted(len(a.shards) for a in result.members.values())
    assert counts == [4, 4, 4]
    assert sorted(s for a in result.members.values() for s in a.shards) == list(range(12))
    assert NO_OWNER not in result.owners
    assert result.nodes == {1: ("h", 9001), 2: ("h", 9002), 3: ("h", 9003)}


def test_a_dead_node_moves_only_its_own_shards() -> None:
    first = assign_shards([claim(1), claim(2), claim(3)], 12)
    held = {int(m[1:]): a.shards for m, a in first.members.items()}
    second = assign_shards([claim(1, held[1]), claim(2, held[2])], 12)
    assert held[1] <= second.members["m1"].shards
    assert held[2] <= second.members["m2"].shards
    assert second.members["m1"].shards | second.members["m2"].shards == set(range(12))


def test_a_shard_still_claimed_by_another_node_is_given_to_nobody_until_released() -> None:
    # Node 1 holds everything; node 2 joins: node 1 gives up half, node 2 gets none of it yet.
    result = assign_shards([claim(1, set(range(12))), claim(2)], 12)
    kept, moving = result.members["m1"].shards, set(range(12)) - result.members["m1"].shards
    assert len(kept) == 6 and result.members["m2"].shards == set()
    assert all(result.owners[s] == 2 for s in moving)  # clients are sent to the coming owner
    # Next generation: node 1 released them, so node 2 gets them.
    after = assign_shards([claim(1, kept), claim(2)], 12)
    assert after.members["m1"].shards == kept and after.members["m2"].shards == moving


def test_a_stale_claim_is_released_by_its_member_and_the_shard_given_next_generation() -> None:
    # Seen on tansu after node 2 was stalled while node 3 restarted: node 3's JoinGroup claimed
    # six shards; the leader gave it four and held 1 and 8 for node 2 until node 3 released them.
    # Node 3 had dropped every shard meanwhile (its generation followed a gap), so it saw nothing
    # to release and did not rejoin: the group stayed Stable with shards 1 and 8 served by no node.
    claims = [
        claim(1000000, {0, 4, 9, 11}),
        claim(1000001, {7, 10}),
        claim(1000002, {1, 2, 3, 5, 6, 8}),
    ]
    result = assign_shards(claims, 12)
    assert result.members["m1000002"].shards == {2, 3, 5, 6}
    assert result.owners[1] == result.owners[8] == 1000001
    assert result.members["m1000001"].shards == {7, 10}  # not yet: node 3 may still serve them
    assert result.members["m1000002"].release == {1, 8}  # so node 3 rejoins, whatever it holds
    assert result.members["m1000000"].release == result.members["m1000001"].release == set()
    # Node 3 rejoins claiming what it was given: every shard has its node.
    after = assign_shards(
        [claim(1000000, {0, 4, 9, 11}), claim(1000001, {7, 10}), claim(1000002, {2, 3, 5, 6})], 12
    )
    assert after.members["m1000001"].shards == {1, 7, 8, 10}
    assert sorted(s for a in after.members.values() for s in a.shards) == list(range(12))
    assert all(not a.release for a in after.members.values())


def test_a_shard_two_nodes_claim_goes_to_neither_until_both_released_it() -> None:
    result = assign_shards([claim(1, {0, 1, 2}), claim(2, {2, 3}), claim(3)], 12)
    assert all(2 not in a.shards for a in result.members.values())
    assert result.members["m1"].release >= {2} and result.members["m2"].release >= {2}
    after = assign_shards([claim(n, result.members[f"m{n}"].shards) for n in (1, 2, 3)], 12)
    assert after.owners[2] != NO_OWNER and 2 in after.members[f"m{after.owners[2]}"].shards


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sets(st.integers(-1, 13), max_size=14), min_size=1, max_size=5),
    st.data(),
)
def test_any_claims_converge_within_one_more_generation(owned: list[set[int]], data: st.DataObject) -> None:
    """Whatever the claims (stale, duplicated, out of range), no shard is given to a node while
    another live node claims it; and once every member released what it was told to (it may
    release more: a fenced shard), the next generation gives every shard to exactly one node."""
    shards = 12
    claims = [claim(n, o) for n, o in enumerate(owned, start=1)]
    first = assign_shards(claims, shards)
    for c in claims:
        assigned = first.members[c.member_id]
        others = {s for o in claims if o is not c for s in o.owned}
        assert not assigned.shards & others
        assert assigned.release == {s for s in c.owned if 0 <= s < shards} - assigned.shards
    kept = [
        data.draw(st.sets(st.sampled_from(sorted(first.members[c.member_id].shards))))
        if first.members[c.member_id].shards
        else set()
        for c in claims
    ]
    second = assign_shards([claim(n, k) for n, k in enumerate(kept, start=1)], shards)
    given_out = [s for a in second.members.values() for s in a.shards]
    assert sorted(given_out) == list(range(shards))
    assert all(not a.release for a in second.members.values())


def test_a_duplicated_node_id_is_refused_to_the_later_process() -> None:
    elsewhere = NodeClaim("new", 1, "h", 9500, 12, 9)  # node 1's id, another address
    result = assign_shards([claim(1, started=5, member="old"), elsewhere, claim(2)], 12)
    assert result.members["new"].shards == set() and "already in use" in (result.members["new"].error or "")
    assert result.members["old"].error is None and len(result.members["old"].shards) == 6


def test_a_restarted_node_takes_its_id_over_from_its_previous_process() -> None:
    # Same node id and address: the earlier member is the node's previous process, still listed
    # by the upstream (killed, or its LeaveGroup not applied yet), never a second live node.
    old_shards = {0, 1, 2, 3, 4, 5}
    result = assign_shards(
        [claim(1, old_shards, started=5, member="old"), claim(1, started=9, member="new"), claim(2)], 12
    )
    assert "taken over by a newer process" in (result.members["old"].error or "")
    assert result.members["old"].shards == set()
    assert result.members["new"].error is None and len(result.members["new"].shards) == 6
    assert result.nodes[1] == ("h", 9001)


def test_a_node_with_another_shard_count_is_refused() -> None:
    result = assign_shards([claim(1), claim(2, shards=8)], 12)
    assert "runs 8 shards" in (result.members["m2"].error or "")
    assert result.members["m1"].shards == set(range(12))


def test_the_assignment_is_the_same_whoever_leads() -> None:
    claims = [claim(3), claim(1), claim(2)]
    assert assign_shards(claims, 50).owners == assign_shards(list(reversed(claims)), 50).owners


def test_a_wall_clock_jump_is_measured_against_the_monotonic_clock() -> None:
    from kcoord.coordinator.runtime.membership import clock_jump_ms

    assert clock_jump_ms(1000.0, 50.0, 1000.5, 50.5) == 0  # both moved half a second
    assert clock_jump_ms(1000.0, 50.0, 4600.5, 50.5) == 3_600_000  # an hour forward
    assert clock_jump_ms(1000.0, 50.0, 990.5, 50.5) == -10_000  # ten seconds back
