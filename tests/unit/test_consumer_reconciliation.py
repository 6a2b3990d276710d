"""The reconciliation engine (coordinator/core/consumer/reconciliation.py): Kafka's
CurrentAssignmentBuilderTest scenarios, with KIP-1251's assignment epochs, each outcome replayed
from its ConsumerGroupCurrentMemberAssignment record; then Hypothesis runs whole groups of clients
between random targets and checks that no partition is ever owned twice, that every member gets to
its target, and that a partition a member keeps keeps its assignment epoch."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.coordinator.core import records as builders
from kcoord.coordinator.core.consumer.group import ResolvedRegularExpression
from kcoord.coordinator.core.consumer.member import ConsumerGroupMember, MemberState
from kcoord.coordinator.core.consumer.reconciliation import (
    FencedMemberEpoch,
    PartitionEpochLookup,
    TopicPartitions,
    reconcile,
)
from kcoord.coordinator.core.consumer.subscriptions import (
    TopicMetadata,
    assigned_topics_are_subscribed,
    assignment_is_subscription_consistent,
    subscribed_topic_ids,
    subscribed_topic_names,
    topic_ids_by_name,
)
from kcoord.protocol.errors import ErrorCode
from tests.unit.consumer_context import BAR, FOO, ConsumerLog, stored

TOPICS = {FOO: TopicMetadata("foo", 10), BAR: TopicMetadata("bar", 10)}
IDS = topic_ids_by_name(TOPICS)

STABLE = MemberState.STABLE
UNREVOKED = MemberState.UNREVOKED_PARTITIONS
UNRELEASED = MemberState.UNRELEASED_PARTITIONS


def at(epoch: int, **topics: Iterable[int]) -> dict[uuid.UUID, dict[int, int]]:
    """Partitions of foo and bar, all assigned at ``epoch``."""
    ids = {"foo": FOO, "bar": BAR}
    return {ids[name]: dict.fromkeys(partitions, epoch) for name, partitions in topics.items()}


def parts(**topics: Iterable[int]) -> dict[uuid.UUID, set[int]]:
    ids = {"foo": FOO, "bar": BAR}
    return {ids[name]: set(partitions) for name, partitions in topics.items()}


def merged(*holdings: Mapping[uuid.UUID, Mapping[int, int]]) -> dict[uuid.UUID, dict[int, int]]:
    out: dict[uuid.UUID, dict[int, int]] = {}
    for holding in holdings:
        for topic_id, partitions in holding.items():
            out.setdefault(topic_id, {}).update(partitions)
    return out


def member(
    state: MemberState,
    epoch: int,
    previous: int,
    assigned: Mapping[uuid.UUID, Mapping[int, int]],
    pending: Mapping[uuid.UUID, Mapping[int, int]] | None = None,
    topics: Collection[str] = ("foo", "bar"),
    regex: str | None = None,
) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        "member", subscribed_topic_names=frozenset(topics), subscribed_topic_regex=regex,
        member_epoch=epoch, previous_member_epoch=previous, state=state,
        assigned_partitions=dict(assigned), partitions_pending_revocation=dict(pending or {}),
    )  # fmt: skip


def nobody_owns(topic_id: uuid.UUID, partition: int) -> int:
    return -1


def owned_at(epoch: int) -> PartitionEpochLookup:
    return lambda topic_id, partition: epoch


def run(
    old: ConsumerGroupMember,
    target_epoch: int,
    target: TopicPartitions,
    *,
    owned: TopicPartitions | None = None,
    owner_epoch: PartitionEpochLookup = nobody_owns,
    enforce: bool = False,
    resolved: Mapping[str, ResolvedRegularExpression] | None = None,
) -> ConsumerGroupMember:
    """``reconcile`` as the heartbeat handler calls it; every outcome must replay from its record."""
    new = reconcile(
        old,
        target_assignment_epoch=target_epoch,
        target_assignment=target,
        owned_partitions=owned,
        current_partition_epoch=owner_epoch,
        subscribed_topic_ids=subscribed_topic_ids(old, resolved or {}, IDS),
        enforce_subscription_consistency=enforce,
    )
    assert_replays(old, new)
    return new


def assert_replays(old: ConsumerGroupMember, new: ConsumerGroupMember) -> None:
    """The handler writes ``new`` as its current-assignment record; replaying that record (as the
    log stores it) onto the member as the group holds it gives ``new`` back, every field."""
    record = stored(builders.consumer_group_current_assignment_record("grp", new))
    assert old.with_current_assignment(record.value, "grp") == new


def outcome(
    m: ConsumerGroupMember,
) -> tuple[MemberState, int, int, dict[uuid.UUID, dict[int, int]], dict[uuid.UUID, dict[int, int]]]:
    return (
        m.state,
        m.member_epoch,
        m.previous_member_epoch,
        dict(m.assigned_partitions),
        dict(m.partitions_pending_revocation),
    )


# -- STABLE ---------------------------------------------------------------------------------------------


def test_stable_to_stable_keeps_the_assignment_epochs() -> None:
    old = member(STABLE, 10, 10, merged(at(8, foo=[1, 2]), at(10, foo=[3], bar=[4, 5, 6])))
    new = run(old, 11, parts(foo=[1, 2, 3], bar=[4, 5, 6]), owner_epoch=owned_at(10))
    assert outcome(new) == (STABLE, 11, 10, merged(at(8, foo=[1, 2]), at(10, foo=[3], bar=[4, 5, 6])), {})


def test_stable_to_stable_with_new_partitions_assigned_at_the_target_epoch() -> None:
    old = member(STABLE, 10, 10, at(10, foo=[1, 2, 3], bar=[4, 5, 6]))
    new = run(old, 11, parts(foo=[1, 2, 3, 4], bar=[4, 5, 6, 7]))
    assert outcome(new) == (
        STABLE,
        11,
        10,
        merged(at(10, foo=[1, 2, 3], bar=[4, 5, 6]), at(11, foo=[4], bar=[7])),
        {},
    )


def test_stable_to_unrevoked_when_partitions_must_be_revoked() -> None:
    """Revoke before assign: the member stays at its epoch, keeps target ∩ current, and the new
    partitions (foo-4, bar-7) wait until the revocation is acknowledged."""
    old = member(STABLE, 10, 10, at(10, foo=[1, 2, 3], bar=[4, 5, 6]))
    new = run(old, 11, parts(foo=[2, 3, 4], bar=[5, 6, 7]))
    assert outcome(new) == (UNREVOKED, 10, 10, at(10, foo=[2, 3], bar=[5, 6]), at(10, foo=[1], bar=[4]))


def test_stable_to_unreleased_when_new_partitions_are_still_owned() -> None:
    old = member(STABLE, 10, 10, at(10, foo=[1, 2, 3], bar=[4, 5, 6]))
    new = run(old, 11, parts(foo=[1, 2, 3, 4], bar=[4, 5, 6, 7]), owner_epoch=owned_at(10))
    assert outcome(new) == (UNRELEASED, 11, 10, at(10, foo=[1, 2, 3], bar=[4, 5, 6]), {})


def test_partitions_the_client_already_gave_up_are_not_revoked_again() -> None:
    """The client reports owning none of the partitions to revoke: no UNREVOKED step; bar-6 is
    dropped, bar-7 is still owned by another member."""
    old = member(STABLE, 10, 10, at(10, foo=[1, 2, 3], bar=[4, 5, 6]))
    new = run(
        old, 11, parts(foo=[1, 2, 3], bar=[4, 5, 7]), owned={},
        owner_epoch=lambda topic_id, partition: 10 if topic_id == BAR else -1,
    )  # fmt: skip
    assert outcome(new) == (UNRELEASED, 11, 10, at(10, foo=[1, 2, 3], bar=[4, 5]), {})


def test_stable_at_the_target_epoch_does_not_move() -> None:
    old = member(STABLE, 10, 9, at(10, foo=[1]))
    assert run(old, 10, parts(foo=[1, 2])) is old


# -- UNREVOKED_PARTITIONS -------------------------------------------------------------------------------


def test_unrevoked_to_stable_once_the_client_stops_reporting_the_revoked_partitions() -> None:
    old = member(UNREVOKED, 10, 10, at(10, foo=[2, 3], bar=[5, 6]), at(10, foo=[1], bar=[4]))
    new = run(old, 11, parts(foo=[2, 3], bar=[5, 6]), owned=parts(foo=[2, 3], bar=[5, 6]))
    assert outcome(new) == (STABLE, 11, 10, at(10, foo=[2, 3], bar=[5, 6]), {})
    # KAFKA-19779: the member last held foo-1 and bar-4 at epoch 10.
    assert new.revocation_epoch == 10


@pytest.mark.parametrize(
    "owned",
    [None, parts(foo=[1, 2, 3], bar=[5, 6]), parts(foo=[2, 3], bar=[4, 5, 6])],
    ids=["not-reported", "still-owns-foo-1", "still-owns-bar-4"],
)
def test_stays_unrevoked_while_the_client_still_owns_a_revoked_partition(
    owned: TopicPartitions | None,
) -> None:
    old = member(UNREVOKED, 10, 10, at(10, foo=[2, 3], bar=[5, 6]), at(10, foo=[1], bar=[4]))
    assert run(old, 12, parts(foo=[3], bar=[6]), owned=owned) is old


def test_unrevoked_to_unrevoked_when_a_newer_target_revokes_more() -> None:
    old = member(UNREVOKED, 10, 10, at(10, foo=[2, 3], bar=[5, 6]), at(10, foo=[1], bar=[4]))
    new = run(old, 12, parts(foo=[3], bar=[6]), owned=parts(foo=[2, 3], bar=[5, 6]))
    assert outcome(new) == (UNREVOKED, 10, 10, at(10, foo=[3], bar=[6]), at(10, foo=[2], bar=[5]))


def test_unrevoked_to_unreleased() -> None:
    old = member(UNREVOKED, 11, 10, at(11, foo=[2, 3], bar=[5, 6]))
    new = run(
        old,
        11,
        parts(foo=[2, 3, 4], bar=[5, 6, 7]),
        owned=parts(foo=[2, 3], bar=[5, 6]),
        owner_epoch=owned_at(10),
    )
    assert outcome(new) == (UNRELEASED, 11, 11, at(11, foo=[2, 3], bar=[5, 6]), {})


def test_a_partition_pending_revocation_that_comes_back_is_assigned_at_the_new_epoch() -> None:
    """foo-4 was being revoked by this very member when the target gave it back: it is not
    "unreleased" (only this member holds it), and it counts as newly assigned."""
    old = member(UNREVOKED, 10, 10, at(10, foo=[2, 3], bar=[5, 6]), at(10, foo=[4]))

    def owner_epoch(topic_id: uuid.UUID, partition: int) -> int:
        return (
            10
            if (topic_id == FOO and partition in (2, 3, 4)) or (topic_id == BAR and partition in (5, 6))
            else -1
        )

    new = run(
        old,
        12,
        parts(foo=[2, 3, 4], bar=[5, 6, 7]),
        owned=parts(foo=[2, 3], bar=[5, 6]),
        owner_epoch=owner_epoch,
    )
    assert outcome(new) == (
        STABLE,
        12,
        10,
        merged(at(10, foo=[2, 3], bar=[5, 6]), at(12, foo=[4], bar=[7])),
        {},
    )


# -- UNRELEASED_PARTITIONS ------------------------------------------------------------------------------


def test_unreleased_to_stable_on_a_newer_target() -> None:
    old = member(UNRELEASED, 11, 11, at(11, foo=[2, 3], bar=[5, 6]))
    new = run(old, 12, parts(foo=[2, 3], bar=[5, 6]), owner_epoch=owned_at(10))
    assert outcome(new) == (STABLE, 12, 11, at(11, foo=[2, 3], bar=[5, 6]), {})


def test_unreleased_to_stable_once_the_previous_owner_released_them() -> None:
    old = member(UNRELEASED, 11, 11, at(11, foo=[2, 3], bar=[5, 6]))
    new = run(old, 11, parts(foo=[2, 3, 4], bar=[5, 6, 7]))
    assert outcome(new) == (STABLE, 11, 11, at(11, foo=[2, 3, 4], bar=[5, 6, 7]), {})


def test_unreleased_waits_while_the_previous_owner_holds_them() -> None:
    old = member(UNRELEASED, 11, 11, at(11, foo=[2, 3], bar=[5, 6]))
    assert run(old, 11, parts(foo=[2, 3, 4], bar=[5, 6, 7]), owner_epoch=owned_at(10)) == old


def test_unreleased_to_unrevoked_on_a_target_that_takes_partitions_away() -> None:
    old = member(UNRELEASED, 11, 11, at(11, foo=[2, 3], bar=[5, 6]))
    new = run(old, 12, parts(foo=[3], bar=[6]), owner_epoch=owned_at(10))
    assert outcome(new) == (UNREVOKED, 11, 11, at(11, foo=[3], bar=[6]), at(11, foo=[2], bar=[5]))


# -- UNKNOWN --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("owned", [None, parts(foo=[3])], ids=["not-reported", "owns-partitions"])
def test_unknown_state_is_fenced_while_the_client_owns_partitions(owned: TopicPartitions | None) -> None:
    old = member(MemberState.UNKNOWN, 11, 11, at(11, foo=[3], bar=[6]), at(11, foo=[2], bar=[5]))
    with pytest.raises(FencedMemberEpoch) as fenced:
        run(old, 12, parts(foo=[3], bar=[6]), owned=owned, owner_epoch=owned_at(10))
    assert fenced.value.error_code is ErrorCode.FENCED_MEMBER_EPOCH


def test_unknown_state_reconciles_from_scratch_once_the_client_owns_nothing() -> None:
    old = member(MemberState.UNKNOWN, 11, 11, at(11, foo=[3], bar=[6]), at(11, foo=[2], bar=[5]))
    new = run(old, 12, parts(foo=[3], bar=[6]), owned={}, owner_epoch=owned_at(11))
    assert outcome(new) == (STABLE, 12, 11, at(11, foo=[3], bar=[6]), {})


# -- subscriptions --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target_epoch", "enforce", "expected_epoch"),
    [(11, False, 11), (11, True, 11), (10, True, 10)],
    ids=["new-target", "new-target-enforced", "same-target-enforced"],
)
def test_topics_no_longer_subscribed_are_dropped_when_already_revoked(
    target_epoch: int, enforce: bool, expected_epoch: int
) -> None:
    """foo is assigned (and in the target) but no longer subscribed; the client already gave it up."""
    old = member(STABLE, 10, 9, at(10, foo=[1, 2, 3], bar=[4, 5, 6]), topics=["bar"])
    new = run(
        old, target_epoch, parts(foo=[1, 2, 3], bar=[4, 5, 6]), owned=parts(bar=[4, 5, 6]), enforce=enforce
    )
    assert outcome(new) == (STABLE, expected_epoch, 10, at(10, bar=[4, 5, 6]), {})


@pytest.mark.parametrize(
    ("target_epoch", "enforce"), [(11, False), (11, True), (10, True)],
    ids=["new-target", "new-target-enforced", "same-target-enforced"],
)  # fmt: skip
def test_topics_no_longer_subscribed_are_revoked_while_the_client_owns_them(
    target_epoch: int, enforce: bool
) -> None:
    old = member(STABLE, 10, 9, at(10, foo=[1, 2, 3], bar=[4, 5, 6]), topics=["bar"])
    owned = parts(foo=[1, 2, 3], bar=[4, 5, 6])
    new = run(old, target_epoch, parts(foo=[1, 2, 3], bar=[4, 5, 6]), owned=owned, enforce=enforce)
    assert outcome(new) == (UNREVOKED, 10, 10, at(10, bar=[4, 5, 6]), at(10, foo=[1, 2, 3]))


def test_an_unrevoked_member_that_drops_a_topic_adds_it_to_its_revocations() -> None:
    """Still owning foo-1 and bar-4, the member unsubscribes from foo: foo-2 and foo-3 join the
    partitions to revoke, without reading the (newer) target."""
    old = member(
        UNREVOKED,
        10,
        10,
        merged(at(8, foo=[2, 3]), at(10, bar=[5, 6])),
        at(10, foo=[1], bar=[4]),
        topics=["bar"],
    )
    new = run(
        old, 12, parts(foo=[1, 3, 4], bar=[6, 7]), owned=parts(foo=[1, 2, 3], bar=[4, 5, 6]), enforce=True
    )
    assert outcome(new) == (
        UNREVOKED,
        10,
        10,
        at(10, bar=[5, 6]),
        merged(at(10, foo=[1], bar=[4]), at(8, foo=[2, 3])),
    )


def test_a_stable_member_with_a_consistent_subscription_is_left_alone() -> None:
    old = member(STABLE, 10, 9, at(10, bar=[4, 5, 6]), topics=["bar"])
    assert assignment_is_subscription_consistent(old, subscribed_topic_ids(old, {}, IDS))
    assert run(old, 10, parts(bar=[4, 5, 6]), owned=parts(bar=[4, 5, 6]), enforce=True) is old


def test_an_unresolved_regular_expression_subscribes_to_nothing() -> None:
    old = member(STABLE, 10, 10, at(10, foo=[1, 2, 3], bar=[4, 5, 6]), topics=[], regex="bar*")
    assert not assignment_is_subscription_consistent(old, subscribed_topic_ids(old, {}, IDS))
    new = run(
        old, 10, parts(foo=[1, 2, 3], bar=[4, 5, 6]), owned=parts(foo=[1, 2, 3], bar=[4, 5, 6]), enforce=True
    )
    assert outcome(new) == (UNREVOKED, 10, 10, {}, at(10, foo=[1, 2, 3], bar=[4, 5, 6]))


def test_names_and_a_resolved_regular_expression_subscribe_to_their_union() -> None:
    old = member(STABLE, 10, 10, at(10, foo=[1, 2, 3], bar=[4, 5, 6]), topics=["foo"], regex="bar*")
    owned = parts(foo=[1, 2, 3], bar=[4, 5, 6])
    unresolved = run(old, 10, parts(foo=[1, 2, 3], bar=[4, 5, 6]), owned=owned, enforce=True)
    assert outcome(unresolved) == (UNREVOKED, 10, 10, at(10, foo=[1, 2, 3]), at(10, bar=[4, 5, 6]))
    resolved = {"bar*": ResolvedRegularExpression(frozenset({"bar"}), version=1, timestamp_ms=0)}
    assert (
        run(old, 10, parts(foo=[1, 2, 3], bar=[4, 5, 6]), owned=owned, enforce=True, resolved=resolved) is old
    )


def test_a_deleted_topic_is_not_subscribed() -> None:
    """A subscribed name the cluster no longer has resolves to no id, so its old partitions go."""
    gone = uuid.UUID("d0000000-0000-0000-0000-000000000003")
    old = member(STABLE, 10, 10, {**at(10, bar=[1]), gone: {0: 10}}, topics=["bar", "deleted"])
    assert not assignment_is_subscription_consistent(old, subscribed_topic_ids(old, {}, IDS))
    new = run(old, 11, {BAR: {1}, gone: {0}}, owned={BAR: {1}})
    assert outcome(new) == (STABLE, 11, 10, at(10, bar=[1]), {})


# -- whole groups of clients (Hypothesis) -----------------------------------------------------------------

PARTITIONS = {FOO: 4, BAR: 3}


class Client:
    """What a consumer client owns. A response that leaves partitions out starts their revocation,
    which takes time (commits, ``onPartitionsRevoked``): the client owns them, and reports them,
    until it finishes. A response that adds partitions gives them to it at once."""

    def __init__(self) -> None:
        self.owned: dict[uuid.UUID, set[int]] = {}
        self.revoking: set[tuple[uuid.UUID, int]] = set()

    def finish_revocation(self) -> None:
        for topic_id, partition in self.revoking:
            self.owned[topic_id].discard(partition)
        self.owned = {topic_id: partitions for topic_id, partitions in self.owned.items() if partitions}
        self.revoking = set()

    def keeps(self) -> dict[uuid.UUID, set[int]]:
        """What it owns once its revocations are done."""
        kept = {t: {p for p in ps if (t, p) not in self.revoking} for t, ps in self.owned.items()}
        return {topic_id: partitions for topic_id, partitions in kept.items() if partitions}

    def report(self) -> dict[uuid.UUID, set[int]]:
        return {topic_id: set(partitions) for topic_id, partitions in self.owned.items()}

    def take(self, member: ConsumerGroupMember) -> None:
        assigned = member.assigned_partitions
        for topic_id, partitions in self.owned.items():
            self.revoking.update((topic_id, p) for p in partitions if p not in assigned.get(topic_id, {}))
        for topic_id, partitions in assigned.items():
            self.owned.setdefault(topic_id, set()).update(partitions)


class Group:
    """A group replayed from its records, its clients, and checks at every heartbeat."""

    def __init__(self, size: int) -> None:
        self.log = ConsumerLog()
        self.member_ids = [f"m{i}" for i in range(size)]
        self.clients = {member_id: Client() for member_id in self.member_ids}
        for member_id in self.member_ids:
            self.log.subscribe(member_id, ["foo", "bar"])

    def install_target(self, epoch: int, owners: list[int | None]) -> None:
        """``owners``: the member index of each partition of foo then bar, or None (unassigned)."""
        targets: dict[str, dict[uuid.UUID, set[int]]] = {member_id: {} for member_id in self.member_ids}
        slots = [(topic_id, p) for topic_id, count in PARTITIONS.items() for p in range(count)]
        for (topic_id, partition), owner in zip(slots, owners, strict=True):
            if owner is not None:
                targets[self.member_ids[owner]].setdefault(topic_id, set()).add(partition)
        self.log.bump_group_epoch(epoch)
        self.log.target(epoch, targets)

    def heartbeat(self, member_id: str, reports_owned: bool = True, finishes_revocation: bool = True) -> None:
        """One heartbeat of the member's client, which first finishes its revocations if it may."""
        group = self.log.group
        old = self.log.member(member_id)
        client = self.clients[member_id]
        if finishes_revocation:
            client.finish_revocation()
        new = reconcile(
            old,
            target_assignment_epoch=group.target_assignment_epoch,
            target_assignment=group.target_assignment_of(member_id),
            owned_partitions=client.report() if reports_owned else None,
            current_partition_epoch=group.current_partition_epoch,
            subscribed_topic_ids=subscribed_topic_ids(
                old, group.resolved_regular_expressions, {"foo": FOO, "bar": BAR}
            ),
        )
        assert_keeps_assignment_epochs(old, new)
        if new != old:
            # Replay refuses a partition held by two members (GroupStateError).
            self.log.write(builders.consumer_group_current_assignment_record(self.log.group_id, new))
            assert self.log.member(member_id) == new
        client.take(new)
        self.assert_no_partition_owned_twice()

    def assert_no_partition_owned_twice(self) -> None:
        seen: set[tuple[uuid.UUID, int]] = set()
        for client in self.clients.values():
            for topic_id, partitions in client.owned.items():
                for partition in partitions:
                    assert (topic_id, partition) not in seen, f"{topic_id}-{partition} owned by two clients"
                    seen.add((topic_id, partition))

    def reconciled(self) -> bool:
        group = self.log.group
        return all(
            self.log.member(member_id).is_reconciled_to(group.target_assignment_epoch)
            and self.clients[member_id].keeps()
            == {t: set(ps) for t, ps in group.target_assignment_of(member_id).items() if ps}
            for member_id in self.member_ids
        )


def assert_keeps_assignment_epochs(old: ConsumerGroupMember, new: ConsumerGroupMember) -> None:
    """KIP-1251: a partition the member keeps (assigned before; assigned or to revoke now) keeps the
    epoch it was assigned at; a partition new to it is assigned at its new epoch."""
    for topic_id, partitions in new.assigned_partitions.items():
        for partition, epoch in partitions.items():
            before = old.assigned_partitions.get(topic_id, {}).get(partition)
            assert epoch == (new.member_epoch if before is None else before)
    for topic_id, partitions in new.partitions_pending_revocation.items():
        for partition, epoch in partitions.items():
            assert epoch == old.assignment_epoch(topic_id, partition)


owners_of_every_partition = st.lists(
    st.one_of(st.none(), st.integers(0, 3)),
    min_size=sum(PARTITIONS.values()),
    max_size=sum(PARTITIONS.values()),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), size=st.integers(1, 4))
def test_random_groups_move_between_targets_safely_and_converge(data: st.DataObject, size: int) -> None:
    """From the first target, reached by all, to a second (and sometimes a third, installed halfway):
    heartbeats in a random order, some not reporting owned partitions, some from clients still
    revoking, never let two clients own a partition; then heartbeats from every member, each having
    finished its revocations, bring every member to STABLE at the target epoch, owning exactly its
    target."""
    owners = owners_of_every_partition.map(lambda xs: [x if x is None or x < size else x % size for x in xs])
    group = Group(size)
    group.install_target(1, data.draw(owners, label="first target"))
    for _ in range(3):
        for member_id in group.member_ids:
            group.heartbeat(member_id)
    assert group.reconciled()

    group.install_target(2, data.draw(owners, label="second target"))
    steps = data.draw(
        st.lists(st.tuples(st.integers(0, size - 1), st.booleans(), st.booleans()), max_size=30),
        label="heartbeats",
    )
    third_at = data.draw(st.one_of(st.none(), st.integers(0, len(steps))), label="third target at step")
    for index, (member_index, reports_owned, finishes_revocation) in enumerate(steps):
        if index == third_at:
            group.install_target(3, data.draw(owners, label="third target"))
        group.heartbeat(group.member_ids[member_index], reports_owned, finishes_revocation)
    if third_at == len(steps):
        group.install_target(3, data.draw(owners, label="third target"))

    for _ in range(4):
        for member_id in group.member_ids:
            group.heartbeat(member_id)
    assert group.reconciled()


def test_a_group_swapping_partitions_goes_through_revoke_then_assign() -> None:
    """Two members swap everything: both revoke at epoch 1, then each takes the other's partitions
    at epoch 2 once they are released, the first to ask through UNRELEASED_PARTITIONS."""
    group = Group(2)
    group.install_target(1, [0, 0, 0, 0, 1, 1, 1])
    for member_id in group.member_ids:
        group.heartbeat(member_id)
    group.install_target(2, [1, 1, 1, 1, 0, 0, 0])
    group.heartbeat("m0")
    group.heartbeat("m1")
    assert [group.log.member(m).state for m in ("m0", "m1")] == [UNREVOKED, UNREVOKED]
    group.heartbeat("m0")  # revoked foo; bar is still m1's
    m0 = group.log.member("m0")
    assert (m0.state, m0.member_epoch, dict(m0.assigned_partitions)) == (UNRELEASED, 2, {})
    group.heartbeat("m1")  # revoked bar; foo is free
    m1 = group.log.member("m1")
    assert (m1.state, m1.member_epoch, dict(m1.assigned_partitions)) == (STABLE, 2, at(2, foo=[0, 1, 2, 3]))
    group.heartbeat("m0")
    assert group.reconciled()
    assert dict(group.log.member("m0").assigned_partitions) == at(2, bar=[0, 1, 2])


def test_replay_gives_back_the_member_with_its_revocation_epoch() -> None:
    """A member that lost partitions carries its revocation epoch through its record."""
    old = replace(member(UNREVOKED, 7, 6, at(5, foo=[2]), at(7, foo=[1])), revocation_epoch=3)
    new = run(old, 8, parts(foo=[2, 5]), owned=parts(foo=[2]))
    assert (new.revocation_epoch, new.member_epoch) == (7, 8)


GONE = uuid.UUID("d0000000-0000-0000-0000-000000000003")
NAMES = ["foo", "bar", "deleted", "baz"]


@settings(max_examples=300, deadline=None)
@given(
    assigned=st.sets(st.sampled_from([FOO, BAR, GONE])),
    names=st.sets(st.sampled_from(NAMES)),
    regex=st.sampled_from([None, "ba.*"]),
    regex_topics=st.sets(st.sampled_from(NAMES)),
)
def test_the_heartbeats_consistency_check_by_assigned_topic_agrees_with_kafkas(
    assigned: set[uuid.UUID], names: set[str], regex: str | None, regex_topics: set[str]
) -> None:
    """The heartbeat asks whether a member's assignment fits its subscription starting from the
    assigned topics (few) instead of the subscribed ones (maybe thousands); the answer must be
    Kafka's ``assignmentIsSubscriptionConsistent`` over the subscribed topic ids."""
    old = ConsumerGroupMember(
        "m", subscribed_topic_names=frozenset(names), subscribed_topic_regex=regex,
        assigned_partitions={topic_id: {0: 1} for topic_id in assigned},
    )  # fmt: skip
    resolved = {"ba.*": ResolvedRegularExpression(frozenset(regex_topics), version=0, timestamp_ms=0)}
    kafkas = assignment_is_subscription_consistent(old, subscribed_topic_ids(old, resolved, IDS))
    assert assigned_topics_are_subscribed(old, subscribed_topic_names(old, resolved), TOPICS, IDS) == kafkas
