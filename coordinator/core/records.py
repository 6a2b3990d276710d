"""Every record kcoord writes to a shard's log is built here (Kafka's ``GroupCoordinatorRecordHelpers``).

Handlers decide *that* a record is written; this module decides *what* it holds, so the byte
layout Kafka tooling reads from the topic has one source. Keys and values are the stored formats of
:mod:`kcoord.protocol.records`; a ``None`` value is a tombstone. Pure: no I/O, no asyncio, no clock (every
timestamp is an argument).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from kcoord.protocol.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)

if TYPE_CHECKING:

    from .classic.group import ClassicGroup
    from .classic.member import ClassicMember

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
