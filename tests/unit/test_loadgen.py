"""The load generator's pure parts: histogram, range assignor, member state machine, ownership."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey
from support.loadgen import report
from support.loadgen.assignor import (
    MemberSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    range_assign,
)
from support.loadgen.histogram import Histogram, bucket_bounds, bucket_of
from support.loadgen.member import Member, MemberListener, Next, State
from support.loadgen.ownership import OwnershipTracker
from support.loadgen.plan import Run, plan, shared_everywhere
from support.loadgen.runtime import Admission, HeartbeatWheel, Runtime, shape, shares
from support.loadgen.targets import targets

# -- histogram -------------------------------------------------------------------------------------


def test_histogram_small_values_are_exact() -> None:
    h = Histogram()
    h.extend(range(1, 101))
    assert h.percentile(50) == 50
    assert h.percentile(99) == 99
    assert h.percentile(100) == 100
    assert (h.min, h.max, h.count) == (1, 100, 100)
    assert h.mean == pytest.approx(50.5)


@pytest.mark.parametrize("value", [0, 1, 255, 256, 257, 1000, 65_535, 10**6, 2**33 + 12345])
def test_bucket_holds_its_value(value: int) -> None:
    low, high = bucket_bounds(bucket_of(value))
    assert low <= value <= high
    assert high - low <= max(1, value // 128)  # < 1 % relative width


def test_histogram_percentiles_within_one_percent() -> None:
    rng = random.Random(7)
    values = [int(rng.lognormvariate(7, 1.5)) for _ in range(50_000)]
    h = Histogram()
    h.extend(values)
    values.sort()
    for p in (50, 90, 99, 99.9):
        exact = values[max(0, int(p / 100 * len(values) + 0.999999) - 1)]
        assert h.percentile(p) == pytest.approx(exact, rel=0.01, abs=1)


def test_histogram_merge_and_reset() -> None:
    a, b = Histogram(), Histogram()
    a.extend([10, 20])
    b.extend([5, 3000])
    a.merge(b)
    assert (a.count, a.min, a.max) == (4, 5, 3000)
    assert a.summary_ms()["count"] == 4
    a.reset()
    assert a.count == 0 and a.percentile(99) == 0


# -- range assignor --------------------------------------------------------------------------------


def test_range_assign_like_kafka() -> None:
    members = [MemberSubscription(f"m{i}", None, ("t",)) for i in (2, 0, 1)]
    assert range_assign(members, {"t": 7}) == {
        "m0": {"t": [0, 1, 2]},
        "m1": {"t": [3, 4]},
        "m2": {"t": [5, 6]},
    }


def test_range_assign_static_members_first_and_per_topic() -> None:
    members = [
        MemberSubscription("a-dynamic", None, ("t", "u")),
        MemberSubscription("z-static", "instance-1", ("t",)),
    ]
    plan = range_assign(members, {"t": 3, "u": 2})
    assert plan["z-static"] == {"t": [0, 1]}  # static sorts before dynamic, takes the extra partition
    assert plan["a-dynamic"] == {"t": [2], "u": [0, 1]}


def test_range_assign_more_members_than_partitions() -> None:
    members = [MemberSubscription(f"m{i}", None, ("t",)) for i in range(4)]
    plan = range_assign(members, {"t": 2})
    assert plan == {"m0": {"t": [0]}, "m1": {"t": [1]}, "m2": {}, "m3": {}}


def test_embedded_protocol_round_trip_has_version_prefix() -> None:
    sub = encode_subscription(["t", "u"])
    assert sub[:2] == b"\x00\x01"
    assert decode_subscription(sub) == ("t", "u")
    data = encode_assignment({"t": [0, 3]})
    assert data[:2] == b"\x00\x01"
    assert decode_assignment(data) == {"t": [0, 3]}
    assert decode_assignment(b"") == {}
    # a v0 assignment as an old Java client writes it
    v0 = b"\x00\x00" + m.ConsumerProtocolAssignment(
        assigned_partitions=[m.ConsumerProtocolAssignment.TopicPartition(topic="x", partitions=[5])]
    ).encode(0)
    assert decode_assignment(v0) == {"x": [5]}


# -- member state machine against canned responses -------------------------------------------------


class CannedLane:
    """A Caller that answers from a script and records what was sent."""

    def __init__(self, script: list[Any]) -> None:
        self.script = list(script)
        self.sent: list[tuple[int, Any]] = []

    def call(self, request: Any, version: int | None = None) -> Any:
        self.sent.append((request.SCHEMA.api_key, request))
        fut = asyncio.get_event_loop().create_future()
        fut.set_result(self.script.pop(0))
        return fut


def join_resp(
    error: int = 0,
    member_id: str = "",
    leader: str = "",
    generation: int = 1,
    members: Any = (),
    skip: bool = False,
) -> Any:
    return m.JoinGroupResponse(
        error_code=error,
        generation_id=generation,
        protocol_type="consumer",
        protocol_name="range",
        leader=leader,
        skip_assignment=skip,
        member_id=member_id,
        members=list(members),
    )


def sync_resp(error: int = 0, assignment: bytes = b"") -> Any:
    return m.SyncGroupResponse(
        error_code=error, protocol_type="consumer", protocol_name="range", assignment=assignment
    )


def jmember(member_id: str, topics: tuple[str, ...] = ("t",), instance: str | None = None) -> Any:
    return m.JoinGroupResponse.JoinGroupResponseMember(
        member_id=member_id, group_instance_id=instance, metadata=encode_subscription(topics)
    )


class Events(MemberListener):
    def __init__(self) -> None:
        self.log: list[str] = []

    def assigned(self, member: Member) -> None:
        self.log.append(f"assigned {member.partitions()}")

    def revoked(self, member: Member, partitions: list[tuple[str, int]]) -> None:
        self.log.append(f"revoked {partitions}")


async def test_dynamic_leader_handles_member_id_required_and_assigns() -> None:
    events = Events()
    mem = Member(0, "g", ["t"], {"t": 4}, listener=events)
    lane = CannedLane(
        [
            join_resp(error=79, member_id="m-1", generation=-1),
            join_resp(member_id="m-1", leader="m-1", members=[jmember("m-1"), jmember("m-2")]),
            sync_resp(assignment=encode_assignment({"t": [0, 1]})),
        ]
    )
    await mem.join(lane)
    first, second, sync = (req for _, req in lane.sent)
    assert first.member_id == "" and second.member_id == "m-1"
    assert second.protocols[0].name == "range" and decode_subscription(second.protocols[0].metadata) == ("t",)
    assert sync.generation_id == 1 and sync.member_id == "m-1"
    plan = {a.member_id: decode_assignment(a.assignment) for a in sync.assignments}
    assert plan == {"m-1": {"t": [0, 1]}, "m-2": {"t": [2, 3]}}
    assert mem.state is State.STABLE and mem.is_leader
    assert events.log == ["assigned [('t', 0), ('t', 1)]"]


async def test_follower_sends_no_assignment_and_rejoins_on_rebalance_in_sync() -> None:
    mem = Member(1, "g", ["t"], {"t": 2})
    lane = CannedLane(
        [
            join_resp(member_id="m-2", leader="m-1", generation=3),
            sync_resp(error=27),  # REBALANCE_IN_PROGRESS: join again with the same member id
            join_resp(member_id="m-2", leader="m-1", generation=4),
            sync_resp(assignment=encode_assignment({"t": [1]})),
        ]
    )
    await mem.join(lane)
    sent = [req for _, req in lane.sent]
    assert sent[1].assignments == []
    assert sent[2].member_id == "m-2"
    assert mem.generation == 4 and mem.assignment == {"t": [1]}
    assert mem.generations_seen == [3, 4]


async def test_static_leader_with_skip_assignment_sends_empty_sync() -> None:
    mem = Member(0, "g", ["t"], {"t": 2}, instance_id="i-0")
    lane = CannedLane(
        [
            join_resp(
                member_id="i-0-new",
                leader="i-0-new",
                generation=5,
                skip=True,
                members=[jmember("i-0-new", instance="i-0")],
            ),
            sync_resp(assignment=encode_assignment({"t": [0, 1]})),
        ]
    )
    await mem.join(lane)
    join, sync = (req for _, req in lane.sent)
    assert join.group_instance_id == "i-0" and join.member_id == ""
    assert sync.assignments == [] and sync.group_instance_id == "i-0"
    assert mem.partitions() == [("t", 0), ("t", 1)]


async def test_unknown_member_id_clears_the_id() -> None:
    mem = Member(0, "g", ["t"], {"t": 1})
    mem.member_id = "stale"
    lane = CannedLane([join_resp(error=25), join_resp(member_id="fresh", leader="x"), sync_resp()])
    await mem.join(lane)
    assert [req.member_id for api, req in lane.sent if api == ApiKey.JOIN_GROUP] == ["stale", ""]
    assert mem.member_id == "fresh"


def test_heartbeat_outcomes() -> None:
    mem = Member(0, "g", ["t"], {"t": 1})
    mem.member_id, mem.generation = "m", 7
    req = mem.heartbeat_request()
    assert (req.group_id, req.generation_id, req.member_id) == ("g", 7, "m")
    assert mem.on_heartbeat(0) is Next.OK
    assert mem.on_heartbeat(27) is Next.REJOIN
    assert mem.on_heartbeat(22) is Next.REJOIN
    assert mem.member_id == "m"
    assert mem.on_heartbeat(25) is Next.REJOIN and mem.member_id == ""


def test_commit_request_and_outcomes() -> None:
    mem = Member(0, "g", ["t"], {"t": 4}, instance_id="i")
    mem.member_id, mem.generation, mem.assignment = "m", 2, {"t": [1, 3]}
    req = mem.commit_request(42)
    assert (req.generation_id_or_member_epoch, req.member_id, req.group_instance_id) == (2, "m", "i")
    assert [(p.partition_index, p.committed_offset) for p in req.topics[0].partitions] == [(1, 42), (3, 42)]
    req.encode(9)  # valid v9
    part, topic = (
        m.OffsetCommitResponse.OffsetCommitResponsePartition,
        m.OffsetCommitResponse.OffsetCommitResponseTopic,
    )
    ok = m.OffsetCommitResponse(topics=[topic(name="t", partitions=[part(partition_index=1, error_code=0)])])
    assert mem.on_commit(ok) == (Next.OK, 0)
    bad = m.OffsetCommitResponse(
        topics=[topic(name="t", partitions=[part(partition_index=1, error_code=22)])]
    )
    assert mem.on_commit(bad) == (Next.REJOIN, 22)


def test_close_static_sends_no_leave_dynamic_does() -> None:
    events = Events()
    static = Member(0, "g", ["t"], {"t": 1}, instance_id="i", listener=events)
    static.member_id, static.assignment, static.state = "s", {"t": [0]}, State.STABLE
    assert static.close() is None
    assert static.state is State.STOPPED and static.member_id == "" and events.log == ["revoked [('t', 0)]"]
    dynamic = Member(1, "g", ["t"], {"t": 1})
    dynamic.member_id = "d"
    leave = dynamic.close()
    assert [x.member_id for x in leave.members] == ["d"]
    leave.encode(5)


# -- ownership, wheel, report ------------------------------------------------------------------------


def test_ownership_tracker_integrates_unowned_time() -> None:
    now = [0.0]
    t = OwnershipTracker([("t", 0), ("t", 1)], clock=lambda: now[0])
    t.acquire([("t", 0), ("t", 1)])
    t.start()
    now[0] = 1.0
    t.release([("t", 0)])
    now[0] = 3.0
    t.acquire([("t", 0)])
    now[0] = 4.0
    t.release([("t", 0), ("t", 1)])
    now[0] = 4.5
    t.stop()
    assert t.any_unowned_s == pytest.approx(2.5)
    assert t.partition_s == pytest.approx(2.0 + 2 * 0.5)
    assert not t.all_owned


def test_wheel_spreads_members_evenly() -> None:
    wheel = HeartbeatWheel(3.0, send=lambda member: None, tick_s=0.5)
    assert wheel.slots_n == 6
    for i in range(20):
        wheel.add(Member(i, "g", ["t"], {"t": 1}))
    sizes = sorted(len(s) for s in wheel.slots)
    assert sizes[0] >= 3 and sizes[-1] <= 4 and sum(sizes) == 20


def test_report_ratio_says_how_much_better_kcoord_is() -> None:
    assert report.ratio(2000.0, 1000.0, higher_is_better=True) == "2.00x"
    assert report.ratio(1.0, 4.0, higher_is_better=False) == "4.00x"
    assert report.ratio(0, 0, higher_is_better=False) == "equal"
    assert report.ratio(0, 13, higher_is_better=False) == "∞"  # kcoord needed none, the peer some
    assert report.ratio(None, 1.0, higher_is_better=True) == "n/a"


# -- connection shapes (one per member, or N shared) -----------------------------------------------


def test_per_member_runtime_gives_members_no_shared_connection() -> None:
    async def run() -> None:
        from support.loadgen.conn import Stats

        per_member = Runtime(("127.0.0.1", 1), Stats(), None)
        assert per_member.per_member and per_member.shared.counts == {}
        mem = per_member.attach(Member(0, "g", ["t"], {"t": 1}))
        assert mem.conn is None  # opened by open_member_connections() or its first join
        per_member.send_heartbeat(mem)  # not stable, no connection: nothing sent, nothing raised
        assert per_member.connections() == []
        assert shape(None) == "per-member" and shape(16) == 16

    asyncio.run(run())


def test_shared_connections_are_split_among_the_groups_coordinators() -> None:
    a, b, default = ("127.0.0.1", 1), ("127.0.0.1", 2), ("127.0.0.1", 9)
    # one coordinator per worker of `kcoord serve --workers 2`: each its groups' share, at least one
    assert shares(16, {"g1": a, "g2": a, "g3": a, "g4": b}, default) == {a: 12, b: 4}
    assert shares(2, {"g1": a, "g2": a, "g3": a, "g4": a, "g5": b}, default) == {a: 1, b: 1}
    assert shares(16, {}, default) == {default: 16}  # no group named: every connection to the default

    async def run() -> None:
        from support.loadgen.conn import Stats

        rt = Runtime(default, Stats(), 16, 100, group_coordinators={"g1": a, "g2": b})
        assert rt.shared.counts == {a: 8, b: 8}
        assert {addr: pool.size for addr, pool in rt.lane_pools.items()} == {a: 50, b: 50}
        assert rt.lanes_of(Member(0, "g2", ["t"], {"t": 1})) is rt.lane_pools[b]

    asyncio.run(run())


def test_admission_is_fifo_and_whole_groups() -> None:
    async def run() -> None:
        adm = Admission(5)
        await adm.acquire(4)
        order: list[str] = []

        async def group(name: str, k: int) -> None:
            await adm.acquire(k)
            order.append(name)

        big = asyncio.ensure_future(group("big", 3))
        small = asyncio.ensure_future(group("small", 1))  # would fit now, but waits behind "big" (FIFO)
        await asyncio.sleep(0)
        assert order == [] and adm.free == 1
        adm.release(2)  # 3 free: "big" goes, "small" still waits for the fourth
        await asyncio.sleep(0)
        assert order == ["big"] and adm.free == 0
        adm.release(1)
        await asyncio.gather(big, small)
        assert order == ["big", "small"] and adm.free == 0
        with pytest.raises(ValueError):
            await adm.acquire(6)

    asyncio.run(run())


def test_run_all_plan_defaults_to_one_connection_per_member() -> None:
    runs = plan(full=True, budget=19_800)
    shared = [r for r in runs if "--connections" in r.args]
    # only the old-shape twin of the 100-committer storm, and the sizes that cannot have one connection each
    assert {r.title.split(" (")[0].split(",")[0] for r in shared} >= {"commit storm 100 committers"}
    assert all("shared connections" in r.title for r in shared)
    assert all(
        int(r.args[r.args.index("--members") + 1]) > 19_800
        for r in shared
        if "--members" in r.args and "old shape" not in r.title
    )
    per_member = [r for r in runs if r.scenario == "commit-storm" and "--connections" not in r.args]
    assert [r.args[r.args.index("--committers") + 1] for r in per_member] == ["100", "1000", "2000"]
    runs = plan(full=False, budget=19_800)
    shared_everywhere(runs, 16)
    assert all(r.args.count("--connections") == 1 for r in runs)


def test_run_all_commit_target_ignores_the_shared_shape() -> None:
    def storm(connections: Any, rate: float) -> Run:
        run = Run("commit-storm", "t", [])
        run.results["kcoord"] = {
            "commits_per_s": rate,
            "params": {"committers": 100, "connections": connections, "storage": "kafka"},
        }
        return run

    lines = targets([storm("per-member", 15_500.0), storm(16, 21_000.0)])
    row = next(line for line in lines if "durable commits" in line)
    assert "15,500/s" in row and "21,000" not in row
