"""Multi-group requests larger than a step (GROUPS_PER_STEP) are split and submitted a step per loop
iteration, one such request at a time, and still answered whole and in request order."""

from __future__ import annotations

import asyncio

from kcoord.coordinator.core.clock import SystemClock
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.result import RequestContext
from kcoord.coordinator.core.shard_state import GroupCoordinatorShard
from kcoord.coordinator.runtime.router import GROUPS_PER_STEP, Router
from kcoord.coordinator.runtime.shard import ShardRuntime
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey
from kcoord.storage.memory import MemoryShardLog

SHARDS = 7


async def loaded_router() -> Router:
    clock = SystemClock()
    shards = [
        ShardRuntime(
            i, lambda i=i: GroupCoordinatorShard(GroupConfig(), clock, shard_index=i), MemoryShardLog(), clock
        )
        for i in range(SHARDS)
    ]
    await asyncio.gather(*(s.first_load() for s in shards))
    return Router(shards)


def test_a_large_describe_groups_is_answered_whole_in_order_while_the_loop_keeps_turning() -> None:
    async def run() -> None:
        router = await loaded_router()
        ids = [f"group-{i}" for i in reversed(range(3 * GROUPS_PER_STEP + 17))]
        answers: list[m.Message] = []
        for n in range(2):  # two at once: they take turns
            router.route(
                ApiKey.DESCRIBE_GROUPS,
                RequestContext(5, "c", "h", n),
                m.DescribeGroupsRequest(groups=ids),
                answers.append,
            )
        ticks = 0
        while len(answers) < 2:
            ticks += 1  # other work gets a turn between the steps
            await asyncio.sleep(0)
        assert ticks > 2 * len(ids) // GROUPS_PER_STEP
        for answer in answers:
            assert isinstance(answer, m.DescribeGroupsResponse)
            assert [g.group_id for g in answer.groups] == ids
            assert {g.group_state for g in answer.groups} == {"Dead"}
        # Ids only described are not remembered: ids of groups that do not exist must not fill it.
        assert not router._placement

    asyncio.run(run())


def test_a_small_multi_group_request_needs_no_turn() -> None:
    async def run() -> None:
        router = await loaded_router()
        ids = [f"g{i}" for i in range(GROUPS_PER_STEP)]
        done: list[m.Message] = []
        async with router._turns:  # a large request holds the turn: a small one does not wait for it
            router.route(
                ApiKey.DESCRIBE_GROUPS,
                RequestContext(5, "c", "h", 1),
                m.DescribeGroupsRequest(groups=ids),
                done.append,
            )
            for _ in range(5):
                await asyncio.sleep(0)
            assert len(done) == 1
        assert [g.group_id for g in done[0].groups] == ids  # type: ignore[attr-defined]

    asyncio.run(run())
