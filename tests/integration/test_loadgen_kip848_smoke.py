"""The load generator's KIP-848 scenarios against a real kcoord (upstream: the session's tansu).

Small (50 members in 5 groups, a few seconds) with a short server heartbeat interval, so the
ramp settles in a few intervals. Checked: every member reaches a stable assignment in which each
partition of the topic is owned exactly once per group (from the members' own assignments, and on
the server's side with ConsumerGroupDescribe), the steady window has no errors and the expected
rate, and commits by topic id are accepted.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator

import pytest

from support.broker import TansuBroker
from support.kcoord_process import KcoordProcess
from support.loadgen.consumer_member import CState, described_partitions
from support.loadgen.consumer_scenarios import _settled_groups, consumer_commit, consumer_steady
from support.loadgen.scenarios import Target
from support.workload import unique

pytestmark = pytest.mark.integration

INTERVAL_MS = 500


@pytest.fixture(scope="module")
def kcoord(tansu: TansuBroker) -> Iterator[KcoordProcess]:
    with KcoordProcess(
        "--shards",
        "3",
        "--storage",
        "kafka",
        "--internal-topic",
        unique("__kcoord_lg848"),
        "--group-consumer-heartbeat-interval-ms",
        str(INTERVAL_MS),
        bootstrap=tansu.bootstrap,
    ) as proc:
        yield proc


def test_members_settle_with_every_partition_owned_once(kcoord: KcoordProcess) -> None:
    async def run() -> None:
        s = await _settled_groups(
            Target(kcoord.bootstrap),
            "lgsmoke",
            members=50,
            group_size=10,
            partitions=12,
            interval_s=None,
            connections=4,
            join_rate=500.0,
            settle_timeout_s=60.0,
            static=False,
        )
        try:
            assert s.settle_s is not None, s.unsettled
            assert s.server_interval_ms == INTERVAL_MS and s.interval_s == INTERVAL_MS / 1000
            assert len(s.groups) == 5
            described = await s.rt.describe(list(s.groups))
            for gid, members in s.groups.items():
                assert len(members) == 10
                assert all(mb.state is CState.MEMBER for mb in members)
                owned = Counter(tp for mb in members for tp in mb.partitions())
                assert len(owned) == 12 and set(owned.values()) == {1}, (
                    gid,
                    owned,
                )  # each partition exactly once
                assert len({tid for tid, _ in owned}) == 1  # the one topic, by id
                g = described[gid]
                assert g.error_code == 0 and g.group_epoch == g.assignment_epoch
                server = {mb.member_id: described_partitions(mb.assignment) for mb in g.members}
                assert server == {mb.member_id: mb.partitions() for mb in members}
                assert {mb.member_epoch for mb in g.members} == {g.group_epoch}
            # the first member joined alone and was given all 12 partitions; it gave most back
            first = s.rt.members[0]
            assert first.partitions_assigned >= 12 and first.partitions_revoked >= 10, vars(first)
            assert s.rt.failures == []
            assert s.stats.snapshot()["errors"] == {}
        finally:
            await s.rt.close()

    asyncio.run(run())


def test_consumer_steady_window_has_no_errors(kcoord: KcoordProcess) -> None:
    r = asyncio.run(
        consumer_steady(
            Target(kcoord.bootstrap, "kcoord"),
            members=50,
            group_size=10,
            duration_s=3.0,
            connections=4,
            join_rate=500.0,
            settle_timeout_s=60.0,
        )
    )
    assert (
        r["params"]["connections"] == 4 and r["connections_opened"] == 4
    )  # the old shared shape, still there
    assert r["settle_s"] is not None and r["groups_unsettled_before_window"] == 0
    assert r["window"]["errors"] == {} and r["failures"] == []
    assert r["in_window"]["fenced"] == 0 and r["in_window"]["assignment_changes"] == 0
    assert r["groups_settled_at_end"] == 5 and r["members_in_group_at_end"] == 50
    # 50 members every 0.5 s: 100 heartbeats/s offered
    assert r["expected_heartbeats_per_s"] == 100.0
    assert 80 <= r["heartbeats_per_s"] <= 120, r["heartbeat"]


def test_consumer_commit_by_topic_id_is_accepted(kcoord: KcoordProcess) -> None:
    # the default shape: one connection per member, as real clients have, for its heartbeats and commits
    r = asyncio.run(
        consumer_commit(
            Target(kcoord.bootstrap, "kcoord"),
            members=20,
            group_size=5,
            duration_s=2.0,
            join_rate=500.0,
            settle_timeout_s=60.0,
        )
    )
    assert r["params"]["connections"] == "per-member" and r["connections_opened"] == 20
    assert r["settle_s"] is not None
    assert r["committers"] == 20 and r["partitions_per_commit"] == 1.0
    assert r["commits_per_s"] > 0 and r["commit"]["count"] > 20
    assert r["commit_errors"] == {} and r["window"]["errors"] == {}
