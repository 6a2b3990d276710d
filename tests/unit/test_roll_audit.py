"""The counts of a migration roll (support/roll/audit.py) from hand-made timelines."""

from __future__ import annotations

import pytest

from support.roll.audit import (
    CommitRefusal,
    Delivery,
    MemberLife,
    OwnershipChange,
    StepTiming,
    audit,
    ownership_intervals,
)


def gained(member: str, at: float, *parts: int) -> OwnershipChange:
    return OwnershipChange(member, at, frozenset(parts), True)


def taken(member: str, at: float, *parts: int) -> OwnershipChange:
    return OwnershipChange(member, at, frozenset(parts), False)


def test_duplicates_lost_and_refused_commits_are_counted() -> None:
    deliveries = [
        Delivery("a", 0, 0, 0, 1.0),
        Delivery("a", 0, 1, 2, 1.0),
        Delivery("b", 0, 1, 2, 2.0),  # the same record by another member
        Delivery("b", 1, 0, 1, 2.0),
        Delivery("b", 1, 0, 1, 2.5),  # and one member twice
        Delivery("b", 1, 0, 1, 2.6),
    ]
    report = audit(
        partitions=2,
        produced=[0, 1, 2, 3, 4],
        deliveries=deliveries,
        changes=[gained("a", 0.0, 0, 1)],
        lives=[MemberLife("a", 0.0, None)],
        refusals=[
            CommitRefusal("b", 2.0, "REBALANCE_IN_PROGRESS"),
            CommitRefusal("a", 2.1, "REBALANCE_IN_PROGRESS"),
        ],
        steps=[],
        window=(0.0, 3.0),
    )
    assert (report.produced, report.delivered, report.never_delivered) == (5, 3, 2)
    assert (report.duplicated_records, report.duplicate_deliveries, report.duplicated_across_members) == (
        2,
        3,
        1,
    )
    assert report.refused_commits == {"REBALANCE_IN_PROGRESS": 2}


def test_ownerless_time_is_measured_inside_the_window_only() -> None:
    changes = [
        gained("a", 0.0, 0, 1),
        taken("a", 2.0, 1),  # partition 1 without an owner from 2.0 ...
        gained("b", 3.5, 1),  # ... to 3.5
    ]
    report = audit(
        partitions=2,
        produced=[],
        deliveries=[],
        changes=changes,
        lives=[MemberLife("a", 0.0, None), MemberLife("b", 3.0, None)],
        refusals=[],
        steps=[],
        window=(1.0, 5.0),
    )
    assert report.ownerless_seconds == {0: 0.0, 1: pytest.approx(1.5)}
    assert report.ownerless_max == pytest.approx(1.5)
    assert report.double_ownership_episodes == 0


def test_a_member_that_ends_without_giving_back_stops_owning_at_its_end() -> None:
    intervals = ownership_intervals([gained("a", 1.0, 0)], [MemberLife("a", 0.0, 4.0)], until=10.0)
    assert [(i.member, i.start, i.end) for i in intervals[0]] == [("a", 1.0, 4.0)]
    still_running = ownership_intervals([gained("a", 1.0, 0)], [MemberLife("a", 0.0, None)], until=10.0)
    assert still_running[0][0].end == 10.0


def test_two_owners_at_once_are_episodes_with_their_seconds() -> None:
    changes = [
        gained("a", 0.0, 0),
        gained("b", 1.0, 0),  # overlap 1.0 .. 1.5
        taken("a", 1.5, 0),
        gained("a", 3.0, 0),  # overlap 3.0 .. 3.25
        taken("b", 3.25, 0),
    ]
    report = audit(
        partitions=1,
        produced=[],
        deliveries=[],
        changes=changes,
        lives=[MemberLife("a", 0.0, None), MemberLife("b", 0.0, None)],
        refusals=[],
        steps=[StepTiming("upgrade c0", 0.5, 1.7), StepTiming("upgrade c1", 2.0, None)],
        window=(0.0, 4.0),
    )
    assert report.double_ownership_episodes == 2
    assert report.double_ownership_seconds == pytest.approx(0.75)
    assert report.ownerless_seconds == {0: 0.0}
    assert report.steps[0].seconds == pytest.approx(1.2)
    assert not report.all_steps_settled
    assert "upgrade c1=unsettled" in report.summary()


def test_a_duplicate_after_a_refused_commit_is_explained_and_one_without_is_not() -> None:
    deliveries = [
        Delivery("a", 0, 5, 5, 1.0),
        Delivery("b", 0, 5, 5, 3.0),  # a's commit of offset 6 was refused: b starts again at 5
        Delivery("a", 1, 7, 8, 1.0),
        Delivery("b", 1, 7, 8, 3.0),  # a's commit of partition 1 went through: unexplained
    ]
    refusals = [CommitRefusal("a", 1.1, "ILLEGAL_GENERATION", ((0, 6),))]
    report = audit(
        partitions=2,
        produced=[5, 8],
        deliveries=deliveries,
        changes=[],
        lives=[],
        refusals=refusals,
        steps=[],
        window=(0.0, 4.0),
    )
    assert (report.duplicated_records, report.duplicated_unexplained) == (2, 1)
    assert refusals[0].covers(0, 5) and not refusals[0].covers(0, 6) and not refusals[0].covers(1, 5)
