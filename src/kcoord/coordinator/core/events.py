"""Group lifecycle events: what the pure state machine tells the world besides records and replies.

Handlers append these to :attr:`kcoord.coordinator.core.result.Result.events`; the shard runtime hands them to
its observer (:mod:`kcoord.coordinator.ops.observability`), which turns them into Prometheus metrics and one
structured log line each. They are frozen, plain data (h11-style) so unit tests can assert the exact
events a handler produced, and so the state machine never learns how they are reported.

Events describe state the handler already decided (and the runtime already replayed); they are
reported when the handler returns, not when the log acknowledges its records.

``reason`` fields are short identifiers from a fixed vocabulary (they become metric labels, which
must stay bounded); free text — Kafka's human reason strings, a client's LeaveGroup reason — goes in
``detail``, which only reaches the logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kcoord.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from .result import Result

# Why a rebalance started: RebalanceStarted.reason.
REBALANCE_REASONS = (
    "member_joined",  # a new member (or a known one with new metadata) joined
    "leader_rejoined",  # the leader sent JoinGroup in a Stable/CompletingRebalance group
    "metadata_changed",  # a member rejoined with different protocols
    "member_left",  # LeaveGroup
    "member_expired",  # a session timeout or the new-member join timeout
    "sync_timeout",  # members did not SyncGroup within the rebalance timeout
    "static_member_replaced",  # a static member rejoined with changed subscription
    "group_loaded",  # a group loaded from the log with members but no live session
    "record_too_large",  # the new generation's record is larger than the log takes: not written
    "other",
)
# Why a member left the group: MemberLeft.reason.
LEAVE_REASONS = (
    "leave_group",  # the member sent LeaveGroup
    "removed_by_admin",  # LeaveGroup by instance id with no member id (KIP-345 admin removal)
    "not_rejoined",  # a dynamic member did not rejoin within the rebalance timeout
    "sync_timeout",  # a member did not send SyncGroup within the rebalance timeout
    "other",
)
# Which request a member was fenced on: MemberFenced.reason is a Kafka error name.
FENCING_ERRORS = (
    "FENCED_INSTANCE_ID",
    "ILLEGAL_GENERATION",
    "UNKNOWN_MEMBER_ID",
    "FENCED_MEMBER_EPOCH",
    "STALE_MEMBER_EPOCH",
    "UNRELEASED_INSTANCE_ID",
)


@dataclass(frozen=True, slots=True)
class MemberJoined:
    group: str
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    protocol_type: str | None = None
    rejoin: bool = False  # a known static member came back under a new member id


@dataclass(frozen=True, slots=True)
class MemberLeft:
    group: str
    member_id: str
    instance_id: str | None
    reason: str  # one of LEAVE_REASONS
    detail: str = ""


@dataclass(frozen=True, slots=True)
class MemberExpired:
    group: str
    member_id: str
    instance_id: str | None
    timeout_ms: int  # the session timeout (or the new-member join timeout) that ran out


@dataclass(frozen=True, slots=True)
class MemberFenced:
    group: str
    member_id: str
    instance_id: str | None
    reason: str  # one of FENCING_ERRORS
    api: str  # the request that was refused: join_group, sync_group, heartbeat, ...


# Which protocol a group runs (Kafka's GroupType): RebalanceStarted/RebalanceCompleted.group_type.
GROUP_TYPES = ("classic", "consumer")


@dataclass(frozen=True, slots=True)
class RebalanceStarted:
    """Classic groups: the group enters PreparingRebalance. KIP-848 consumer groups: the group
    epoch is bumped (``generation`` is then the epoch being replaced)."""

    group: str
    reason: str  # one of REBALANCE_REASONS
    generation: int  # the generation being replaced
    members: int
    detail: str = ""
    group_type: str = "classic"  # one of GROUP_TYPES


@dataclass(frozen=True, slots=True)
class RebalanceCompleted:
    """Classic groups: a generation is complete, every member has its assignment (the group is
    Stable). KIP-848 consumer groups: the target assignment of a new group epoch is computed (the
    members then reconcile to it: :class:`ReconciliationCompleted`)."""

    group: str
    generation: int
    duration_ms: int  # classic: PreparingRebalance to Stable; consumer: epoch bump to new target
    members: int
    protocol: str | None = None
    group_type: str = "classic"  # one of GROUP_TYPES


@dataclass(frozen=True, slots=True)
class ReconciliationCompleted:
    """Every member of a KIP-848 consumer group reports the target assignment of the group's epoch
    (member epoch == group epoch, nothing left to revoke or wait for): the group is Stable again.

    ``duration_ms`` runs from the first group epoch bump the group had not yet reconciled to, so
    bumps that follow one another before the members settle count as one reconciliation, as a
    classic rebalance that members join midway counts as one."""

    group: str
    epoch: int  # the group epoch every member reached
    duration_ms: int
    members: int


@dataclass(frozen=True, slots=True)
class GroupStateChanged:
    group: str
    old: str
    new: str
    generation: int


@dataclass(frozen=True, slots=True)
class GroupDeleted:
    group: str
    reason: str  # "delete_groups" (an admin) or "offsets_expired" (retention)


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    """One member's share of a new assignment. Classic groups carry the leader's opaque bytes
    (``raw``; the consumer protocol's are decoded off the request path, by the event writer);
    KIP-848 consumer groups carry the partitions the server assignor chose (``partitions``)."""

    member_id: str
    instance_id: str | None
    raw: bytes | None = None
    partitions: tuple[tuple[str, int], ...] | None = None  # (topic name or id, partition), sorted


@dataclass(frozen=True, slots=True)
class AssignmentComputed:
    """The assignment of a new generation (classic: the leader's SyncGroup, written) or target
    assignment epoch (KIP-848: the server assignor's result), for every member."""

    group: str
    generation: int
    protocol_type: str | None  # classic: "consumer", "connect", ...; KIP-848 groups: "kip848"
    protocol: (
        str | None
    )  # classic: the chosen protocol ("range", "cooperative-sticky"); KIP-848: the assignor
    members: tuple[MemberAssignment, ...]


@dataclass(frozen=True, slots=True)
class OffsetsCommitted:
    """An OffsetCommit (or TxnOffsetCommit) was accepted: ``partitions`` offsets were written."""

    group: str
    partitions: int


@dataclass(frozen=True, slots=True)
class CommitRejected:
    """An offset commit refused for a reason other than fencing (REBALANCE_IN_PROGRESS, ...)."""

    group: str
    member_id: str
    error: str  # a Kafka error name
    api: str


GroupEvent = (
    MemberJoined
    | MemberLeft
    | MemberExpired
    | MemberFenced
    | RebalanceStarted
    | RebalanceCompleted
    | ReconciliationCompleted
    | GroupStateChanged
    | GroupDeleted
    | AssignmentComputed
    | OffsetsCommitted
    | CommitRejected
)


_FENCING_CODES = frozenset(
    {
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.FENCED_MEMBER_EPOCH,
        ErrorCode.STALE_MEMBER_EPOCH,
        ErrorCode.UNRELEASED_INSTANCE_ID,
    }
)
_COMMIT_APIS = frozenset({"offset_commit", "txn_offset_commit"})


def emit_fenced(
    out: Result, group_id: str, member_id: str, instance_id: str | None, error: int, api: str
) -> None:
    """Report a request refused because its member is fenced; an offset commit refused for another
    reason is reported as :class:`CommitRejected` (other refusals are not events)."""
    if error in _FENCING_CODES:
        out.emit(MemberFenced(group_id, member_id, instance_id, ErrorCode(error).name, api))
    elif api in _COMMIT_APIS and error != ErrorCode.NONE:
        try:
            name = ErrorCode(error).name
        except ValueError:
            name = str(error)
        out.emit(CommitRejected(group_id, member_id, name, api))
