"""Moves one member's current assignment towards its target, a heartbeat at a time (Kafka's
``CurrentAssignmentBuilder``, the reconciliation engine of the consumer protocol).

:func:`reconcile` is pure: it reads the member, its target, what its client reports owning and who
owns each partition now, and returns the member's next state (the same object when nothing moves).
The heartbeat handler writes a changed member as its ConsumerGroupCurrentMemberAssignment record
(:func:`kcoord.coordinator.core.records.consumer_group_current_assignment_record`); replaying that
record gives back exactly the returned member.

The rules, which together keep a partition from being owned by two clients at once:

- *Revoke before assign.* A member that must give partitions up stays at its epoch in
  UNREVOKED_PARTITIONS, owning target ∩ current, until its client's heartbeat no longer lists the
  partitions pending revocation. Only then does it move to the target epoch.
- *Assign only what is free.* At the target epoch a member gets the target partitions nobody owns
  (current partition epoch -1, or only itself as their revoker). The others wait in
  UNRELEASED_PARTITIONS until their previous owner lets them go.
- *Assignment epochs (KIP-1251).* A partition new to the member is assigned at the target epoch; one
  it keeps keeps the epoch it was assigned at. :meth:`ConsumerGroupMember.with_assignment` does this
  bookkeeping (and moves kcoord's revocation epoch).
- *Subscriptions.* A topic the member no longer subscribes to counts as absent from its target. With
  ``enforce_subscription_consistency`` such topics are also stripped from a member already at the
  target epoch, without a full reconciliation (Kafka's ``updateCurrentAssignment``).
- A member in a state this version does not know (UNKNOWN) is fenced unless its client reports
  owning nothing, and then reconciled from scratch at the target epoch.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping

from kcoord.protocol.errors import ErrorCode

from .member import ConsumerGroupMember, MemberState

# topic id -> partitions: what a client reports owning, or the target of one member
TopicPartitions = Mapping[uuid.UUID, Collection[int]]
# (topic id, partition) -> the member epoch of the partition's owner, or -1 when nobody owns it
PartitionEpochLookup = Callable[[uuid.UUID, int], int]


class FencedMemberEpoch(Exception):
    """The member must give up all its partitions and rejoin (ConsumerGroupHeartbeat's
    FENCED_MEMBER_EPOCH; Kafka's ``FencedMemberEpochException``)."""

    error_code = ErrorCode.FENCED_MEMBER_EPOCH


def reconcile(
    member: ConsumerGroupMember,
    *,
    target_assignment_epoch: int,
    target_assignment: TopicPartitions,
    owned_partitions: TopicPartitions | None,
    current_partition_epoch: PartitionEpochLookup,
    subscribed_topic_ids: Collection[uuid.UUID],
    enforce_subscription_consistency: bool = False,
) -> ConsumerGroupMember:
    """The member's next state (Kafka's ``CurrentAssignmentBuilder.build``).

    ``owned_partitions`` is what the heartbeat reports (None when it did not say, which counts as
    still owning everything). ``current_partition_epoch`` is the group's view before this member
    changes (:meth:`ConsumerGroup.current_partition_epoch`). ``subscribed_topic_ids`` are the
    member's topics by name and by resolved regular expression (:func:`.subscriptions.subscribed_topic_ids`).

    Raises :class:`FencedMemberEpoch` for a member in the UNKNOWN state whose client still reports
    partitions (or does not report them)."""
    reconciliation = _Reconciliation(
        member, target_assignment_epoch, target_assignment, owned_partitions,
        current_partition_epoch, subscribed_topic_ids,
    )  # fmt: skip
    state = member.state
    if state is MemberState.STABLE:
        # A new target epoch restarts the reconciliation; at the target, only the subscription may move.
        if member.member_epoch != target_assignment_epoch:
            return reconciliation.next_assignment(member.member_epoch)
        if enforce_subscription_consistency:
            return reconciliation.strip_unsubscribed()
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        # Nothing moves until the client stops reporting the partitions it must revoke; a
        # subscription change may still add topics to revoke meanwhile.
        if reconciliation.client_owns_any(member.partitions_pending_revocation):
            return reconciliation.strip_unsubscribed() if enforce_subscription_consistency else member
        return reconciliation.next_assignment(member.member_epoch)
    if state is MemberState.UNRELEASED_PARTITIONS:
        # Takes whatever of its target was released since, or follows a newer target.
        return reconciliation.next_assignment(member.member_epoch)
    # UNKNOWN: a state written by a newer coordinator. Start over from an empty client.
    if owned_partitions is None or owned_partitions:
        raise FencedMemberEpoch(
            f"member {member.member_id} is in an unknown state; it must give up its partitions and rejoin"
        )
    return reconciliation.next_assignment(target_assignment_epoch)


class _Reconciliation:
    """One call of :func:`reconcile`: its inputs, and the two ways a member can move."""

    def __init__(
        self,
        member: ConsumerGroupMember,
        target_assignment_epoch: int,
        target_assignment: TopicPartitions,
        owned_partitions: TopicPartitions | None,
        current_partition_epoch: PartitionEpochLookup,
        subscribed_topic_ids: Collection[uuid.UUID],
    ) -> None:
        self.member = member
        self.target_epoch = target_assignment_epoch
        self.target = target_assignment
        self.owned = owned_partitions
        self.owner_epoch = current_partition_epoch
        self.subscribed = subscribed_topic_ids

    def client_owns_any(self, partitions: TopicPartitions) -> bool:
        """Whether the client still reports owning any of ``partitions`` (Kafka's
        ``ownsRevokedPartitions``); a heartbeat that reports nothing proves nothing was revoked."""
        if self.owned is None:
            return True
        for topic_id, owned in self.owned.items():
            to_revoke = partitions.get(topic_id)
            if to_revoke and any(partition in to_revoke for partition in owned):
                return True
        return False

    def next_assignment(self, member_epoch: int) -> ConsumerGroupMember:
        """Kafka's ``computeNextAssignment``: revoke first; else move to the target epoch, with the
        target partitions that are free and UNRELEASED_PARTITIONS if some are not.

        ``member_epoch`` is the epoch the member stays at while it revokes (its own, or the target
        epoch for a member reconciled from scratch)."""
        member = self.member
        kept: dict[uuid.UUID, set[int]] = {}
        to_revoke: dict[uuid.UUID, set[int]] = {}
        to_assign: dict[uuid.UUID, set[int]] = {}
        has_unreleased = False
        for topic_id in self.target.keys() | member.assigned_partitions.keys():
            # A topic the member no longer subscribes to is not its target, whatever the assignor said.
            target = set(self.target.get(topic_id, ())) if topic_id in self.subscribed else set()
            current = member.assigned_partitions.get(topic_id, {}).keys()
            kept_here = target & current
            revoked_here = current - kept_here
            # The member's own partitions pending revocation are not "someone else's": one member
            # owns a partition at a time, so it may take them straight back.
            own_pending = member.partitions_pending_revocation.get(topic_id, {})
            unreleased = {
                p for p in target - kept_here if self.owner_epoch(topic_id, p) != -1 and p not in own_pending
            }
            has_unreleased = has_unreleased or bool(unreleased)
            for holder, partitions in (
                (kept, kept_here), (to_revoke, revoked_here), (to_assign, target - kept_here - unreleased)
            ):  # fmt: skip
                if partitions:
                    holder[topic_id] = set(partitions)

        if to_revoke and self.client_owns_any(to_revoke):
            # Revoke before assign: the member keeps its epoch until the client lets them go.
            return member.with_assignment(
                member_epoch=member_epoch,
                previous_member_epoch=member.member_epoch,
                state=MemberState.UNREVOKED_PARTITIONS,
                assigned=kept,
                pending_revocation=to_revoke,
            )
        # Nothing left to revoke (or the client already did): the target epoch, with every free
        # target partition; the new ones get the target epoch as their assignment epoch.
        assigned = {topic_id: set(partitions) for topic_id, partitions in kept.items()}
        for topic_id, partitions in to_assign.items():
            assigned.setdefault(topic_id, set()).update(partitions)
        return member.with_assignment(
            member_epoch=self.target_epoch,
            previous_member_epoch=member.member_epoch,
            state=MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE,
            assigned=assigned,
            pending_revocation={},
        )

    def strip_unsubscribed(self) -> ConsumerGroupMember:
        """Kafka's ``updateCurrentAssignment``: the member's topics it no longer subscribes to move to
        its partitions pending revocation, at its current epoch and without reading the target."""
        member = self.member
        unsubscribed = {t: ps for t, ps in member.assigned_partitions.items() if t not in self.subscribed}
        if not unsubscribed:
            return member
        assigned = {t: ps.keys() for t, ps in member.assigned_partitions.items() if t in self.subscribed}
        pending: dict[uuid.UUID, set[int]] = {
            t: set(ps) for t, ps in member.partitions_pending_revocation.items()
        }
        for topic_id, partitions in unsubscribed.items():
            pending.setdefault(topic_id, set()).update(partitions)
        if self.client_owns_any(pending):
            return member.with_assignment(
                member_epoch=member.member_epoch,
                previous_member_epoch=member.member_epoch,
                state=MemberState.UNREVOKED_PARTITIONS,
                assigned=assigned,
                pending_revocation=pending,
            )
        # The client already let them go: the member only shrinks, in the state it was in.
        return member.with_assignment(
            member_epoch=member.member_epoch,
            previous_member_epoch=member.member_epoch,
            state=member.state,
            assigned=assigned,
            pending_revocation=member.partitions_pending_revocation,
        )
