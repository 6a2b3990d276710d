"""Cluster mode: a node serves its shards only while its lease on the cluster's group holds.

- :class:`Lease` (pure): counted from the *send* time of each request whose answer extended the
  session, so an answer read late (the process was paused) never stretches it.
- The router checks it on every request: once it ran out, owned shards are answered
  NOT_COORDINATOR, never from their state, and the membership is told.
- The membership releases every shard once it ran out, also while a JoinGroup is parked; a
  SyncGroup answer read after it ran out is not applied; a generation after a gap releases the
  shards kept, so they reload; a shard fenced by another node is released and the node rejoins.
- A fenced shard the cluster still gives this node is loaded again, never left fenced.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from kcoord.coordinator.runtime.membership import ClusterMembership, Lease, Ownership, _decode_claim
from kcoord.coordinator.runtime.router import shard_for_group
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from kcoord.storage.base import FencedError
from kcoord.storage.memory import MemoryShardLog
from tests.unit.test_router_ownership import SHARDS, call, commit_error, node, ownership, settle
from tests.unit.test_shard_runtime import commit_request, fetch_request

# -- the lease itself --------------------------------------------------------------------------------


def test_a_lease_holds_for_its_duration_after_the_send_time_of_the_last_contact() -> None:
    lease = Lease(5.5)
    assert not lease.valid(0.0)  # nothing before the first contact
    lease.contact(sent_at=100.0)
    assert lease.valid(105.4) and not lease.valid(105.5)
    lease.contact(sent_at=103.0)
    assert lease.valid(108.4) and not lease.valid(108.5)


def test_an_answer_read_late_does_not_shorten_or_stretch_the_lease() -> None:
    lease = Lease(5.5)
    lease.contact(sent_at=103.0)
    lease.contact(sent_at=100.0)  # an older request's answer, read after a newer one's
    assert lease.deadline == 108.5
    # A heartbeat sent just before a 30 s pause and read after it counts from its send.
    lease.contact(sent_at=110.0)
    assert not lease.valid(140.0)


def test_a_revoked_lease_holds_no_more() -> None:
    lease = Lease(5.5)
    lease.contact(sent_at=100.0)
    lease.revoke()
    assert not lease.valid(100.1)
    lease.contact(sent_at=101.0)
    assert lease.valid(101.1)


# -- the router checks it on every request -----------------------------------------------------------


def test_the_router_answers_not_coordinator_once_the_lease_ran_out_and_says_so() -> None:
    async def run() -> None:
        logs = [MemoryShardLog() for _ in range(SHARDS)]
        router = node(logs, 1)
        lease = Lease(5.5)
        lease.contact(sent_at=asyncio.get_running_loop().time() + 1000)  # far ahead: holds
        lapsed: list[bool] = []
        router.follow_membership(lease, lambda: lapsed.append(True), lambda _i: None)
        everything = tuple(1 for _ in range(SHARDS))
        await router.apply_ownership(ownership(1, everything, 1))
        await settle(router)
        group = "leased-group"
        assert commit_error(await call(router, ApiKey.OFFSET_COMMIT, commit_request(group, 0, 7))) == 0
        fetched = await call(router, ApiKey.OFFSET_FETCH, fetch_request(group), version=7)
        assert isinstance(fetched, m.OffsetFetchResponse) and fetched.error_code == ErrorCode.NONE
        assert not lapsed

        lease.revoke()  # as if the clock passed the deadline
        refused = await call(router, ApiKey.OFFSET_FETCH, fetch_request(group), version=7)
        assert isinstance(refused, m.OffsetFetchResponse)
        assert refused.error_code == ErrorCode.NOT_COORDINATOR
        resp = await call(router, ApiKey.OFFSET_COMMIT, commit_request(group, 0, 8))
        assert commit_error(resp) == ErrorCode.NOT_COORDINATOR
        multi = m.OffsetFetchRequest(groups=[m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group)])
        answer = await call(router, ApiKey.OFFSET_FETCH, multi, version=8)
        assert isinstance(answer, m.OffsetFetchResponse)
        assert answer.groups[0].error_code == ErrorCode.NOT_COORDINATOR
        listed = await call(router, ApiKey.LIST_GROUPS, m.ListGroupsRequest())
        assert isinstance(listed, m.ListGroupsResponse) and not listed.groups
        assert not router.serves(shard_for_group(group, SHARDS))
        assert lapsed
        assert router.shards[shard_for_group(group, SHARDS)].loaded  # released by the membership, not here

    asyncio.run(run())


def test_a_fenced_shard_is_reported_and_reloaded_when_the_cluster_gives_it_again() -> None:
    async def run() -> None:
        logs = [MemoryShardLog() for _ in range(SHARDS)]
        router = node(logs, 1)
        lease = Lease(5.5)
        lease.contact(sent_at=asyncio.get_running_loop().time() + 1000)
        fenced: list[int] = []
        router.follow_membership(lease, lambda: None, fenced.append)
        everything = tuple(1 for _ in range(SHARDS))
        await router.apply_ownership(ownership(1, everything, 1))
        await settle(router)
        shard = router.shards[0]
        shard._log_lost(FencedError("another kcoord took it"))
        assert fenced == [0] and shard.fenced and not shard.loaded
        # The next generation still gives it to this node: it loads again instead of staying fenced.
        await router.apply_ownership(ownership(2, everything, 1))
        await settle(router)
        assert not shard.fenced and shard.loaded

    asyncio.run(run())


# -- the membership -----------------------------------------------------------------------------------


class Applied:
    def __init__(self) -> None:
        self.ownerships: list[Ownership] = []

    async def __call__(self, ownership: Ownership) -> None:
        self.ownerships.append(ownership)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def membership(applied: Applied, clock: FakeClock, session_timeout_ms: int = 6000) -> ClusterMembership:
    member = ClusterMembership(
        [("127.0.0.1", 9092)],
        node_id=1,
        advertised=("127.0.0.1", 9100),
        internal_topic="t",
        num_shards=SHARDS,
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=500,
        static_membership=False,
        apply=applied,
        on_fatal=lambda _: None,
    )
    member._now = clock.monotonic
    return member


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_the_watchdog_releases_every_shard_once_the_lease_ran_out_even_while_joining(
    clock: FakeClock,
) -> None:
    async def run() -> None:
        applied = Applied()
        member = membership(applied, clock)
        member.lease.contact(clock.now)
        await member._set(Ownership(3, frozenset({0, 1}), (1, 1), {1: ("127.0.0.1", 9100)}))
        watchdog = asyncio.ensure_future(member._watch_contact())
        try:
            await asyncio.sleep(0.3)
            assert member.owned == {0, 1}  # the lease holds
            clock.now += member.lease.duration  # a JoinGroup parked all along: no contact
            member.lease_lapsed()  # the router noticed first
            await asyncio.sleep(0.05)
            assert member.owned == frozenset() and applied.ownerships[-1].shards == frozenset()
            assert applied.ownerships[-1].owners == (-1, -1)
            assert member._rejoin_requested.is_set()  # so the cluster's assignment stops naming it
        finally:
            watchdog.cancel()

    asyncio.run(run())


def test_a_shard_fenced_by_another_node_is_released_and_the_node_rejoins(clock: FakeClock) -> None:
    async def run() -> None:
        applied = Applied()
        member = membership(applied, clock)
        await member._set(Ownership(3, frozenset({0, 1}), (1, 1), {1: ("127.0.0.1", 9100)}))
        member.shard_fenced(1)
        await asyncio.sleep(0.01)
        assert member.owned == {0}
        assert applied.ownerships[-1].owners == (1, -1)
        assert member._rejoin_requested.is_set()

    asyncio.run(run())


class ScriptedCoordinator:
    """A group coordinator connection that answers from a script; ``before_answer`` runs as each
    request is answered (to move the clock while it was "in flight")."""

    def __init__(self, answers: list[Any], before_answer: Any = None) -> None:
        self.answers = answers
        self.sent: list[Any] = []
        self.before_answer = before_answer
        self.closed = False

    def request(self, request: Any, *args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        self.sent.append(request)
        if self.before_answer is not None:
            self.before_answer(request)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.set_result(self.answers.pop(0))
        return fut


def join_answer(generation: int, member_id: str = "me") -> m.JoinGroupResponse:
    return m.JoinGroupResponse(
        error_code=0, generation_id=generation, protocol_name="kcoord-shards-v1", leader="other",
        member_id=member_id, members=[],
    )  # fmt: skip


def sync_answer(
    member: ClusterMembership, generation: int, shards: set[int], release: set[int] | None = None
) -> m.SyncGroupResponse:
    info: dict[str, Any] = {
        "generation": generation, "owners": [1] * SHARDS, "nodes": {"1": ["127.0.0.1", 9100]}, "error": None,
    }  # fmt: skip
    if release is not None:
        info["release"] = sorted(release)
    user_data = json.dumps(info).encode()
    TP = m.ConsumerProtocolAssignment.TopicPartition
    body = m.ConsumerProtocolAssignment(
        assigned_partitions=[TP(topic=member.topic, partitions=sorted(shards))], user_data=user_data
    )
    return m.SyncGroupResponse(error_code=0, assignment=(1).to_bytes(2, "big") + body.encode(1))


def test_an_assignment_read_after_the_lease_ran_out_is_not_applied(clock: FakeClock) -> None:
    async def run() -> None:
        applied = Applied()
        member = membership(applied, clock)
        member.member_id = "me"

        def pause_during_sync(request: Any) -> None:
            if isinstance(request, m.SyncGroupRequest) and len(conn.sent) == 2:
                clock.now += 30  # SIGSTOP after the coordinator answered, SIGCONT 30 s later

        conn = ScriptedCoordinator(
            [join_answer(4), sync_answer(member, 4, {0, 1}), join_answer(6), sync_answer(member, 6, {0})],
            pause_during_sync,
        )
        await member._join_and_sync(conn)  # type: ignore[arg-type]
        # Generation 4's assignment came too late: never applied (nothing is served); generation 6's is.
        assert [sorted(o.shards) for o in applied.ownerships] == [[], [0]]
        assert applied.ownerships[-1].generation == 6 and member.owned == {0}

    asyncio.run(run())


def test_shards_kept_across_a_gap_in_generations_are_released_so_they_reload(clock: FakeClock) -> None:
    async def run() -> None:
        applied = Applied()
        member = membership(applied, clock)
        member.member_id = "me"
        conn = ScriptedCoordinator([join_answer(4), sync_answer(member, 4, {0, 1})])
        await member._join_and_sync(conn)  # type: ignore[arg-type]
        assert member.owned == {0, 1}
        # The next generation this node sees is 7: 5 and 6 went on without it.
        conn.answers = [join_answer(7), sync_answer(member, 7, {0, 1})]
        await member._join_and_sync(conn)  # type: ignore[arg-type]
        assert [sorted(o.shards) for o in applied.ownerships] == [[0, 1], [], [0, 1]]
        # ... whereas the next generation keeps them in place.
        conn.answers = [join_answer(8), sync_answer(member, 8, {0, 1})]
        await member._join_and_sync(conn)  # type: ignore[arg-type]
        assert [sorted(o.shards) for o in applied.ownerships][-1] == [0, 1]
        assert len(applied.ownerships) == 4

    asyncio.run(run())


@pytest.mark.parametrize("leader_says_release", [True, False], ids=["release-listed", "older-leader"])
def test_a_claim_not_given_makes_the_node_rejoin_even_if_it_dropped_the_shard_meanwhile(
    clock: FakeClock, leader_says_release: bool
) -> None:
    """Seen on tansu: a node's JoinGroup claimed shards it then dropped (its generation followed a
    gap); the leader held one of them for another node until this one released it. This node,
    holding nothing it lost, did not rejoin, and the shard stayed unserved in a Stable group."""

    async def run() -> None:
        applied = Applied()
        member = membership(applied, clock)
        member.member_id = "me"
        conn = ScriptedCoordinator([join_answer(4), sync_answer(member, 4, {0, 1})])
        await member._join_and_sync(conn)  # type: ignore[arg-type]
        assert member.owned == {0, 1}
        conn.answers = [
            join_answer(7),  # a gap: every shard is dropped before this assignment is applied
            sync_answer(member, 7, {0}, {1} if leader_says_release else None),
            join_answer(8),
            sync_answer(member, 8, {0}),
        ]
        conn.sent.clear()
        await member._join_and_sync(conn)  # type: ignore[arg-type]
        joins = [r for r in conn.sent if isinstance(r, m.JoinGroupRequest)]
        assert len(joins) == 2  # rejoined after generation 7
        claims = [_decode_claim("me", j.protocols[0].metadata) for j in joins]
        assert [c.owned for c in claims if c is not None] == [{0, 1}, {0}]
        assert member.generation == 8 and member.owned == {0}

    asyncio.run(run())


def test_an_unknown_member_releases_every_shard_at_once(clock: FakeClock) -> None:
    async def run() -> None:
        applied = Applied()
        member = membership(applied, clock)
        member.member_id = "me"
        member.lease.contact(clock.now)
        await member._set(Ownership(3, frozenset({0, 1}), (1, 1), {1: ("127.0.0.1", 9100)}))
        conn = ScriptedCoordinator(
            [
                m.JoinGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID, member_id="", members=[]),
                join_answer(9, member_id="new"),
                sync_answer(member, 9, set()),
            ]
        )
        await member._join_and_sync(conn)  # type: ignore[arg-type]
        assert applied.ownerships[1].shards == frozenset()  # released before rejoining
        assert conn.sent[1].member_id == ""

    asyncio.run(run())
