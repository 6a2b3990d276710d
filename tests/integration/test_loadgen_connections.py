"""The load generator's connection shapes (one per member, or N shared) against a real kcoord.

The default shape must model real clients: one connection per member, carrying its joins,
heartbeats and commits. Counted on both sides: the generator's own count of connections it
opened, and kcoord's ``kcoord_connections_accepted`` counter around the step that opens them.
The old shape (N shared connections) must stay available and say so in its report. Nothing here
is timed.
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kcoord.protocol.messages import ApiKey
from support.broker import TansuBroker
from support.kcoord_process import KcoordProcess
from support.loadgen.admin import single_coordinator
from support.loadgen.conn import Stats
from support.loadgen.member import Member, State
from support.loadgen.runtime import Runtime
from support.loadgen.scenarios import Target, _create_topic, commit_storm, steady
from support.ports import free_port
from support.workload import unique

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kcoord(tansu: TansuBroker) -> Iterator[KcoordProcess]:
    port = free_port()
    # A short initial rebalance delay (Kafka's default is 3 s, and a group whose members keep arriving
    # waits it twice): the scenarios' members all send their JoinGroups at once, well within 0.5 s, so
    # they still join one generation together; what is checked here is connection counts, not timing.
    with KcoordProcess(
        "--internal-topic",
        unique("__kcoord_lgconn"),
        "--metrics",
        f"127.0.0.1:{port}",
        "--group-initial-rebalance-delay-ms",
        "500",
        bootstrap=tansu.bootstrap,
    ) as proc:
        proc.metrics_url = f"http://127.0.0.1:{port}/metrics"  # type: ignore[attr-defined]
        yield proc


def accepted(kcoord: KcoordProcess) -> float:
    """kcoord's count of client connections accepted so far."""
    with urllib.request.urlopen(kcoord.metrics_url, timeout=10) as resp:  # type: ignore[attr-defined]
        text = resp.read().decode()
    for family in text_string_to_metric_families(text):
        if family.name == "kcoord_connections_accepted":
            return sum(s.value for s in family.samples if s.name.endswith("_total"))
    raise AssertionError("kcoord_connections_accepted not exported")


def test_per_member_shape_gives_each_member_its_own_connection(kcoord: KcoordProcess) -> None:
    members, group_size = 12, 4

    async def run() -> None:
        topic = unique("lgconn")
        await _create_topic(kcoord.bootstrap, topic, group_size)
        group_ids = [unique("lgconn-g") for _ in range(members // group_size)]
        coordinator = await single_coordinator(kcoord.bootstrap, group_ids)
        stats = Stats()
        rt = await Runtime(coordinator, stats, None, lanes=members, heartbeat_interval_s=0.5).start()
        try:
            assert rt.per_member and rt.shared.all() == []
            groups: list[list[Member]] = [[] for _ in group_ids]
            for i in range(members):
                g = i % len(group_ids)
                groups[g].append(rt.attach(Member(i, group_ids[g], [topic], {topic: group_size})))
            before = accepted(kcoord)
            await rt.open_member_connections()
            await asyncio.gather(
                *(rt.join_group(g) for g in groups)
            )  # joins go on the members' own connections
            assert all(mem.state is State.STABLE for mem in rt.members), rt.failures
            assert accepted(kcoord) - before == members  # no lanes, no shared connections: one each
            assert stats.connections_opened == members
            assert len({id(mem.conn) for mem in rt.members}) == members
            rt.start_commits(rt.members)
            await asyncio.sleep(1.0)  # two heartbeat rounds and a few commits on each connection
            rt.stop_commits()
            assert accepted(kcoord) - before == members
            assert stats.histogram(ApiKey.HEARTBEAT).count >= members
            assert stats.histogram(ApiKey.OFFSET_COMMIT).count >= members
            assert stats.snapshot()["errors"] == {}
        finally:
            await rt.close()

    asyncio.run(run())


def test_scenarios_report_the_shape_that_ran(kcoord: KcoordProcess) -> None:
    target = Target(kcoord.bootstrap, "kcoord")
    per_member = asyncio.run(commit_storm(target, committers=10, group_size=5, duration_s=1.0))
    assert per_member["params"]["connections"] == "per-member"
    assert per_member["connections_opened"] == 10
    assert per_member["commits_per_s"] > 0 and per_member["commit_errors"] == {}

    shared = asyncio.run(commit_storm(target, committers=10, group_size=5, duration_s=1.0, connections=2))
    assert shared["params"]["connections"] == 2
    assert shared["connections_opened"] >= 2 + 5  # the shared ones, and lanes for at least one group's joins
    assert shared["commits_per_s"] > 0 and shared["commit_errors"] == {}

    hb = asyncio.run(steady(target, members=6, group_size=3, interval_s=0.5, duration_s=1.0))
    assert hb["params"]["connections"] == "per-member" and hb["connections_opened"] == 6
    assert hb["members_stable_at_end"] == 6 and hb["window"]["errors"] == {}
