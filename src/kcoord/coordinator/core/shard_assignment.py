"""Which kcoord node owns which shard: the assignor the nodes' upstream group runs (cluster mode).

The nodes of a kcoord cluster are members of one classic group on the upstream Kafka cluster; its
leader runs :func:`assign_shards` over every member's :class:`NodeClaim` and hands each member its
:class:`NodeAssignment`. Pure: no I/O, no clock (a claim carries its node's start time).

Invariants:
- *One node id, one member.* Members that share a node id (two processes started with the same
  ``coordinator.node.id``; an upstream that does not enforce ``group.instance.id``) are reduced to
  the one that started first; the others get no shard and an ``error`` saying why. Except a node
  restarted: members with the same node id *and* the same advertised address are one node's
  processes, the earlier one gone (killed, or its LeaveGroup not yet applied by the upstream: it
  cannot be serving, the new process holds its port), so the latest one keeps the id.
- *Never two owners at once (cooperative hand-off, as KIP-429).* A shard that another live member
  still claims is not given to its new owner in the same generation: the claimant loses it now,
  releases it, and rejoins; the next generation gives it to its target. Only a shard nobody live
  claims (its owner died, or it was just released) is given at once. A shard two live members
  claim (a claim that is stale: sent before its node released the shard) is given to neither.
- *No shard waits more than one generation.* Each member's :attr:`NodeAssignment.release` names
  the shards it claimed and is not given; a member with any must release them and rejoin, even
  if it believes it no longer holds them (its claim may predate a release), so the claims of the
  next generation are within what this one gave and that generation gives every shard.
- *Sticky and balanced.* A claimed shard stays with its claimant while that node holds at most
  ``ceil(shards / nodes)``; a node's surplus and unclaimed shards go by rendezvous hashing
  (highest ``hash(shard, node)`` first) to nodes under that bound. A node that leaves moves only
  its own shards; one that comes back takes shards only from nodes above the bound.
- ``owners`` (the same for every member) names each shard's target node, also while the shard is
  still being released: clients are sent to where the group will be served.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

NO_OWNER = -1


@dataclass(frozen=True)
class NodeClaim:
    """What one member says in its JoinGroup metadata."""

    member_id: str
    node_id: int
    host: str
    port: int
    shards: int  # the node's shard count (must match the group's)
    started_ms: int  # when the node's process started: the oldest of a duplicated node id keeps it
    owned: frozenset[int] = frozenset()  # shards it holds now


@dataclass
class NodeAssignment:
    """What one member gets back in its SyncGroup assignment."""

    shards: set[int] = field(default_factory=set)
    error: str | None = None
    # Shards this member claimed but is not given: it releases them and rejoins (module docstring).
    release: set[int] = field(default_factory=set)


@dataclass
class ShardAssignment:
    members: dict[str, NodeAssignment]  # member id -> its assignment
    owners: list[int]  # shard -> target node id (NO_OWNER: no live node)
    nodes: dict[int, tuple[str, int]]  # node id -> advertised (host, port), live members only


def _score(shard: int, node_id: int) -> int:
    digest = hashlib.blake2b(f"{shard}:{node_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def assign_shards(claims: list[NodeClaim], num_shards: int) -> ShardAssignment:
    members = {c.member_id: NodeAssignment() for c in claims}
    # One member per node id: the process that started first (then the lowest member id) keeps it.
    by_node: dict[int, NodeClaim] = {}
    for claim in sorted(claims, key=lambda c: (c.started_ms, c.member_id)):
        if claim.shards != num_shards:
            members[claim.member_id].error = (
                f"this node runs {claim.shards} shards but the cluster runs {num_shards} "
                "(the internal topic's partition count); every node needs the same --shards"
            )
            continue
        kept = by_node.get(claim.node_id)
        if kept is None:
            by_node[claim.node_id] = claim
        elif (kept.host, kept.port) == (claim.host, claim.port):
            # The same node restarted (module docstring): its earlier process gives way.
            members[kept.member_id].error = (
                f"node id {claim.node_id} at {claim.host}:{claim.port} was taken over by a newer "
                f"process of the same node (member {claim.member_id})"
            )
            by_node[claim.node_id] = claim
        else:
            members[claim.member_id].error = (
                f"node id {claim.node_id} is already in use by the node at {kept.host}:{kept.port} "
                f"(member {kept.member_id}); every kcoord node needs its own coordinator.node.id"
            )
    live = sorted(by_node)
    owners = [NO_OWNER] * num_shards
    if not live:
        return ShardAssignment(members, owners, {})
    capacity = -(-num_shards // len(live))
    load = dict.fromkeys(live, 0)
    claimants: dict[int, set[int]] = {}  # shard -> every live node claiming it
    for node in live:
        for shard in by_node[node].owned:
            if 0 <= shard < num_shards:
                claimants.setdefault(shard, set()).add(node)
    # Sticky pass: each node keeps the claimed shards it prefers most, up to the bound; a shard
    # two nodes claim stays with neither (it is released, then given like an unclaimed one).
    for node in live:
        mine = [s for s in by_node[node].owned if claimants.get(s) == {node}]
        for shard in sorted(mine, key=lambda s: -_score(s, node))[:capacity]:
            owners[shard] = node
            load[node] += 1
    # Everything else, by rendezvous preference, to nodes under the bound.
    for shard in range(num_shards):
        if owners[shard] != NO_OWNER:
            continue
        for node in sorted(live, key=lambda n: -_score(shard, n)):
            if load[node] < capacity:
                owners[shard] = node
                load[node] += 1
                break
    member_of = {node: by_node[node].member_id for node in live}
    for shard, target in enumerate(owners):
        if claimants.get(shard, {target}) <= {target}:
            members[member_of[target]].shards.add(shard)
        # else: every claimant releases it first; its target gets it next generation
    for node in live:
        assigned = members[member_of[node]]
        assigned.release = {s for s in by_node[node].owned if 0 <= s < num_shards} - assigned.shards
    nodes = {node: (by_node[node].host, by_node[node].port) for node in live}
    return ShardAssignment(members, owners, nodes)
