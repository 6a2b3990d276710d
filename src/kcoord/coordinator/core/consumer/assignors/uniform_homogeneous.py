"""The uniform assignor when every member subscribes to the same topics.

Kafka's ``UniformHomogeneousAssignmentBuilder``, including KAFKA-18688's stability fix (2025).
Balance first, then stickiness:

- Balance: P partitions over M members give every member P // M or P // M + 1 partitions, and
  exactly P % M members the extra one.
- Stickiness: a member keeps its current partitions up to its quota. The P % M extra slots go first
  to members that already hold more than P // M (in member id order), so that no member gives up a
  partition while another takes one more; slots still free then go to the members last in member id
  order that have room, as in Kafka.

Steps:
1. In member id order, each member keeps up to its quota (lowest topic ids, then lowest partitions
   first); the rest of its partitions join a queue behind the partitions nobody holds.
2. Members below quota take runs of partitions from the queue, in member id order.

Cost: O(P) to learn which partitions are held, done with set operations per member and topic rather
than per partition, plus work per partition only for partitions that change hands. A member whose
partitions stay the same gets its current mapping back, the same object.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Generic

from .assignment import GroupAssignment
from .spec import GroupSpec, MemberAssignment, TopicDescriber, TopicIdT

# (topic id, partitions) pairs: what a member holds and keeps ...
_Held = list[tuple[TopicIdT, frozenset[int]]]
# ... and runs of partitions in order: what members give up and take.
_Runs = list[tuple[TopicIdT, Sequence[int]]]


def assign_homogeneous(
    group: GroupSpec[TopicIdT], topics: TopicDescriber[TopicIdT]
) -> GroupAssignment[TopicIdT]:
    members = group.members
    if not members:
        return GroupAssignment({})
    subscription = next(iter(members.values())).subscribed_topic_ids
    counts: dict[TopicIdT, int] = {}
    for topic_id in sorted(subscription):
        count = topics.partition_count(topic_id)
        if count > 0:
            counts[topic_id] = count
    member_ids = sorted(members)
    min_quota, extra_slots = divmod(sum(counts.values()), len(member_ids))

    held: dict[TopicIdT, set[int]] = {topic_id: set() for topic_id in counts}
    given_up: _PartitionQueue[TopicIdT] = _PartitionQueue()
    kept: list[_Held[TopicIdT]] = []
    intact: list[bool] = []  # the member keeps exactly its current mapping (so far)
    room: list[list[int]] = []  # [member index, partitions it may still take]
    for index, member_id in enumerate(member_ids):
        valid, valid_count, unchanged = _valid_partitions(members[member_id].assignment, counts, held)
        # Every member bids for an extra slot while some are left; it wins one only by filling it
        # with its own partitions, otherwise it gives the slot back for a member that can.
        claims_extra = extra_slots > 0
        quota = min_quota + claims_extra
        if valid_count > quota:
            valid = _keep_lowest(valid, quota, given_up)
            unchanged = False
            space = 0
        else:
            space = quota - valid_count
        if claims_extra:
            if space > 0:
                space -= 1
                claims_extra = False
            else:
                extra_slots -= 1
        if space > 0 or (extra_slots > 0 and not claims_extra):
            room.append([index, space])
        kept.append(valid)
        intact.append(unchanged)

    queue = _unheld_partitions(counts, held)
    queue.extend(given_up)
    # Slots nobody could fill from its own partitions go to the last members with room.
    for entry in reversed(room):
        if extra_slots == 0:
            break
        entry[1] += 1
        extra_slots -= 1
    taken: dict[int, _Runs[TopicIdT]] = {}
    for index, space in room:
        if space > 0:
            taken[index] = queue.take(space)
    if not queue.exhausted:
        raise AssertionError("uniform assignor: the quotas left partitions unassigned")

    result: dict[str, MemberAssignment[TopicIdT]] = {}
    for index, member_id in enumerate(member_ids):
        runs = taken.get(index)
        if runs is None and intact[index]:
            result[member_id] = members[member_id].assignment
        else:
            result[member_id] = _merged(kept[index], runs or [])
    return GroupAssignment(result)


def _valid_partitions(
    current: MemberAssignment[TopicIdT], counts: dict[TopicIdT, int], held: dict[TopicIdT, set[int]]
) -> tuple[_Held[TopicIdT], int, bool]:
    """The member's partitions it may keep: of subscribed topics, in range, not held by an earlier member.

    Marks them held. Returns them, their number, and whether that is all of ``current``.
    """
    valid: _Held[TopicIdT] = []
    total = 0
    unchanged = True
    for topic_id, partitions in current.items():
        count = counts.get(topic_id)
        if count is None or not partitions:
            unchanged = False
            continue
        topic_held = held[topic_id]
        if min(partitions) < 0 or max(partitions) >= count or not topic_held.isdisjoint(partitions):
            partitions = frozenset(p for p in partitions if 0 <= p < count and p not in topic_held)
            unchanged = False
            if not partitions:
                continue
        topic_held.update(partitions)
        valid.append((topic_id, partitions))
        total += len(partitions)
    return valid, total, unchanged


def _keep_lowest(valid: _Held[TopicIdT], quota: int, given_up: _PartitionQueue[TopicIdT]) -> _Held[TopicIdT]:
    """Keep ``quota`` partitions, lowest topic ids then lowest partitions first; queue the rest."""
    kept: _Held[TopicIdT] = []
    for topic_id, partitions in sorted(valid, key=lambda run: run[0]):
        if len(partitions) <= quota:
            kept.append((topic_id, partitions))
            quota -= len(partitions)
            continue
        ordered = sorted(partitions)
        if quota > 0:
            kept.append((topic_id, frozenset(ordered[:quota])))
        given_up.append(topic_id, ordered[quota:])
        quota = 0
    return kept


def _unheld_partitions(
    counts: dict[TopicIdT, int], held: dict[TopicIdT, set[int]]
) -> _PartitionQueue[TopicIdT]:
    """The partitions no member holds, by topic id then partition."""
    queue: _PartitionQueue[TopicIdT] = _PartitionQueue()
    for topic_id, count in counts.items():
        topic_held = held[topic_id]
        if not topic_held:
            queue.append(topic_id, range(count))
        elif len(topic_held) < count:
            queue.append(topic_id, sorted(set(range(count)).difference(topic_held)))
    return queue


def _merged(kept: _Held[TopicIdT], taken: _Runs[TopicIdT]) -> MemberAssignment[TopicIdT]:
    assignment = dict(kept)
    for topic_id, partitions in taken:
        own = assignment.get(topic_id)
        assignment[topic_id] = own.union(partitions) if own else frozenset(partitions)
    return MappingProxyType(assignment)


class _PartitionQueue(Generic[TopicIdT]):
    """Partitions waiting for a member, in order, handed out as runs (slices, not one by one)."""

    __slots__ = ("_runs", "_run", "_offset")

    def __init__(self) -> None:
        self._runs: _Runs[TopicIdT] = []
        self._run = 0  # index of the run being handed out
        self._offset = 0  # position in that run

    def append(self, topic_id: TopicIdT, partitions: Sequence[int]) -> None:
        if partitions:
            self._runs.append((topic_id, partitions))

    def extend(self, other: _PartitionQueue[TopicIdT]) -> None:
        """Queue what ``other`` still holds behind this queue's partitions."""
        if other._offset:
            topic_id, partitions = other._runs[other._run]
            self.append(topic_id, partitions[other._offset :])
            self._runs.extend(other._runs[other._run + 1 :])
        else:
            self._runs.extend(other._runs[other._run :])

    def take(self, count: int) -> _Runs[TopicIdT]:
        taken: _Runs[TopicIdT] = []
        runs = self._runs
        while count > 0 and self._run < len(runs):
            topic_id, partitions = runs[self._run]
            end = self._offset + count
            run = partitions[self._offset : end]
            taken.append((topic_id, run))
            count -= len(run)
            if end >= len(partitions):
                self._run += 1
                self._offset = 0
            else:
                self._offset = end
        return taken

    @property
    def exhausted(self) -> bool:
        return self._run >= len(self._runs)
