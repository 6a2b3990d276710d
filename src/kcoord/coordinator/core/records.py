"""Every record kcoord writes to a shard's log is built here (Kafka's ``GroupCoordinatorRecordHelpers``).

Handlers decide *that* a record is written; this module decides *what* it holds, so the byte
layout Kafka tooling reads from the topic has one source. Keys and values are the stored formats of
:mod:`kcoord.protocol.records`; a ``None`` value is a tombstone. Pure: no I/O, no asyncio, no clock (every
timestamp is an argument).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from kcoord.protocol.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    GroupMetadataPartKey,
    GroupMetadataValue,
    GroupParts,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    encode_record,
    group_metadata_record_size,
    group_part_record_size,
    group_parts_tag,
    member_metadata_size,
    revocation_epoch_tag,
)

if TYPE_CHECKING:
    from .classic.group import ClassicGroup
    from .classic.member import ClassicMember
    from .consumer.group import ConsumerGroup, ResolvedRegularExpression
    from .consumer.member import ConsumerGroupMember, PartitionEpochs

NO_EXPIRE_TIMESTAMP = -1  # OffsetCommitValue v3 has no expire timestamp; -1 selects it


# -- classic groups (type 2) --------------------------------------------------------------------------
def member_metadata(member: ClassicMember, protocol: str | None, assignment: bytes) -> MemberMetadata:
    """A member as GroupMetadataValue stores it ("member metadata V3"): its metadata for the
    group's protocol only, and its assignment."""
    return MemberMetadata(
        member_id=member.member_id,
        group_instance_id=member.group_instance_id,
        client_id=member.client_id,
        client_host=member.client_host,
        rebalance_timeout=member.rebalance_timeout_ms,
        session_timeout=member.session_timeout_ms,
        subscription=member.metadata(protocol),
        assignment=assignment,
    )


def group_metadata_record(
    group_id: str,
    *,
    protocol_type: str | None,
    generation: int,
    protocol: str | None,
    leader: str | None,
    current_state_timestamp: int | None,
    members: Iterable[MemberMetadata],
) -> Record:
    """One generation of a classic group; a missing state timestamp is stored as -1."""
    value = GroupMetadataValue(
        protocol_type=protocol_type or "",
        generation=generation,
        protocol=protocol,
        leader=leader,
        current_state_timestamp=-1 if current_state_timestamp is None else current_state_timestamp,
        members=list(members),
    )
    return Record(GroupMetadataKey(group=group_id), value)


def classic_group_record(group: ClassicGroup, assignment: Mapping[str, bytes]) -> Record:
    """The group's current generation with these assignments (Kafka's ``newGroupMetadataRecord``)."""
    return group_metadata_record(
        group.group_id,
        protocol_type=group.protocol_type,
        generation=group.generation_id,
        protocol=group.protocol_name,
        leader=group.leader_id,
        current_state_timestamp=group.current_state_timestamp,
        members=[
            member_metadata(member, group.protocol_name, assignment.get(member.member_id, b""))
            for member in group.members.values()
        ],
    )


def empty_group_record(group: ClassicGroup) -> Record:
    """What a JoinGroup that creates a group commits (Kafka's ``newEmptyGroupMetadataRecord``)."""
    return group_metadata_record(
        group.group_id,
        protocol_type=group.protocol_type,
        generation=0,
        protocol=None,
        leader=None,
        current_state_timestamp=group.current_state_timestamp,
        members=[],
    )


def group_tombstone(group_id: str) -> Record:
    return Record(GroupMetadataKey(group=group_id), None)


def group_metadata_records(record: Record, max_record_bytes: int, write_id: int) -> list[Record] | None:
    """A group's GroupMetadata record as the log can take it: ``[record]`` when it fits in
    ``max_record_bytes``; otherwise split, or None when even that cannot fit (one member alone too
    large for a record). Sizes come from the fields' lengths: nothing is encoded to learn them.

    Split (the group has thousands of members, or large assignments): the members go, in order, into
    as few part records as fit (:class:`GroupMetadataPartKey` with ``write_id``, indexes from 0),
    followed by the GroupMetadata record itself with no members and a tag naming the parts. The
    GroupMetadata record is last, so it commits the write: parts whose GroupMetadata record never
    reached the log (a write cut short) are never replayed as a generation. Why split rather than
    compress: docs/storage.md ("A classic group too large for one record").
    """
    if group_metadata_record_size(record) <= max_record_bytes:
        return [record]
    value = record.value
    if not isinstance(value, GroupMetadataValue):
        return None  # a tombstone is never too large: only a group id over the limit gets here
    group = record.key.group
    empty_part = group_part_record_size(group, 0)
    parts: list[list[MemberMetadata]] = [[]]
    used = empty_part
    for member in value.members:
        size = member_metadata_size(member)
        if empty_part + size > max_record_bytes:
            return None
        if parts[-1] and used + size > max_record_bytes:
            parts.append([])
            used = empty_part
        parts[-1].append(member)
        used += size
    out = [
        Record(
            GroupMetadataPartKey(group, write_id, index),
            GroupMetadataValue(
                protocol_type="",
                generation=value.generation,
                protocol=None,
                leader=None,
                current_state_timestamp=-1,
                members=members,
            ),
        )  # fmt: skip
        for index, members in enumerate(parts)
    ]
    head = GroupMetadataValue(
        protocol_type=value.protocol_type,
        generation=value.generation,
        protocol=value.protocol,
        leader=value.leader,
        current_state_timestamp=value.current_state_timestamp,
        members=[],
        unknown_tagged=[group_parts_tag(GroupParts(write_id, len(parts)))],
    )
    head_record = Record(record.key, head)
    key_bytes, value_bytes = encode_record(head_record)  # no members: cheap
    if len(key_bytes) + len(value_bytes or b"") > max_record_bytes:
        return None
    out.append(head_record)
    return out


def group_part_tombstone(group_id: str, write_id: int, index: int) -> Record:
    """Removes a part of a split group that no GroupMetadata record of the group names any more."""
    return Record(GroupMetadataPartKey(group_id, write_id, index), None)


# -- committed offsets (type 1) -----------------------------------------------------------------------
def offset_commit_record(
    group_id: str,
    topic: str,
    partition: int,
    *,
    offset: int,
    leader_epoch: int,
    metadata: str,
    commit_timestamp: int,
    expire_timestamp: int = NO_EXPIRE_TIMESTAMP,
) -> Record:
    """An explicit ``expire_timestamp`` (OffsetCommit v2-v4 retention) makes the value v1."""
    value = OffsetCommitValue(
        offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp=commit_timestamp,
        expire_timestamp=expire_timestamp,
    )
    return Record(OffsetCommitKey(group=group_id, topic=topic, partition=partition), value)


def offset_tombstone(group_id: str, topic: str, partition: int) -> Record:
    return Record(OffsetCommitKey(group=group_id, topic=topic, partition=partition), None)


# -- consumer groups (KIP-848, types 3-8 and 16; every value v0) ------------------------------------------
# Kafka's GroupCoordinatorRecordHelpers.newConsumerGroup*: topics and partitions are written in
# ascending order (Kafka writes its hash maps' order), so a group's records are deterministic.
_CurrentTopicPartitions = ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions
_TargetTopicPartition = ConsumerGroupTargetAssignmentMemberValue.TopicPartition
_ClassicMemberMetadata = ConsumerGroupMemberMetadataValue.ClassicMemberMetadata
_ClassicProtocol = ConsumerGroupMemberMetadataValue.ClassicProtocol


def consumer_group_epoch_record(group_id: str, epoch: int, metadata_hash: int = 0) -> Record:
    """The group epoch and the hash of its subscribed topics' metadata (Kafka's
    ``newConsumerGroupEpochRecord``; the hash is KIP-1101's, Kafka 4.1+)."""
    return Record(
        ConsumerGroupMetadataKey(group_id=group_id),
        ConsumerGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash),
    )


def consumer_group_epoch_tombstone(group_id: str) -> Record:
    """Deletes the group; written last, after every other record of the group was tombstoned
    (Kafka's ``newConsumerGroupEpochTombstoneRecord``)."""
    return Record(ConsumerGroupMetadataKey(group_id=group_id), None)


def consumer_group_subscription_metadata_tombstone(group_id: str) -> Record:
    """Removes a ConsumerGroupPartitionMetadata value (type 4) that Kafka 4.0 wrote; nothing writes
    one any more (Kafka's ``newConsumerGroupSubscriptionMetadataTombstoneRecord``)."""
    return Record(ConsumerGroupPartitionMetadataKey(group_id=group_id), None)


def consumer_group_member_subscription_record(group_id: str, member: ConsumerGroupMember) -> Record:
    """A member's subscription and client (Kafka's ``newConsumerGroupMemberSubscriptionRecord``)."""
    classic = member.classic_member_metadata
    value = ConsumerGroupMemberMetadataValue(
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=sorted(member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor,
        # Kafka writes the tag with a null for a member of the consumer protocol.
        classic_member_metadata=None if classic is None else _ClassicMemberMetadata(
            session_timeout_ms=classic.session_timeout_ms,
            supported_protocols=[_ClassicProtocol(name=n, metadata=md) for n, md in classic.supported_protocols],
        ),
    )  # fmt: skip
    return Record(ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member.member_id), value)


def consumer_group_member_subscription_tombstone(group_id: str, member_id: str) -> Record:
    """Removes the member; written after its current and target assignment tombstones (Kafka's
    ``newConsumerGroupMemberSubscriptionTombstoneRecord``)."""
    return Record(ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member_id), None)


def consumer_group_target_assignment_record(
    group_id: str, member_id: str, partitions: Mapping[uuid.UUID, Iterable[int]]
) -> Record:
    """The partitions the assignor wants the member to own (Kafka's ``newConsumerGroupTargetAssignmentRecord``)."""
    value = ConsumerGroupTargetAssignmentMemberValue(
        topic_partitions=[
            _TargetTopicPartition(topic_id=topic_id, partitions=sorted(ps))
            for topic_id, ps in sorted(partitions.items())
        ]
    )
    return Record(ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), value)


def consumer_group_target_assignment_tombstone(group_id: str, member_id: str) -> Record:
    """Kafka's ``newConsumerGroupTargetAssignmentTombstoneRecord``."""
    return Record(ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None)


def consumer_group_target_assignment_epoch_record(
    group_id: str, assignment_epoch: int, assignment_timestamp_ms: int = 0
) -> Record:
    """The group epoch the target assignment was computed for, and when that finished (KIP-1263,
    Kafka 4.3+; 0, the default, is not written) (Kafka's ``newConsumerGroupTargetAssignmentEpochRecord``)."""
    value = ConsumerGroupTargetAssignmentMetadataValue(
        assignment_epoch=assignment_epoch, assignment_timestamp=assignment_timestamp_ms
    )
    return Record(ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id), value)


def consumer_group_target_assignment_epoch_tombstone(group_id: str) -> Record:
    """Kafka's ``newConsumerGroupTargetAssignmentEpochTombstoneRecord``."""
    return Record(ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id), None)


def _current_topic_partitions(
    partitions: PartitionEpochs,
) -> list[ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions]:
    topics = []
    for topic_id, epochs in sorted(partitions.items()):
        ordered = sorted(epochs.items())
        topics.append(
            _CurrentTopicPartitions(
                topic_id=topic_id,
                partitions=[partition for partition, _ in ordered],
                assignment_epochs=[epoch for _, epoch in ordered],
            )
        )
    return topics


def consumer_group_current_assignment_record(group_id: str, member: ConsumerGroupMember) -> Record:
    """A member's epochs, reconciliation state and partitions, each partition with the epoch it
    was assigned at (KIP-1251) and the member's revocation epoch in kcoord's own tag (Kafka's
    ``newConsumerGroupCurrentAssignmentRecord``)."""
    value = ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=member.member_epoch,
        previous_member_epoch=member.previous_member_epoch,
        state=int(member.state),
        assigned_partitions=_current_topic_partitions(member.assigned_partitions),
        partitions_pending_revocation=_current_topic_partitions(member.partitions_pending_revocation),
        unknown_tagged=[revocation_epoch_tag(member.revocation_epoch)],
    )
    return Record(
        ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member.member_id), value
    )


def consumer_group_current_assignment_tombstone(group_id: str, member_id: str) -> Record:
    """The first of a leaving member's three tombstones (Kafka's
    ``newConsumerGroupCurrentAssignmentTombstoneRecord``)."""
    return Record(ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), None)


def consumer_group_regular_expression_record(
    group_id: str, regex: str, resolved: ResolvedRegularExpression
) -> Record:
    """The topics a subscribed regular expression resolved to (Kafka's
    ``newConsumerGroupRegularExpressionRecord``)."""
    value = ConsumerGroupRegularExpressionValue(
        topics=sorted(resolved.topics), version=resolved.version, timestamp=resolved.timestamp_ms
    )
    return Record(ConsumerGroupRegularExpressionKey(group_id=group_id, regular_expression=regex), value)


def consumer_group_regular_expression_tombstone(group_id: str, regex: str) -> Record:
    """Kafka's ``newConsumerGroupRegularExpressionTombstone``."""
    return Record(ConsumerGroupRegularExpressionKey(group_id=group_id, regular_expression=regex), None)


def consumer_group_member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """What removes a member, in the order its replay requires (Kafka's ``removeMember``): current
    assignment, target assignment, then subscription."""
    return [
        consumer_group_current_assignment_tombstone(group_id, member_id),
        consumer_group_target_assignment_tombstone(group_id, member_id),
        consumer_group_member_subscription_tombstone(group_id, member_id),
    ]


def consumer_group_tombstones(group: ConsumerGroup, member_ids: Iterable[str] | None = None) -> list[Record]:
    """What deletes a whole group, in Kafka's ``ConsumerGroup.createGroupTombstoneRecords`` order:
    every member's current and target assignments, the target assignment epoch, every member's
    subscription, the resolved regular expressions, the deprecated partition metadata, the group epoch.
    ``member_ids``: the members the log holds by then, when a write before these records changes
    them (a static member replaced); the group's own otherwise."""
    group_id = group.group_id
    members = sorted(group.members if member_ids is None else set(member_ids))
    targets = sorted(  # the same as the members, unless a log was cut
        group.members.keys() | group.target_assignment.keys() if member_ids is None else set(members)
    )
    return [
        *(consumer_group_current_assignment_tombstone(group_id, m) for m in members),
        *(consumer_group_target_assignment_tombstone(group_id, m) for m in targets),
        consumer_group_target_assignment_epoch_tombstone(group_id),
        *(consumer_group_member_subscription_tombstone(group_id, m) for m in members),
        *(
            consumer_group_regular_expression_tombstone(group_id, r)
            for r in sorted(group.resolved_regular_expressions)
        ),
        consumer_group_subscription_metadata_tombstone(group_id),
        consumer_group_epoch_tombstone(group_id),
    ]
