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
- A node serves its shards only while its :class:`Lease` holds: ``session.timeout -
  heartbeat.interval`` after sending the last request whose answer proves the coordinator extended
  its session (a JoinGroup, SyncGroup or Heartbeat answered NONE; a Heartbeat answered
  REBALANCE_IN_PROGRESS, which Kafka's coordinator answers after extending it). The coordinator
  expires it a full session timeout after it extended the session, at or after that send, and
  only then can the shards go to another node: a node cut off, stalled or paused stops first,
  whatever its membership is doing. The router checks the lease on every request (after a
  SIGSTOP the event loop may read clients before any task of this module runs); the watchdog
  then releases every shard. While a JoinGroup or SyncGroup is parked at the coordinator (its
  connection answers nothing else meanwhile) Heartbeats on a second connection keep the lease,
  so a long legitimate rebalance does not cost the shards.
- A node serves no shard from memory it may not own: released shards are loaded again from the
  log when given back (which re-takes the per-shard transactional id and fences any interim
  owner); an assignment that arrives after the lease ran out (this process was paused or cut
  off after the coordinator answered) is not applied; a generation that follows a gap (the
  cluster completed one without this node) releases the shards kept, so they reload; an answer
  saying this member is unknown releases everything. A shard its log says another node fenced
  is released and this node rejoins, so the cluster gives it again (and it reloads) or to another.
- A node whose instance id was taken over (FENCED_INSTANCE_ID), or whose assignment carries an
  error (a duplicated node id, another shard count), releases everything and stops: ``on_fatal``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kcoord.client import PLAINTEXT, Connection, KafkaClientError, UpstreamSecurity, connect
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


class Lease:
    """Until when this node may serve the shards the cluster gave it (module docstring).

    Pure: readings of ``time.monotonic()`` (or a test's clock) go in, nothing is read here.
    ``deadline`` is public so the router's per-request check is one comparison.
    """

    __slots__ = ("deadline", "duration")

    def __init__(self, duration: float) -> None:
        self.duration = duration  # session timeout minus one heartbeat interval, in seconds
        self.deadline = -math.inf  # nothing may be served before the first contact

    def contact(self, sent_at: float) -> None:
        """The coordinator extended this member's session answering a request sent at ``sent_at``
        (the send time, not the answer's: an answer may sit in a socket for as long as the
        process is paused, while the session runs out)."""
        deadline = sent_at + self.duration
        if deadline > self.deadline:
            self.deadline = deadline

    def revoke(self) -> None:
        """The coordinator says this member is gone: nothing may be served until the next contact."""
        self.deadline = -math.inf

    def valid(self, now: float) -> bool:
        return now < self.deadline


class CoordinatorNotFound(Exception):
    """No bootstrap broker answered, or FindCoordinator answered an error."""


async def connect_group_coordinator(
    bootstrap: list[tuple[str, int]],
    group_id: str,
    security: UpstreamSecurity,
    *,
    connect_timeout: float,
    find_timeout: float,
    request_timeout: float,
) -> tuple[Connection, tuple[str, int]]:
    """A connection to ``group_id``'s coordinator (and its address), found with FindCoordinator on
    the first bootstrap broker that answers; ``request_timeout`` is the new connection's."""
    last: Exception | None = None
    for address in bootstrap:
        try:
            conn = await connect(
                address,
                timeout=connect_timeout,
                request_timeout=find_timeout,
                limits=VERSION_LIMITS,
                security=security,
            )
        except (KafkaClientError, OSError, TimeoutError) as exc:
            last = exc
            continue
        try:
            resp = await conn.request(
                m.FindCoordinatorRequest(key=group_id, key_type=0), timeout=find_timeout
            )
        finally:
            conn.close()
        if resp.error_code != ErrorCode.NONE:
            raise CoordinatorNotFound(f"FindCoordinator for {group_id} answered error {resp.error_code}")
        coordinator = await connect(
            (resp.host, resp.port),
            timeout=connect_timeout,
            request_timeout=request_timeout,
            limits=VERSION_LIMITS,
            security=security,
        )
        return coordinator, (resp.host, resp.port)
    raise CoordinatorNotFound(f"no upstream broker reachable at {bootstrap}: {last}")


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
        security: UpstreamSecurity = PLAINTEXT,
    ) -> None:
        self.bootstrap = bootstrap
        self.security = security  # TLS and kcoord's own SASL login to the upstream brokers
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
        self._member_id = ""
        # Told each new member id ("" once the coordinator forgot this member): a worker tells its
        # supervisor, which removes a dead worker from the group by it.
        self.on_member_id: Callable[[str], None] | None = None
        self.generation = -1
        self.owned: frozenset[int] = frozenset()
        self.ownership = Ownership(-1, frozenset(), (NO_OWNER,) * num_shards, {node_id: advertised})
        self.rebalances = 0  # completed SyncGroups (generations this node took part in)
        self._conn: Connection | None = None
        self._coordinator_address: tuple[str, int] | None = None
        self._keepalive_conn: Connection | None = None  # Heartbeats while a JoinGroup/SyncGroup is parked
        self.lease = Lease(max(session_timeout_ms / 1000 - self.heartbeat_interval, self.heartbeat_interval))
        # The generation of the last JoinGroup this member completed: one more than that is the
        # next; anything else means the cluster completed a generation without this node.
        self.joined_generation = -1
        self._lapse_noticed = asyncio.Event()  # the router saw the lease run out: release now
        self._rejoin_requested = asyncio.Event()  # a shard was fenced: rejoin without it
        self._task: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._stopping = False
        self._applying = asyncio.Lock()
        self._now: Callable[[], float] = time.monotonic  # the lease's clock; tests inject their own

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
        conn = await self._leave_connection()
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
        self._close_keepalive()

    async def _leave_connection(self) -> Connection | None:
        """The connection to send the LeaveGroup on: the coordinator connection, or a new one when
        a JoinGroup or SyncGroup is still parked on it (answers come in order, so the LeaveGroup
        would wait out the rest of the rebalance: seconds of shutdown, half the session timeout on
        tansu)."""
        conn = self._conn
        if conn is None or conn.closed or not conn.in_flight or self._coordinator_address is None:
            return conn
        conn.close()
        try:
            self._conn = await connect(
                self._coordinator_address,
                timeout=5.0,
                request_timeout=5.0,
                limits=VERSION_LIMITS,
                security=self.security,
            )
        except (KafkaClientError, OSError, TimeoutError):
            self._conn = None  # no LeaveGroup: the session times out instead
        return self._conn

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
                self._close_keepalive()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    async def _coordinator(self) -> Connection:
        try:
            coordinator, address = await connect_group_coordinator(
                self.bootstrap,
                self.group_id,
                self.security,
                connect_timeout=5.0,
                find_timeout=10.0,
                request_timeout=self.session_timeout_ms / 1000 + 30,
            )
        except CoordinatorNotFound as exc:
            raise _Rediscover(str(exc)) from None
        self._conn = coordinator
        self._coordinator_address = address
        return coordinator

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
        self._rejoin_requested.clear()
        while True:
            claimed = self.owned  # what this JoinGroup's metadata claims: what the leader sees
            sent_at = self._now()
            join = await self._parked(
                conn,
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
                ),
            )
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
                await self._gone("JoinGroup answered UNKNOWN_MEMBER_ID")
                continue
            if error == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            self._check(error, "JoinGroup")
            self.lease.contact(sent_at)  # the join completed with this member in it
            self.member_id, generation = join.member_id, join.generation_id
            # The same generation again: a follower rejoining a Stable group unchanged is answered
            # with it (Kafka); the next one: a rebalance this member took part in throughout.
            previous = self.joined_generation
            missed = previous >= 0 and generation not in (previous, previous + 1)
            self.joined_generation = generation
            assignments: list[Any] = []
            if join.leader == join.member_id:
                assignments = self._lead(join.members, generation)
            sent_at = self._now()
            sync = await self._parked(
                conn,
                m.SyncGroupRequest(
                    group_id=self.group_id,
                    generation_id=generation,
                    member_id=self.member_id,
                    group_instance_id=self.instance_id,
                    protocol_type=PROTOCOL_TYPE,
                    protocol_name=PROTOCOL_NAME,
                    assignments=assignments,
                ),
            )
            log.debug("cluster: SyncGroup: error %d", sync.error_code)
            if sync.error_code in REJOIN:
                if sync.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                    await self._gone("SyncGroup answered UNKNOWN_MEMBER_ID")
                continue
            self._check(sync.error_code, "SyncGroup")
            self.lease.contact(sent_at)
            if not self.lease.valid(self._now()):
                # Answered, but read only after the lease ran out (this process was paused or cut
                # off meanwhile): the cluster may have moved on since, so this assignment is not
                # applied; rejoin and learn what holds now.
                log.error(
                    "cluster: generation %d's assignment arrived %.1f s after its SyncGroup was sent, past this "
                    "node's lease; it releases every shard and rejoins",
                    generation,
                    self._now() - sent_at,
                )
                await self._set(self._nothing())
                continue
            if missed and self.owned:
                log.warning(
                    "cluster: generation %d follows a gap (this node's last was %d): the cluster may have given "
                    "its shards %s to another node meanwhile; this node releases every shard and reloads those "
                    "it is given",
                    generation,
                    previous,
                    sorted(self.owned),
                )
                await self._set(self._nothing())
            self.generation = generation
            self.rebalances += 1
            revoked = await self._take(sync.assignment, generation, claimed)
            if not revoked:
                return
            # Released shards go to their new owners only in a later generation: start it now.
            # Also when this node had dropped them already (after its JoinGroup was sent): the
            # leader saw them claimed and gave them to nobody, and only a new claim without them
            # lets the next generation give them out.
            log.info("cluster: released shards %s; rejoining so their new owners get them", sorted(revoked))

    async def _parked(self, conn: Connection, request: Message) -> Any:
        """A JoinGroup or SyncGroup, which the coordinator may hold for a whole rebalance; its
        connection answers nothing else meanwhile (a broker handles one request per connection at
        a time), so Heartbeats on a second one keep the lease while it waits."""
        answer: asyncio.Future[Any] = conn.request(request)
        if not self.member_id or not self.owned:  # nothing to keep: no lease to extend
            return await answer
        keepalive = asyncio.ensure_future(self._keep_alive_while_parked())
        try:
            return await answer
        finally:
            await _end(keepalive)

    async def _keep_alive_while_parked(self) -> None:
        """Heartbeats with the latest generation this member joined, every heartbeat interval.

        Kafka's coordinator extends the session of a member that heartbeats while the group is
        PreparingRebalance (and answers REBALANCE_IN_PROGRESS) or CompletingRebalance (NONE);
        one whose generation is over is answered ILLEGAL_GENERATION and not extended. These are
        sent only after this member's JoinGroup: a dynamic member that had not rejoined when the
        join phase completed is removed from the group whatever it heartbeated.
        """
        address = self._coordinator_address
        if address is None:
            return
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            conn = self._keepalive_conn
            try:
                if conn is None or conn.closed:
                    conn = self._keepalive_conn = await connect(
                        address,
                        timeout=5.0,
                        request_timeout=self.heartbeat_interval * 4,
                        limits=VERSION_LIMITS,
                        security=self.security,
                    )
                sent_at = self._now()
                resp = await conn.request(
                    m.HeartbeatRequest(
                        group_id=self.group_id,
                        generation_id=self.joined_generation,
                        member_id=self.member_id,
                        group_instance_id=self.instance_id,
                    )
                )
            except (KafkaClientError, OSError, TimeoutError) as exc:
                log.debug("cluster: heartbeat while parked failed: %r", exc)
                self._close_keepalive()
                continue
            log.debug("cluster: heartbeat while parked: error %d", resp.error_code)
            if resp.error_code in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS):
                self.lease.contact(sent_at)
            elif resp.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                self.lease.revoke()  # out of the group: the watchdog releases the shards now
                self._lapse_noticed.set()

    @property
    def member_id(self) -> str:
        return self._member_id

    @member_id.setter
    def member_id(self, value: str) -> None:
        if value != self._member_id:
            self._member_id = value
            if self.on_member_id is not None:
                self.on_member_id(value)

    def _close_keepalive(self) -> None:
        if self._keepalive_conn is not None:
            self._keepalive_conn.close()
            self._keepalive_conn = None

    async def _gone(self, why: str) -> None:
        """The coordinator no longer knows this member: the cluster may give its shards to others."""
        self.member_id = ""
        self.lease.revoke()
        if self.owned:
            log.error("cluster: %s: this node is out of the group and releases every shard", why)
            await self._set(self._nothing())

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
                    assignment=self._encode_assignment(generation, set(), set(), result, "unreadable claim"),
                )
            )
        for claim in claims:
            assigned = result.members[claim.member_id]
            out.append(
                A(
                    member_id=claim.member_id,
                    assignment=self._encode_assignment(
                        generation, assigned.shards, assigned.release, result, assigned.error
                    ),
                )
            )
        log.info(
            "cluster: generation %d assigned by this node (leader): %s",
            generation,
            ", ".join(
                f"node {c.node_id}: {len(result.members[c.member_id].shards)}"
                + (f" (releases {sorted(r)} first)" if (r := result.members[c.member_id].release) else "")
                for c in claims
            ),
        )
        return out

    def _encode_assignment(
        self, generation: int, shards: set[int], release: set[int], result: Any, error: str | None
    ) -> bytes:
        user_data = json.dumps(
            {
                "generation": generation,
                "owners": result.owners,
                "nodes": {str(n): list(a) for n, a in result.nodes.items()},
                "error": error,
                "release": sorted(release),
            }
        ).encode()
        TP = m.ConsumerProtocolAssignment.TopicPartition
        body = m.ConsumerProtocolAssignment(
            assigned_partitions=[TP(topic=self.topic, partitions=sorted(shards))],
            user_data=user_data,
        )
        return ASSIGNMENT_VERSION.to_bytes(2, "big") + body.encode(ASSIGNMENT_VERSION)

    async def _take(
        self, data: bytes, generation: int, claimed: frozenset[int] = frozenset()
    ) -> frozenset[int]:
        """Apply this generation's assignment; returns the shards this node must be seen to give up
        before the cluster gives them out: those it held and lost, those its JoinGroup claimed
        (``claimed``) and was not given, and those the leader says it claimed and must release
        (a leader of an older version sends no such list)."""
        try:
            version = int.from_bytes(data[:2], "big", signed=True)
            body, _ = m.ConsumerProtocolAssignment.decode_from(data, 2, min(max(version, 0), 3))
            info = json.loads(body.user_data or b"{}")
            shards = frozenset(
                p for tp in body.assigned_partitions if tp.topic == self.topic for p in tp.partitions
            )
            owners = tuple(int(o) for o in info["owners"])
            nodes = {int(n): (str(a[0]), int(a[1])) for n, a in info["nodes"].items()}
            release = frozenset(int(s) for s in info.get("release") or [])
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
        return revoked | ((claimed | release) - shards)

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
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rejoin_requested.wait(), self.heartbeat_interval)
            if self._rejoin_requested.is_set():
                return
            sent_at = self._now()
            resp = await conn.request(
                m.HeartbeatRequest(
                    group_id=self.group_id,
                    generation_id=self.generation,
                    member_id=self.member_id,
                    group_instance_id=self.instance_id,
                )
            )
            if resp.error_code in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS):
                self.lease.contact(sent_at)
            if resp.error_code in REJOIN:
                log.info("cluster: Heartbeat answered error %d: rejoining", resp.error_code)
                if resp.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                    await self._gone("Heartbeat answered UNKNOWN_MEMBER_ID")
                return
            self._check(resp.error_code, "Heartbeat")

    # -- the lease; shards lost to another node --------------------------------------------------------
    def lease_lapsed(self) -> None:
        """The router refused a request because the lease ran out: release the shards now."""
        self._lapse_noticed.set()

    def shard_fenced(self, shard: int) -> None:
        """The shard's log says another node took it while the cluster still names this one: stop
        claiming it and rejoin, so the cluster gives it again (this node then reloads it from the
        log) or to the node that holds it."""
        if shard not in self.owned:
            return
        log.error(
            "cluster: shard %d was fenced by another node while this node was assigned it; it releases the "
            "shard and rejoins",
            shard,
        )
        asyncio.get_running_loop().create_task(self._drop(shard))

    async def _drop(self, shard: int) -> None:
        ownership = self.ownership
        if shard not in ownership.shards:
            return
        owners = tuple(NO_OWNER if i == shard else o for i, o in enumerate(ownership.owners))
        kept = ownership.shards - {shard}
        # The same line as a generation's, so tools reading the log follow who holds what.
        log.info(
            "cluster: generation %d: this node (id %d) serves %d shards, loses [%d]; nodes %s",
            ownership.generation,
            self.node_id,
            len(kept),
            shard,
            sorted(ownership.nodes),
        )
        await self._set(Ownership(ownership.generation, kept, owners, ownership.nodes))
        self._rejoin_requested.set()

    async def _watch_contact(self) -> None:
        """Release every shard once the lease ran out, whatever the member loop is doing (parked in
        a JoinGroup included); report a wall-clock jump (see :func:`clock_jump_ms`)."""
        wall, mono = time.time(), time.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._lapse_noticed.wait(), min(self.heartbeat_interval, 1.0) / 2)
            self._lapse_noticed.clear()
            wall_now, mono_now = time.time(), time.monotonic()
            jump = clock_jump_ms(wall, mono, wall_now, mono_now)
            wall, mono = wall_now, mono_now
            if abs(jump) >= CLOCK_JUMP_REPORT_MS:
                log.error(
                    "cluster: this node's wall clock jumped %+d ms. Shard ownership does not depend on it (the "
                    "group's session and the lease run on the monotonic clock, the fencing on producer epochs), "
                    "so no other node's shard is served; but group session timers and commit timestamps on this "
                    "node follow the wall clock, as Kafka's do: fix the clock (NTP)",
                    jump,
                )
            if self.owned and not self.lease.valid(self._now()):
                if self.lease.deadline == -math.inf:
                    why = "the group coordinator no longer knows this member"
                else:
                    silent = self._now() - (self.lease.deadline - self.lease.duration)
                    why = f"no answer from the group coordinator that extends this node's session for {silent:.1f} s"
                log.error(
                    "cluster: %s (session timeout %d ms): this node releases every shard (%d) before the "
                    "cluster can give them to another node",
                    why,
                    self.session_timeout_ms,
                    len(self.owned),
                )
                await self._set(self._nothing())
                # The coordinator may not have expired this member (the lease ends first): its
                # assignment would still name this node for the shards it no longer serves.
                self._rejoin_requested.set()


async def _end(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` and wait until it has ended, cancelling it again while it runs.

    Once is not enough on Python 3.11: ``asyncio.wait_for`` (under ``connect``) drops a cancellation
    that arrives as the operation it waits for completes (fixed in 3.12), and the task goes on. The
    keep-alive then heartbeated on while the member loop waited for it, with a JoinGroup's answer
    in hand: a SASL_SSL cluster test saw a node's rebalance stall that way for a minute. The
    caller's own cancellation still propagates (``asyncio.wait`` does not swallow it).
    """
    try:
        while not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=0.1)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not task.cancelled() and task.exception() is not None:
        log.debug("cluster: heartbeat while parked ended with %r", task.exception())


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
