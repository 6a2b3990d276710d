"""The cluster's shard assignor: one owner per node id, cooperative hand-off, sticky and balanced."""

from __future__ import annotations

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


def test_a_duplicated_node_id_is_refused_to_the_later_process() -> None:
    result = assign_shards(
        [claim(1, started=5, member="old"), claim(1, started=9, member="new"), claim(2)], 12
    )
    assert result.members["new"].shards == set() and "already in use" in (result.members["new"].error or "")
    assert result.members["old"].error is None and len(result.members["old"].shards) == 6


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
