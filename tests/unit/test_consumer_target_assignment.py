"""The target assignment engine (coordinator/core/consumer/target_assignment.py): Kafka's
TargetAssignmentBuilderTest scenarios (what the assignor is given, which records are written), the
choice of assignor, and a group that replays the records it returns."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from kcoord.coordinator.core import records as builders
from kcoord.coordinator.core.consumer.assignors import (
    GroupAssignment,
    GroupSpec,
    SubscriptionType,
    TopicDescriber,
)
from kcoord.coordinator.core.consumer.group import ResolvedRegularExpression, TargetAssignment
from kcoord.coordinator.core.consumer.member import ConsumerGroupMember
from kcoord.coordinator.core.consumer.subscriptions import TopicMetadata
from kcoord.coordinator.core.consumer.target_assignment import (
    build_target_assignment,
    preferred_server_assignor,
    update_target_assignment,
)
from kcoord.protocol.records import Record
from tests.unit.consumer_context import BAR, FOO, ConsumerLog

BAZ = uuid.UUID("ba200000-0000-0000-0000-000000000003")
TOPICS = {FOO: TopicMetadata("foo", 6), BAR: TopicMetadata("bar", 6)}
EPOCH = 20


def target(**topics: Iterable[int]) -> TargetAssignment:
    ids = {"foo": FOO, "bar": BAR, "baz": BAZ}
    return {ids[name]: frozenset(partitions) for name, partitions in topics.items()}


class FixedAssignor:
    """Returns a preset assignment, and keeps what it was asked (Kafka's test mocks its assignor)."""

    def __init__(self, name: str = "fixed", result: Mapping[str, TargetAssignment] | None = None) -> None:
        self.name = name
        self.result = dict(result or {})
        self.spec: GroupSpec[Any] | None = None
        self.topics: TopicDescriber[Any] | None = None

    def assign(self, group: GroupSpec[Any], topics: TopicDescriber[Any]) -> GroupAssignment[Any]:
        self.spec, self.topics = group, topics
        return GroupAssignment({member_id: self.result.get(member_id, {}) for member_id in group.members})


def consumer(member_id: str, *topics: str, **fields: Any) -> ConsumerGroupMember:
    return ConsumerGroupMember(member_id, subscribed_topic_names=frozenset(topics), **fields)


def build(
    assignor: FixedAssignor,
    members: Iterable[ConsumerGroupMember],
    current: Mapping[str, TargetAssignment],
    **kwargs: Any,
) -> tuple[dict[str, TargetAssignment], list[Record]]:
    result = build_target_assignment(
        "grp", EPOCH, assignor, members={m.member_id: m for m in members}, target_assignment=current,
        topics=TOPICS, assignment_timestamp_ms=1234, **kwargs,
    )  # fmt: skip
    return dict(result.assignment), result.records


def target_record(member_id: str, assignment: TargetAssignment) -> Record:
    return builders.consumer_group_target_assignment_record("grp", member_id, assignment)


EPOCH_RECORD = builders.consumer_group_target_assignment_epoch_record("grp", EPOCH, 1234)
TWO_MEMBERS = [consumer("m1", "foo", "bar"), consumer("m2", "foo", "bar")]
TWO_TARGETS = {"m1": target(foo=[0, 1, 2], bar=[0, 1, 2]), "m2": target(foo=[3, 4, 5], bar=[3, 4, 5])}


# -- Kafka's TargetAssignmentBuilderTest scenarios ----------------------------------------------------------


def test_an_empty_group_writes_only_the_new_epoch() -> None:
    assignment, records = build(FixedAssignor(), [], {})
    assert (assignment, records) == ({}, [EPOCH_RECORD])


def test_unchanged_assignments_write_only_the_new_epoch() -> None:
    assignor = FixedAssignor(result=TWO_TARGETS)
    assignment, records = build(assignor, TWO_MEMBERS, TWO_TARGETS)
    assert (assignment, records) == (TWO_TARGETS, [EPOCH_RECORD])
    assert assignor.spec is not None and assignor.topics is not None
    assert assignor.spec.subscription_type is SubscriptionType.HOMOGENEOUS
    assert {m: s.assignment for m, s in assignor.spec.members.items()} == TWO_TARGETS
    assert assignor.topics.partition_count(FOO) == 6 and assignor.topics.partition_count(BAZ) == 0


def test_swapped_assignments_write_both_members() -> None:
    swapped = {"m1": TWO_TARGETS["m2"], "m2": TWO_TARGETS["m1"]}
    _, records = build(FixedAssignor(result=swapped), TWO_MEMBERS, TWO_TARGETS)
    assert records == [target_record("m1", swapped["m1"]), target_record("m2", swapped["m2"]), EPOCH_RECORD]


def test_a_new_member_joins_with_an_empty_current_assignment() -> None:
    new_targets = {
        "m1": target(foo=[0, 1], bar=[0, 1]), "m2": target(foo=[2, 3], bar=[2, 3]), "m3": target(foo=[4, 5], bar=[4, 5]),
    }  # fmt: skip
    assignor = FixedAssignor(result=new_targets)
    assignment, records = build(
        assignor, TWO_MEMBERS, TWO_TARGETS, updated_member=consumer("m3", "foo", "bar")
    )
    assert assignor.spec is not None and assignor.spec.members["m3"].assignment == {}
    assert assignment == new_targets
    assert records == [*(target_record(m, new_targets[m]) for m in ("m1", "m2", "m3")), EPOCH_RECORD]


def test_a_new_member_that_gets_nothing_still_gets_a_record() -> None:
    """A member without a target yet gets one, even an empty one (Kafka compares with null)."""
    _, records = build(
        FixedAssignor(result=TWO_TARGETS), TWO_MEMBERS, TWO_TARGETS, updated_member=consumer("m3", "foo")
    )
    assert records == [target_record("m3", {}), EPOCH_RECORD]


def test_an_updated_member_is_assigned_with_its_new_subscription() -> None:
    assignor = FixedAssignor(
        result={"m1": target(foo=[0, 1, 2, 3, 4, 5]), "m2": target(bar=[0, 1, 2, 3, 4, 5])}
    )
    _, records = build(
        assignor, TWO_MEMBERS, TWO_TARGETS, updated_member=consumer("m2", "bar", rack_id="rack-2")
    )
    assert assignor.spec is not None
    updated = assignor.spec.members["m2"]
    assert (updated.subscribed_topic_ids, updated.assignment, updated.rack_id) == (
        frozenset({BAR}),
        TWO_TARGETS["m2"],
        "rack-2",
    )
    assert assignor.spec.subscription_type is SubscriptionType.HETEROGENEOUS
    assert [r.key.member_id for r in records[:-1]] == ["m1", "m2"]


def test_a_partial_update_writes_only_the_member_that_changed() -> None:
    three = [*TWO_MEMBERS, consumer("m3", "foo", "bar")]
    current = {**TWO_TARGETS, "m3": {}}
    new_targets = {**TWO_TARGETS, "m3": target(baz=[0])}
    _, records = build(FixedAssignor(result=new_targets), three, current)
    assert records == [target_record("m3", target(baz=[0])), EPOCH_RECORD]


def test_a_removed_member_is_left_out_and_gets_no_tombstone() -> None:
    """Its tombstones are written by its removal, not by the target assignment."""
    three = [*TWO_MEMBERS, consumer("m3", "foo", "bar")]
    current = {
        "m1": target(foo=[0, 1], bar=[0, 1]),
        "m2": target(foo=[2, 3], bar=[2, 3]),
        "m3": target(foo=[4, 5], bar=[4, 5]),
    }
    assignor = FixedAssignor(result=TWO_TARGETS)
    assignment, records = build(assignor, three, current, removed_member_ids=["m3"])
    assert assignor.spec is not None and set(assignor.spec.members) == {"m1", "m2"}
    assert assignment == TWO_TARGETS
    assert records == [
        target_record("m1", TWO_TARGETS["m1"]),
        target_record("m2", TWO_TARGETS["m2"]),
        EPOCH_RECORD,
    ]


def test_a_static_member_replaced_by_a_new_member_id_keeps_its_target() -> None:
    members = [consumer("m1", "foo", "bar", instance_id="i1"), consumer("m2", "foo", "bar", instance_id="i2")]
    assignor = FixedAssignor(result={"m1": TWO_TARGETS["m1"], "m3": TWO_TARGETS["m2"]})
    assignment, records = build(
        assignor, members, TWO_TARGETS, static_members={"i1": "m1", "i2": "m2"},
        updated_member=consumer("m3", "foo", "bar", instance_id="i2"), removed_member_ids=["m2"],
    )  # fmt: skip
    assert assignor.spec is not None and set(assignor.spec.members) == {"m1", "m3"}
    replacing = assignor.spec.members["m3"]
    assert (replacing.assignment, replacing.instance_id) == (TWO_TARGETS["m2"], "i2")
    assert assignment == {"m1": TWO_TARGETS["m1"], "m3": TWO_TARGETS["m2"]}
    # The new member id has no target yet: it gets one, the old member's.
    assert records == [target_record("m3", TWO_TARGETS["m2"]), EPOCH_RECORD]


# -- what the assignor is told about subscriptions ----------------------------------------------------------


def test_subscriptions_resolve_names_and_regular_expressions_to_existing_topic_ids() -> None:
    members = [
        consumer("names", "foo", "missing"),
        consumer("regex", subscribed_topic_regex="b.*"),
        consumer("both", "foo", subscribed_topic_regex="b.*"),
        consumer("unresolved", subscribed_topic_regex="x.*"),
    ]
    resolved = {
        "b.*": ResolvedRegularExpression(frozenset({"bar", "baz-not-created"}), version=3, timestamp_ms=0)
    }
    assignor = FixedAssignor()
    build(assignor, members, {}, resolved_regular_expressions=resolved)
    assert assignor.spec is not None
    assert {m: s.subscribed_topic_ids for m, s in assignor.spec.members.items()} == {
        "names": frozenset({FOO}), "regex": frozenset({BAR}), "both": frozenset({FOO, BAR}), "unresolved": frozenset(),
    }  # fmt: skip
    assert assignor.spec.subscription_type is SubscriptionType.HETEROGENEOUS


def test_an_empty_topic_in_a_stored_target_equals_no_topic() -> None:
    """A record may hold a topic with no partitions; it is the same target as without it."""
    current = {"m1": {**TWO_TARGETS["m1"], BAZ: frozenset()}, "m2": TWO_TARGETS["m2"]}
    _, records = build(FixedAssignor(result=TWO_TARGETS), TWO_MEMBERS, current)
    assert records == [EPOCH_RECORD]


# -- which assignor ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("assignors", "expected"),
    [
        ([], "uniform"),
        ([None, None], "uniform"),
        (["range"], "range"),
        (["range", "range", "uniform", None], "range"),
        (["range", "uniform"], "uniform"),  # a tie: Kafka's hash map order puts uniform first
        (["sticky", "sticky", "range"], "range"),  # a name the coordinator does not have
    ],
)
def test_the_assignor_is_the_one_most_members_name(assignors: list[str | None], expected: str) -> None:
    members = [consumer(f"m{i}", server_assignor=name) for i, name in enumerate(assignors)]
    assert preferred_server_assignor(members) == expected


def test_update_counts_the_member_as_it_will_be() -> None:
    """Kafka's ``computePreferredServerAssignor(old, new)``: m2 switching to range makes range the choice."""
    log = ConsumerLog()
    log.subscribe("m1", ["foo"], server_assignor="range")
    log.subscribe("m2", ["foo"], server_assignor="uniform")
    uniform, range_ = FixedAssignor("uniform"), FixedAssignor("range")
    registry = {"uniform": uniform, "range": range_}
    updated = consumer("m2", "foo", server_assignor="range")
    update_target_assignment(log.group, 1, TOPICS, now_ms=0, updated_member=updated, assignors=registry)
    assert range_.spec is not None and uniform.spec is None


# -- a group replaying what it returns ---------------------------------------------------------------------------


def test_a_group_replays_its_new_target_assignment() -> None:
    log = ConsumerLog()
    log.subscribe("m1", ["foo", "bar"])
    log.bump_group_epoch(1)
    joining = consumer("m2", "foo", "bar", client_id="c", client_host="h", rebalance_timeout_ms=45_000)
    result = update_target_assignment(log.group, 2, TOPICS, now_ms=777, updated_member=joining)
    # The uniform assignor shares 12 partitions six and six.
    assert sorted(sum(len(ps) for ps in result.of(m).values()) for m in ("m1", "m2")) == [6, 6]
    log.write(builders.consumer_group_member_subscription_record("grp", joining), *result.records)
    log.bump_group_epoch(2)
    group = log.group
    assert {m: group.target_assignment_of(m) for m in ("m1", "m2")} == dict(result.assignment)
    assert (group.target_assignment_epoch, group.assignment_timestamp_ms) == (2, 777)

    # Nothing changed: recomputing at the next epoch writes only the epoch.
    again = update_target_assignment(group, 3, TOPICS, now_ms=778, updated_member=group.member("m1"))
    assert again.records == [builders.consumer_group_target_assignment_epoch_record("grp", 3, 778)]


def test_a_static_member_rejoining_under_a_new_id_takes_over_its_target_in_the_log() -> None:
    log = ConsumerLog()
    log.subscribe("m1", ["foo", "bar"], instance_id="i1")
    log.subscribe("m2", ["foo", "bar"], instance_id="i2")
    log.bump_group_epoch(1)
    log.target(1, TWO_TARGETS)
    old_m2 = log.member("m2")
    rejoined = old_m2.replaced_by("m3")
    result = update_target_assignment(log.group, 1, TOPICS, now_ms=5, updated_member=rejoined)
    assert result.of("m3") == TWO_TARGETS["m2"] and "m2" not in result.assignment
    assert result.records[:-1] == [target_record("m3", TWO_TARGETS["m2"])]
    # What the heartbeat handler writes: the old member's tombstones, the new member, the target.
    log.remove_member("m2")
    log.write(builders.consumer_group_member_subscription_record("grp", rejoined), *result.records)
    assert log.group.static_member_id("i2") == "m3"
    assert log.group.target_assignment_of("m3") == TWO_TARGETS["m2"]
    assert "m2" not in log.group.target_assignment
