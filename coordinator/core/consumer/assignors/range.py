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
        runs = _topic_runs(group, topics)
        shared = sorted(runs) if group.subscription_type is SubscriptionType.HOMOGENEOUS else None
        assignments: dict[str, MemberAssignment[TopicIdT]] = {}
        for member_id in ranked:
            member = members[member_id]
            assignment: dict[TopicIdT, frozenset[int]] = {}
            for topic_id in shared if shared is not None else member.subscribed_topic_ids:
                topic_runs = runs.get(topic_id)
                if topic_runs is not None:
                    start, end = topic_runs.next_run()
                    if end > start:
                        assignment[topic_id] = frozenset(range(start, end))
            # Hand an unchanged assignment back as it is, so callers can spot unchanged members.
            assignments[member_id] = (
                member.assignment if assignment == member.assignment else MappingProxyType(assignment)
            )
        return GroupAssignment(assignments)


def _rank(member_id: str, member: MemberSubscriptionAndAssignment[TopicIdT]) -> tuple[int, str, str]:
    """Static members first, by instance id; then dynamic members by member id.

    Instance ids are unique within a group; the member id only settles ties should the caller pass
    a duplicate, so that the order never depends on the order of ``members``.
    """
    if member.instance_id is not None:
        return 0, member.instance_id, member_id
    return 1, member_id, ""


def _topic_runs(group: GroupSpec[TopicIdT], topics: TopicDescriber[TopicIdT]) -> dict[TopicIdT, _TopicRuns]:
    """The topics with partitions that members subscribe to, each with its number of subscribers."""
    members = group.members
    subscriber_counts: dict[TopicIdT, int] = {}
    if group.subscription_type is SubscriptionType.HOMOGENEOUS:
        first = next(iter(members.values()), None)
        if first is not None:
            subscriber_counts = dict.fromkeys(first.subscribed_topic_ids, len(members))
    else:
        for member in members.values():
            for topic_id in member.subscribed_topic_ids:
                subscriber_counts[topic_id] = subscriber_counts.get(topic_id, 0) + 1
    runs: dict[TopicIdT, _TopicRuns] = {}
    for topic_id, subscribers in subscriber_counts.items():
        count = topics.partition_count(topic_id)
        if count > 0:
            runs[topic_id] = _TopicRuns(count, subscribers)
    return runs


class _TopicRuns:
    """Cuts one topic's partitions into its subscribers' runs, in subscriber order."""

    __slots__ = ("_partitions", "_min_quota", "_extras", "_next_start")

    def __init__(self, partitions: int, subscribers: int) -> None:
        self._partitions = partitions
        self._min_quota, self._extras = divmod(partitions, subscribers)
        self._next_start = 0

    def next_run(self) -> tuple[int, int]:
        """[start, end) for the next subscriber; empty once the partitions run out."""
        start = self._next_start
        end = min(start + self._min_quota, self._partitions)
        if self._extras > 0:
            end += 1
            self._extras -= 1
        self._next_start = end
        return start, end
