"""The router in cluster mode: a node answers only for the shards the cluster gave it.

Two routers share two in-memory shard logs, as two kcoord nodes share the internal topic's
partitions: a commit acknowledged by one node is read back by the other after the shard moved,
a shard that left a node is answered NOT_COORDINATOR there at once, and one the cluster named a
node for before it arrived is answered COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio

from kcoord.coordinator.core.clock import SystemClock
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.result import RequestContext
from kcoord.coordinator.core.shard_state import GroupCoordinatorShard
from kcoord.coordinator.runtime.membership import Ownership
from kcoord.coordinator.runtime.router import Router, shard_for_group
from kcoord.coordinator.runtime.shard import ShardRuntime
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from kcoord.storage.memory import MemoryShardLog
from tests.unit.test_shard_runtime import commit_request, fetch_request

SHARDS = 2
NODES = {1: ("h", 1), 2: ("h", 2)}


def node(logs: list[MemoryShardLog], node_id: int) -> Router:
    clock = SystemClock()
    shards = [
        ShardRuntime(
            i, lambda i=i: GroupCoordinatorShard(GroupConfig(), clock, shard_index=i), logs[i], clock
        )
        for i in range(SHARDS)
    ]
    router = Router(shards)
    router.owned = frozenset()
    router.node_id = node_id
    return router


def ownership(generation: int, owners: tuple[int, ...], mine: int, held: set[int] | None = None) -> Ownership:
    shards = {s for s, o in enumerate(owners) if o == mine} if held is None else held
    return Ownership(generation, frozenset(shards), owners, NODES)


async def call(router: Router, api_key: int, request: m.Message, version: int = 8) -> m.Message:
    fut: asyncio.Future[m.Message] = asyncio.get_running_loop().create_future()
    router.route(api_key, RequestContext(version, "c", "h", 1), request, fut.set_result)
    return await fut


async def settle(router: Router) -> None:
    for _ in range(100):
        if router.all_loaded:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("shards did not load")


def commit_error(resp: m.Message) -> int:
    assert isinstance(resp, m.OffsetCommitResponse)
    return resp.topics[0].partitions[0].error_code


def test_a_shard_moves_between_nodes_with_its_commits() -> None:
    async def run() -> None:
        logs = [MemoryShardLog() for _ in range(SHARDS)]
        a, b = node(logs, 1), node(logs, 2)
        group = "moving-group"
        shard = shard_for_group(group, SHARDS)
        first = tuple(1 for _ in range(SHARDS))  # node 1 serves everything
        await a.apply_ownership(ownership(1, first, 1))
        await b.apply_ownership(ownership(1, first, 2))
        await settle(a)
        assert (
            commit_error(await call(a, ApiKey.OFFSET_COMMIT, commit_request(group, 0, 42))) == ErrorCode.NONE
        )
        assert (
            commit_error(await call(b, ApiKey.OFFSET_COMMIT, commit_request(group, 0, 43)))
            == ErrorCode.NOT_COORDINATOR
        )

        # Generation 2 names node 2, while node 1 still has to release it: node 2 asks clients to wait.
        moved = tuple(2 if s == shard else 1 for s in range(SHARDS))
        await b.apply_ownership(ownership(2, moved, 2, held=set()))
        assert commit_error(await call(b, ApiKey.OFFSET_COMMIT, commit_request(group, 0, 43))) == (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        )
        # ... except a classic Heartbeat, which Kafka answers NONE while the group loads.
        beat = m.HeartbeatRequest(group_id=group, generation_id=1, member_id="m-1")
        assert (await call(b, ApiKey.HEARTBEAT, beat, version=4)).error_code == ErrorCode.NONE
        await a.apply_ownership(ownership(2, moved, 1))
        assert (
            commit_error(await call(a, ApiKey.OFFSET_COMMIT, commit_request(group, 0, 44)))
            == ErrorCode.NOT_COORDINATOR
        )
        assert a.shards[shard].fenced and not a.shards[shard].loaded

        # Generation 3 gives it to node 2, which loads what node 1 acknowledged.
        await b.apply_ownership(ownership(3, moved, 2))
        await settle(b)
        fetched = await call(b, ApiKey.OFFSET_FETCH, fetch_request(group), version=7)
        assert isinstance(fetched, m.OffsetFetchResponse)
        assert fetched.topics[0].partitions[0].committed_offset == 42

        # ListGroups on each node lists only the groups of its own shards.
        listed_a = await call(a, ApiKey.LIST_GROUPS, m.ListGroupsRequest())
        listed_b = await call(b, ApiKey.LIST_GROUPS, m.ListGroupsRequest())
        assert isinstance(listed_a, m.ListGroupsResponse) and isinstance(listed_b, m.ListGroupsResponse)
        assert group not in {g.group_id for g in listed_a.groups}
        assert group in {g.group_id for g in listed_b.groups}

    asyncio.run(run())


def test_single_node_mode_routes_every_shard() -> None:
    async def run() -> None:
        logs = [MemoryShardLog() for _ in range(SHARDS)]
        clock = SystemClock()
        shards = [
            ShardRuntime(
                i, lambda i=i: GroupCoordinatorShard(GroupConfig(), clock, shard_index=i), logs[i], clock
            )
            for i in range(SHARDS)
        ]
        router = Router(shards)
        await asyncio.gather(*(s.first_load() for s in shards))
        for i in range(20):
            resp = await call(router, ApiKey.OFFSET_COMMIT, commit_request(f"g{i}", 0, 1))
            assert commit_error(resp) == ErrorCode.NONE

    asyncio.run(run())


def test_readiness_before_the_shards_exist_lists_every_configured_shard_as_not_loaded() -> None:
    from kcoord.coordinator.net.server import App
    from kcoord.coordinator.ops.observability import readiness
    from kcoord.coordinator.ops.settings import Settings

    async def run() -> None:
        single = App(Settings(shards=4))  # not started: storage still opening, no shard exists yet
        ok, body = readiness(single)
        assert not ok and body["not_loaded"] == [0, 1, 2, 3] and body["listening"] is False
        clustered = App(Settings(shards=4, cluster_enabled=True))
        clustered.router.owned = frozenset({1, 3})  # what start() and the cluster's group set
        ok, body = readiness(clustered)
        assert not ok and body["not_loaded"] == [1, 3]
        assert body["waiting_for_shards"] is True  # no assignment from the cluster's group yet

    asyncio.run(run())
