"""One member of a KIP-848 consumer group, as its records describe it (Kafka's ``ConsumerGroupMember``).

A member is immutable: every change is a new member, and the group replaces the old one. Two
records describe it, and replaying either one creates it (a compacted log may hold either first):

- ConsumerGroupMemberMetadata, its subscription and client (:meth:`ConsumerGroupMember.with_member_metadata`);
- ConsumerGroupCurrentMemberAssignment, its epochs, reconciliation state and partitions
  (:meth:`ConsumerGroupMember.with_current_assignment`).

Their tombstones remove it; that is the group's business (:mod:`.group`).

Partitions are kept with the epoch they were assigned at (KIP-1251): topic id -> partition ->
assignment epoch, for the partitions the member owns and for those it must still revoke. A record
written before KIP-1251 (no ``AssignmentEpochs``) gives each partition the record's member epoch
(0 when that is negative, a static member that left), as Kafka does, so such partitions are fenced
strictly until they are assigned again.

The member also keeps a *revocation epoch* (KAFKA-19779's design, kcoord's
``revocation-epoch`` fencing): the last member epoch at which it lost partitions. A new member
starts at 0; a member replayed from a record that does not carry it (written by Kafka, or by
kcoord before it tracked it) gets :data:`UNKNOWN_REVOCATION_EPOCH` and is fenced strictly until
it next loses partitions.

:meth:`ConsumerGroupMember.with_assignment` is the one place the assignment and revocation epochs
move; the reconciliation (Kafka's ``CurrentAssignmentBuilder``) computes the partitions and epochs,
and this keeps the bookkeeping behind them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from types import MappingProxyType
from typing import Any, TypeVar

from kcoord.protocol.records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    revocation_epoch_of,
)

log = logging.getLogger(__name__)

# ConsumerGroupHeartbeat's member epochs with a meaning of their own.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
# A member replayed from a record without kcoord's revocation epoch: fenced strictly.
UNKNOWN_REVOCATION_EPOCH = -1

# topic id -> partition -> the epoch the partition was assigned to the member at
PartitionEpochs = Mapping[uuid.UUID, Mapping[int, int]]
# What most members hold in partitions_pending_revocation: nothing. One read-only object for all.
NO_PARTITIONS: PartitionEpochs = MappingProxyType({})

_Shared = TypeVar("_Shared", bound=Hashable)
# Equal immutable values many members carry (a subscription, a client id or host), one object each.
# Only a cache: cleared when full, which costs sharing, never correctness.
_shared_values: dict[Hashable, Any] = {}
_SHARED_VALUES_MAX = 16_384


def shared(value: _Shared) -> _Shared:
    """The one object kept for values equal to ``value`` (``value`` itself the first time).

    Tens of thousands of members of a few deployments subscribe to the same topics from the same
    hosts with the same client id; each replayed record decodes its own copy of those values, and
    sharing them is about a third of a member's memory."""
    found = _shared_values.get(value)
    if found is None or type(found) is not type(value):
        if len(_shared_values) >= _SHARED_VALUES_MAX:
            _shared_values.clear()
        _shared_values[value] = found = value
    return found


class MemberState(IntEnum):
    """Where a member is in its reconciliation (Kafka's ``MemberState``; the values are the record's)."""

    STABLE = 0  # owns exactly its target assignment at its epoch
    UNREVOKED_PARTITIONS = 1  # must revoke partitions before it gets a new epoch
    UNRELEASED_PARTITIONS = 2  # at the new epoch, waiting for partitions other members still own
    UNKNOWN = 127  # a value this version does not know (Kafka maps any such value here)

    @classmethod
    def of(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member that joined with the classic protocol (JoinGroup) brought: its session
    timeout and its protocols, in preference order. None for a member of the consumer protocol."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]  # (name, metadata)


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    # -- ConsumerGroupMemberMetadata --
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None  # as stored; "" and None both mean none
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    classic_member_metadata: ClassicMemberMetadata | None = None
    # -- ConsumerGroupCurrentMemberAssignment --
    member_epoch: int = JOIN_GROUP_MEMBER_EPOCH
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned_partitions: PartitionEpochs = field(default_factory=dict)
    partitions_pending_revocation: PartitionEpochs = field(default_factory=dict)
    revocation_epoch: int = 0

    # -- views --------------------------------------------------------------------------------------
    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    @property
    def subscribed_regex(self) -> str | None:
        """The regular expression the member subscribes with, or None (Kafka's
        ``subscribedTopicRegexOrNull``: an empty one is none)."""
        return self.subscribed_topic_regex or None

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_assignment_epoch

    def assignment_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The epoch ``partition`` was assigned at, if the member owns it or must still revoke it."""
        epoch = self.assigned_partitions.get(topic_id, {}).get(partition)
        if epoch is None:
            epoch = self.partitions_pending_revocation.get(topic_id, {}).get(partition)
        return epoch

    def held_partitions(self) -> set[tuple[uuid.UUID, int]]:
        """Every (topic id, partition) the member owns or must still revoke."""
        return {
            (topic_id, partition)
            for holding in (self.assigned_partitions, self.partitions_pending_revocation)
            for topic_id, partitions in holding.items()
            for partition in partitions
        }

    # -- replay -------------------------------------------------------------------------------------
    def with_member_metadata(self, value: ConsumerGroupMemberMetadataValue) -> ConsumerGroupMember:
        """Kafka's ``Builder.updateWith(ConsumerGroupMemberMetadataValue)``."""
        classic = value.classic_member_metadata
        return replace(
            self,
            instance_id=value.instance_id,
            rack_id=None if value.rack_id is None else shared(value.rack_id),
            client_id=shared(value.client_id),
            client_host=shared(value.client_host),
            subscribed_topic_names=shared(frozenset(value.subscribed_topic_names)),
            subscribed_topic_regex=value.subscribed_topic_regex,
            server_assignor=None if value.server_assignor is None else shared(value.server_assignor),
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            classic_member_metadata=None if classic is None else ClassicMemberMetadata(
                session_timeout_ms=classic.session_timeout_ms,
                supported_protocols=tuple((p.name, p.metadata) for p in classic.supported_protocols),
            ),
        )  # fmt: skip

    def with_current_assignment(
        self, value: ConsumerGroupCurrentMemberAssignmentValue, group_id: str = ""
    ) -> ConsumerGroupMember:
        """Kafka's ``Builder.updateWith(ConsumerGroupCurrentMemberAssignmentValue)``, and kcoord's
        revocation epoch from its tag (:data:`UNKNOWN_REVOCATION_EPOCH` when the record has none)."""
        default_epoch = value.member_epoch
        revocation_epoch = revocation_epoch_of(value)
        return replace(
            self,
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=MemberState.of(value.state),
            assigned_partitions=partition_epochs_from_record(
                value.assigned_partitions, default_epoch, group_id
            ),
            partitions_pending_revocation=partition_epochs_from_record(
                value.partitions_pending_revocation, default_epoch, group_id
            ),
            revocation_epoch=UNKNOWN_REVOCATION_EPOCH if revocation_epoch is None else revocation_epoch,
        )

    # -- what handlers build the next member with ---------------------------------------------------
    def with_assignment(
        self,
        *,
        member_epoch: int,
        previous_member_epoch: int,
        state: MemberState,
        assigned: Mapping[uuid.UUID, Iterable[int]],
        pending_revocation: Mapping[uuid.UUID, Iterable[int]] | None = None,
    ) -> ConsumerGroupMember:
        """The member with this reconciliation outcome, its epochs kept the way commit fencing needs:

        - a partition the member already owned keeps its assignment epoch; a partition new to it is
          assigned at ``member_epoch`` (KIP-1251); a partition to revoke keeps the epoch it was
          assigned at;
        - when the member lets partitions go, its revocation epoch moves up to the last epoch it
          held them at: its old epoch when the epoch moves on (KAFKA-19779 bumps it when the member
          leaves UNREVOKED_PARTITIONS for a new epoch), one below its epoch otherwise (a commit at
          the member's current epoch is always accepted, as in Kafka)."""
        assigned_before = self.assigned_partitions
        held_before = {
            (topic_id, partition): epoch
            for holding in (self.partitions_pending_revocation, assigned_before)
            for topic_id, partitions in holding.items()
            for partition, epoch in partitions.items()
        }
        new_assigned = _with_epochs(assigned, lambda t, p: assigned_before.get(t, {}).get(p, member_epoch))
        new_pending = _with_epochs(
            pending_revocation or {}, lambda t, p: held_before.get((t, p), member_epoch)
        )
        revocation_epoch = self.revocation_epoch
        held_after = {
            (t, p) for holding in (new_assigned, new_pending) for t, ps in holding.items() for p in ps
        }
        if not held_before.keys() <= held_after:
            last_held = self.member_epoch if member_epoch > self.member_epoch else member_epoch - 1
            revocation_epoch = max(revocation_epoch, last_held)
        return replace(
            self,
            member_epoch=member_epoch,
            previous_member_epoch=previous_member_epoch,
            state=state,
            assigned_partitions=new_assigned,
            partitions_pending_revocation=new_pending,
            revocation_epoch=revocation_epoch,
        )

    def as_static_leave(self) -> ConsumerGroupMember:
        """A static member leaving for a while (heartbeat epoch -2), as Kafka's
        ``consumerGroupStaticMemberGroupLeave`` writes it: epoch -2, nothing left to revoke, and every
        partition it keeps reset to assignment epoch 0 (``resetAssignedPartitionsEpochsToZero``),
        since the member that rejoins with its instance id holds them from epoch 0 under a new id.
        Its revocation epoch goes back to 0 for the same reason."""
        return replace(
            self,
            member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
            partitions_pending_revocation={},
            assigned_partitions={
                topic_id: dict.fromkeys(partitions, 0)
                for topic_id, partitions in self.assigned_partitions.items()
            },
            revocation_epoch=0,
        )

    def replaced_by(self, member_id: str) -> ConsumerGroupMember:
        """The member that takes this static member's place when its instance id rejoins with
        ``member_id``: everything it had, at epoch 0, and no classic metadata (Kafka's
        ``getOrMaybeSubscribeStaticConsumerGroupMember``)."""
        return replace(
            self,
            member_id=member_id,
            member_epoch=JOIN_GROUP_MEMBER_EPOCH,
            previous_member_epoch=JOIN_GROUP_MEMBER_EPOCH,
            classic_member_metadata=None,
        )

    # -- plain data ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Every field as plain, comparable data (the shard's durable view)."""
        return {
            "instance_id": self.instance_id,
            "rack_id": self.rack_id,
            "client_id": self.client_id,
            "client_host": self.client_host,
            "subscribed_topic_names": sorted(self.subscribed_topic_names),
            "subscribed_topic_regex": self.subscribed_topic_regex,
            "server_assignor": self.server_assignor,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "classic_member_metadata": None if self.classic_member_metadata is None else (
                self.classic_member_metadata.session_timeout_ms,
                list(self.classic_member_metadata.supported_protocols),
            ),
            "member_epoch": self.member_epoch,
            "previous_member_epoch": self.previous_member_epoch,
            "state": self.state.name,
            "assigned_partitions": _plain(self.assigned_partitions),
            "partitions_pending_revocation": _plain(self.partitions_pending_revocation),
            "revocation_epoch": self.revocation_epoch,
        }  # fmt: skip


def _with_epochs(
    topics: Mapping[uuid.UUID, Iterable[int]], epoch_of: Callable[[uuid.UUID, int], int]
) -> dict[uuid.UUID, dict[int, int]]:
    out: dict[uuid.UUID, dict[int, int]] = {}
    for topic_id, partitions in topics.items():
        by_partition = {p: epoch_of(topic_id, p) for p in sorted(partitions)}
        if by_partition:
            out[topic_id] = by_partition
    return out


def _plain(partitions: PartitionEpochs) -> dict[str, dict[int, int]]:
    return {str(topic_id): dict(sorted(epochs.items())) for topic_id, epochs in sorted(partitions.items())}


def partition_epochs_from_record(
    topics: Sequence[ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions],
    default_epoch: int,
    group_id: str = "",
) -> PartitionEpochs:
    """A record's partitions with their assignment epochs (Kafka's ``Utils.assignmentFromTopicPartitions``).

    A topic without ``AssignmentEpochs`` (a record from before KIP-1251) takes ``default_epoch``,
    the record's member epoch, for every partition, and never a negative one (a static member that
    left is at -2). A topic whose epochs do not match its partitions one to one is a broken record:
    Kafka logs it and falls back to the default for the whole topic, and so does kcoord."""
    if not topics:
        return NO_PARTITIONS
    fallback = max(default_epoch, 0)
    out: dict[uuid.UUID, dict[int, int]] = {}
    for topic in topics:
        # An absent tag decodes as its default, an empty list: no epochs, as null is.
        epochs = topic.assignment_epochs or None
        if epochs is not None and len(epochs) != len(topic.partitions):
            log.error(
                "group %s: %d assignment epochs for %d partitions of topic %s; using epoch %d",
                group_id, len(epochs), len(topic.partitions), topic.topic_id, fallback,
            )  # fmt: skip
            epochs = None
        by_partition = out.setdefault(shared(topic.topic_id), {})
        if epochs is None:
            by_partition.update(dict.fromkeys(topic.partitions, fallback))
        else:
            by_partition.update(zip(topic.partitions, epochs, strict=True))
    return out
