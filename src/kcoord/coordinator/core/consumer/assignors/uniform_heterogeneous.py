"""The uniform assignor when members subscribe to different topics.

Kafka's ``UniformHeterogeneousAssignmentBuilder`` as reworked for Kafka 4.0 (KAFKA-17710). A
member's load is its number of partitions over all topics; balance is sought per topic, among the
topic's subscribers:

1. Each member keeps its current partitions of the topics it still subscribes to.
2. Partitions nobody holds are handed out topic by topic, each to the least loaded subscriber,
   round robin among subscribers with equal load (lowest member id first). Topics go in the order:
   most partitions per subscriber, then fewest subscribers, then topic id.
3. Balancing: passes over the topics with two or more subscribers, in the same order. For each,
   the topic's partitions move from its most loaded subscribers that hold some (their highest
   partition first) to its least loaded subscribers, until those loads differ by at most one. The
   passes end after a full pass without a move, or after 16 passes (Kafka's limit).

The guarantee, once the passes settle (Kafka: "perfectly balanced when all subscribers of a topic have
the same subscriptions, almost balanced otherwise"): no partition could move from its member to
another subscriber of its topic with two or more partitions fewer. With overlapping, unequal
subscriptions the loads can still differ by more than one (members 1 and 2 on topic A, 2 and 3 on
topic B: 9, 10 and 11 partitions).

Members are numbered in member id order. Who holds a partition is one list per topic, so handing
out or moving a partition is a couple of list stores; only the members and topics that changed are
rebuilt at the end, and every other member gets its current mapping back, the same object.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter
from types import MappingProxyType
from typing import Any, Generic

from .assignment import GroupAssignment
from .spec import GroupSpec, MemberAssignment, TopicDescriber, TopicIdT

MAX_BALANCE_PASSES = 16  # Kafka's MAX_ITERATION_COUNT


def assign_heterogeneous(
    group: GroupSpec[TopicIdT], topics: TopicDescriber[TopicIdT]
) -> GroupAssignment[TopicIdT]:
    builder = _HeterogeneousBuilder(group, topics)
    builder.keep_current()
    builder.hand_out_unheld()
    builder.balance()
    return builder.result()


class _HeterogeneousBuilder(Generic[TopicIdT]):
    def __init__(self, group: GroupSpec[TopicIdT], topics: TopicDescriber[TopicIdT]) -> None:
        self._member_ids = sorted(group.members)
        self._members = [group.members[member_id] for member_id in self._member_ids]
        # topic -> its subscribers (member indexes, ascending); only topics with partitions. Built
        # per distinct subscription: members mostly share a few, and a frozenset caches its hash,
        # while a topic id (uuid.UUID) is hashed anew on every lookup.
        alike: dict[frozenset[TopicIdT], list[int]] = {}
        for index, member in enumerate(self._members):
            alike.setdefault(member.subscribed_topic_ids, []).append(index)
        self._subscribers: dict[TopicIdT, list[int]] = {}
        for subscription, indexes in alike.items():
            for topic_id in subscription:
                subscribers = self._subscribers.get(topic_id)
                if subscribers is None:
                    if topics.partition_count(topic_id) <= 0:
                        continue
                    subscribers = self._subscribers[topic_id] = []
                subscribers.extend(indexes)
        if len(alike) > 1:
            for subscribers in self._subscribers.values():
                subscribers.sort()
        # topic -> partition -> member index holding it, -1 for nobody.
        self._owners: dict[TopicIdT, list[int]] = {
            topic_id: [-1] * topics.partition_count(topic_id) for topic_id in self._subscribers
        }
        self._loads = [0] * len(self._members)
        # What each member keeps of its current assignment: that very mapping when it is all valid.
        self._kept: list[MemberAssignment[TopicIdT]] = []
        # topic -> members whose partitions of that topic changed.
        self._touched: dict[TopicIdT, set[int]] = {}

    def keep_current(self) -> None:
        owners = self._owners
        for index, member in enumerate(self._members):
            current = member.assignment
            subscribed = member.subscribed_topic_ids
            valid: dict[TopicIdT, frozenset[int]] = {}
            unchanged = True
            for topic_id, partitions in current.items():
                topic_owners = owners.get(topic_id) if topic_id in subscribed else None
                if topic_owners is None or not partitions:
                    unchanged = False
                    continue
                count = len(topic_owners)
                mine = 0
                for partition in partitions:
                    if 0 <= partition < count and topic_owners[partition] < 0:
                        topic_owners[partition] = index
                        mine += 1
                if mine < len(partitions):  # out of range, or held by a member that sorts first
                    partitions = frozenset(
                        p for p in partitions if 0 <= p < count and topic_owners[p] == index
                    )
                    unchanged = False
                if partitions:
                    valid[topic_id] = partitions
                    self._loads[index] += len(partitions)
            self._kept.append(current if unchanged else MappingProxyType(valid))

    def hand_out_unheld(self) -> None:
        unheld: dict[TopicIdT, list[int]] = {}
        for topic_id, topic_owners in self._owners.items():
            free = [partition for partition, owner in enumerate(topic_owners) if owner < 0]
            if free:
                unheld[topic_id] = free
        loads = self._loads
        balancer = _LoadBalancer(loads)
        for topic_id in self._in_balancing_order(unheld):
            balancer.reset(self._subscribers[topic_id])
            topic_owners = self._owners[topic_id]
            touched = self._touched.setdefault(topic_id, set())
            for partition in unheld[topic_id]:
                member = balancer.next_least_loaded()
                topic_owners[partition] = member
                loads[member] += 1
                touched.add(member)

    def balance(self) -> None:
        shared = [topic_id for topic_id, subscribers in self._subscribers.items() if len(subscribers) >= 2]
        ordered = self._in_balancing_order(shared)
        # Reads the loads of a topic's subscribers in one C call (the common case is a balanced topic).
        loads_of = [itemgetter(*self._subscribers[topic_id]) for topic_id in ordered]
        balancer = _LoadBalancer(self._loads)
        last_moved = -1  # the last topic that moved partitions: one more pass up to it finds nothing to do
        for _ in range(MAX_BALANCE_PASSES):
            for position, topic_id in enumerate(ordered):
                if position == last_moved:
                    return
                moved = self._balance_topic(topic_id, balancer, loads_of[position])
                if moved or last_moved == -1:
                    last_moved = position

    def _balance_topic(self, topic_id: TopicIdT, balancer: _LoadBalancer, loads_of: itemgetter[Any]) -> int:
        """Move the topic's partitions from its most to its least loaded subscribers; returns how many moved."""
        loads: tuple[int, ...] = loads_of(self._loads)
        if max(loads) - min(loads) <= 1:
            return 0
        subscribers = self._subscribers[topic_id]
        balancer.reset(subscribers)
        topic_owners = self._owners[topic_id]
        held_by: dict[int, list[int]] = {member: [] for member in subscribers}
        for partition, owner in enumerate(topic_owners):
            held_by[owner].append(partition)
        touched = self._touched.setdefault(topic_id, set())
        moved = 0
        while not balancer.balanced:
            donor = balancer.next_most_loaded()
            while donor >= 0 and not held_by[donor]:
                balancer.exclude_last_most_loaded()
                donor = balancer.next_most_loaded()
            if donor < 0:
                break  # the most loaded subscribers hold none of this topic's partitions
            partition = held_by[donor].pop()
            receiver = balancer.next_least_loaded()
            if balancer.balanced:
                break
            topic_owners[partition] = receiver
            self._loads[donor] -= 1
            self._loads[receiver] += 1
            touched.add(donor)
            touched.add(receiver)
            moved += 1
        return moved

    def _in_balancing_order(self, topic_ids: Iterable[TopicIdT]) -> list[TopicIdT]:
        """Most partitions per subscriber first (as a double, like Kafka), then fewest subscribers, then topic id."""
        owners = self._owners
        subscribers = self._subscribers

        def order(topic_id: TopicIdT) -> tuple[float, int, TopicIdT]:
            count = len(subscribers[topic_id])
            return -(len(owners[topic_id]) / count), count, topic_id

        return sorted(topic_ids, key=order)

    def result(self) -> GroupAssignment[TopicIdT]:
        changed: dict[int, dict[TopicIdT, frozenset[int]]] = {}
        for topic_id, members in self._touched.items():
            collected: dict[int, list[int]] = {member: [] for member in members}
            for partition, owner in enumerate(self._owners[topic_id]):
                bucket = collected.get(owner)
                if bucket is not None:
                    bucket.append(partition)
            for member, held in collected.items():
                changed.setdefault(member, {})[topic_id] = frozenset(held)
        assignments: dict[str, MemberAssignment[TopicIdT]] = {}
        for index, member_id in enumerate(self._member_ids):
            kept = self._kept[index]
            changes = changed.get(index)
            if changes is None:
                assignments[member_id] = kept
                continue
            assignment = dict(kept)
            for topic_id, partitions in changes.items():
                if partitions:
                    assignment[topic_id] = partitions
                else:
                    assignment.pop(topic_id, None)
            assignments[member_id] = MappingProxyType(assignment)
        return GroupAssignment(assignments)


class _LoadBalancer:
    """Picks the least and the most loaded of a topic's subscribers, one partition at a time (Kafka's
    ``MemberAssignmentBalancer``).

    The subscribers are sorted by load. The least loaded range, at the front, grows rightwards: each
    member in it receives one partition per round, and when a round ends its level rises by one and
    takes in the members now at that level. The most loaded range, at the back, grows leftwards the
    same way as members give partitions up; members with nothing of the topic to give are swapped out
    of it. The topic is balanced once the two levels differ by one or less. Loads are read live from
    the shared ``loads`` list, which the caller updates after each move.
    """

    __slots__ = (
        "_loads", "_order", "_least_end", "_least_level", "_next_least",
        "_most_start", "_most_end", "_most_level", "_next_most",
    )  # fmt: skip

    def __init__(self, loads: list[int]) -> None:
        self._loads = loads
        self._order: list[int] = []
        self._least_end = self._least_level = self._next_least = 0
        self._most_start = self._most_end = self._most_level = self._next_most = 0

    def reset(self, members: list[int]) -> None:
        """Start on a topic; ``members`` ascending, so equal loads stay in member order (a stable sort)."""
        loads = self._loads
        order = self._order = sorted(members, key=loads.__getitem__)
        self._least_end = 0  # [0, least_end): the least loaded range
        self._least_level = loads[order[0]] - 1
        self._next_least = 0
        self._most_start = self._most_end = len(order)  # [most_start, most_end): the most loaded range
        self._most_level = loads[order[-1]] + 1
        self._next_most = len(order) - 1

    @property
    def balanced(self) -> bool:
        return self._most_level - self._least_level <= 1

    def next_least_loaded(self) -> int:
        """The member to receive the next partition."""
        order = self._order
        if self._next_least >= self._least_end:
            # Everyone in the range got one: raise its level, take in members at the new level.
            level = self._least_level = self._least_level + 1
            end = self._least_end
            while end < len(order) and self._loads[order[end]] == level:
                end += 1
            self._least_end = end
            self._next_least = 0
        member = order[self._next_least]
        self._next_least += 1
        return member

    def next_most_loaded(self) -> int:
        """The member to give up the next partition, or -1 when no member is left to ask."""
        order = self._order
        if self._next_most < self._most_start:
            start = self._most_start
            if self._most_end <= start and start > 0:
                # Exclusions emptied the range: restart it from the next member down, whatever its load.
                level = self._loads[order[start - 1]]
            else:
                level = self._most_level - 1
            while start > 0 and self._loads[order[start - 1]] == level:
                start -= 1
            self._most_level = level
            self._most_start = start
            self._next_most = self._most_end - 1
        if self._next_most < 0:
            return -1
        member = order[self._next_most]
        self._next_most -= 1
        return member

    def exclude_last_most_loaded(self) -> None:
        """Drop the member :meth:`next_most_loaded` just returned from the most loaded range."""
        order = self._order
        at, end = self._next_most + 1, self._most_end - 1
        order[at], order[end] = order[end], order[at]
        self._most_end = end
