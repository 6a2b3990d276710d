"""Online migration between a classic group and a consumer group (KIP-848), as Kafka 4.0 does it.

Two conversions, each a run of records that the shard's ordinary replay applies:

- *Upgrade* (Kafka's ``convertToConsumerGroup``): a consumer-protocol member joins (heartbeat epoch 0)
  a classic group in use whose protocol type is ``consumer``. The classic group's tombstone, then a
  consumer group at the classic generation: every classic member becomes a member at that epoch,
  Stable, its subscription and assignment decoded from its ConsumerProtocol metadata, its session
  timeout and protocols kept in ``ClassicMemberMetadata``; the target assignment is what it owns.
  The joining member's own records follow and bump the epoch, so the classic members are asked to
  rejoin and give up what the new target moves.
- *Downgrade* (Kafka's ``convertToClassicGroup``): the last consumer-protocol member leaves (or is
  fenced) and classic members remain. The consumer group's tombstones, then a classic group at the
  group epoch with the remaining members, each assigned its target in the ConsumerProtocol format of
  its own metadata version; the shard then prepares a rebalance of that classic group.

``group.consumer.migration.policy`` allows either, both or neither. Pure: no clock reads beyond the
timestamps passed in.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from enum import Enum

from kcoord.protocol import messages as m
from kcoord.protocol.records import MemberMetadata, Record

from . import records as rec
from .classic.group import ClassicGroup
from .consumer.group import ConsumerGroup
from .consumer.member import ClassicMemberMetadata, ConsumerGroupMember, MemberState
from .consumer.subscriptions import TopicImage, topic_ids_by_name

CONSUMER_PROTOCOL_TYPE = "consumer"
# The highest ConsumerProtocolSubscription / ConsumerProtocolAssignment versions this codec reads.
_HIGHEST_EMBEDDED_VERSION = 3


class MigrationPolicy(Enum):
    """``group.consumer.migration.policy`` (Kafka's ``ConsumerGroupMigrationPolicy``)."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


class MalformedEmbeddedProtocol(ValueError):
    """A member's ConsumerProtocol subscription or assignment does not decode."""


# -- the embedded consumer protocol ---------------------------------------------------------------------
def embedded_version(data: bytes) -> int:
    """The int16 version that prefixes a ConsumerProtocol subscription or assignment."""
    if len(data) < 2:
        raise MalformedEmbeddedProtocol("no version")
    return int.from_bytes(data[:2], "big", signed=True)


def decode_subscription(data: bytes) -> m.ConsumerProtocolSubscription:
    version = embedded_version(data)
    if version < 0:
        raise MalformedEmbeddedProtocol(f"subscription version {version}")
    try:
        body, _ = m.ConsumerProtocolSubscription.decode_from(data, 2, min(version, _HIGHEST_EMBEDDED_VERSION))
    except Exception as error:
        raise MalformedEmbeddedProtocol(f"subscription: {error}") from None
    return body


def decode_assignment(data: bytes) -> dict[str, set[int]]:
    """Topic name -> partitions; an empty assignment (a member that never synced) is none."""
    if not data:
        return {}
    version = embedded_version(data)
    if version < 0:
        raise MalformedEmbeddedProtocol(f"assignment version {version}")
    try:
        body, _ = m.ConsumerProtocolAssignment.decode_from(data, 2, min(version, _HIGHEST_EMBEDDED_VERSION))
    except Exception as error:
        raise MalformedEmbeddedProtocol(f"assignment: {error}") from None
    out: dict[str, set[int]] = {}
    for topic in body.assigned_partitions:
        out.setdefault(topic.topic, set()).update(topic.partitions)
    return out


def encode_assignment(
    partitions: Mapping[uuid.UUID, Iterable[int]], topics: TopicImage, version: int
) -> bytes:
    """A ConsumerProtocolAssignment of ``partitions`` by topic name (a topic the image does not know
    is left out, as Kafka's ``toConsumerProtocolAssignment``), in ``version`` (at most 3)."""
    version = min(max(version, 0), _HIGHEST_EMBEDDED_VERSION)
    TP = m.ConsumerProtocolAssignment.TopicPartition
    assigned = [
        TP(topic=topics[topic_id].name, partitions=sorted(ps))
        for topic_id, ps in sorted(partitions.items())
        if topic_id in topics and ps
    ]
    body = m.ConsumerProtocolAssignment(assigned_partitions=assigned, user_data=None)
    return version.to_bytes(2, "big", signed=True) + body.encode(version)


def owned_partitions(
    subscription: m.ConsumerProtocolSubscription, topics: TopicImage
) -> dict[uuid.UUID, set[int]]:
    """What a classic member says it owns (subscription v1+; nothing in v0), by topic id."""
    ids = topic_ids_by_name(topics)
    owned: dict[uuid.UUID, set[int]] = {}
    for topic in subscription.owned_partitions or []:
        topic_id = ids.get(topic.topic)
        if topic_id is not None:
            owned.setdefault(topic_id, set()).update(topic.partitions)
    return owned


def by_topic_id(partitions: Mapping[str, Iterable[int]], topics: TopicImage) -> dict[uuid.UUID, set[int]]:
    ids = topic_ids_by_name(topics)
    return {ids[name]: set(ps) for name, ps in partitions.items() if name in ids and ps}


def classic_metadata(
    session_timeout_ms: int, protocols: Iterable[tuple[str, bytes]]
) -> ClassicMemberMetadata:
    return ClassicMemberMetadata(session_timeout_ms=session_timeout_ms, supported_protocols=tuple(protocols))


# -- upgrade ---------------------------------------------------------------------------------------------
def upgrade_records(
    classic: ClassicGroup, topics: TopicImage, metadata_hash: Callable[[Iterable[str]], int]
) -> list[Record]:
    """The records that turn ``classic`` (in use, protocol type ``consumer``) into a consumer group, in
    Kafka's order: the classic tombstone, each member's subscription, the group epoch, each member's
    target, the target epoch, each member's current assignment. Raises
    :class:`MalformedEmbeddedProtocol` when a member's metadata or assignment does not decode."""
    group_id = classic.group_id
    epoch = classic.generation_id
    members: list[ConsumerGroupMember] = []
    for member in classic.members.values():
        # A group still in its first rebalance has no protocol yet: the member's preferred one.
        protocol = classic.protocol_name or (member.protocols[0][0] if member.protocols else None)
        if protocol not in member.protocol_names():
            raise MalformedEmbeddedProtocol(f"member {member.member_id} has no metadata for {protocol!r}")
        subscription = decode_subscription(member.metadata(protocol))
        assigned = by_topic_id(decode_assignment(member.assignment), topics)
        converted = ConsumerGroupMember(
            member.member_id,
            instance_id=member.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=frozenset(subscription.topics),
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            classic_member_metadata=classic_metadata(member.session_timeout_ms, member.protocols),
        ).with_assignment(
            member_epoch=epoch, previous_member_epoch=epoch, state=MemberState.STABLE, assigned=assigned
        )
        members.append(converted)
    records = [rec.group_tombstone(group_id)]
    records.extend(rec.consumer_group_member_subscription_record(group_id, mm) for mm in members)
    subscribed = {name for mm in members for name in mm.subscribed_topic_names}
    records.append(rec.consumer_group_epoch_record(group_id, epoch, metadata_hash(subscribed)))
    records.extend(
        rec.consumer_group_target_assignment_record(group_id, mm.member_id, mm.assigned_partitions)
        for mm in members
    )
    records.append(rec.consumer_group_target_assignment_epoch_record(group_id, epoch))
    records.extend(rec.consumer_group_current_assignment_record(group_id, mm) for mm in members)
    return records


# -- downgrade -------------------------------------------------------------------------------------------
def remaining_classic_members(
    group: ConsumerGroup, leaving: Iterable[str]
) -> list[ConsumerGroupMember] | None:
    """The members left once ``leaving`` are gone, if there are some and every one of them speaks the
    classic protocol (Kafka's ``allMembersUseClassicProtocolExcept``); None otherwise."""
    gone = set(leaving)
    remaining = [mm for member_id, mm in group.members.items() if member_id not in gone]
    if not remaining or not all(mm.uses_classic_protocol for mm in remaining):
        return None
    return remaining


def select_protocol(members: Iterable[ConsumerGroupMember]) -> str | None:
    """The classic group's protocol (Kafka's ``ClassicGroup.selectProtocol``): among the protocols
    every member supports, the one most members list first."""
    members = list(members)
    supported = [
        [name for name, _ in mm.classic_member_metadata.supported_protocols]
        for mm in members
        if mm.classic_member_metadata
    ]
    if not supported:
        return None
    candidates = set(supported[0]).intersection(*supported[1:])
    if not candidates:
        return None
    votes = Counter(next(name for name in names if name in candidates) for names in supported)
    return max(sorted(votes), key=lambda name: votes[name])


def downgrade_records(
    group: ConsumerGroup,
    members: list[ConsumerGroupMember],
    topics: TopicImage,
    now_ms: int,
    *,
    joining: tuple[str, str] | None = None,
) -> list[Record] | None:
    """The records that turn ``group`` into a classic group of ``members`` (all classic): the consumer
    group's tombstones, then its GroupMetadata at the group epoch, each member assigned its target.
    ``joining``: (replaced member id, its replacement's id) when a static member's replacement is
    among ``members``: its records, written just before, are tombstoned instead of the replaced
    one's, and it takes the replaced member's target. None when the members share no protocol or
    one's metadata does not decode."""
    protocol = select_protocol(members)
    if protocol is None:
        return None

    def target_of(member_id: str) -> str:
        return joining[0] if joining is not None and member_id == joining[1] else member_id

    stored: list[MemberMetadata] = []
    for member in members:
        classic = member.classic_member_metadata
        assert classic is not None
        metadata = dict(classic.supported_protocols)[protocol]
        try:
            version = embedded_version(metadata)
        except MalformedEmbeddedProtocol:
            return None
        stored.append(
            MemberMetadata(
                member_id=member.member_id,
                group_instance_id=member.instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                rebalance_timeout=member.rebalance_timeout_ms,
                session_timeout=classic.session_timeout_ms,
                subscription=metadata,
                assignment=encode_assignment(
                    group.target_assignment_of(target_of(member.member_id)), topics, version
                ),
            )
        )
    records = rec.consumer_group_tombstones(
        group, None if joining is None else [mm.member_id for mm in members]
    )
    records.append(
        rec.group_metadata_record(
            group.group_id,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            generation=group.group_epoch,
            protocol=protocol,
            leader=stored[0].member_id,
            current_state_timestamp=now_ms,
            members=stored,
        )
    )
    return records
