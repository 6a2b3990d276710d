"""One classic group of thousands of members over the raw wire, for the large-group test and bench.

Real consumers (a JVM or a librdkafka thread each) are far too heavy for 5,000 members on these
machines, so each member is a JoinGroup/SyncGroup pair on a few pipelined connections of kcoord's
own client, with what a Java consumer would send: a ConsumerProtocolSubscription v1 of one or two
topics, and from the leader a ~100-byte ConsumerProtocolAssignment per member (19 scattered
partitions of a large topic, so the assignments are not all alike). JoinGroup v3 gives a member its
id at once (no MEMBER_ID_REQUIRED round), on Kafka's own coordinator as on kcoord. Sessions are
long (5 min), so the group stays Stable without heartbeats while it is checked.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

from kcoord.client import Connection
from kcoord.protocol import messages as m
from support.loadgen.assignor import encode_assignment, encode_subscription

JOIN_VERSION = 3
SYNC_VERSION = 2
HEARTBEAT_VERSION = 2
DESCRIBE_VERSION = 3
SESSION_TIMEOUT_MS = 300_000
REBALANCE_TIMEOUT_MS = 120_000
TOPICS = ("orders-events", "payments-v2")


def subscription(index: int) -> bytes:
    return encode_subscription(TOPICS if index % 3 else TOPICS[:1])


def assignments(member_ids: list[str], seed: int = 11) -> dict[str, bytes]:
    """About 100 bytes per member: 19 partitions of ``orders-events`` drawn at random."""
    rng = random.Random(seed)
    return {mid: encode_assignment({TOPICS[0]: sorted(rng.sample(range(100_000), 19))}) for mid in member_ids}


@dataclass
class FormedGroup:
    group: str
    generation: int
    leader: str
    plan: dict[str, bytes]  # member id -> assignment the leader sent, in join order
    join_s: float
    sync_s: float
    join_errors: dict[int, int] = field(default_factory=dict)
    sync_errors: dict[int, int] = field(default_factory=dict)  # error code -> members answered it

    @property
    def stable(self) -> bool:
        return not self.join_errors and not self.sync_errors


async def _connections(address: str, count: int) -> list[Connection]:
    host, port = address.rsplit(":", 1)
    return [await Connection.open((host, int(port)), timeout=30.0) for _ in range(count)]


def _tally(responses: list[Any]) -> dict[int, int]:
    errors: dict[int, int] = {}
    for r in responses:
        if r.error_code:
            errors[r.error_code] = errors.get(r.error_code, 0) + 1
    return errors


# Parked JoinGroups each hold a slot of their connection until the rebalance completes, and kcoord
# reads at most max.inflight (1,000 by default) requests of one connection at a time: with fewer
# connections than members / 1,000 the rest are never read, the join phase runs into the rebalance
# timeout and the group forms without them. Real members each have their own connection.
MEMBERS_PER_CONNECTION = 500


async def form(
    address: str, group: str, members: int, connections: int | None = None, timeout: float = 300.0
) -> FormedGroup:
    """Join ``members`` members and sync them with the leader's assignment; how it went, timed."""
    if connections is None:
        connections = max(8, -(-members // MEMBERS_PER_CONNECTION))
    conns = await _connections(address, connections)
    try:
        P = m.JoinGroupRequest.JoinGroupRequestProtocol
        started = time.monotonic()
        joins = [
            conns[i % connections].request(
                m.JoinGroupRequest(
                    group_id=group,
                    session_timeout_ms=SESSION_TIMEOUT_MS,
                    rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                    member_id="",
                    protocol_type="consumer",
                    protocols=[P(name="range", metadata=subscription(i))],
                ),
                JOIN_VERSION,
                timeout=timeout,
            )  # fmt: skip
            for i in range(members)
        ]
        joined = await asyncio.gather(*joins)
        join_s = time.monotonic() - started
        join_errors = _tally(joined)
        ok = [j for j in joined if not j.error_code]
        if join_errors or not ok:
            return FormedGroup(group, -1, "", {}, join_s, 0.0, join_errors)
        generation, leader = ok[0].generation_id, ok[0].leader
        plan = assignments([j.member_id for j in ok])
        A = m.SyncGroupRequest.SyncGroupRequestAssignment
        # Followers first (they park until the leader's assignment), then the leader.
        order = sorted(plan, key=lambda mid: mid == leader)
        syncs = [
            conns[i % connections].request(
                m.SyncGroupRequest(
                    group_id=group,
                    generation_id=generation,
                    member_id=mid,
                    assignments=[A(member_id=k, assignment=v) for k, v in plan.items()]
                    if mid == leader
                    else [],
                ),
                SYNC_VERSION,
                timeout=timeout,
            )  # fmt: skip
            for i, mid in enumerate(order)
        ]
        synced = await asyncio.gather(*syncs)
        sync_s = time.monotonic() - started - join_s
        wrong = sum(
            1 for mid, s in zip(order, synced, strict=True) if not s.error_code and s.assignment != plan[mid]
        )
        sync_errors = _tally(synced)
        if wrong:
            sync_errors[-1000] = wrong  # answered NONE with another member's assignment: never expected
        return FormedGroup(group, generation, leader, plan, join_s, sync_s, join_errors, sync_errors)
    finally:
        for c in conns:
            c.close()


async def heartbeats(address: str, formed: FormedGroup, connections: int = 8) -> dict[int, int]:
    """Every member's Heartbeat at the formed generation: error code -> members (0 is NONE)."""
    conns = await _connections(address, connections)
    try:
        answers = await asyncio.gather(*(
            conns[i % connections].request(m.HeartbeatRequest(
                group_id=formed.group, generation_id=formed.generation, member_id=mid), HEARTBEAT_VERSION, timeout=60.0)
            for i, mid in enumerate(formed.plan)
        ))  # fmt: skip
    finally:
        for c in conns:
            c.close()
    codes: dict[int, int] = {}
    for a in answers:
        codes[a.error_code] = codes.get(a.error_code, 0) + 1
    return codes


async def describe(address: str, group: str) -> Any:
    """The group as DescribeGroups shows it (one described group)."""
    (conn,) = await _connections(address, 1)
    try:
        resp = await conn.request(m.DescribeGroupsRequest(groups=[group]), DESCRIBE_VERSION, timeout=60.0)
    finally:
        conn.close()
    return resp.groups[0]


async def resync(address: str, formed: FormedGroup, member_id: str) -> Any:
    """A member's SyncGroup at the formed generation in a Stable group: its stored assignment."""
    (conn,) = await _connections(address, 1)
    try:
        return await conn.request(m.SyncGroupRequest(
            group_id=formed.group, generation_id=formed.generation, member_id=member_id, assignments=[]),
            SYNC_VERSION, timeout=60.0)  # fmt: skip
    finally:
        conn.close()


async def wait_served(address: str, formed: FormedGroup, timeout: float = 120.0) -> float:
    """Seconds until the leader's Heartbeat answers anything but a loading/not-coordinator error."""
    started = time.monotonic()
    retriable = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
    while time.monotonic() - started < timeout:
        try:
            (conn,) = await _connections(address, 1)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        try:
            answer = await conn.request(m.HeartbeatRequest(
                group_id=formed.group, generation_id=formed.generation, member_id=formed.leader),
                HEARTBEAT_VERSION, timeout=timeout)  # fmt: skip
        finally:
            conn.close()
        if answer.error_code not in retriable:
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    raise TimeoutError(f"group {formed.group} not served within {timeout}s")
