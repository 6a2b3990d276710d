"""One simulated KIP-848 consumer (``group.protocol=consumer``): the client side of
ConsumerGroupHeartbeat as a pure state machine.

Why pure: what makes the load realistic is which fields each heartbeat carries and what the member
does with each answer, and that can be tested against canned responses without sockets. The
runtime (:mod:`.consumer_runtime`) decides *when* to send; this module decides *what*.

The rules follow the Java consumer 4.x (``ConsumerHeartbeatRequestManager.HeartbeatState`` and
``ConsumerMembershipManager``), with ConsumerGroupHeartbeat v1 (KIP-1082: the client makes up its
member id once and keeps it for its lifetime):

- **Full heartbeat** (a join with epoch 0, and the first heartbeat after a request failed or the
  coordinator moved): every field — rebalance timeout, subscribed topic names, server assignor
  (null: the group's default) and the owned partitions (empty on a join, as Kafka requires).
- **Later heartbeats** send null for every field that did not change since the last one the
  coordinator answered; the owned partitions are sent only when the member's assignment changed
  since it last reported it (the acknowledgement of a reconciliation). A heartbeat that changes
  nothing is therefore the same bytes for a whole member epoch (the runtime encodes it once).
- **Reconciliation** is instant: an assignment in a response replaces what the member owns — the
  partitions it lost are revoked, the new ones assigned — and the member acknowledges at once
  with the partitions it now owns (the Java client does the same after its rebalance callbacks).
- **FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID**: the member loses everything, goes back to epoch 0
  with the same member id, and rejoins at once with a full heartbeat.
- Coordinator errors (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS):
  retry after a back-off with a full heartbeat. Anything else stops the member (reported).

Offsets: OffsetCommit v10 names topics by id (the ids the assignment came with) and carries the
member's current epoch; commit errors do not change the membership (in KIP-848 the heartbeat owns
it), they are counted.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E

HEARTBEAT_VERSION = 1
COMMIT_VERSION = 10
DESCRIBE_VERSION = 0
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2
DEFAULT_REBALANCE_TIMEOUT_MS = 300_000  # the Java consumer's max.poll.interval.ms

HB = m.ConsumerGroupHeartbeatRequest
_RETRIABLE = {E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR}

Assignment = dict[uuid.UUID, tuple[int, ...]]  # topic id -> sorted partitions (no empty entries)


class CState(enum.Enum):
    JOINING = "joining"  # the next (or in-flight) heartbeat has epoch 0
    MEMBER = "member"  # in the group with an epoch > 0
    STOPPED = "stopped"  # left, or a fatal error


class Step(enum.Enum):
    """What the runtime does after a heartbeat response."""

    WAIT = "wait"  # next heartbeat at its regular time
    NOW = "now"  # heartbeat at once (acknowledge an assignment, or rejoin after being fenced)
    BACKOFF = "backoff"  # retry after a pause
    STOP = "stop"  # fatal: the member is out


def normalize(topic_partitions: Iterable[Any]) -> Assignment:
    """A heartbeat response's assignment as {topic id: sorted partitions}, empty topics dropped."""
    out: Assignment = {}
    for tp in topic_partitions:
        if tp.partitions:
            out[tp.topic_id] = tuple(sorted(set(tp.partitions) | set(out.get(tp.topic_id, ()))))
    return out


def partition_set(assignment: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


class ConsumerMember:
    """A consumer of group ``group_id`` subscribed to ``topics``; static if ``instance_id`` is set."""

    def __init__(
        self,
        index: int,
        group_id: str,
        topics: Sequence[str],
        instance_id: str | None = None,
        rebalance_timeout_ms: int = DEFAULT_REBALANCE_TIMEOUT_MS,
        server_assignor: str | None = None,
        member_id: str | None = None,
    ) -> None:
        self.index = index
        self.group_id = group_id
        self.topics = list(topics)
        self.instance_id = instance_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.server_assignor = server_assignor
        self.member_id = member_id or str(uuid.uuid4())
        self.state = CState.JOINING
        self.epoch = JOIN_EPOCH
        self.owned: Assignment = {}
        self.reported: Assignment | None = None  # owned partitions as the coordinator last heard them
        self.full = True  # the next heartbeat carries every field
        self.heartbeat_interval_ms: int | None = None
        self.error: str | None = None
        # what the heartbeat in flight reported, taken as known when its answer is a success
        self._sent_owned: Assignment | None = None
        # counters
        self.joins = 0
        self.fenced = 0
        self.assignments = 0  # responses that changed what the member owns
        self.partitions_revoked = 0
        self.partitions_assigned = 0
        # runtime fields (kept here so the hot path needs no dict lookup)
        self.conn: Any = None
        self.admitted = False  # the runtime sent its join; the wheel heartbeats it from then on
        self.hb_inflight = False
        self.hb_callback: Any = None
        self.hb_frame: bytearray | None = None
        self.hb_frame_epoch = -99
        self.committer = False
        self.commit_offset = 0
        self.commit_inflight = False
        self.commit_callback: Any = None

    # -- state the runtime asks about -----------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.state is not CState.STOPPED

    @property
    def needs_ack(self) -> bool:
        """The member owns something the coordinator has not heard from it yet."""
        return self.state is CState.MEMBER and self.owned != self.reported

    @property
    def steady(self) -> bool:
        """The next heartbeat is the minimal one (epoch only): its bytes can be reused."""
        return self.state is CState.MEMBER and not self.full and self.owned == self.reported

    def partitions(self) -> set[tuple[uuid.UUID, int]]:
        return partition_set(self.owned)

    # -- heartbeat ------------------------------------------------------------------------------------
    def heartbeat_request(self) -> m.ConsumerGroupHeartbeatRequest:
        """The next heartbeat, with the fields Kafka's rules ask for (see the module docstring)."""
        req = HB(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.epoch,
            instance_id=self.instance_id,
        )
        self._sent_owned = None
        if self.state is CState.JOINING or self.full:
            req.rebalance_timeout_ms = self.rebalance_timeout_ms
            req.subscribed_topic_names = list(self.topics)
            req.server_assignor = self.server_assignor
            owned = {} if self.epoch == JOIN_EPOCH else self.owned
            req.topic_partitions = _topic_partitions(owned)
            self._sent_owned = dict(owned)
            if self.epoch == JOIN_EPOCH:
                self.joins += 1
        elif self.owned != self.reported:
            req.topic_partitions = _topic_partitions(self.owned)
            self._sent_owned = dict(self.owned)
        return req

    def on_heartbeat(self, resp: Any) -> Step:
        """Take a ConsumerGroupHeartbeat response; say what to do next."""
        if self.state is CState.STOPPED:
            return Step.STOP
        ec = resp.error_code
        if ec == E.NONE:
            if resp.member_id:
                self.member_id = resp.member_id
            self.epoch = resp.member_epoch
            self.heartbeat_interval_ms = resp.heartbeat_interval_ms
            self.state = CState.MEMBER
            self.full = False
            if self._sent_owned is not None:
                self.reported = self._sent_owned
                self._sent_owned = None
            if resp.assignment is not None:
                self.reconcile(normalize(resp.assignment.topic_partitions))
            return Step.NOW if self.owned != self.reported else Step.WAIT
        self._sent_owned = None
        if ec in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
            self.fence()
            return Step.NOW
        if ec in _RETRIABLE:
            self.full = True
            return Step.BACKOFF
        self.stop(
            f"{self.group_id}/{self.index}: ConsumerGroupHeartbeat error {ec} {resp.error_message or ''}".rstrip()
        )
        return Step.STOP

    def on_failure(self) -> None:
        """The heartbeat got no answer (connection lost): the next one is full, as Java resets its sent fields."""
        self._sent_owned = None
        self.full = True

    def reconcile(self, target: Assignment) -> tuple[set[tuple[uuid.UUID, int]], set[tuple[uuid.UUID, int]]]:
        """Revoke what the member lost, take what it gained; (revoked, assigned)."""
        before, after = partition_set(self.owned), partition_set(target)
        revoked, assigned = before - after, after - before
        if revoked or assigned:
            self.assignments += 1
            self.partitions_revoked += len(revoked)
            self.partitions_assigned += len(assigned)
        self.owned = target
        return revoked, assigned

    def fence(self) -> None:
        """FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: partitions lost, back to epoch 0, same member id."""
        self.fenced += 1
        self.owned = {}
        self.reported = None
        self.epoch = JOIN_EPOCH
        self.full = True
        self.state = CState.JOINING

    def stop(self, error: str | None = None) -> None:
        self.error = error
        self.state = CState.STOPPED

    def leave_request(self) -> m.ConsumerGroupHeartbeatRequest | None:
        """The heartbeat that leaves the group (epoch -1, or -2 for a static member); None if not in it."""
        if self.state is not CState.MEMBER:
            return None
        epoch = LEAVE_STATIC_EPOCH if self.instance_id is not None else LEAVE_EPOCH
        return HB(
            group_id=self.group_id, member_id=self.member_id, member_epoch=epoch, instance_id=self.instance_id
        )

    # -- commits --------------------------------------------------------------------------------------
    def commit_request(self, offset: int) -> m.OffsetCommitRequest | None:
        """OffsetCommit v10 of every owned partition at ``offset``, by topic id, at the member's epoch."""
        if self.state is not CState.MEMBER or not self.owned:
            return None
        part = m.OffsetCommitRequest.OffsetCommitRequestPartition
        topic = m.OffsetCommitRequest.OffsetCommitRequestTopic
        return m.OffsetCommitRequest(
            group_id=self.group_id,
            generation_id_or_member_epoch=self.epoch,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            topics=[
                topic(
                    topic_id=t,
                    partitions=[
                        part(
                            partition_index=p,
                            committed_offset=offset,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                        for p in ps
                    ],
                )
                for t, ps in sorted(self.owned.items())
            ],
        )

    @staticmethod
    def commit_errors(resp: Any) -> list[int]:
        """The non-zero partition error codes of an OffsetCommit response."""
        return [p.error_code for t in resp.topics for p in t.partitions if p.error_code]


def _topic_partitions(owned: Assignment) -> list[m.ConsumerGroupHeartbeatRequest.TopicPartitions]:
    return [HB.TopicPartitions(topic_id=t, partitions=list(ps)) for t, ps in sorted(owned.items())]


def group_settled(members: Sequence[ConsumerMember], partitions: int) -> bool:
    """Client-side view of a settled group: everyone a member at one epoch, every acknowledgement
    heard, and the members' partitions cover ``partitions`` partitions exactly once."""
    if not members:
        return True
    epoch = members[0].epoch
    seen: set[tuple[uuid.UUID, int]] = set()
    total = 0
    for mb in members:
        if mb.state is not CState.MEMBER or mb.epoch != epoch or mb.owned != mb.reported:
            return False
        ps = mb.partitions()
        total += len(ps)
        seen |= ps
    return total == len(seen) == partitions


def described_partitions(assignment: Any) -> set[tuple[uuid.UUID, int]]:
    return {(tp.topic_id, p) for tp in assignment.topic_partitions for p in tp.partitions}


def describe_settled(group: Any, members: int) -> str | None:
    """None if a ConsumerGroupDescribe group is settled on the server's side, else why not.

    Settled: the group's target assignment is at the group epoch, the group has ``members``
    members, and every member is at that epoch holding exactly its target assignment (nothing
    left to revoke or to receive).
    """
    if group.error_code:
        return f"error {group.error_code} {group.error_message or ''}".rstrip()
    if group.assignment_epoch != group.group_epoch:
        return f"assignment epoch {group.assignment_epoch} behind group epoch {group.group_epoch}"
    if len(group.members) != members:
        return f"{len(group.members)} members, expected {members}"
    for mb in group.members:
        if mb.member_epoch != group.group_epoch:
            return f"member {mb.member_id} at epoch {mb.member_epoch}, group at {group.group_epoch}"
        if described_partitions(mb.assignment) != described_partitions(mb.target_assignment):
            return f"member {mb.member_id} does not hold its target assignment yet"
    return None
