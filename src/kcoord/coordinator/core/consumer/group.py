"""The state of one KIP-848 consumer group, built only by replaying its records (Kafka's ``ConsumerGroup``).

This is a data structure with invariants, not a protocol handler. Its durable state changes only
through the ``apply_*`` methods, one per record type, the same after a write and when a shard
loads (a ``None`` value is the record's tombstone):

- group epoch and metadata hash: ConsumerGroupMetadata (type 3), :meth:`apply_group_metadata`
  (its tombstone deletes the group: :meth:`check_deletable`, then the shard drops it);
- whether a ConsumerGroupPartitionMetadata value (type 4, deprecated by KIP-1101 in Kafka 4.1) is
  still in the log, so the next epoch bump writes its tombstone: :meth:`apply_partition_metadata`;
- each member: ConsumerGroupMemberMetadata (type 5) and ConsumerGroupCurrentMemberAssignment
  (type 8), :meth:`apply_member_metadata` and :meth:`apply_current_assignment`;
- target assignment epoch: ConsumerGroupTargetAssignmentMetadata (type 6);
- each member's target assignment: ConsumerGroupTargetAssignmentMember (type 7);
- the topics each subscribed regular expression resolved to: ConsumerGroupRegularExpression (type 16).

Kept in step by the same methods (never written): the static members, the epoch of every owned
partition, the subscriber counts of topic names and regular expressions, a version that changes
whenever what the group subscribes to may have changed, and the state. They are what lets a
heartbeat cost the same at any group size: nothing on its path loops over the members.

Invariants (a record that would break one raises :class:`GroupStateError`, as Kafka's replay throws
IllegalStateException and fails the load):
- a partition is owned or pending revocation by at most one member;
- a member is removed (its metadata tombstone) only after its current-assignment tombstone (epoch
  -1) and its target-assignment tombstone, the order Kafka writes them in;
- a group is deleted only with no members, no target assignment and the target assignment
  metadata tombstoned (epoch -1);
- ``state`` is Kafka's ``maybeUpdateGroupState``: EMPTY without members, ASSIGNING while the group
  epoch is ahead of the target assignment epoch, RECONCILING while a member is not reconciled to the
  target (not STABLE at the target epoch), STABLE otherwise; DEAD once the shard dropped the group.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
)

from .member import LEAVE_GROUP_MEMBER_EPOCH, ConsumerGroupMember, PartitionEpochs, shared

# member id -> topic id -> partitions: what the assignor wants each member to own
TargetAssignment = Mapping[uuid.UUID, frozenset[int]]


class GroupStateError(RuntimeError):
    """A record that contradicts the group's state (Kafka's IllegalStateException on replay)."""


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ResolvedRegularExpression:
    """The topics a regular expression matched when the coordinator last resolved it, the
    metadata version it was resolved against, and when."""

    topics: frozenset[str]
    version: int
    timestamp_ms: int


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        """An Empty group at epoch 0: what a consumer group's first record is applied to."""
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.target_assignment_epoch = 0
        self.assignment_timestamp_ms = 0
        self.has_subscription_metadata_record = False
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target_assignment: dict[str, TargetAssignment] = {}
        self.resolved_regular_expressions: dict[str, ResolvedRegularExpression] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.state = ConsumerGroupState.EMPTY
        self._partition_epochs: dict[uuid.UUID, dict[int, int]] = {}  # owner's member epoch
        self._regex_subscribers: Counter[str] = Counter()
        self._name_subscribers: Counter[str] = Counter()  # topic name -> members subscribing by name
        # Bumped by every change that may change what the group subscribes to (a member's names or
        # regex, a member added or removed, a regex resolved anew): what memos of it are keyed on.
        self.subscriptions_version = 0
        self._unreconciled = 0  # members not reconciled to the target assignment epoch: the state, in O(1)
        self._classic_protocol_members = 0  # members that speak the classic protocol (a mixed group)
        self._subscribed_names_memo: tuple[int, frozenset[str]] | None = None
        # The heartbeat's memo of the metadata hash: (subscriptions version, topic image, hash).
        self.metadata_hash_memo: tuple[int, object, int] | None = None

    # -- views ----------------------------------------------------------------------------------------
    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def unreconciled_members(self) -> int:
        """Members not (yet) reconciled to the target assignment epoch: the group is Stable at 0."""
        return self._unreconciled

    @property
    def is_empty(self) -> bool:
        return self.state is ConsumerGroupState.EMPTY

    def member(self, member_id: str) -> ConsumerGroupMember | None:
        return self.members.get(member_id)

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def target_assignment_of(self, member_id: str) -> TargetAssignment:
        return self.target_assignment.get(member_id, {})

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The member epoch of the partition's owner, or -1 when no member owns it (Kafka's
        ``currentPartitionEpoch``, what reconciliation reads to know a partition is released)."""
        return self._partition_epochs.get(topic_id, {}).get(partition, -1)

    def subscribed_regex_count(self, regex: str) -> int:
        return self._regex_subscribers[regex]

    def subscribed_regexes_after(
        self, removed: Iterable[ConsumerGroupMember] = (), added: ConsumerGroupMember | None = None
    ) -> set[str]:
        """The regular expressions members subscribe with once ``removed`` are gone and ``added``
        is in (replacing the member of its id, if any): the subscriber counts, adjusted."""
        if not self._regex_subscribers and (added is None or added.subscribed_regex is None):
            # Nobody subscribes by a regular expression, nor will ``added``: none after (removing
            # members only lowers counts). Every heartbeat of a group subscribing by name asks.
            return set()
        counts = self._regex_subscribers.copy()
        for member in self._replaced(removed, added):
            if member.subscribed_regex is not None:
                counts[member.subscribed_regex] -= 1
        if added is not None and added.subscribed_regex is not None:
            counts[added.subscribed_regex] += 1
        return {regex for regex, count in counts.items() if count > 0}

    def subscribed_names_after(
        self,
        resolved: Mapping[str, ResolvedRegularExpression],
        removed: Iterable[ConsumerGroupMember] = (),
        added: ConsumerGroupMember | None = None,
    ) -> set[str]:
        """The topic names the group subscribes to once ``removed`` are gone and ``added`` is in, by
        name or through ``resolved`` (the regular expressions as they will resolve): the subscriber
        counts, adjusted; its cost grows with the topics, not with the members."""
        counts = self._name_subscribers.copy()
        for member in self._replaced(removed, added):
            counts.subtract(member.subscribed_topic_names)
        if added is not None:
            counts.update(added.subscribed_topic_names)
        names = {name for name, count in counts.items() if count > 0}
        for regex in self.subscribed_regexes_after(removed, added):
            if (resolution := resolved.get(regex)) is not None:
                names |= resolution.topics
        return names

    def _replaced(
        self, removed: Iterable[ConsumerGroupMember], added: ConsumerGroupMember | None
    ) -> list[ConsumerGroupMember]:
        """The members as the group holds them that ``removed`` and ``added`` take away (each once:
        a static member may rejoin under its own member id)."""
        ids = {m.member_id for m in removed}
        if added is not None:
            ids.add(added.member_id)
        return [self.members[member_id] for member_id in ids if member_id in self.members]

    @property
    def num_classic_protocol_members(self) -> int:
        return self._classic_protocol_members

    def subscribed_topic_names(self) -> frozenset[str]:
        """The topics the group subscribes to: by a member's name, or through a resolved regular
        expression (Kafka's ``subscribedTopicNames`` keys); remembered until the subscriptions change."""
        memo = self._subscribed_names_memo
        if memo is not None and memo[0] == self.subscriptions_version:
            return memo[1]
        names = {name for name, count in self._name_subscribers.items() if count > 0}
        for resolved in self.resolved_regular_expressions.values():
            names |= resolved.topics
        frozen = frozenset(names)
        self._subscribed_names_memo = (self.subscriptions_version, frozen)
        return frozen

    # -- offset fetch and delete, DeleteGroups -------------------------------------------------------------
    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        """Kafka's ``ConsumerGroup.validateOffsetFetch``: a fetch without a member (null id, negative
        epoch: the admin client, or a client before OffsetFetch v9) is always served; a member must
        be one and fetch at its own epoch, or it could read offsets it no longer owns the right to."""
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        member = None if member_id is None else self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            # A member that joined with JoinGroup knows its epoch as a generation.
            return (
                ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH
            )
        return ErrorCode.NONE

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Kafka's ``ModernGroup.isSubscribedToTopic``: by a member's name or a resolved regular
        expression. Such offsets are neither deleted (OffsetDelete) nor expired."""
        return topic in self.subscribed_topic_names()

    def validate_delete(self) -> ErrorCode:
        """Kafka's ``ConsumerGroup.validateDeleteGroup``: only an Empty group may be deleted."""
        return ErrorCode.NONE if self.is_empty else ErrorCode.NON_EMPTY_GROUP

    # -- replay -----------------------------------------------------------------------------------------
    def apply_group_metadata(self, value: ConsumerGroupMetadataValue) -> None:
        """A ConsumerGroupMetadata value; its tombstone is the shard's (:meth:`check_deletable`)."""
        self.group_epoch = value.epoch
        self.metadata_hash = value.metadata_hash
        self._update_state()

    def apply_partition_metadata(self, value: ConsumerGroupPartitionMetadataValue | None) -> None:
        """Kafka 4.1+ no longer reads the topics a ConsumerGroupPartitionMetadata value lists (the
        metadata hash replaced them); it only remembers that one is in the log, to tombstone it."""
        self.has_subscription_metadata_record = value is not None

    def apply_member_metadata(self, member_id: str, value: ConsumerGroupMemberMetadataValue | None) -> None:
        old = self.members.get(member_id)
        if value is not None:
            self._update_member(old, (old or ConsumerGroupMember(member_id)).with_member_metadata(value))
            return
        if old is None:
            return
        if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
            raise GroupStateError(
                f"group {self.group_id}: tombstone for member {member_id} before its current assignment tombstone"
            )
        if member_id in self.target_assignment:
            raise GroupStateError(
                f"group {self.group_id}: tombstone for member {member_id} before its target assignment tombstone"
            )
        self._remove_member(old)

    def apply_current_assignment(
        self, member_id: str, value: ConsumerGroupCurrentMemberAssignmentValue | None
    ) -> None:
        old = self.members.get(member_id)
        if value is not None:
            new = (old or ConsumerGroupMember(member_id)).with_current_assignment(value, self.group_id)
        elif old is None:
            return
        else:
            # The first of a member's three tombstones: it owns nothing any more (Kafka's replay).
            new = replace(
                old,
                member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                assigned_partitions={},
                partitions_pending_revocation={},
            )
        self._update_member(old, new)

    def apply_target_assignment_metadata(
        self, value: ConsumerGroupTargetAssignmentMetadataValue | None
    ) -> None:
        if value is not None:
            self.target_assignment_epoch = value.assignment_epoch
            self.assignment_timestamp_ms = value.assignment_timestamp
        else:
            if self.target_assignment:
                raise GroupStateError(
                    f"group {self.group_id}: target assignment metadata tombstone while "
                    f"{len(self.target_assignment)} members still have a target assignment"
                )
            self.target_assignment_epoch = -1
        # A new target epoch: who is reconciled to it is counted anew (once per assignment).
        self._unreconciled = sum(
            not member.is_reconciled_to(self.target_assignment_epoch) for member in self.members.values()
        )
        self._update_state()

    def apply_target_assignment_member(
        self, member_id: str, value: ConsumerGroupTargetAssignmentMemberValue | None
    ) -> None:
        if value is None:
            self.target_assignment.pop(member_id, None)
            return
        partitions: dict[uuid.UUID, set[int]] = {}
        for topic in value.topic_partitions:
            partitions.setdefault(shared(topic.topic_id), set()).update(topic.partitions)
        member = self.members.get(member_id)
        if member is not None:
            member_id = member.member_id  # one copy of the id for the member and its target
        self.target_assignment[member_id] = {topic_id: frozenset(ps) for topic_id, ps in partitions.items()}

    def apply_regular_expression(self, regex: str, value: ConsumerGroupRegularExpressionValue | None) -> None:
        self.subscriptions_version += 1
        if value is None:
            self.resolved_regular_expressions.pop(regex, None)
        else:
            self.resolved_regular_expressions[regex] = ResolvedRegularExpression(
                topics=frozenset(value.topics), version=value.version, timestamp_ms=value.timestamp
            )

    def check_deletable(self) -> None:
        """What Kafka checks before a ConsumerGroupMetadata tombstone deletes the group: every other
        record of the group was tombstoned first."""
        if self.members:
            raise GroupStateError(f"group {self.group_id}: deleted with {len(self.members)} members")
        if self.target_assignment:
            raise GroupStateError(
                f"group {self.group_id}: deleted with {len(self.target_assignment)} target assignments"
            )
        if self.target_assignment_epoch != -1:
            raise GroupStateError(
                f"group {self.group_id}: deleted before its target assignment metadata tombstone"
            )

    # -- derived state --------------------------------------------------------------------------------
    def _update_member(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember) -> None:
        if old is not None:
            self._forget(old)
        self.members[new.member_id] = new
        self._unreconciled += not new.is_reconciled_to(self.target_assignment_epoch)
        self._classic_protocol_members += new.uses_classic_protocol
        self._add_partition_epochs(new.assigned_partitions, new.member_epoch)
        self._add_partition_epochs(new.partitions_pending_revocation, new.member_epoch)
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id
        if new.subscribed_regex is not None:
            self._regex_subscribers[new.subscribed_regex] += 1
        self._name_subscribers.update(new.subscribed_topic_names)
        if (
            old is None
            or old.subscribed_topic_names != new.subscribed_topic_names
            or old.subscribed_regex != new.subscribed_regex
        ):
            self.subscriptions_version += 1
        self._update_state()

    def _remove_member(self, old: ConsumerGroupMember) -> None:
        self._forget(old)
        del self.members[old.member_id]
        self.subscriptions_version += 1
        self._update_state()

    def _forget(self, old: ConsumerGroupMember) -> None:
        """Undo what ``old`` added to the derived state."""
        self._unreconciled -= not old.is_reconciled_to(self.target_assignment_epoch)
        self._classic_protocol_members -= old.uses_classic_protocol
        self._remove_partition_epochs(old.assigned_partitions, old.member_epoch)
        self._remove_partition_epochs(old.partitions_pending_revocation, old.member_epoch)
        # Kafka writes a replaced static member's tombstones before its successor's records; an
        # instance id that already names another member is that member's.
        if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
            del self.static_members[old.instance_id]
        name = old.subscribed_regex
        if name is not None:
            self._regex_subscribers[name] -= 1
            if self._regex_subscribers[name] <= 0:
                del self._regex_subscribers[name]
        for topic in old.subscribed_topic_names:
            self._name_subscribers[topic] -= 1
            if self._name_subscribers[topic] <= 0:
                del self._name_subscribers[topic]

    def _add_partition_epochs(self, partitions: PartitionEpochs, epoch: int) -> None:
        for topic_id, by_partition in partitions.items():
            owners = self._partition_epochs.setdefault(topic_id, {})
            for partition in by_partition:
                if partition in owners:
                    raise GroupStateError(
                        f"group {self.group_id}: partition {topic_id}-{partition} assigned at epoch {epoch} "
                        f"is still owned at epoch {owners[partition]}"
                    )
                owners[partition] = epoch

    def _remove_partition_epochs(self, partitions: PartitionEpochs, epoch: int) -> None:
        for topic_id, by_partition in partitions.items():
            owners = self._partition_epochs.get(topic_id, {})
            for partition in by_partition:
                if owners.pop(partition, None) != epoch:
                    raise GroupStateError(
                        f"group {self.group_id}: partition {topic_id}-{partition} released at epoch {epoch} "
                        "was not owned at that epoch"
                    )
            if not owners:
                self._partition_epochs.pop(topic_id, None)

    def _update_state(self) -> None:
        if self.state is ConsumerGroupState.DEAD:
            return
        if not self.members:
            self.state = ConsumerGroupState.EMPTY
        elif self.group_epoch > self.target_assignment_epoch:
            self.state = ConsumerGroupState.ASSIGNING
        elif self._unreconciled == 0:
            self.state = ConsumerGroupState.STABLE
        else:
            self.state = ConsumerGroupState.RECONCILING

    def mark_dead(self) -> None:
        """The shard dropped the group: anything still holding it sees it is gone."""
        self.state = ConsumerGroupState.DEAD

    # -- plain data -------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The group's durable state as plain data (the shard's durable view)."""
        return {
            "group_epoch": self.group_epoch,
            "metadata_hash": self.metadata_hash,
            "target_assignment_epoch": self.target_assignment_epoch,
            "assignment_timestamp_ms": self.assignment_timestamp_ms,
            "has_subscription_metadata_record": self.has_subscription_metadata_record,
            "members": {member_id: member.to_dict() for member_id, member in sorted(self.members.items())},
            "target_assignment": {
                member_id: {str(topic_id): sorted(ps) for topic_id, ps in sorted(assignment.items())}
                for member_id, assignment in sorted(self.target_assignment.items())
            },
            "resolved_regular_expressions": {
                regex: (sorted(resolved.topics), resolved.version, resolved.timestamp_ms)
                for regex, resolved in sorted(self.resolved_regular_expressions.items())
            },
            "state": self.state.value,
        }
