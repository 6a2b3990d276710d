"""Cluster mode: this kcoord node as a member of a classic group on the upstream cluster.

The nodes of a kcoord cluster share the shards (the internal topic's partitions) through an
existing engine instead of a protocol of their own: each node joins the group
``kcoord-cluster.<internal topic>`` on the upstream Kafka cluster with the classic protocol
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup; protocol type ``consumer`` subscribed to the
internal topic, so Kafka's tools show which node holds which partition), as a static member
(``group.instance.id = kcoord-node-<coordinator.node.id>``: on Apache Kafka a node restarted
within ``cluster.session.timeout.ms`` gets its shards back with no rebalance). tansu 0.6's
coordinator mishandles static members (it answers their heartbeats UNKNOWN_MEMBER_ID and never
expires a dead one), so ``cluster.static.membership=false`` joins as a dynamic member there. The upstream's
group coordinator detects dead nodes and elects the leader; the leader runs
:func:`kcoord.coordinator.core.shard_assignment.assign_shards` over the members' claims.

What travels (JSON in the consumer protocol's user data):
- subscription: ``{"node", "host", "port", "shards", "started", "owned"}`` — the node's id, its
  advertised coordinator address, shard count, process start (ms) and the shards it holds now;
- assignment: ``{"generation", "owners", "nodes", "error"}`` plus the node's partitions —
  ``owners[shard]`` is the node serving that shard (for FindCoordinator on every node) and
  ``nodes`` every live node's address (for Metadata).

Invariants:
- A node serves only shards the latest SyncGroup gave it; shards it lost are released (stop
  serving at once, then drained) *before* it rejoins, and the leader gives a shard another live
  member still claims to nobody until that member released it (cooperative hand-off), so two
  nodes never both take a shard in the same generation. The per-shard transactional-id epoch
  (storage/ownership.py) stays the last line: a node that takes a shard fences the previous holder.
- A node that has not heard from the group coordinator for ``session.timeout - heartbeat.interval``
  releases every shard: the coordinator expires it after the full session timeout, and only then
  can the shards go to another node, so a node cut off from the upstream stops serving first.
- A node whose instance id was taken over (FENCED_INSTANCE_ID), or whose assignment carries an
  error (a duplicated node id, another shard count), releases everything and stops: ``on_fatal``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kcoord.client import Connection, KafkaClientError, connect
from kcoord.coordinator.core.shard_assignment import NO_OWNER, NodeClaim, assign_shards
from kcoord.protocol import messages as m
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode

log = logging.getLogger("kcoord.cluster")

PROTOCOL_TYPE = "consumer"
PROTOCOL_NAME = "kcoord-shards-v1"
SUBSCRIPTION_VERSION = 1  # ConsumerProtocolSubscription v1: topics, user data, owned partitions
ASSIGNMENT_VERSION = 1

VERSION_LIMITS: dict[type[Message], tuple[int, int]] = {
    m.FindCoordinatorRequest: (1, 3),  # one key per request
    m.JoinGroupRequest: (5, 9),  # v5: group.instance.id
    m.SyncGroupRequest: (3, 5),
    m.HeartbeatRequest: (3, 4),
    m.LeaveGroupRequest: (3, 5),  # v3: members by instance id
}

REJOIN = frozenset(
    {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}
)


def group_id_for(internal_topic: str) -> str:
    return f"kcoord-cluster.{internal_topic}"


def instance_id_for(node_id: int) -> str:
    return f"kcoord-node-{node_id}"


@dataclass(frozen=True)
class Ownership:
    """One generation's answer for this node."""

    generation: int
    shards: frozenset[int]  # the shards this node serves
    owners: tuple[int, ...]  # shard -> node id serving it (NO_OWNER: none)
    nodes: dict[int, tuple[str, int]]  # live node id -> advertised coordinator (host, port)


class _Rediscover(Exception):
    """The coordinator moved or the connection broke: find it again."""


class _Fatal(Exception):
    """This node must stop serving for good (its node id was taken, or the cluster refused it)."""


class ClusterMembership:
    def __init__(
        self,
        bootstrap: list[tuple[str, int]],
        *,
        node_id: int,
        advertised: tuple[str, int],
        internal_topic: str,
        num_shards: int,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        static_membership: bool = True,
        apply: Callable[[Ownership], Awaitable[None]],
        on_fatal: Callable[[str], None],
    ) -> None:
        self.bootstrap = bootstrap
        self.node_id = node_id
        self.advertised = advertised
        self.topic = internal_topic
        self.num_shards = num_shards
        self.group_id = group_id_for(internal_topic)
        self.instance_id = instance_id_for(node_id) if static_membership else None
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self._apply = apply
        self._on_fatal = on_fatal
        self.started_ms = int(time.time() * 1000)
        self.member_id = ""
        self.generation = -1
        self.owned: frozenset[int] = frozenset()
        self.ownership = Ownership(-1, frozenset(), (NO_OWNER,) * num_shards, {node_id: advertised})
        self.rebalances = 0  # completed SyncGroups (generations this node took part in)
        self._conn: Connection | None = None
        self._last_contact = time.monotonic()  # last answer from the group coordinator
        self._task: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._stopping = False
        self._joining = False
        self._applying = asyncio.Lock()

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run())
        self._watchdog = loop.create_task(self._watch_contact())

    async def stop(self) -> None:
        """Release every shard (drained), then leave the group so the others take them at once."""
        self._stopping = True
        for task in (self._task, self._watchdog):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        log.info("cluster: stopping: this node releases every shard and leaves group %s", self.group_id)
        await self._set(self._nothing())
        conn = self._conn
        if conn is not None and not conn.closed and self.member_id:
            identity = m.LeaveGroupRequest.MemberIdentity(
                member_id=self.member_id, group_instance_id=self.instance_id, reason="kcoord node stopping"
            )
            with contextlib.suppress(KafkaClientError, OSError, TimeoutError):
                await conn.request(
                    m.LeaveGroupRequest(group_id=self.group_id, members=[identity]),
                    timeout=5.0,
                )
                log.info("cluster: left group %s (member %s)", self.group_id, self.member_id)
        if conn is not None:
            conn.close()

    # -- the member loop ------------------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = 0.1
        while not self._stopping:
            try:
                conn = await self._coordinator()
                while True:
                    await self._join_and_sync(conn)
                    backoff = 0.1
                    await self._heartbeat_until_rebalance(conn)
            except _Fatal as exc:
                log.error("cluster: %s; this node releases every shard and stops", exc)
                await self._set(self._nothing())
                self._on_fatal(str(exc))
                return
            except (_Rediscover, KafkaClientError, OSError, TimeoutError) as exc:
                log.warning(
                    "cluster: group coordinator of %s: %s; finding it again in %.1f s",
                    self.group_id,
                    exc,
                    backoff,
                )
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    async def _coordinator(self) -> Connection:
        last: Exception | None = None
        for address in self.bootstrap:
            try:
                conn = await connect(address, timeout=5.0, request_timeout=10.0, limits=VERSION_LIMITS)
            except (KafkaClientError, OSError, TimeoutError) as exc:
                last = exc
                continue
            try:
                resp = await conn.request(
                    m.FindCoordinatorRequest(key=self.group_id, key_type=0), timeout=10.0
                )
            finally:
                conn.close()
            if resp.error_code != ErrorCode.NONE:
                raise _Rediscover(f"FindCoordinator error {resp.error_code}")
            coordinator = await connect(
                (resp.host, resp.port),
                timeout=5.0,
                request_timeout=self.session_timeout_ms / 1000 + 30,
                limits=VERSION_LIMITS,
            )
            self._conn = coordinator
            return coordinator
        raise _Rediscover(f"no upstream broker reachable at {self.bootstrap}: {last}")

    def _metadata(self) -> bytes:
        user_data = json.dumps(
            {
                "node": self.node_id,
                "host": self.advertised[0],
                "port": self.advertised[1],
                "shards": self.num_shards,
                "started": self.started_ms,
                "owned": sorted(self.owned),
            }
        ).encode()
        TP = m.ConsumerProtocolSubscription.TopicPartition
        body = m.ConsumerProtocolSubscription(
            topics=[self.topic],
            user_data=user_data,
            owned_partitions=[TP(topic=self.topic, partitions=sorted(self.owned))] if self.owned else [],
        )
        return SUBSCRIPTION_VERSION.to_bytes(2, "big") + body.encode(SUBSCRIPTION_VERSION)

    async def _join_and_sync(self, conn: Connection) -> None:
        # Parked in a rebalance (a JoinGroup waiting for the others, a SyncGroup for the leader): the
        # coordinator does not expire a member there, so the contact watchdog does not count it.
        self._joining = True
        try:
            await self._join_and_sync_once(conn)
        finally:
            self._joining = False

    async def _join_and_sync_once(self, conn: Connection) -> None:
        while True:
            join = await conn.request(
                m.JoinGroupRequest(
                    group_id=self.group_id,
                    session_timeout_ms=self.session_timeout_ms,
                    rebalance_timeout_ms=self.session_timeout_ms,
                    member_id=self.member_id,
                    group_instance_id=self.instance_id,
                    protocol_type=PROTOCOL_TYPE,
                    protocols=[
                        m.JoinGroupRequest.JoinGroupRequestProtocol(
                            name=PROTOCOL_NAME, metadata=self._metadata()
                        )
                    ],
                    reason="kcoord node joining",
                )
            )
            self._contact()
            log.debug(
                "cluster: JoinGroup: error %d, generation %d, member %s, leader %s, %d members",
                join.error_code,
                join.generation_id,
                join.member_id,
                join.leader,
                len(join.members),
            )
            error = join.error_code
            if error == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = join.member_id
                continue
            if error == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if error == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            self._check(error, "JoinGroup")
            self.member_id, generation = join.member_id, join.generation_id
            assignments: list[Any] = []
            if join.leader == join.member_id:
                assignments = self._lead(join.members, generation)
            sync = await conn.request(
                m.SyncGroupRequest(
                    group_id=self.group_id,
                    generation_id=generation,
                    member_id=self.member_id,
                    group_instance_id=self.instance_id,
                    protocol_type=PROTOCOL_TYPE,
                    protocol_name=PROTOCOL_NAME,
                    assignments=assignments,
                )
            )
            self._contact()
            log.debug("cluster: SyncGroup: error %d", sync.error_code)
            if sync.error_code in REJOIN:
                if sync.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                continue
            self._check(sync.error_code, "SyncGroup")
            self.generation = generation
            self.rebalances += 1
            revoked = await self._take(sync.assignment, generation)
            if not revoked:
                return
            # Released shards go to their new owners only in a later generation: start it now.
            log.info("cluster: released shards %s; rejoining so their new owners get them", sorted(revoked))

    def _check(self, error: int, api: str) -> None:
        if error == ErrorCode.NONE:
            return
        if error == ErrorCode.FENCED_INSTANCE_ID:
            raise _Fatal(
                f"another process joined the kcoord cluster with this node's id {self.node_id} "
                f"(group.instance.id {self.instance_id}): {api} answered FENCED_INSTANCE_ID"
            )
        if error == ErrorCode.INVALID_SESSION_TIMEOUT:
            # Apache Kafka refuses a session outside group.min/max.session.timeout.ms (6 s..30 min by
            # default; tansu 0.6 takes any): no retry can succeed, so say so instead of looping.
            raise _Fatal(
                f"the upstream refuses cluster.session.timeout.ms={self.session_timeout_ms}: {api} answered "
                "INVALID_SESSION_TIMEOUT (outside its group.min.session.timeout.ms..group.max.session.timeout.ms)"
            )
        # NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and the like: the coordinator moved; anything
        # else is retried the same way, with back-off, and logged each time.
        raise _Rediscover(f"{api} error {error}")

    def _lead(self, members: list[Any], generation: int) -> list[Any]:
        """As the group's leader: assign the shards over every member's claim."""
        claims: list[NodeClaim] = []
        unreadable: list[str] = []
        for member in members:
            claim = _decode_claim(member.member_id, member.metadata)
            if claim is None:
                unreadable.append(member.member_id)
            else:
                claims.append(claim)
        result = assign_shards(claims, self.num_shards)
        A = m.SyncGroupRequest.SyncGroupRequestAssignment
        out = []
        for member_id in unreadable:  # not a kcoord node of this version: it gets no shard
            out.append(
                A(
                    member_id=member_id,
                    assignment=self._encode_assignment(generation, set(), result, "unreadable claim"),
                )
            )
        for claim in claims:
            assigned = result.members[claim.member_id]
            out.append(
                A(
                    member_id=claim.member_id,
                    assignment=self._encode_assignment(generation, assigned.shards, result, assigned.error),
                )
            )
        log.info(
            "cluster: generation %d assigned by this node (leader): %s",
            generation,
            ", ".join(f"node {c.node_id}: {len(result.members[c.member_id].shards)}" for c in claims),
        )
        return out

    def _encode_assignment(self, generation: int, shards: set[int], result: Any, error: str | None) -> bytes:
        user_data = json.dumps(
            {
                "generation": generation,
                "owners": result.owners,
                "nodes": {str(n): list(a) for n, a in result.nodes.items()},
                "error": error,
            }
        ).encode()
        TP = m.ConsumerProtocolAssignment.TopicPartition
        body = m.ConsumerProtocolAssignment(
            assigned_partitions=[TP(topic=self.topic, partitions=sorted(shards))],
            user_data=user_data,
        )
        return ASSIGNMENT_VERSION.to_bytes(2, "big") + body.encode(ASSIGNMENT_VERSION)

    async def _take(self, data: bytes, generation: int) -> frozenset[int]:
        """Apply this generation's assignment; returns the shards this node had to give up."""
        try:
            version = int.from_bytes(data[:2], "big", signed=True)
            body, _ = m.ConsumerProtocolAssignment.decode_from(data, 2, min(max(version, 0), 3))
            info = json.loads(body.user_data or b"{}")
            shards = frozenset(
                p for tp in body.assigned_partitions if tp.topic == self.topic for p in tp.partitions
            )
            owners = tuple(int(o) for o in info["owners"])
            nodes = {int(n): (str(a[0]), int(a[1])) for n, a in info["nodes"].items()}
        except Exception as exc:  # a leader of another version, or not a kcoord node at all
            raise _Fatal(
                f"unreadable assignment from the cluster's leader in generation {generation}: {exc!r}"
            ) from exc
        if info.get("error"):
            raise _Fatal(f"the cluster refused this node: {info['error']}")
        if len(owners) != self.num_shards:
            raise _Fatal(f"the cluster's leader runs {len(owners)} shards, this node {self.num_shards}")
        revoked = self.owned - shards
        log.info(
            "cluster: generation %d: this node (id %d) serves %d shards%s%s; nodes %s",
            generation,
            self.node_id,
            len(shards),
            f", gains {sorted(shards - self.owned)}" if shards - self.owned else "",
            f", loses {sorted(revoked)}" if revoked else "",
            sorted(nodes),
        )
        await self._set(Ownership(generation, shards, owners, nodes))
        return revoked

    def _nothing(self) -> Ownership:
        """This node serves no shard and, as far as it knows, nobody serves the ones it held:
        FindCoordinator here answers COORDINATOR_NOT_AVAILABLE for them until a generation says more."""
        owners = tuple(NO_OWNER if o == self.node_id else o for o in self.ownership.owners)
        nodes = {n: a for n, a in self.ownership.nodes.items() if n != self.node_id}
        return Ownership(self.generation, frozenset(), owners, nodes)

    async def _set(self, ownership: Ownership) -> None:
        async with self._applying:
            self.ownership = ownership
            self.owned = ownership.shards
            await self._apply(ownership)

    async def _heartbeat_until_rebalance(self, conn: Connection) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            resp = await conn.request(
                m.HeartbeatRequest(
                    group_id=self.group_id,
                    generation_id=self.generation,
                    member_id=self.member_id,
                    group_instance_id=self.instance_id,
                )
            )
            self._contact()
            if resp.error_code in REJOIN:
                log.info("cluster: Heartbeat answered error %d: rejoining", resp.error_code)
                if resp.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                return
            self._check(resp.error_code, "Heartbeat")

    # -- cut off from the upstream --------------------------------------------------------------------
    def _contact(self) -> None:
        self._last_contact = time.monotonic()

    async def _watch_contact(self) -> None:
        """Release every shard before the coordinator can expire this node and give them away;
        report a wall-clock jump (see :func:`clock_jump_ms`)."""
        limit = max(self.session_timeout_ms / 1000 - self.heartbeat_interval, self.heartbeat_interval)
        wall, mono = time.time(), time.monotonic()
        while True:
            await asyncio.sleep(min(self.heartbeat_interval, 1.0) / 2)
            wall_now, mono_now = time.time(), time.monotonic()
            jump = clock_jump_ms(wall, mono, wall_now, mono_now)
            wall, mono = wall_now, mono_now
            if abs(jump) >= CLOCK_JUMP_REPORT_MS:
                log.error(
                    "cluster: this node's wall clock jumped %+d ms. Shard ownership does not depend on it (the "
                    "group's session and the watchdog run on the monotonic clock, the fencing on producer epochs), "
                    "so no other node's shard is served; but group session timers and commit timestamps on this "
                    "node follow the wall clock, as Kafka's do: fix the clock (NTP)",
                    jump,
                )
            silent = time.monotonic() - self._last_contact
            if silent > limit and self.owned and not self._joining:
                log.error(
                    "cluster: no answer from the group coordinator for %.1f s (session timeout %d ms): this node "
                    "stops serving its %d shards before the cluster gives them to another node",
                    silent,
                    self.session_timeout_ms,
                    len(self.owned),
                )
                await self._set(self._nothing())


CLOCK_JUMP_REPORT_MS = 1000  # a wall clock that moves this much more (or less) than the monotonic one jumped


def clock_jump_ms(wall_before: float, mono_before: float, wall_now: float, mono_now: float) -> int:
    """How far the wall clock moved beyond the monotonic clock between two readings (ms; negative:
    backwards). Both in seconds, as time.time() and time.monotonic() give them."""
    return round(((wall_now - wall_before) - (mono_now - mono_before)) * 1000)


def _decode_claim(member_id: str, metadata: bytes) -> NodeClaim | None:
    try:
        version = int.from_bytes(metadata[:2], "big", signed=True)
        body, _ = m.ConsumerProtocolSubscription.decode_from(metadata, 2, min(max(version, 0), 3))
        info = json.loads(body.user_data or b"{}")
        return NodeClaim(
            member_id=member_id,
            node_id=int(info["node"]),
            host=str(info["host"]),
            port=int(info["port"]),
            shards=int(info["shards"]),
            started_ms=int(info["started"]),
            owned=frozenset(int(s) for s in info.get("owned", [])),
        )
    except Exception as exc:
        log.warning(
            "cluster: member %s sent a claim this node cannot read (%r); it gets no shard", member_id, exc
        )
        return None
