"""The KIP-848 scenarios: ``consumer-steady`` (ConsumerGroupHeartbeat at scale) and
``consumer-commit`` (OffsetCommit v10 by topic id at the member epoch).

Both start the same way (:func:`_settled_groups`):

1. one topic of ``partitions`` partitions (default: the group size, one partition per member),
   and a Metadata request for it through the target until it lists every partition (as a
   consumer asks for its subscription's metadata; kcoord learns topics from the Metadata it
   relays, so the groups never join before the coordinator knows the topic); every group
   subscribes to it by name and the coordinator assigns (server-side assignor);
2. the **ramp**: groups are admitted whole, each member sending its join (epoch 0, full
   heartbeat) at once, at ``join_rate`` members a second. The first member's answer gives the
   heartbeat interval (``heartbeat_interval_ms``) unless ``interval_s`` is set, and the wheel
   starts; from then on every admitted member heartbeats once per interval, acknowledging and
   revoking as the coordinator asks (:mod:`.consumer_member`);
3. **settle**: wait until every group is settled on the client's side (one epoch, every
   acknowledgement heard, partitions owned exactly once) AND on the server's side
   (ConsumerGroupDescribe: assignment epoch = group epoch, every member at that epoch holding
   its target assignment — nothing pending to revoke or receive).

Only then is anything measured, after one more heartbeat interval, so the joins and
reconciliations of the ramp do not land in the window.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

from kcoord.protocol.messages import ApiKey

from .admin import (
    CONSUMER_COMMIT_REQUIRED_VERSIONS,
    CONSUMER_REQUIRED_VERSIONS,
    await_topic_metadata,
    find_coordinators,
)
from .conn import Stats
from .consumer_member import ConsumerMember, CState, describe_settled, group_settled
from .consumer_runtime import ConsumerRuntime
from .runtime import shape
from .scenarios import Target, _create_topic, _run_id, _usage, with_cores_per_1k_heartbeats

log = logging.getLogger("loadgen.consumer")


@dataclass
class Setup:
    rt: ConsumerRuntime
    stats: Stats
    groups: dict[str, list[ConsumerMember]]
    partitions: int
    interval_s: float
    server_interval_ms: int | None
    ramp_s: float
    settle_s: float | None  # first join -> settled on both sides; None: did not settle in time
    unsettled: dict[str, str]  # group -> why (client or server side), at the end of the wait
    topic_status: str


async def _settled_groups(
    target: Target,
    prefix: str,
    members: int,
    group_size: int,
    partitions: int | None,
    interval_s: float | None,
    connections: int | None,
    join_rate: float,
    settle_timeout_s: float,
    static: bool,
    required: dict[int, int] = CONSUMER_REQUIRED_VERSIONS,
) -> Setup:
    run = _run_id()
    partitions = partitions or group_size
    group_count = math.ceil(members / group_size)
    topic = f"bench-{prefix}-{run}"
    topic_status = await _create_topic(target.bootstrap, topic, partitions)
    await await_topic_metadata(target.bootstrap, topic, partitions)
    group_ids = [f"{prefix}-{run}-{g}" for g in range(group_count)]
    coordinators = await find_coordinators(target.bootstrap, group_ids, required=required)
    stats = Stats(timeline_api=ApiKey.CONSUMER_GROUP_HEARTBEAT)
    rt = await ConsumerRuntime(
        coordinators[group_ids[0]], stats, connections, group_coordinators=coordinators
    ).start()
    try:
        groups: dict[str, list[ConsumerMember]] = {g: [] for g in group_ids}
        for i in range(members):
            gid = group_ids[i % group_count]
            mb = ConsumerMember(i, gid, [topic], instance_id=f"{prefix}-{run}-{i}" if static else None)
            groups[gid].append(rt.attach(mb))
        await rt.open_member_connections()  # before the ramp's clock starts
        t0 = time.perf_counter()
        first = rt.members[0]
        rt.join([first])
        assert rt.first_interval is not None
        server_interval_ms = await asyncio.wait_for(rt.first_interval, 30.0)
        interval = interval_s if interval_s is not None else server_interval_ms / 1000
        rt.start_wheel(interval)
        admitted = 1
        for gid in group_ids:
            batch = [mb for mb in groups[gid] if not mb.admitted]
            rt.join(batch)
            admitted += len(batch)
            await asyncio.sleep(len(batch) / join_rate)
        ramp_s = time.perf_counter() - t0
        log.info(
            "%s: %d members in %d groups admitted in %.1fs (interval %.1fs)",
            prefix,
            members,
            group_count,
            ramp_s,
            interval,
        )
        settle_s, unsettled = await _wait_settled(rt, groups, partitions, t0, settle_timeout_s)
        log.info(
            "%s: settled=%s after %.1fs; unsettled groups %d",
            prefix,
            settle_s is not None,
            time.perf_counter() - t0,
            len(unsettled),
        )
        return Setup(
            rt,
            stats,
            groups,
            partitions,
            interval,
            server_interval_ms,
            ramp_s,
            settle_s,
            unsettled,
            topic_status,
        )
    except BaseException:
        await rt.close()
        raise


async def _wait_settled(
    rt: ConsumerRuntime, groups: dict[str, list[ConsumerMember]], partitions: int, t0: float, timeout_s: float
) -> tuple[float | None, dict[str, str]]:
    """Seconds from ``t0`` until every group is settled on both sides, and the groups that are not."""
    deadline = time.perf_counter() + timeout_s
    unsettled: dict[str, str] = {}
    while True:
        unsettled = {g: "client side" for g, mbs in groups.items() if not group_settled(mbs, partitions)}
        if not unsettled:
            described = await rt.describe(list(groups))
            for gid, mbs in groups.items():
                g = described.get(gid)
                why = "not described" if g is None else describe_settled(g, len(mbs))
                if why is not None:
                    unsettled[gid] = f"server side: {why}"
            if not unsettled:
                return time.perf_counter() - t0, {}
        if time.perf_counter() > deadline or any(
            mb.state is CState.STOPPED for mbs in groups.values() for mb in mbs
        ):
            return None, unsettled
        await asyncio.sleep(0.25)


def _heartbeat_result(window: dict[str, Any]) -> dict[str, Any]:
    return window["apis"].get("ConsumerGroupHeartbeat", {})


def _errors(window: dict[str, Any], api: str) -> dict[str, int]:
    return {k: v for k, v in window["errors"].items() if k.startswith(api + ":")}


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in after}


async def _stable_at_end(s: Setup) -> tuple[int, int]:
    """(groups settled on both sides now, members that are members now)."""
    described = await s.rt.describe(list(s.groups))
    ok = sum(
        1 for gid, mbs in s.groups.items()
        if group_settled(mbs, s.partitions) and gid in described and describe_settled(described[gid], len(mbs)) is None
    )  # fmt: skip
    return ok, sum(1 for mb in s.rt.members if mb.state is CState.MEMBER)


def _common(s: Setup, members: int, group_size: int) -> dict[str, Any]:
    return {
        "members": members,
        "groups": len(s.groups),
        "group_size": group_size,
        "partitions": s.partitions,
        "interval_s": s.interval_s,
        "server_heartbeat_interval_ms": s.server_interval_ms,
    }


async def consumer_steady(
    target: Target,
    members: int = 5000,
    group_size: int = 50,
    partitions: int | None = None,
    interval_s: float | None = None,
    duration_s: float = 15.0,
    connections: int | None = None,
    join_rate: float = 2000.0,
    settle_timeout_s: float = 300.0,
    static: bool = False,
) -> dict[str, Any]:
    """N KIP-848 members in groups of ``group_size`` heartbeating: rate, p50/p99/max, errors by code."""
    s = await _settled_groups(
        target,
        "cgsteady",
        members,
        group_size,
        partitions,
        interval_s,
        connections,
        join_rate,
        settle_timeout_s,
        static,
    )
    rt, stats = s.rt, s.stats
    try:
        await asyncio.sleep(s.interval_s)  # one heartbeat round after the group settled, before measuring
        assert rt.wheel is not None
        stats.reset()
        rt.wheel.lag.reset()
        before = rt.counters()
        usage = _usage(target)
        await asyncio.sleep(duration_s)
        window = stats.snapshot()
        server = usage.stop().report()
        counters = _delta(rt.counters(), before)
        settled_groups, members_at_end = await _stable_at_end(s)
        hb = _heartbeat_result(window)
        rate = hb.get("rate_per_s", 0.0)
        result: dict[str, Any] = {
            "scenario": "consumer-steady",
            "target": target.label,
            "params": {
                **_common(s, members, group_size),
                "duration_s": duration_s,
                "connections": shape(connections),
                "join_rate": join_rate,
                "static": static,
                "topic": s.topic_status,
            },
            "connections_opened": stats.connections_opened,
            "ramp_s": round(s.ramp_s, 2),
            "settle_s": None if s.settle_s is None else round(s.settle_s, 2),
            "groups_unsettled_before_window": len(s.unsettled),
            "unsettled_examples": dict(list(s.unsettled.items())[:3]),
            "heartbeats_per_s": rate,
            "expected_heartbeats_per_s": round(members / s.interval_s, 1),
            "heartbeat": hb,
            "heartbeat_errors": _errors(window, "ConsumerGroupHeartbeat"),
            "before_window": before,  # the ramp and settle: joins, revocations, acknowledgements
            "in_window": counters,
            "groups_settled_at_end": settled_groups,
            "members_in_group_at_end": members_at_end,
            "loadgen_tick_lag_p99_ms": round(rt.wheel.lag.percentile(99) / 1000, 3),
            "loadgen_tick_lag_max_ms": round(rt.wheel.lag.max / 1000, 3),
            "heartbeat_timeline": window.get("timeline"),
            **server,
            "window": window,
            "failures": rt.failures[:5],
        }
        return with_cores_per_1k_heartbeats(result, server, rate)
    finally:
        await rt.close()


async def consumer_commit(
    target: Target,
    members: int = 1000,
    group_size: int = 10,
    partitions: int | None = None,
    interval_s: float | None = None,
    duration_s: float = 10.0,
    connections: int | None = None,
    join_rate: float = 2000.0,
    settle_timeout_s: float = 300.0,
    fencing: str = "unknown",
    storage: str = "unknown",
) -> dict[str, Any]:
    """Every member keeps one OffsetCommit v10 (its partitions, by topic id, at its member epoch) in
    flight while it heartbeats: commits/s, latency, errors by code. ``fencing`` and ``storage`` only
    label the report (they are the server's settings)."""
    s = await _settled_groups(
        target,
        "cgcommit",
        members,
        group_size,
        partitions,
        interval_s,
        connections,
        join_rate,
        settle_timeout_s,
        False,
        CONSUMER_COMMIT_REQUIRED_VERSIONS,
    )
    rt, stats = s.rt, s.stats
    try:
        rt.start_commits(rt.members)
        await asyncio.sleep(min(2.0, duration_s / 5))  # warm-up
        stats.reset()
        before = rt.counters()
        usage = _usage(target)
        await asyncio.sleep(duration_s)
        window = stats.snapshot()
        rt.stop_commits()
        server = usage.stop().report()
        counters = _delta(rt.counters(), before)
        settled_groups, members_at_end = await _stable_at_end(s)
        oc = window["apis"].get("OffsetCommit", {})
        committers = [mb for mb in rt.members if mb.owned]
        return {
            "scenario": "consumer-commit",
            "target": target.label,
            "params": {
                **_common(s, members, group_size),
                "duration_s": duration_s,
                "connections": shape(connections),
                "fencing": fencing,
                "storage": storage,
                "topic": s.topic_status,
            },
            "connections_opened": stats.connections_opened,
            "ramp_s": round(s.ramp_s, 2),
            "settle_s": None if s.settle_s is None else round(s.settle_s, 2),
            "groups_unsettled_before_window": len(s.unsettled),
            "commits_per_s": oc.get("rate_per_s", 0.0),
            "committers": len(committers),
            "partitions_per_commit": round(
                sum(len(mb.partitions()) for mb in committers) / max(1, len(committers)), 2
            ),
            "commit": oc,
            "commit_errors": _errors(window, "OffsetCommit"),
            "heartbeat": _heartbeat_result(window),
            "heartbeat_errors": _errors(window, "ConsumerGroupHeartbeat"),
            "before_window": before,  # the ramp and settle: joins, revocations, acknowledgements
            "in_window": counters,
            "groups_settled_at_end": settled_groups,
            "members_in_group_at_end": members_at_end,
            **server,
            "window": window,
            "failures": rt.failures[:5],
        }
    finally:
        await rt.close()


SCENARIOS = {"consumer-steady": consumer_steady, "consumer-commit": consumer_commit}
