"""The four load scenarios (steady, join storm, rolling bounce, commit storm), each against one
endpoint; run twice for a side-by-side figure.

Every scenario gives each member one connection of its own by default (``connections=None``), as
real clients have, and says so in its params (``"connections": "per-member"``) with the count
actually opened (``connections_opened``); ``connections=C`` runs the old shape, C shared
connections for the steady traffic plus lanes for joins (see :mod:`.runtime`). Why the default
changed: Kafka processes one request per connection at a time, so 100 committers on
16 shared connections measured Kafka at 16 requests in flight while kcoord pipelined all 100.

Every scenario returns a plain dict (JSON-ready): its parameters, the per-API latency/throughput
of its measurement window and the scenario's own figures. Group and topic names carry a run id so
two runs against the same server never share state.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from .admin import create_topic, find_coordinators, single_coordinator
from .conn import Stats
from .member import Member, MemberListener, State
from .ownership import OwnershipTracker
from .procstat import Usage
from .runtime import Runtime, shape

log = logging.getLogger("loadgen")


@dataclass
class Target:
    """Where to send the load, and which process to charge the CPU to."""

    bootstrap: str
    label: str = "target"
    server_pids: list[int] = field(default_factory=list)  # CPU is summed over these
    upstream_pids: list[int] = field(default_factory=list)  # reported apart (upstream_cores)


def _run_id() -> str:
    return uuid.uuid4().hex[:8]


def with_cores_per_1k_heartbeats(
    result: dict[str, Any], server: dict[str, Any], rate: float
) -> dict[str, Any]:
    """``result`` with the server's cores per 1,000 heartbeats/s, when both are known."""
    if server["server_cores"] is not None and rate:
        result["server_cores_per_1k_hb_s"] = round(server["server_cores"] / (rate / 1000), 4)
    return result


def _usage(target: Target) -> Usage:
    return Usage(list(target.server_pids), list(target.upstream_pids)).start()


async def _create_topic(bootstrap: str, topic: str, partitions: int) -> str:
    return await asyncio.get_running_loop().run_in_executor(None, create_topic, bootstrap, topic, partitions)


async def _wait_for(predicate: Any, timeout_s: float, poll_s: float = 0.01) -> bool:
    end = time.perf_counter() + timeout_s
    while time.perf_counter() < end:
        if predicate():
            return True
        await asyncio.sleep(poll_s)
    return bool(predicate())


async def _join_all(rt: Runtime, groups: list[list[Member]], timeout_s: float) -> tuple[float, int]:
    """Join every group (admitted whole, as lanes allow); (seconds, members not stable)."""
    started = time.perf_counter()
    tasks = [asyncio.get_running_loop().create_task(rt.join_group(g)) for g in groups]
    done, pending = await asyncio.wait(tasks, timeout=timeout_s)
    for t in pending:
        t.cancel()
    for t in done:
        if t.exception() is not None:
            rt.failures.append(repr(t.exception()))
    not_stable = sum(1 for g in groups for mem in g if mem.state is not State.STABLE)
    return time.perf_counter() - started, not_stable


# -- steady state ----------------------------------------------------------------------------------
async def steady(
    target: Target,
    members: int = 1000,
    group_size: int = 100,
    interval_s: float = 3.0,
    duration_s: float = 15.0,
    connections: int | None = None,
    lanes: int = 2000,
    session_timeout_ms: int = 10_000,
    static: bool = False,
    join_timeout_s: float = 120.0,
) -> dict[str, Any]:
    """N members in G groups heartbeating every ``interval_s``: latency, rate, server CPU per 1k hb/s."""
    run = _run_id()
    group_count = math.ceil(members / group_size)
    topic = f"bench-steady-{run}"
    topic_status = await _create_topic(target.bootstrap, topic, group_size)
    group_ids = [f"steady-{run}-{g}" for g in range(group_count)]
    coordinators = await find_coordinators(target.bootstrap, group_ids)
    stats = Stats()
    rt = await Runtime(
        coordinators[group_ids[0]],
        stats,
        connections,
        min(lanes, members),
        interval_s,
        group_coordinators=coordinators,
    ).start()
    try:
        groups: list[list[Member]] = [[] for _ in range(group_count)]
        for i in range(members):
            g = i % group_count
            mem = Member(
                i,
                group_ids[g],
                [topic],
                {topic: group_size},
                instance_id=f"steady-{run}-{i}" if static else None,
                session_timeout_ms=session_timeout_ms,
            )
            groups[g].append(rt.attach(mem))
        await rt.open_member_connections()
        setup_s, not_stable = await _join_all(rt, groups, join_timeout_s)
        log.info("steady: %d members joined in %.1fs (%d not stable)", members, setup_s, not_stable)
        await asyncio.sleep(interval_s)  # one full heartbeat round before measuring
        stats.reset()
        rejoins_before = rt.rejoins
        skipped_before = rt.heartbeats_skipped
        rt.wheel.lag.reset()
        usage = _usage(target)
        await asyncio.sleep(duration_s)
        window = stats.snapshot()
        server = usage.stop().report()
        hb = window["apis"].get("Heartbeat", {})
        rate = hb.get("rate_per_s", 0.0)
        result: dict[str, Any] = {
            "scenario": "steady",
            "target": target.label,
            "params": {
                "members": members,
                "groups": group_count,
                "group_size": group_size,
                "interval_s": interval_s,
                "duration_s": duration_s,
                "connections": shape(connections),
                "session_timeout_ms": session_timeout_ms,
                "static": static,
                "topic": topic_status,
            },
            "connections_opened": stats.connections_opened,
            "setup_s": round(setup_s, 2),
            "members_not_stable_after_setup": not_stable,
            "members_stable_at_end": sum(1 for mem in rt.members if mem.state is State.STABLE),
            "heartbeats_per_s": rate,
            "expected_heartbeats_per_s": round(members / interval_s, 1),
            "heartbeat": hb,
            "rejoins_in_window": rt.rejoins - rejoins_before,
            "heartbeats_skipped_in_window": rt.heartbeats_skipped - skipped_before,
            "loadgen_tick_lag_p99_ms": round(rt.wheel.lag.percentile(99) / 1000, 3),
            **server,
            "window": window,
            "failures": rt.failures[:5],
        }
        return with_cores_per_1k_heartbeats(result, server, rate)
    finally:
        await rt.close()


# -- join storm ------------------------------------------------------------------------------------
class _StormClock(MemberListener):
    """Times the phases of a join storm from the members' point of view.

    "Settled" is the first moment every member holds an assignment of one and the same
    generation; joins sent after that (rejoins of a later rebalance) do not move "last join".
    """

    def __init__(self, members: int) -> None:
        self.members = members
        self.first_join_sent: float | None = None
        self.last_join_sent = 0.0
        self.first_joined: float | None = None
        self.settled_at: float | None = None
        self._holding: dict[int, int] = {}  # member index -> generation of the assignment it holds
        self._per_generation: dict[int, int] = {}

    def join_sent(self, member: Member, has_member_id: bool) -> None:
        now = time.perf_counter()
        if self.first_join_sent is None:
            self.first_join_sent = now
        if self.settled_at is None:
            self.last_join_sent = now

    def joined(self, member: Member) -> None:
        if self.first_joined is None:
            self.first_joined = time.perf_counter()

    def assigned(self, member: Member) -> None:
        self._drop(member)
        gen = self._holding[member.index] = member.generation
        self._per_generation[gen] = self._per_generation.get(gen, 0) + 1
        if self.settled_at is None and self._per_generation[gen] == self.members:
            self.settled_at = time.perf_counter()

    def revoked(self, member: Member, partitions: list[tuple[str, int]]) -> None:
        self._drop(member)

    def _drop(self, member: Member) -> None:
        gen = self._holding.pop(member.index, None)
        if gen is not None:
            self._per_generation[gen] -= 1


async def join_storm(
    target: Target,
    members: int = 1000,
    partitions: int | None = None,
    connections: int | None = None,
    session_timeout_ms: int = 10_000,
    rebalance_timeout_ms: int = 60_000,
    timeout_s: float = 60.0,
) -> dict[str, Any]:
    """One new group, M dynamic members joining at once, each on its own connection (per member:
    the member's only connection; shared: a lane, heartbeats on the shared connections), every
    connection opened before the clock starts.

    Reported: first JoinGroup -> every member holds its SyncGroup assignment; the same from the
    LAST JoinGroup sent (the target's "after the last member joined"), and from the moment the
    rebalance completed (first successful JoinGroup response) — the coordinator's own work,
    without the group.initial.rebalance.delay.ms it waits for a new group.
    """
    run = _run_id()
    partitions = partitions or members
    topic = f"bench-storm-{run}"
    topic_status = await _create_topic(target.bootstrap, topic, partitions)
    group_id = f"storm-{run}"
    coordinator = await single_coordinator(target.bootstrap, [group_id])
    stats = Stats()
    rt = await Runtime(coordinator, stats, connections, members, 3.0).start()
    clock = _StormClock(members)
    try:
        group = [
            rt.attach(
                Member(
                    i,
                    group_id,
                    [topic],
                    {topic: partitions},
                    session_timeout_ms=session_timeout_ms,
                    rebalance_timeout_ms=rebalance_timeout_ms,
                    listener=clock,
                )
            )
            for i in range(members)
        ]
        if rt.per_member:
            await rt.open_member_connections()
        else:
            await rt.warm_lanes(members)
        stats.reset()
        usage = _usage(target)
        t0 = time.perf_counter()
        elapsed, not_stable = await _join_all(rt, [group], timeout_s)
        server = usage.stop().report()
        window = stats.snapshot()
        first = clock.first_join_sent or t0
        done = clock.settled_at

        def since(t: float | None) -> float | None:
            return None if done is None or t is None else round(done - t, 3)

        generations = sorted({g for mem in group for g in mem.generations_seen})
        return {
            "scenario": "join-storm",
            "target": target.label,
            "params": {
                "members": members,
                "partitions": partitions,
                "connections": shape(connections),
                "session_timeout_ms": session_timeout_ms,
                "rebalance_timeout_ms": rebalance_timeout_ms,
                "topic": topic_status,
            },
            "connections_opened": stats.connections_opened,
            "settled": done is not None,
            "members_not_stable": not_stable,
            "total_s": since(first),
            "after_last_join_s": since(clock.last_join_sent),
            "after_rebalance_s": since(clock.first_joined),
            "join_phase_s": round((clock.first_joined or first) - first, 3),
            "wall_s": round(elapsed, 3),
            "join_calls": sum(mem.join_calls for mem in group),
            "generations": generations,
            **server,
            "window": window,
            "failures": rt.failures[:5],
        }
    finally:
        await rt.close()


# -- rolling bounce --------------------------------------------------------------------------------
class _Owners(MemberListener):
    def __init__(self, tracker: OwnershipTracker) -> None:
        self.tracker = tracker
        self.generations: set[int] = set()

    def joined(self, member: Member) -> None:
        self.generations.add(member.generation)

    def assigned(self, member: Member) -> None:
        self.tracker.acquire(member.partitions())

    def revoked(self, member: Member, partitions: list[tuple[str, int]]) -> None:
        self.tracker.release(partitions)


async def rolling_bounce(
    target: Target,
    members: int = 20,
    static: bool = True,
    partitions: int | None = None,
    interval_s: float = 1.0,
    session_timeout_ms: int = 10_000,
    downtime_s: float = 0.5,
    step_timeout_s: float = 60.0,
    budget_s: float = 90.0,
    connections: int | None = None,
) -> dict[str, Any]:
    """Restart members one by one (close, ``downtime_s``, rejoin), waiting for a stable group each time.

    Per member, a restart closes the member's connection (after its LeaveGroup, if dynamic) and
    the rejoin opens a new one, as a restarted process does.

    Rebalances are counted as generations the members saw after the initial join; "unowned" is
    measured by :class:`OwnershipTracker` from the first close to the last stable group.
    """
    run = _run_id()
    partitions = partitions or 2 * members
    topic = f"bench-bounce-{run}"
    topic_status = await _create_topic(target.bootstrap, topic, partitions)
    group_id = f"bounce-{run}"
    coordinator = await single_coordinator(target.bootstrap, [group_id])
    stats = Stats()
    rt = await Runtime(coordinator, stats, connections, members, interval_s).start()
    tracker = OwnershipTracker([(topic, p) for p in range(partitions)])
    owners = _Owners(tracker)
    try:
        group = [
            rt.attach(
                Member(
                    i,
                    group_id,
                    [topic],
                    {topic: partitions},
                    instance_id=f"bounce-{run}-{i}" if static else None,
                    session_timeout_ms=session_timeout_ms,
                    listener=owners,
                )
            )
            for i in range(members)
        ]
        await rt.open_member_connections()

        def stable() -> bool:
            gens = {mem.generation for mem in group}
            return (
                all(mem.state is State.STABLE and not mem.rejoining for mem in group)
                and len(gens) == 1
                and tracker.all_owned
            )

        await _join_all(rt, [group], step_timeout_s)
        ok = await _wait_for(stable, step_timeout_s)
        log.info(
            "bounce: initial group stable=%s generations=%s", ok, sorted({mem.generation for mem in group})
        )
        initial = {mem.generation for mem in group}
        if not ok:
            raise RuntimeError(f"group never settled before the bounce: {rt.failures[:3]}")
        owners.generations = set(initial)
        stats.reset()
        rejoins_before = rt.rejoins
        tracker.start()
        usage = _usage(target)
        t0 = time.perf_counter()
        step_times = []
        settled_all = True
        bounced = 0
        for mem in group:
            if time.perf_counter() - t0 > budget_s:
                log.warning("bounce: budget of %.0fs spent after %d members", budget_s, bounced)
                break
            bounced += 1
            s0 = time.perf_counter()
            try:
                # A target that stops answering must not hang the run: a step has a time limit.
                await asyncio.wait_for(rt.leave(mem), step_timeout_s)
                await asyncio.sleep(downtime_s)
                await asyncio.wait_for(rt.join(mem), step_timeout_s)
            except TimeoutError:
                log.warning(
                    "bounce: member %d did not leave and rejoin within %.0fs; stopping",
                    mem.index,
                    step_timeout_s,
                )
                settled_all = False
                step_times.append(time.perf_counter() - s0)
                break
            settled = await _wait_for(stable, step_timeout_s)
            settled_all &= settled
            log.info(
                "bounce: member %d restarted, settled=%s in %.2fs, generations %s",
                mem.index,
                settled,
                time.perf_counter() - s0,
                sorted(owners.generations),
            )
            step_times.append(time.perf_counter() - s0)
        tracker.stop()
        total = time.perf_counter() - t0
        generations = sorted(owners.generations)
        return {
            "scenario": "rolling-bounce",
            "target": target.label,
            "params": {
                "members": members,
                "static": static,
                "partitions": partitions,
                "interval_s": interval_s,
                "connections": shape(connections),
                "session_timeout_ms": session_timeout_ms,
                "downtime_s": downtime_s,
                "topic": topic_status,
            },
            "connections_opened": stats.connections_opened,
            "bounced": bounced,
            "rebalances": len(set(generations) - initial),
            "generations": generations,
            "settled_every_step": settled_all,
            "total_s": round(total, 3),
            "unowned_any_s": round(tracker.any_unowned_s, 3),
            "unowned_partition_s": round(tracker.partition_s, 3),
            "unowned_excluding_downtime_s": round(max(0.0, tracker.any_unowned_s - members * downtime_s), 3),
            "step_mean_s": round(sum(step_times) / len(step_times), 3),
            "rejoins_by_others": rt.rejoins - rejoins_before,
            **usage.stop().report(),
            "window": stats.snapshot(),
            "failures": rt.failures[:5],
        }
    finally:
        await rt.close()


# -- commit storm ----------------------------------------------------------------------------------
async def commit_storm(
    target: Target,
    committers: int = 100,
    group_size: int = 10,
    duration_s: float = 15.0,
    connections: int | None = None,
    interval_s: float = 3.0,
    session_timeout_ms: int = 10_000,
    storage: str = "unknown",
    join_timeout_s: float = 180.0,
) -> dict[str, Any]:
    """C committers (members of groups of ``group_size``), each with one OffsetCommit v9 in flight."""
    run = _run_id()
    group_count = math.ceil(committers / group_size)
    topic = f"bench-commit-{run}"
    topic_status = await _create_topic(target.bootstrap, topic, group_size)
    group_ids = [f"commit-{run}-{g}" for g in range(group_count)]
    coordinators = await find_coordinators(target.bootstrap, group_ids)
    stats = Stats()
    rt = await Runtime(
        coordinators[group_ids[0]],
        stats,
        connections,
        min(committers, 2000),
        interval_s,
        group_coordinators=coordinators,
    ).start()
    try:
        groups: list[list[Member]] = [[] for _ in range(group_count)]
        for i in range(committers):
            g = i % group_count
            groups[g].append(
                rt.attach(
                    Member(
                        i, group_ids[g], [topic], {topic: group_size}, session_timeout_ms=session_timeout_ms
                    )
                )
            )
        await rt.open_member_connections()
        setup_s, not_stable = await _join_all(rt, groups, join_timeout_s)
        log.info("commit: %d members joined in %.1fs (%d not stable)", committers, setup_s, not_stable)
        rt.start_commits(rt.members)
        await asyncio.sleep(min(2.0, duration_s / 5))  # warm-up
        stats.reset()
        usage = _usage(target)
        await asyncio.sleep(duration_s)
        window = stats.snapshot()
        rt.stop_commits()
        server = usage.stop().report()
        oc = window["apis"].get("OffsetCommit", {})
        parts = sum(len(mem.partitions()) for mem in rt.members) / max(1, len(rt.members))
        return {
            "scenario": "commit-storm",
            "target": target.label,
            "params": {
                "committers": committers,
                "group_size": group_size,
                "duration_s": duration_s,
                "connections": shape(connections),
                "storage": storage,
                "topic": topic_status,
            },
            "connections_opened": stats.connections_opened,
            "setup_s": round(setup_s, 2),
            "members_not_stable_after_setup": not_stable,
            "commits_per_s": oc.get("rate_per_s", 0.0),
            "partitions_per_commit": round(parts, 2),
            "commit": oc,
            "commit_errors": {k: v for k, v in window["errors"].items() if k.startswith("OffsetCommit")},
            **server,
            "window": window,
            "failures": rt.failures[:5],
        }
    finally:
        await rt.close()


SCENARIOS = {
    "steady": steady,
    "join-storm": join_storm,
    "rolling-bounce": rolling_bounce,
    "commit-storm": commit_storm,
}


def target_dict(target: Target) -> dict[str, Any]:
    return asdict(target)
