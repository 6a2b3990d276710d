"""Server-side assignors (KIP-848): "uniform" and "range", against Kafka's scenarios and as properties.

The hand examples port the scenarios of Kafka's UniformHomogeneousAssignmentBuilderTest,
UniformHeterogeneousAssignmentBuilderTest, CommonAssignorTests and RangeAssignorTest (group-coordinator
module, Kafka 4.0). Kafka's tests list members in a TreeMap (member id order), as ours are always
taken. Where a Kafka test expects a PartitionAssignorException for a topic that does not exist, ours
ignores the topic (see assignors/spec.py). In three homogeneous scenarios Kafka hands out the free
partitions in the HashSet order of its random-looking topic Uuids; ours go in topic id order, so the
expected runs differ there, and the comments say how.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.coordinator.core.consumer.assignors import (
    DEFAULT_ASSIGNOR,
    SERVER_ASSIGNORS,
    GroupAssignment,
    GroupSpec,
    MemberSubscriptionAndAssignment,
    PartitionAssignor,
    RangeAssignor,
    SubscriptionType,
    TopicsMetadata,
    UniformAssignor,
)

HOMOGENEOUS = SubscriptionType.HOMOGENEOUS
HETEROGENEOUS = SubscriptionType.HETEROGENEOUS
UNIFORM = UniformAssignor()
RANGE = RangeAssignor()

Plain = dict[str, dict[str, set[int]]]  # member -> topic -> partitions, for comparing
Group = tuple[dict[str, MemberSubscriptionAndAssignment[str]], dict[str, int]]  # members, partition counts


def member(
    *topics: str,
    assignment: Mapping[str, set[int]] | None = None,
    instance_id: str | None = None,
) -> MemberSubscriptionAndAssignment[str]:
    current = {topic: frozenset(partitions) for topic, partitions in (assignment or {}).items()}
    return MemberSubscriptionAndAssignment(frozenset(topics), current, instance_id=instance_id)


def assign(
    assignor: PartitionAssignor,
    members: Mapping[str, MemberSubscriptionAndAssignment[str]],
    counts: Mapping[str, int],
    subscription_type: SubscriptionType | None = None,
) -> Plain:
    group = GroupSpec.of(members) if subscription_type is None else GroupSpec(members, subscription_type)
    return plain(assignor.assign(group, TopicsMetadata(counts)))


def plain(result: GroupAssignment[str]) -> Plain:
    return {m: {t: set(p) for t, p in a.items()} for m, a in result.members.items()}


def with_assignment(
    members: Mapping[str, MemberSubscriptionAndAssignment[str]], result: GroupAssignment[str]
) -> dict[str, MemberSubscriptionAndAssignment[str]]:
    """The members again, each now holding what ``result`` gave it."""
    return {
        m: MemberSubscriptionAndAssignment(
            spec.subscribed_topic_ids, result.members[m], spec.rack_id, spec.instance_id
        )
        for m, spec in members.items()
    }


# -- the registry ------------------------------------------------------------------------------------


def test_the_server_assignors_are_uniform_then_range() -> None:
    assert list(SERVER_ASSIGNORS) == ["uniform", "range"]
    assert DEFAULT_ASSIGNOR == "uniform"
    assert [a.name for a in SERVER_ASSIGNORS.values()] == ["uniform", "range"]


def test_subscription_type_is_homogeneous_when_all_members_subscribe_alike() -> None:
    assert GroupSpec.of({}).subscription_type is HOMOGENEOUS
    assert GroupSpec.of({"A": member("T1", "T2"), "B": member("T2", "T1")}).subscription_type is HOMOGENEOUS
    assert GroupSpec.of({"A": member("T1"), "B": member("T1", "T2")}).subscription_type is HETEROGENEOUS
    assert GroupSpec.of({"A": member(), "B": member("T1")}).subscription_type is HETEROGENEOUS


@pytest.mark.parametrize("assignor", [UNIFORM, RANGE], ids=["uniform", "range"])
def test_an_empty_group_gets_an_empty_assignment(assignor: PartitionAssignor) -> None:
    assert assign(assignor, {}, {"T1": 3}) == {}


# -- uniform, homogeneous (UniformHomogeneousAssignmentBuilderTest) ------------------------------------


def test_uniform_one_member_without_subscription_gets_nothing() -> None:
    # Kafka returns no entry for the member; ours lists every member, here with nothing.
    assert assign(UNIFORM, {"A": member()}, {"T1": 3}) == {"A": {}}


def test_uniform_a_topic_that_does_not_exist_is_ignored() -> None:
    # Kafka throws PartitionAssignorException; its TargetAssignmentBuilder never passes such a topic.
    assert assign(UNIFORM, {"A": member("T2")}, {"T1": 3}) == {"A": {}}
    assert assign(UNIFORM, {"A": member("T1", "T2")}, {"T1": 3, "T2": 0}) == {"A": {"T1": {0, 1, 2}}}


def test_uniform_first_assignment_two_members_two_topics() -> None:
    members = {"A": member("T1", "T3"), "B": member("T1", "T3")}
    # 5 partitions: A gets 2, B (the last member with room) the extra one. Kafka's queue starts with
    # T3, giving A T3 0-1 and B T1 0-2; ours starts with T1.
    assert assign(UNIFORM, members, {"T1": 3, "T3": 2}) == {
        "A": {"T1": {0, 1}},
        "B": {"T1": {2}, "T3": {0, 1}},
    }


def test_uniform_more_members_than_partitions() -> None:
    members = {"A": member("T3"), "B": member("T3"), "C": member("T3")}
    assert assign(UNIFORM, members, {"T3": 2}) == {"A": {}, "B": {"T3": {0}}, "C": {"T3": {1}}}


def test_uniform_unbalanced_previous_assignment_is_evened_out() -> None:
    members = {
        "A": member("T1", "T2", assignment={"T1": {0, 1}, "T2": {0, 1}}),
        "B": member("T1", "T2", assignment={"T1": {2}, "T2": {2}}),
    }
    assert assign(UNIFORM, members, {"T1": 3, "T2": 3}) == {
        "A": {"T1": {0, 1}, "T2": {0}},
        "B": {"T1": {2}, "T2": {1, 2}},
    }


def test_uniform_partitions_added_go_to_the_members_with_room() -> None:
    # T1 grew from 3 to 6 partitions and T2 from 3 to 5: 11 over 2 members, B takes the extra one.
    members = {
        "A": member("T1", "T2", assignment={"T1": {0, 2}, "T2": {0}}),
        "B": member("T1", "T2", assignment={"T1": {1}, "T2": {1, 2}}),
    }
    # Kafka's queue has T2's new partitions first (A: T2 3-4; B: T1 3-5); ours T1's.
    assert assign(UNIFORM, members, {"T1": 6, "T2": 5}) == {
        "A": {"T1": {0, 2, 3, 4}, "T2": {0}},
        "B": {"T1": {1, 5}, "T2": {1, 2, 3, 4}},
    }


def test_uniform_member_added_takes_one_partition_from_each() -> None:
    members = {
        "A": member("T1", "T2", assignment={"T1": {0, 2}, "T2": {0}}),
        "B": member("T1", "T2", assignment={"T1": {1}, "T2": {1, 2}}),
        "C": member("T1", "T2"),
    }
    assert assign(UNIFORM, members, {"T1": 3, "T2": 3}) == {
        "A": {"T1": {0, 2}},
        "B": {"T1": {1}, "T2": {1}},
        "C": {"T2": {0, 2}},
    }


def test_uniform_member_removed_its_partitions_are_shared() -> None:
    members = {
        "A": member("T1", "T2", assignment={"T1": {0}, "T2": {0}}),
        "B": member("T1", "T2", assignment={"T1": {1}, "T2": {1}}),
    }
    # Kafka hands out T2 2 first (A: T2 0,2; B: T1 1,2); ours T1 2.
    assert assign(UNIFORM, members, {"T1": 3, "T2": 3}) == {
        "A": {"T1": {0, 2}, "T2": {0}},
        "B": {"T1": {1}, "T2": {1, 2}},
    }


def test_uniform_subscription_removed_drops_the_topic() -> None:
    members = {
        "A": member("T2", assignment={"T1": {0}, "T2": {0}}),
        "B": member("T2", assignment={"T1": {1}, "T2": {1}}),
    }
    assert assign(UNIFORM, members, {"T1": 2, "T2": 2}) == {"A": {"T2": {0}}, "B": {"T2": {1}}}


def test_uniform_large_homogeneous_group_is_valid_and_balanced() -> None:
    counts = {f"topic-{i}": 3 for i in range(1, 101)}
    members = {f"member{i}": member(*counts) for i in range(1, 50)}
    result = assign(UNIFORM, members, counts)
    check_valid(members, counts, result)
    sizes = [sum(map(len, a.values())) for a in result.values()]
    assert max(sizes) - min(sizes) <= 1


def test_uniform_homogeneous_extra_slots_go_to_members_already_holding_them() -> None:
    # 7 partitions, 3 members: one extra slot. C already holds 3 and keeps them all; nobody moves.
    members = {
        "A": member("T1", assignment={"T1": {0, 1}}),
        "B": member("T1", assignment={"T1": {2, 3}}),
        "C": member("T1", assignment={"T1": {4, 5, 6}}),
    }
    assert assign(UNIFORM, members, {"T1": 7}) == {
        "A": {"T1": {0, 1}},
        "B": {"T1": {2, 3}},
        "C": {"T1": {4, 5, 6}},
    }


def test_uniform_partitions_out_of_range_or_held_twice_are_reassigned() -> None:
    # T1 shrank to 2 partitions (5 is gone), and B claims A's partition 0: A, first by id, keeps it.
    members = {"A": member("T1", assignment={"T1": {0, 5}}), "B": member("T1", assignment={"T1": {0}})}
    for subscription_type in (HOMOGENEOUS, HETEROGENEOUS):
        assert assign(UNIFORM, members, {"T1": 2}, subscription_type) == {"A": {"T1": {0}}, "B": {"T1": {1}}}


# -- uniform, heterogeneous (UniformHeterogeneousAssignmentBuilderTest) --------------------------------


def test_uniform_heterogeneous_members_without_subscriptions_get_nothing() -> None:
    members = {"A": member(), "B": member()}
    assert assign(UNIFORM, members, {"T1": 3}, HETEROGENEOUS) == {"A": {}, "B": {}}


def test_uniform_heterogeneous_topics_that_do_not_exist_are_ignored() -> None:
    members = {"A": member("T3"), "B": member("T2")}
    assert assign(UNIFORM, members, {"T1": 3}, HETEROGENEOUS) == {"A": {}, "B": {}}


def test_uniform_heterogeneous_first_assignment_two_members_two_topics() -> None:
    members = {"A": member("T1", "T3"), "B": member("T3")}
    assert assign(UNIFORM, members, {"T1": 3, "T3": 6}) == {
        "A": {"T1": {0, 1, 2}, "T3": {4}},
        "B": {"T3": {0, 1, 2, 3, 5}},
    }


def test_uniform_heterogeneous_more_members_than_partitions() -> None:
    members = {"A": member("T3"), "B": member("T3"), "C": member("T1")}
    assert assign(UNIFORM, members, {"T3": 1, "T1": 2}) == {"A": {"T3": {0}}, "B": {}, "C": {"T1": {0, 1}}}


def test_uniform_heterogeneous_unbalanced_previous_assignment_three_topics() -> None:
    members = {
        "A": member("T1", assignment={"T1": {0, 1, 2}}),
        "B": member("T1", "T2", assignment={"T1": {3}, "T2": {0}}),
        "C": member("T1", "T2", "T3", assignment={"T1": {4, 5}, "T2": {1, 2, 3}, "T3": {0, 1, 2, 3}}),
    }
    assert assign(UNIFORM, members, {"T1": 6, "T2": 4, "T3": 4}) == {
        "A": {"T1": {0, 1, 2, 5}},
        "B": {"T1": {3}, "T2": {0, 1, 2, 3}},
        "C": {"T1": {4}, "T3": {0, 1, 2, 3}},
    }


def test_uniform_heterogeneous_partitions_added() -> None:
    # Originally T1 -> 4, T2 -> 3, T3 -> 2, T4 -> 3 partitions.
    members = {
        "A": member("T1", "T3", assignment={"T1": {0, 1, 2, 3}, "T3": {0, 1}}),
        "B": member("T1", "T2", "T3", "T4", assignment={"T2": {0, 1, 2}, "T4": {0, 1, 2}}),
    }
    assert assign(UNIFORM, members, {"T1": 6, "T2": 5, "T3": 3, "T4": 3}) == {
        "A": {"T1": {0, 1, 2, 3, 4, 5}, "T3": {0, 1, 2}},
        "B": {"T2": {0, 1, 2, 3, 4}, "T4": {0, 1, 2}},
    }


def test_uniform_heterogeneous_member_added_and_partitions_added() -> None:
    # Initially T1 -> 3, T2 -> 3 partitions; A no longer subscribes to T2.
    members = {
        "A": member("T1", assignment={"T1": {0, 2}, "T2": {0}}),
        "B": member("T1", "T2", assignment={"T1": {1}, "T2": {1, 2}}),
        "C": member("T1", "T2"),
    }
    assert assign(UNIFORM, members, {"T1": 6, "T2": 7}) == {
        "A": {"T1": {0, 2, 3, 4, 5}},
        "B": {"T1": {1}, "T2": {1, 2, 6}},
        "C": {"T2": {0, 3, 4, 5}},
    }


def test_uniform_heterogeneous_member_removed() -> None:
    members = {
        "A": member("T1", "T3", assignment={"T1": {0, 1, 2}, "T3": {0, 1}}),
        "B": member("T2", assignment={"T2": {3, 4, 5, 6}}),
    }
    assert assign(UNIFORM, members, {"T1": 3, "T2": 8, "T3": 3}) == {
        "A": {"T1": {0, 1, 2}, "T3": {0, 1, 2}},
        "B": {"T2": {0, 1, 2, 3, 4, 5, 6, 7}},
    }


def test_uniform_heterogeneous_subscription_removed() -> None:
    members = {
        "A": member("T1", assignment={"T1": {0, 2}, "T2": {1, 3}}),
        "B": member("T1", "T2", assignment={"T1": {1}, "T2": {0, 2, 4}}),
    }
    assert assign(UNIFORM, members, {"T1": 3, "T2": 5}) == {
        "A": {"T1": {0, 1, 2}},
        "B": {"T2": {0, 1, 2, 3, 4}},
    }


def test_uniform_heterogeneous_topic_partitions_run_out_before_balance() -> None:
    """Kafka's edge case: the topic's least loaded subscriber starts with none of its partitions."""
    members = {
        "A": member("T1", "T2", "T3", assignment={"T1": {0, 1}, "T2": {0, 1}, "T3": {0, 1}}),
        "B": member("T1", "T2", "T3"),
    }
    # Homogeneous in fact; Kafka's test forces the heterogeneous builder, and so does this one.
    assert assign(UNIFORM, members, {"T1": 2, "T2": 2, "T3": 2}, HETEROGENEOUS) == {
        "A": {"T2": {0}, "T3": {0, 1}},
        "B": {"T1": {0, 1}, "T2": {1}},
    }


def test_uniform_heterogeneous_member_without_subscription_next_to_one_with() -> None:
    members = {"A": member("T1"), "B": member()}
    assert assign(UNIFORM, members, {"T1": 3}) == {"A": {"T1": {0, 1, 2}}, "B": {}}


def test_uniform_heterogeneous_overlapping_subscriptions_can_stay_uneven() -> None:
    """Kafka's documented limit: each topic is balanced among its subscribers, the totals need not be."""
    members = {"M1": member("A"), "M2": member("A", "B"), "M3": member("B")}
    result = assign(UNIFORM, members, {"A": 10, "B": 20})
    check_valid(members, {"A": 10, "B": 20}, result)
    check_heterogeneous_balance(members, {"A": 10, "B": 20}, result)


# -- both uniform paths (CommonAssignorTests) ----------------------------------------------------------


@pytest.mark.parametrize("subscription_type", [HOMOGENEOUS, HETEROGENEOUS])
def test_uniform_reuses_the_assignment_when_nothing_changes(subscription_type: SubscriptionType) -> None:
    counts = {"T1": 2, "T2": 5, "T3": 7}
    members = {m: member("T1", "T2", "T3") for m in "ABC"}
    topics = TopicsMetadata(counts)
    first = UNIFORM.assign(GroupSpec(members, subscription_type), topics)
    second = UNIFORM.assign(GroupSpec(with_assignment(members, first), subscription_type), topics)
    for m in members:
        assert second.members[m] is first.members[m]


@pytest.mark.parametrize("subscription_type", [HOMOGENEOUS, HETEROGENEOUS])
def test_uniform_result_does_not_depend_on_member_order(subscription_type: SubscriptionType) -> None:
    counts = {"T1": 2, "T2": 5, "T3": 7}
    members = {m: member("T1", "T2", "T3") for m in "ABC"}
    first = UNIFORM.assign(GroupSpec(members, subscription_type), TopicsMetadata(counts))
    expected = plain(first)
    held = with_assignment(members, first)
    for order in ["ABC", "ACB", "BAC", "BCA", "CAB", "CBA"]:
        reordered = {m: held[m] for m in order}
        assert assign(UNIFORM, reordered, counts, subscription_type) == expected


# -- range (RangeAssignorTest, Kafka 4.0) --------------------------------------------------------------


def test_range_one_member_without_topics() -> None:
    assert assign(RANGE, {"A": member()}, {"T1": 3}) == {"A": {}}


def test_range_a_topic_that_does_not_exist_is_ignored() -> None:
    assert assign(RANGE, {"A": member("T2")}, {"T1": 3}) == {"A": {}}


def test_range_first_assignment_two_members_same_subscriptions() -> None:
    members = {"A": member("T1", "T3"), "B": member("T1", "T3")}
    assert assign(RANGE, members, {"T1": 3, "T3": 2}) == {
        "A": {"T1": {0, 1}, "T3": {0}},
        "B": {"T1": {2}, "T3": {1}},
    }


def test_range_first_assignment_three_members_different_subscriptions() -> None:
    members = {"A": member("T1", "T2"), "B": member("T3"), "C": member("T2", "T3")}
    assert assign(RANGE, members, {"T1": 3, "T2": 3, "T3": 2}) == {
        "A": {"T1": {0, 1, 2}, "T2": {0, 1}},
        "B": {"T3": {0}},
        "C": {"T2": {2}, "T3": {1}},
    }


def test_range_more_members_than_partitions() -> None:
    members = {m: member("T1", "T3") for m in "ABC"}
    assert assign(RANGE, members, {"T1": 3, "T3": 2}) == {
        "A": {"T1": {0}, "T3": {0}},
        "B": {"T1": {1}, "T3": {1}},
        "C": {"T1": {2}},
    }


def test_range_static_member_keeps_its_range_under_a_new_member_id() -> None:
    members = {"A": member("T1", instance_id="instanceA"), "B": member("T1", instance_id="instanceB")}
    before = assign(RANGE, members, {"T1": 3})
    members = {"memberA1": member("T1", instance_id="instanceA"), "B": member("T1", instance_id="instanceB")}
    after = assign(RANGE, members, {"T1": 3})
    assert after["memberA1"] == before["A"] and after["B"] == before["B"]


def test_range_mixed_static_and_dynamic_members() -> None:
    members = {
        "A": member("T1", instance_id="instanceA"),
        "C": member("T1", instance_id="instanceC"),
        "B": member("T1"),
    }
    before = assign(RANGE, members, {"T1": 5})
    assert before == {"A": {"T1": {0, 1}}, "C": {"T1": {2, 3}}, "B": {"T1": {4}}}  # static members first
    members = {
        "memberA1": member("T1", instance_id="instanceA"),
        "B": member("T1"),
        "C": member("T1", instance_id="instanceC"),
    }
    after = assign(RANGE, members, {"T1": 5})
    assert after == {"memberA1": before["A"], "B": before["B"], "C": before["C"]}


def test_range_more_members_than_partitions_when_one_joins() -> None:
    members = {
        "A": member("T1", "T2", assignment={"T1": {0}, "T2": {0}}),
        "B": member("T1", "T2", assignment={"T1": {1}, "T2": {1}}),
        "C": member("T1", "T2"),
    }
    assert assign(RANGE, members, {"T1": 2, "T2": 2}) == {
        "A": {"T1": {0}, "T2": {0}},
        "B": {"T1": {1}, "T2": {1}},
        "C": {},
    }


def test_range_one_partition_added_to_each_topic() -> None:
    members = {
        "A": member("T1", "T2", assignment={"T1": {0, 1}, "T2": {0, 1}}),
        "B": member("T1", "T2", assignment={"T1": {2}, "T2": {2}}),
    }
    assert assign(RANGE, members, {"T1": 4, "T2": 4}) == {
        "A": {"T1": {0, 1}, "T2": {0, 1}},
        "B": {"T1": {2, 3}, "T2": {2, 3}},
    }


def test_range_member_joins_and_the_ranges_shift() -> None:
    """Not sticky (since Kafka 3.9): B gives up partition 2 and takes 1."""
    members = {
        "A": member("T1", "T2", assignment={"T1": {0, 1}, "T2": {0, 1}}),
        "B": member("T1", "T2", assignment={"T1": {2}, "T2": {2}}),
        "C": member("T1", "T2"),
    }
    assert assign(RANGE, members, {"T1": 3, "T2": 3}) == {
        "A": {"T1": {0}, "T2": {0}},
        "B": {"T1": {1}, "T2": {1}},
        "C": {"T1": {2}, "T2": {2}},
    }


def test_range_member_joins_and_a_partition_is_added() -> None:
    members = {
        "A": member("T1", "T2", assignment={"T1": {0, 1}, "T2": {0, 1}}),
        "B": member("T1", "T2", assignment={"T1": {2}, "T2": {2}}),
        "C": member("T1"),
    }
    assert assign(RANGE, members, {"T1": 4, "T2": 3}) == {
        "A": {"T1": {0, 1}, "T2": {0, 1}},
        "B": {"T1": {2}, "T2": {2}},
        "C": {"T1": {3}},
    }


def test_range_member_removed() -> None:
    members = {"B": member("T1", "T2", assignment={"T1": {2}, "T2": {2}})}
    assert assign(RANGE, members, {"T1": 3, "T2": 3}) == {"B": {"T1": {0, 1, 2}, "T2": {0, 1, 2}}}


def test_range_subscriptions_changed() -> None:
    # Subscriptions were A -> T1, T2; B -> T2; C -> T2, T3. Now A -> T1; B -> T1, T2, T3; C -> T2.
    members = {
        "A": member("T1", assignment={"T1": {0, 1, 2}, "T2": {0}}),
        "B": member("T1", "T2", "T3", assignment={"T2": {1}}),
        "C": member("T2", assignment={"T2": {2}, "T3": {0, 1}}),
    }
    assert assign(RANGE, members, {"T1": 3, "T2": 3, "T3": 2}) == {
        "A": {"T1": {0, 1}},
        "B": {"T1": {2}, "T2": {0, 1}, "T3": {0, 1}},
        "C": {"T2": {2}},
    }


def test_range_hands_back_an_unchanged_assignment_as_is() -> None:
    members = {m: member("T1") for m in "AB"}
    first = RANGE.assign(GroupSpec.of(members), TopicsMetadata({"T1": 4}))
    second = RANGE.assign(GroupSpec.of(with_assignment(members, first)), TopicsMetadata({"T1": 4}))
    assert all(second.members[m] is first.members[m] for m in members)


# -- properties ----------------------------------------------------------------------------------------

TOPIC_NAMES = ["t0", "t1", "t2", "t3", "t4"]
UNKNOWN_TOPIC = "gone"  # subscribed to, but the describer does not know it


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool | None = None) -> Group:
    """A group and its topics: counts from 0, an unknown topic, and current assignments that may be
    stale (unsubscribed topics, partitions out of range, partitions claimed by two members)."""
    topic_names = draw(st.lists(st.sampled_from(TOPIC_NAMES), unique=True, max_size=5))
    counts = {t: draw(st.integers(0, 12)) for t in topic_names}
    candidates = [*topic_names, UNKNOWN_TOPIC]
    member_ids = draw(st.lists(st.sampled_from([f"m{i}" for i in range(10)]), unique=True, max_size=7))
    if homogeneous is None:
        homogeneous = draw(st.booleans())
    shared = frozenset(draw(st.lists(st.sampled_from(candidates), unique=True)))
    members = {}
    for member_id in member_ids:
        topics = (
            shared if homogeneous else frozenset(draw(st.lists(st.sampled_from(candidates), unique=True)))
        )
        current = {
            t: frozenset(draw(st.lists(st.integers(-1, 13), max_size=6)))
            for t in draw(st.lists(st.sampled_from(candidates), unique=True, max_size=3))
        }
        instance_id = draw(st.one_of(st.none(), st.sampled_from(["i0", "i1", "i2", "i3"])))
        members[member_id] = MemberSubscriptionAndAssignment(topics, current, instance_id=instance_id)
    return members, counts


def check_valid(
    members: Mapping[str, MemberSubscriptionAndAssignment[str]], counts: Mapping[str, int], result: Plain
) -> None:
    """Every partition of a subscribed topic goes to exactly one member that subscribes to it; nothing else is assigned."""
    assert set(result) == set(members)
    owners: dict[tuple[str, int], str] = {}
    for member_id, assignment in result.items():
        for topic, partitions in assignment.items():
            assert partitions, f"{member_id} has an empty set for {topic}"
            assert topic in members[member_id].subscribed_topic_ids, (
                f"{member_id} got {topic} it does not subscribe to"
            )
            assert counts.get(topic, 0) > 0
            for p in partitions:
                assert 0 <= p < counts[topic]
                assert (topic, p) not in owners, f"{topic}-{p} assigned twice"
                owners[(topic, p)] = member_id
    subscribed = {t for spec in members.values() for t in spec.subscribed_topic_ids}
    expected = {(t, p) for t in subscribed for p in range(counts.get(t, 0))}
    assert set(owners) == expected


def loads(result: Plain) -> dict[str, int]:
    return {m: sum(map(len, a.values())) for m, a in result.items()}


def check_heterogeneous_balance(
    members: Mapping[str, MemberSubscriptionAndAssignment[str]], counts: Mapping[str, int], result: Plain
) -> None:
    """Kafka's guarantee: no partition could move to another subscriber of its topic with 2+ fewer partitions."""
    load = loads(result)
    for topic in counts:
        subscribers = [m for m, spec in members.items() if topic in spec.subscribed_topic_ids]
        holders = [m for m in subscribers if topic in result[m]]
        for holder in holders:
            for other in subscribers:
                assert load[holder] - load[other] <= 1, (topic, holder, other, load)


def shuffled(
    members: Mapping[str, MemberSubscriptionAndAssignment[str]], seed: int
) -> dict[str, MemberSubscriptionAndAssignment[str]]:
    """The same group, with members and each member's topics in another order."""
    rng = random.Random(seed)
    order = list(members)
    rng.shuffle(order)
    out = {}
    for m in order:
        spec = members[m]
        items = list(spec.assignment.items())
        rng.shuffle(items)
        out[m] = MemberSubscriptionAndAssignment(
            spec.subscribed_topic_ids, dict(items), spec.rack_id, spec.instance_id
        )
    return out


ASSIGNORS = st.sampled_from([UNIFORM, RANGE])


@settings(max_examples=300, deadline=None)
@given(groups(), ASSIGNORS)
def test_every_subscribed_partition_goes_to_exactly_one_subscriber(
    group: Group, assignor: PartitionAssignor
) -> None:
    members, counts = group
    check_valid(members, counts, assign(assignor, members, counts))


@settings(max_examples=200, deadline=None)
@given(groups(), ASSIGNORS, st.integers(0, 2**32))
def test_the_result_depends_on_the_input_not_its_order(
    group: Group, assignor: PartitionAssignor, seed: int
) -> None:
    members, counts = group
    result = assign(assignor, members, counts)
    assert assign(assignor, members, counts) == result
    assert assign(assignor, shuffled(members, seed), dict(reversed(counts.items()))) == result


@settings(max_examples=300, deadline=None)
@given(groups(homogeneous=True))
def test_uniform_homogeneous_sizes_differ_by_at_most_one(group: Group) -> None:
    members, counts = group
    sizes = loads(assign(UNIFORM, members, counts)).values()
    assert not sizes or max(sizes) - min(sizes) <= 1


@settings(max_examples=300, deadline=None)
@given(groups(homogeneous=False))
def test_uniform_heterogeneous_no_partition_could_move_to_a_lighter_subscriber(group: Group) -> None:
    members, counts = group
    result = assign(UNIFORM, members, counts, HETEROGENEOUS)
    check_heterogeneous_balance(members, counts, result)


@settings(max_examples=200, deadline=None)
@given(groups(), st.sampled_from([HOMOGENEOUS, HETEROGENEOUS]))
def test_uniform_a_settled_assignment_stays_as_it_is(
    group: Group, subscription_type: SubscriptionType
) -> None:
    members, counts = group
    if subscription_type is HOMOGENEOUS:
        members = {
            m: MemberSubscriptionAndAssignment(frozenset(counts), s.assignment) for m, s in members.items()
        }
    first = UNIFORM.assign(GroupSpec(members, subscription_type), TopicsMetadata(counts))
    second = UNIFORM.assign(
        GroupSpec(with_assignment(members, first), subscription_type), TopicsMetadata(counts)
    )
    assert all(second.members[m] is first.members[m] for m in members)


@settings(max_examples=300, deadline=None)
@given(groups(homogeneous=True), st.sampled_from(["m0", "m5", "zz"]))
def test_uniform_homogeneous_join_moves_only_what_balance_requires(group: Group, newcomer: str) -> None:
    members, counts = group
    members.pop(newcomer, None)
    settled = with_assignment(members, UNIFORM.assign(GroupSpec.of(members), TopicsMetadata(counts)))
    before = {m: {(t, p) for t, ps in spec.assignment.items() for p in ps} for m, spec in settled.items()}
    subscription = next(iter(members.values())).subscribed_topic_ids if members else frozenset(counts)
    joined = {**settled, newcomer: MemberSubscriptionAndAssignment(subscription)}
    after_plain = assign(UNIFORM, joined, counts)
    after = {m: {(t, p) for t, ps in a.items() for p in ps} for m, a in after_plain.items()}

    # Members that stay only give partitions up, never swap them.
    for m in settled:
        assert after[m] <= before[m]
    # And they give up the fewest balance allows: with P // M each and P % M extra slots, a member
    # holding more than P // M keeps one extra while slots last.
    total = sum(len(b) for b in before.values())
    quota, extra_slots = divmod(total, len(joined))
    over = [len(b) - quota for b in before.values() if len(b) > quota]
    least_moves = sum(over) - min(extra_slots, len(over))
    assert sum(len(before[m]) - len(after[m]) for m in settled) == least_moves


@settings(max_examples=300, deadline=None)
@given(groups(homogeneous=True))
def test_uniform_homogeneous_leave_takes_nothing_from_those_who_stay(group: Group) -> None:
    members, counts = group
    if not members:
        return
    settled = with_assignment(members, UNIFORM.assign(GroupSpec.of(members), TopicsMetadata(counts)))
    leaver = sorted(settled)[len(settled) // 2]
    stayers = {m: spec for m, spec in settled.items() if m != leaver}
    after = assign(UNIFORM, stayers, counts)
    for m, spec in stayers.items():
        for topic, partitions in spec.assignment.items():
            assert partitions <= after[m][topic]


@settings(max_examples=300, deadline=None)
@given(groups())
def test_range_balances_each_topic_and_co_partitions_alike_members(group: Group) -> None:
    members, counts = group
    result = assign(RANGE, members, counts)
    for topic, count in counts.items():
        subscribers = [m for m, spec in members.items() if topic in spec.subscribed_topic_ids]
        if count and subscribers:
            sizes = [len(result[m].get(topic, ())) for m in subscribers]
            assert max(sizes) - min(sizes) <= 1
            for m in subscribers:  # each member's partitions of the topic are one contiguous run
                partitions = sorted(result[m].get(topic, ()))
                if partitions:
                    assert partitions == list(range(partitions[0], partitions[0] + len(partitions)))
    # Same topics, same partition counts: each member gets the same partition numbers of every topic.
    if len({spec.subscribed_topic_ids for spec in members.values()}) == 1:
        known = [t for t in next(iter(members.values())).subscribed_topic_ids if counts.get(t, 0) > 0]
        if len({counts[t] for t in known}) == 1:
            for assignment in result.values():
                assert len({frozenset(assignment.get(t, ())) for t in known}) == 1
