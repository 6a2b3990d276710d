"""What a server-side assignor is given: the group's members and a description of their topics.

Kafka's ``GroupSpec``, ``MemberSubscriptionAndAssignment`` and ``SubscribedTopicDescriber``
(``org.apache.kafka.coordinator.group.api.assignor``), shaped for Python:

- Topic ids are opaque keys chosen by the caller (Kafka's topic ``Uuid`` as ``uuid.UUID``, or a
  name). They must be hashable and ordered: assignors sort them wherever order decides who gets
  what, so the same input always gives the same assignment.
- A member's current assignment maps topic id -> frozenset of partition numbers. Assignors never
  mutate their input, and hand a member's mapping back as it is when they leave that member alone
  (Kafka's assignment reuse): identity is a cheap first test for "unchanged", equality settles it.
- Topics the describer does not know (partition count 0) are ignored. Kafka's assignors throw
  ``PartitionAssignorException`` there instead, but its ``TargetAssignmentBuilder`` only passes
  topics that exist, so the caller sees the same result; a member subscribed only to unknown topics
  gets an empty assignment. Current partitions that are out of range, or held by another member
  that sorts first, are dropped and assigned like any unassigned partition.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeAlias, TypeVar


class _Orderable(Protocol):
    def __lt__(self, other: Any, /) -> bool: ...


# A topic id: any hashable, ordered key the caller uses for topics (uuid.UUID, str).
TopicIdT = TypeVar("TopicIdT", bound=_Orderable)
_TopicIdContraT = TypeVar("_TopicIdContraT", bound=_Orderable, contravariant=True)

# topic id -> the member's partitions of that topic (no empty sets in assignor output).
MemberAssignment: TypeAlias = Mapping[TopicIdT, frozenset[int]]


class SubscriptionType(enum.Enum):
    """Kafka's ``SubscriptionType``: whether every member subscribes to the same topics."""

    HOMOGENEOUS = "homogeneous"
    HETEROGENEOUS = "heterogeneous"


@dataclass(frozen=True, slots=True)
class MemberSubscriptionAndAssignment(Generic[TopicIdT]):
    """One member as an assignor sees it (Kafka's ``MemberSubscriptionAndAssignment``)."""

    subscribed_topic_ids: frozenset[TopicIdT]
    assignment: MemberAssignment[TopicIdT] = field(default_factory=dict)
    rack_id: str | None = None
    instance_id: str | None = None  # group.instance.id of a static member


@dataclass(frozen=True, slots=True)
class GroupSpec(Generic[TopicIdT]):
    """The members to assign (Kafka's ``GroupSpec``).

    ``subscription_type`` must be true of ``members``: the homogeneous paths read one member's
    subscription for all. :meth:`of` works it out; a caller that keeps subscription counts up to
    date as members come and go (as Kafka's ``ModernGroup`` does) can pass it in directly.
    """

    members: Mapping[str, MemberSubscriptionAndAssignment[TopicIdT]]
    subscription_type: SubscriptionType

    @classmethod
    def of(cls, members: Mapping[str, MemberSubscriptionAndAssignment[TopicIdT]]) -> GroupSpec[TopicIdT]:
        return cls(members, subscription_type_of(members))


def subscription_type_of(
    members: Mapping[str, MemberSubscriptionAndAssignment[TopicIdT]],
) -> SubscriptionType:
    """Homogeneous when every member subscribes to the same topics (an empty group counts as homogeneous)."""
    subscriptions = iter(members.values())
    first = next(subscriptions, None)
    if first is None:
        return SubscriptionType.HOMOGENEOUS
    topics = first.subscribed_topic_ids
    if all(member.subscribed_topic_ids == topics for member in subscriptions):
        return SubscriptionType.HOMOGENEOUS
    return SubscriptionType.HETEROGENEOUS


class TopicDescriber(Protocol[_TopicIdContraT]):
    """Kafka's ``SubscribedTopicDescriber``: what an assignor may know about a topic."""

    def partition_count(self, topic_id: _TopicIdContraT) -> int:
        """The topic's number of partitions; 0 when the topic is unknown."""
        ...

    def racks_for_partition(self, topic_id: _TopicIdContraT, partition: int) -> frozenset[str]:
        """The racks of the partition's replicas; empty when unknown. No assignor here reads it yet."""
        ...


@dataclass(frozen=True, slots=True)
class TopicsMetadata(Generic[TopicIdT]):
    """A :class:`TopicDescriber` over plain mappings."""

    partition_counts: Mapping[TopicIdT, int]
    partition_racks: Mapping[TopicIdT, Mapping[int, frozenset[str]]] = field(default_factory=dict)

    def partition_count(self, topic_id: TopicIdT) -> int:
        return self.partition_counts.get(topic_id, 0)

    def racks_for_partition(self, topic_id: TopicIdT, partition: int) -> frozenset[str]:
        return self.partition_racks.get(topic_id, {}).get(partition, frozenset())
