"""Computes a consumer group's new target assignment and the records that store it (Kafka's
``TargetAssignmentBuilder.ConsumerTargetAssignmentBuilder``, and ``GroupMetadataManager.updateTargetAssignment``
that drives it).

The heartbeat handler calls :func:`update_target_assignment` when the group epoch is ahead of the
target assignment epoch, or when a static member is replaced. Pure: the group is read, never
changed; the handler writes the returned records and the group learns the new target by replaying
them.

- Every member is described to the assignor by its subscribed topics that exist (by name and by
  resolved regular expression, :mod:`.subscriptions`), its rack, its instance id and its current
  *target* assignment, which the assignors keep as much of as they can.
- The member this heartbeat adds or updates is taken as given, not as the group holds it yet. A
  static member that rejoins under a new member id starts from the target of the member it replaces,
  and the replaced one is left out.
- Records: a ConsumerGroupTargetAssignmentMember for each member whose target changed (or that had
  none), then the ConsumerGroupTargetAssignmentMetadata with the new epoch. A removed member gets no
  tombstone here: its removal writes it (Kafka's builder does the same).
- The assignor is the server assignor most members name, or ``group.consumer.assignors``' first
  (``uniform``) when none does (:func:`preferred_server_assignor`).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from kcoord.protocol.records import Record

from ..records import consumer_group_target_assignment_epoch_record, consumer_group_target_assignment_record
from .assignors import (
    DEFAULT_ASSIGNOR,
    SERVER_ASSIGNORS,
    GroupSpec,
    MemberSubscriptionAndAssignment,
    PartitionAssignor,
    TopicsMetadata,
)
from .group import ConsumerGroup, ResolvedRegularExpression, TargetAssignment
from .member import ConsumerGroupMember
from .subscriptions import TopicImage, subscribed_topic_ids, topic_ids_by_name


@dataclass(frozen=True, slots=True)
class TargetAssignmentResult:
    """The group's new target assignment, and the records that store it."""

    assignment: Mapping[str, TargetAssignment]  # every member after the change -> its target
    records: list[Record] = field(default_factory=list)

    def of(self, member_id: str) -> TargetAssignment:
        return self.assignment.get(member_id, {})


def preferred_server_assignor(
    members: Iterable[ConsumerGroupMember],
    assignors: Mapping[str, PartitionAssignor] = SERVER_ASSIGNORS,
    default: str = DEFAULT_ASSIGNOR,
) -> str:
    """The server assignor most members name (Kafka's ``computePreferredServerAssignor``), ``default``
    when none names one.

    Only names in ``assignors`` count (a heartbeat naming another is refused, but a log written
    under another configuration may hold one). Kafka breaks a tie by its hash map's order, which
    puts "uniform" before "range"; here a tie goes to ``default``, then to the name that sorts first."""
    counts = Counter(
        m.server_assignor for m in members if m.server_assignor is not None and m.server_assignor in assignors
    )
    if not counts:
        return default
    return min(counts, key=lambda name: (-counts[name], name != default, name))


def build_target_assignment(
    group_id: str,
    group_epoch: int,
    assignor: PartitionAssignor,
    *,
    members: Mapping[str, ConsumerGroupMember],
    target_assignment: Mapping[str, TargetAssignment],
    topics: TopicImage,
    resolved_regular_expressions: Mapping[str, ResolvedRegularExpression] | None = None,
    static_members: Mapping[str, str] | None = None,
    updated_member: ConsumerGroupMember | None = None,
    removed_member_ids: Collection[str] = (),
    assignment_timestamp_ms: int = 0,
) -> TargetAssignmentResult:
    """Kafka's ``TargetAssignmentBuilder.build``: ``members`` and ``target_assignment`` as the group
    holds them, ``updated_member`` replacing (or joining) them, ``removed_member_ids`` left out;
    ``static_members`` maps instance ids to the member ids the group knows them by."""
    resolved = resolved_regular_expressions or {}
    ids_by_name = topic_ids_by_name(topics)

    def spec(
        member: ConsumerGroupMember, assignment: TargetAssignment
    ) -> MemberSubscriptionAndAssignment[uuid.UUID]:
        return MemberSubscriptionAndAssignment(
            subscribed_topic_ids=subscribed_topic_ids(member, resolved, ids_by_name),
            assignment=assignment,
            rack_id=member.rack_id,
            instance_id=member.instance_id,
        )

    specs = {
        member_id: spec(member, target_assignment.get(member_id, {})) for member_id, member in members.items()
    }
    for member_id in removed_member_ids:
        specs.pop(member_id, None)
    if updated_member is not None:
        member_id = updated_member.member_id
        current = target_assignment.get(member_id, {})
        # A static member rejoining under a new member id takes over the target of the one it replaces.
        if updated_member.instance_id is not None and static_members is not None:
            replaced_id = static_members.get(updated_member.instance_id)
            if replaced_id is not None and replaced_id != member_id:
                current = target_assignment.get(replaced_id, {})
        specs[member_id] = spec(updated_member, current)

    new_assignment = assignor.assign(
        GroupSpec.of(specs),
        TopicsMetadata({topic_id: metadata.partition_count for topic_id, metadata in topics.items()}),
    ).members
    result: dict[str, TargetAssignment] = {}
    records: list[Record] = []
    for member_id in sorted(specs):
        new = _without_empty_topics(new_assignment.get(member_id, {}))
        result[member_id] = new
        old = target_assignment.get(member_id)
        if old is None or _without_empty_topics(old) != new:
            records.append(consumer_group_target_assignment_record(group_id, member_id, new))
    records.append(
        consumer_group_target_assignment_epoch_record(group_id, group_epoch, assignment_timestamp_ms)
    )
    return TargetAssignmentResult(result, records)


def update_target_assignment(
    group: ConsumerGroup,
    group_epoch: int,
    topics: TopicImage,
    *,
    now_ms: int,
    updated_member: ConsumerGroupMember | None = None,
    removed_member_id: str | None = None,
    assignors: Mapping[str, PartitionAssignor] = SERVER_ASSIGNORS,
    default_assignor: str = DEFAULT_ASSIGNOR,
    resolved_regular_expressions: Mapping[str, ResolvedRegularExpression] | None = None,
) -> TargetAssignmentResult:
    """The group's target assignment at ``group_epoch`` after this heartbeat (Kafka's
    ``updateTargetAssignment``): the preferred assignor of the members as they will be, and the
    member a static ``updated_member`` replaces (its instance id names another member id) removed.
    ``resolved_regular_expressions``: as this heartbeat resolves them (default: as the group holds them)."""
    removed = {removed_member_id} if removed_member_id is not None else set()
    if updated_member is not None:
        replaced_id = group.static_member_id(updated_member.instance_id)
        if replaced_id is not None and replaced_id != updated_member.member_id:
            removed.add(replaced_id)
    members_after = {m_id: m for m_id, m in group.members.items() if m_id not in removed}
    if updated_member is not None:
        members_after[updated_member.member_id] = updated_member
    assignor = assignors[preferred_server_assignor(members_after.values(), assignors, default_assignor)]
    return build_target_assignment(
        group.group_id,
        group_epoch,
        assignor,
        members=group.members,
        target_assignment=group.target_assignment,
        topics=topics,
        resolved_regular_expressions=(
            group.resolved_regular_expressions
            if resolved_regular_expressions is None
            else resolved_regular_expressions
        ),
        static_members=group.static_members,
        updated_member=updated_member,
        removed_member_ids=removed,
        assignment_timestamp_ms=now_ms,
    )


def _without_empty_topics(assignment: TargetAssignment) -> TargetAssignment:
    """A target as it compares and is stored: a topic with no partitions is no topic (a record may
    hold one; an assignor never returns one)."""
    return {topic_id: frozenset(partitions) for topic_id, partitions in assignment.items() if partitions}
