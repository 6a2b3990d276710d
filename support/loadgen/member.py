"""One simulated consumer-group member: the classic protocol's client side, as a state machine.

Why a state machine with pure ``on_*`` methods: the decisions (what to do with MEMBER_ID_REQUIRED,
REBALANCE_IN_PROGRESS, a static leader's SkipAssignment, ...) are what makes the load realistic,
and they can be tested against canned responses without sockets. The only coroutine,
:meth:`Member.join`, drives JoinGroup v9 and SyncGroup v5 over a ``Caller`` (a connection the member
holds alone while it joins, because a Kafka server answers a connection's requests in order and a
parked JoinGroup would hold back everything behind it). Heartbeats and commits are built here but
sent by the runtime over shared, pipelined connections.

Behaviour follows the Java consumer (eager protocol): a member revokes everything before it
rejoins; UNKNOWN_MEMBER_ID clears the member id; a static member (group.instance.id) sends no
LeaveGroup when it closes, so a quick restart is invisible to the group (KIP-345).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E

from .assignor import (
    MemberSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    range_assign,
)

JOIN_VERSION = 9
SYNC_VERSION = 5
HEARTBEAT_VERSION = 4
COMMIT_VERSION = 9
LEAVE_VERSION = 5

_RETRIABLE_COORDINATOR = {E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR}


class Caller(Protocol):
    def call(self, request: Any, version: int | None = None) -> Awaitable[Any]: ...


class State(enum.Enum):
    UNJOINED = "unjoined"
    JOINING = "joining"
    STABLE = "stable"
    STOPPED = "stopped"


class Next(enum.Enum):
    """What the member does after a response."""

    OK = "ok"  # carry on (stable, or the response needs nothing)
    SYNC = "sync"  # JoinGroup succeeded: send SyncGroup
    RETRY = "retry"  # send the JoinGroup again at once (member id changed)
    BACKOFF = "backoff"  # coordinator busy: retry after a pause
    REJOIN = "rejoin"  # leave the stable state and join again


class JoinFailed(RuntimeError):
    """A non-retriable error, or too many attempts."""


class MemberListener:
    """Hooks the scenarios use to observe members; all no-ops here."""

    def join_sent(self, member: Member, has_member_id: bool) -> None:
        pass

    def joined(self, member: Member) -> None:
        """JoinGroup succeeded (the rebalance this member waited for completed)."""

    def assigned(self, member: Member) -> None:
        """SyncGroup gave the member its assignment: it owns ``member.partitions()`` now."""

    def revoked(self, member: Member, partitions: list[tuple[str, int]]) -> None:
        """The member gave up these partitions (rejoin or close)."""


class Member:
    """A consumer in group ``group_id`` subscribed to ``topics``; static if ``instance_id`` is set."""

    def __init__(
        self,
        index: int,
        group_id: str,
        topics: Sequence[str],
        partitions_per_topic: Mapping[str, int],
        instance_id: str | None = None,
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 30_000,
        client_id: str = "kcoord-loadgen",
        listener: MemberListener | None = None,
        max_join_attempts: int = 100,
    ) -> None:
        self.index = index
        self.group_id = group_id
        self.topics = tuple(topics)
        self.partitions_per_topic = dict(partitions_per_topic)
        self.instance_id = instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.client_id = client_id
        self.listener = listener or MemberListener()
        self.max_join_attempts = max_join_attempts
        self.subscription = encode_subscription(self.topics)
        self.state = State.UNJOINED
        self.member_id = ""
        self.generation = -1
        self.leader_id = ""
        self.protocol_name = "range"
        self.assignment: dict[str, list[int]] = {}
        self.join_calls = 0
        self.sync_calls = 0
        self.generations_seen: list[int] = []
        # runtime fields (owned by the runtime, kept here to avoid a dict lookup per heartbeat)
        self.conn: Any = None
        self.hb_frame: bytearray | None = None
        self.hb_inflight = False
        self.hb_callback: Any = None
        self.hb_sent_generation = -1
        self.rejoining = False
        self.committer = False
        self.commit_offset = 0
        self.commit_inflight = False
        self.commit_callback: Any = None

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id

    def partitions(self) -> list[tuple[str, int]]:
        return [(t, p) for t, parts in sorted(self.assignment.items()) for p in parts]

    # -- join and sync --------------------------------------------------------------------------------
    def join_request(self) -> Any:
        proto = m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=self.subscription)
        return m.JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type="consumer",
            protocols=[proto],
            reason=None,
        )

    def on_join_response(self, resp: Any) -> Next:
        """Update the member from a JoinGroup response; say what to send next."""
        ec = resp.error_code
        if ec == E.NONE:
            self.member_id = resp.member_id
            self.generation = resp.generation_id
            self.leader_id = resp.leader
            self.protocol_name = resp.protocol_name or "range"
            self.generations_seen.append(resp.generation_id)
            return Next.SYNC
        if ec == E.MEMBER_ID_REQUIRED:  # KIP-394: join again with the id the coordinator gave us
            self.member_id = resp.member_id
            return Next.RETRY
        if ec == E.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            return Next.RETRY
        if ec == E.REBALANCE_IN_PROGRESS or ec in _RETRIABLE_COORDINATOR:
            return Next.BACKOFF
        raise JoinFailed(f"{self.group_id}/{self.index}: JoinGroup error {ec}")

    def sync_request(self, join_resp: Any) -> Any:
        """SyncGroup: the leader sends the range assignment, unless told to skip it (KIP-814)."""
        assignments = []
        if self.is_leader and not join_resp.skip_assignment:
            subs = [
                MemberSubscription(x.member_id, x.group_instance_id, decode_subscription(x.metadata))
                for x in join_resp.members
            ]
            plan = range_assign(subs, self.partitions_per_topic)
            cls = m.SyncGroupRequest.SyncGroupRequestAssignment
            assignments = [
                cls(member_id=mid, assignment=encode_assignment(a)) for mid, a in sorted(plan.items())
            ]
        return m.SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type="consumer",
            protocol_name=self.protocol_name,
            assignments=assignments,
        )

    def on_sync_response(self, resp: Any) -> Next:
        ec = resp.error_code
        if ec == E.NONE:
            self.assignment = decode_assignment(resp.assignment)
            self.state = State.STABLE
            self.hb_frame = None  # the runtime re-encodes it for the new generation
            self.listener.assigned(self)
            return Next.OK
        if ec == E.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            return Next.RETRY
        if ec in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION):
            return Next.RETRY
        if ec in _RETRIABLE_COORDINATOR:
            return Next.BACKOFF
        raise JoinFailed(f"{self.group_id}/{self.index}: SyncGroup error {ec}")

    async def join(self, lane: Caller, backoff_s: float = 0.1) -> None:
        """Join (or rejoin) the group and sync until the member holds an assignment."""
        self.revoke()
        self.state = State.JOINING
        for _ in range(self.max_join_attempts):
            self.join_calls += 1
            self.listener.join_sent(self, bool(self.member_id))
            join_resp = await lane.call(self.join_request(), JOIN_VERSION)
            step = self.on_join_response(join_resp)
            if step is Next.BACKOFF:
                await asyncio.sleep(backoff_s)
                continue
            if step is Next.RETRY:
                continue
            self.listener.joined(self)
            self.sync_calls += 1
            sync_resp = await lane.call(self.sync_request(join_resp), SYNC_VERSION)
            step = self.on_sync_response(sync_resp)
            if step is Next.OK:
                return
            if step is Next.BACKOFF:
                await asyncio.sleep(backoff_s)
        raise JoinFailed(
            f"{self.group_id}/{self.index}: no assignment after {self.max_join_attempts} attempts"
        )

    # -- heartbeat ------------------------------------------------------------------------------------
    def heartbeat_request(self) -> Any:
        return m.HeartbeatRequest(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
        )

    def on_heartbeat(self, error_code: int) -> Next:
        if error_code == E.NONE or error_code in _RETRIABLE_COORDINATOR:
            return Next.OK
        if error_code in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION):
            return Next.REJOIN
        if error_code == E.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            return Next.REJOIN
        if error_code == E.FENCED_INSTANCE_ID:
            raise JoinFailed(f"{self.group_id}/{self.index}: fenced (instance id {self.instance_id})")
        return Next.REJOIN

    # -- commits --------------------------------------------------------------------------------------
    def commit_request(self, offset: int) -> Any:
        """OffsetCommit v9 of every owned partition at ``offset``, under this generation and member id."""
        part = m.OffsetCommitRequest.OffsetCommitRequestPartition
        topic = m.OffsetCommitRequest.OffsetCommitRequestTopic
        topics = [
            topic(
                name=t,
                partitions=[
                    part(
                        partition_index=p,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                    for p in parts
                ],
            )
            for t, parts in sorted(self.assignment.items())
        ]
        return m.OffsetCommitRequest(
            group_id=self.group_id,
            generation_id_or_member_epoch=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            topics=topics,
        )

    def on_commit(self, resp: Any) -> tuple[Next, int]:
        """(what next, first non-zero partition error or 0)."""
        for t in resp.topics:
            for p in t.partitions:
                ec = p.error_code
                if ec:
                    if ec in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION):
                        return Next.REJOIN, ec
                    if ec == E.UNKNOWN_MEMBER_ID:
                        self.member_id = ""
                        return Next.REJOIN, ec
                    return Next.OK, ec
        return Next.OK, 0

    # -- leaving --------------------------------------------------------------------------------------
    def revoke(self) -> None:
        """Eager protocol: give up every partition (before a rejoin, or on close)."""
        if self.assignment or self.state is State.STABLE:
            parts = self.partitions()
            self.assignment = {}
            self.listener.revoked(self, parts)
        if self.state is State.STABLE:
            self.state = State.UNJOINED

    def leave_request(self) -> Any | None:
        """LeaveGroup for a dynamic member; ``None`` for a static one (KIP-345: it just goes away)."""
        if self.instance_id is not None or not self.member_id:
            return None
        ident = m.LeaveGroupRequest.MemberIdentity(
            member_id=self.member_id, group_instance_id=None, reason="loadgen restart"
        )
        return m.LeaveGroupRequest(group_id=self.group_id, members=[ident])

    def close(self) -> Any | None:
        """Stop the member as a process exit would; returns the LeaveGroup to send, if any.

        The member id is forgotten, as a restarted process would: a static member comes back with
        only its instance id, a dynamic one as a brand-new member.
        """
        leave = self.leave_request()
        self.revoke()
        self.state = State.STOPPED
        self.member_id = ""
        self.generation = -1
        self.hb_frame = None
        return leave
