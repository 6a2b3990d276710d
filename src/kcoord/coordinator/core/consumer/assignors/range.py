"""The "range" assignor: contiguous runs of partitions per topic, co-partitioned where possible.

Kafka's server-side ``RangeAssignor`` since its rewrite in Kafka 3.9 (KAFKA-16944), the one of Kafka
4.0. Each topic's partitions are cut into contiguous runs over the topic's subscribers: with P
partitions and S subscribers, each gets P // S, and the first P % S one more. Subscribers go in one
order for every topic: static members first, by group.instance.id, then the others by member id. So
when all members subscribe to the same topics and the topics have equal partition counts, every member
gets the same partition numbers of each topic (co-partitioning, for joins).

It is not sticky: the assignment is recomputed from the member order alone, and a member that joins
or leaves shifts the runs of the members after it. The earlier server-side range assignor (Kafka 3.5
to 3.8) kept current partitions, but could not keep co-partitioning too; Kafka dropped that. Static
members keep their runs across restarts because the order follows instance ids, not member ids.
Not rack aware (later Kafka versions add rack matching).
"""

from __future__ import annotations

from types import MappingProxyType

from .assignment import GroupAssignment
from .spec import (
    GroupSpec,
    MemberAssignment,
    MemberSubscriptionAndAssignment,
    SubscriptionType,
    TopicDescriber,
    TopicIdT,
)


class RangeAssignor:
    @property
    def name(self) -> str:
        return "range"

    def assign(
        self, group: GroupSpec[TopicIdT], topics: TopicDescriber[TopicIdT]
    ) -> GroupAssignment[TopicIdT]:
        members = group.members
        ranked = sorted(members, key=lambda member_id: _rank(member_id, members[member_id]))
        assignments: dict[str, dict[TopicIdT, frozenset[int]]] = {member_id: {} for member_id in ranked}
        for topic_id, subscribers in _subscribers_by_topic(group, ranked).items():
            count = topics.partition_count(topic_id)
            if count <= 0:
                continue
            # Subscriber k gets count // S partitions, one more while k < count % S; only the first
            # min(S, count) subscribers get any, so the work follows partitions, not members x topics.
            quota, extras = divmod(count, len(subscribers))
            start = 0
            for k in range(min(len(subscribers), count)):
                end = start + quota + (k < extras)
                assignments[subscribers[k]][topic_id] = frozenset(range(start, end))
                start = end
        result: dict[str, MemberAssignment[TopicIdT]] = {}
        for member_id, assignment in assignments.items():
            current = members[member_id].assignment
            # Hand an unchanged assignment back as it is, so callers can spot unchanged members.
            result[member_id] = current if assignment == current else MappingProxyType(assignment)
        return GroupAssignment(result)


def _rank(member_id: str, member: MemberSubscriptionAndAssignment[TopicIdT]) -> tuple[int, str, str]:
    """Static members first, by instance id; then dynamic members by member id.

    Instance ids are unique within a group; the member id only settles ties should the caller pass
    a duplicate, so that the order never depends on the order of ``members``.
    """
    if member.instance_id is not None:
        return 0, member.instance_id, member_id
    return 1, member_id, ""


def _subscribers_by_topic(group: GroupSpec[TopicIdT], ranked: list[str]) -> dict[TopicIdT, list[str]]:
    """topic id -> its subscribers, in rank order."""
    members = group.members
    if not ranked:
        return {}
    if group.subscription_type is SubscriptionType.HOMOGENEOUS:
        return dict.fromkeys(sorted(members[ranked[0]].subscribed_topic_ids), ranked)
    subscribers: dict[TopicIdT, list[str]] = {}
    for member_id in ranked:
        for topic_id in members[member_id].subscribed_topic_ids:
            subscribers.setdefault(topic_id, []).append(member_id)
    return subscribers
