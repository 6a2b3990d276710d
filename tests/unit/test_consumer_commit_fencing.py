"""Offset commit fencing of KIP-848 consumer groups, in its three modes
(``group.consumer.offset.commit.fencing``), against groups built only by replaying the records
the record builders write (tests/unit/consumer_context.py).

The founding scenario: member A owns P1 at epoch e; B joins; A is bumped to e+1 and keeps P1; A's
commit of P1 at epoch e, sent before it heard of e+1, is honest. Strict fencing refuses it; the
relaxed modes accept it. A partition A lost at the bump is refused by every mode, and so is an
epoch newer than A's.
"""

from __future__ import annotations

import pytest

from kcoord.coordinator.core import records as builders
from kcoord.coordinator.core.classic.group import ClassicGroup
from kcoord.coordinator.core.classic.member import ClassicMember
from kcoord.coordinator.core.consumer.commit_fencing import (
    OffsetCommitFencing,
    request_error,
    validate_offset_commit,
)
from kcoord.coordinator.core.consumer.member import ClassicMemberMetadata, MemberState
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    Record,
)
from tests.unit.consumer_context import BAR, FOO, ConsumerLog

STRICT = OffsetCommitFencing.STRICT
REVOCATION = OffsetCommitFencing.REVOCATION_EPOCH
ASSIGNMENT = OffsetCommitFencing.ASSIGNMENT_EPOCH
ALL_MODES = list(OffsetCommitFencing)
E0 = 5  # A's epoch before B joins
P1, P2, P3 = (FOO, 0), (FOO, 1), (BAR, 0)


def commit(
    log: ConsumerLog, member_id: str, epoch: int, *partitions: tuple[object, int], mode: OffsetCommitFencing,
    transactional: bool = False, api_version: int = 9, instance_id: str | None = None,
) -> dict[object, E]:  # fmt: skip
    return validate_offset_commit(
        log.group,
        member_id,
        instance_id,
        epoch,
        list(partitions),
        transactional,
        fencing=mode,
        api_version=api_version,
    )


def a_owns(*partitions: tuple[object, int]) -> ConsumerLog:
    """A is STABLE at epoch E0 owning ``partitions`` (assigned at E0 - 2, E0 being its latest bump)."""
    log = ConsumerLog()
    assignment: dict[object, list[int]] = {}
    for topic, partition in partitions:
        assignment.setdefault(topic, []).append(partition)
    log.bump_group_epoch(E0 - 2)
    log.subscribe("A", ["foo", "bar"])
    log.target(E0 - 2, {"A": assignment})
    log.reconcile("A", epoch=E0 - 2, assigned=assignment)
    log.bump_group_epoch(E0)
    log.target(E0, {"A": assignment})
    log.reconcile("A", epoch=E0, assigned=assignment)
    assert log.member("A").assigned_partitions == {
        t: dict.fromkeys(ps, E0 - 2) for t, ps in assignment.items()
    }
    return log


def b_joins_and_a_keeps_p1() -> ConsumerLog:
    """A owns P1; B joins and gets P3, which nobody owned; A goes straight to E0 + 1 with P1."""
    log = a_owns(P1)
    log.bump_group_epoch(E0 + 1)
    log.subscribe("B", ["bar"])
    log.target(E0 + 1, {"A": {FOO: [0]}, "B": {BAR: [0]}})
    log.reconcile("A", epoch=E0 + 1, assigned={FOO: [0]})
    log.reconcile("B", epoch=E0 + 1, assigned={BAR: [0]})
    return log


def b_joins_and_takes_p2() -> ConsumerLog:
    """A owns P1 and P2; B joins and gets P2: A must first revoke it (UNREVOKED_PARTITIONS at E0),
    then moves to E0 + 1 with P1 only, and B gets P2."""
    log = a_owns(P1, P2)
    log.bump_group_epoch(E0 + 1)
    log.subscribe("B", ["foo"])
    log.target(E0 + 1, {"A": {FOO: [0]}, "B": {FOO: [1]}})
    log.reconcile(
        "A", epoch=E0, assigned={FOO: [0]}, pending={FOO: [1]}, state=MemberState.UNREVOKED_PARTITIONS
    )
    log.reconcile("B", epoch=E0 + 1, assigned={}, state=MemberState.UNRELEASED_PARTITIONS)
    return log


def finish_revocation(log: ConsumerLog) -> None:
    log.reconcile("A", epoch=E0 + 1, assigned={FOO: [0]})
    log.reconcile("B", epoch=E0 + 1, assigned={FOO: [1]})


# -- the founding scenario ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"), [(STRICT, E.STALE_MEMBER_EPOCH), (REVOCATION, E.NONE), (ASSIGNMENT, E.NONE)]
)
def test_a_commit_at_the_epoch_before_a_bump_that_kept_the_partition(
    mode: OffsetCommitFencing, expected: E
) -> None:
    log = b_joins_and_a_keeps_p1()
    assert log.member("A").member_epoch == E0 + 1
    assert commit(log, "A", E0, P1, mode=mode) == {P1: expected}
    assert commit(log, "A", E0 + 1, P1, mode=mode) == {P1: E.NONE}  # the current epoch: always
    assert commit(log, "B", E0 + 1, P3, mode=mode) == {P3: E.NONE}


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_partition_revoked_at_the_bump_is_refused_in_every_mode(mode: OffsetCommitFencing) -> None:
    log = b_joins_and_takes_p2()
    # Until it revoked P2, A is at E0 and commits it: it must, before letting it go.
    assert commit(log, "A", E0, P1, P2, mode=mode) == {P1: E.NONE, P2: E.NONE}
    finish_revocation(log)
    assert log.member("A").revocation_epoch == E0
    codes = commit(log, "A", E0, P1, P2, mode=mode)
    assert codes[P2] == E.STALE_MEMBER_EPOCH
    # P1 stayed A's: KIP-1251 accepts it; the revocation epoch is per member, so it refuses it.
    assert codes[P1] == (E.NONE if mode is ASSIGNMENT else E.STALE_MEMBER_EPOCH)
    assert request_error(codes) == E.STALE_MEMBER_EPOCH  # Kafka answers the whole commit so
    assert commit(log, "B", E0 + 1, P2, mode=mode) == {P2: E.NONE}


@pytest.mark.parametrize("mode", ALL_MODES)
def test_an_epoch_newer_than_the_members_is_refused_in_every_mode(mode: OffsetCommitFencing) -> None:
    """Kafka: StaleMemberEpochException ("newer than current member epoch"), not FENCED_MEMBER_EPOCH
    (that one is the heartbeat's); ILLEGAL_GENERATION for TxnOffsetCommit."""
    log = b_joins_and_a_keeps_p1()
    assert commit(log, "A", E0 + 2, P1, mode=mode) == {P1: E.STALE_MEMBER_EPOCH}
    assert commit(log, "A", E0 + 2, P1, mode=mode, transactional=True) == {P1: E.ILLEGAL_GENERATION}


@pytest.mark.parametrize("mode", ALL_MODES)
def test_partitions_the_member_never_owned_and_epochs_before_it_got_them(mode: OffsetCommitFencing) -> None:
    """Only assignment epochs know which partitions a member had at which epoch; the revocation
    epoch only knows the member lost none since (here: never), so it accepts these."""
    log = b_joins_and_a_keeps_p1()
    refused = E.STALE_MEMBER_EPOCH
    lenient = E.NONE if mode is REVOCATION else refused
    assert commit(log, "A", E0, P3, mode=mode) == {P3: lenient}  # P3 is B's, never A's
    assert commit(log, "B", E0, P3, mode=mode) == {P3: lenient}  # B got P3 at E0 + 1
    assert commit(log, "A", E0 - 3, P1, mode=mode) == {P1: lenient}  # A got P1 at E0 - 2


def test_a_new_member_starts_at_revocation_epoch_0() -> None:
    """So the revocation-epoch mode accepts any epoch of its own above 0 (0 is the join epoch)."""
    log = b_joins_and_a_keeps_p1()
    assert log.member("B").revocation_epoch == 0
    assert commit(log, "B", 0, P3, mode=REVOCATION) == {P3: E.STALE_MEMBER_EPOCH}
    assert commit(log, "B", 1, P3, mode=REVOCATION) == {P3: E.NONE}


# -- the member-level rules the modes share --------------------------------------------------------------------


@pytest.mark.parametrize("mode", ALL_MODES)
def test_unknown_members_and_simple_commits(mode: OffsetCommitFencing) -> None:
    log = b_joins_and_a_keeps_p1()
    assert commit(log, "Z", E0 + 1, P1, mode=mode) == {P1: E.UNKNOWN_MEMBER_ID}
    # Generation -1 with no member: the admin client; only an empty group takes it.
    assert commit(log, "", -1, P1, mode=mode) == {P1: E.UNKNOWN_MEMBER_ID}
    # A transactional producer that sent no group metadata is not checked.
    assert commit(log, "", -1, P1, mode=mode, transactional=True) == {P1: E.NONE}
    assert commit(log, "", -1, P1, mode=mode, transactional=True, instance_id="i") == {
        P1: E.UNKNOWN_MEMBER_ID
    }
    log.remove_member("A")
    log.remove_member("B")
    assert log.group.is_empty
    assert commit(log, "", -1, P1, P3, mode=mode) == {P1: E.NONE, P3: E.NONE}
    assert commit(log, "A", E0, P1, mode=mode) == {P1: E.UNKNOWN_MEMBER_ID}


@pytest.mark.parametrize("mode", ALL_MODES)
def test_transactional_commits_say_illegal_generation(mode: OffsetCommitFencing) -> None:
    """TxnOffsetCommit has no STALE_MEMBER_EPOCH: Kafka converts it to ILLEGAL_GENERATION."""
    log = b_joins_and_takes_p2()
    finish_revocation(log)
    assert commit(log, "A", E0, P2, mode=mode, transactional=True) == {P2: E.ILLEGAL_GENERATION}
    # TxnOffsetCommit has no version floor; P2 is B's now, which only assignment-epoch looks at.
    p2 = E.ILLEGAL_GENERATION if mode is OffsetCommitFencing.ASSIGNMENT_EPOCH else E.NONE
    assert commit(log, "A", E0 + 1, P1, mode=mode, transactional=True, api_version=0) == {P1: E.NONE}
    assert commit(log, "A", E0 + 1, P1, P2, mode=mode, transactional=True, api_version=0) == {
        P1: E.NONE,
        P2: p2,
    }


@pytest.mark.parametrize("mode", ALL_MODES)
def test_at_the_current_epoch_only_assignment_epoch_refuses_a_partition_the_member_does_not_own(
    mode: OffsetCommitFencing,
) -> None:
    """Under assignment-epoch "a partition not owned by the member is rejected", at its
    current epoch too (Kafka 4.3 accepts the current epoch whatever the partitions, as the other
    two modes do). A partition still pending revocation is still the member's."""
    log = b_joins_and_takes_p2()
    assert commit(log, "A", E0, P2, mode=mode) == {P2: E.NONE}  # A must still revoke P2: its own
    finish_revocation(log)
    refused = E.STALE_MEMBER_EPOCH if mode is OffsetCommitFencing.ASSIGNMENT_EPOCH else E.NONE
    assert commit(log, "A", E0 + 1, P1, P2, mode=mode) == {P1: E.NONE, P2: refused}


@pytest.mark.parametrize("mode", ALL_MODES)
def test_consumer_protocol_members_must_use_offset_commit_v9(mode: OffsetCommitFencing) -> None:
    log = b_joins_and_a_keeps_p1()
    assert commit(log, "A", E0 + 1, P1, mode=mode, api_version=8) == {P1: E.UNSUPPORTED_VERSION}


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_classic_protocol_member_of_a_consumer_group_is_held_to_its_generation(
    mode: OffsetCommitFencing,
) -> None:
    """A member that joined with JoinGroup: strict in every mode, ILLEGAL_GENERATION, any version."""
    log = b_joins_and_a_keeps_p1()
    log.subscribe(
        "A", ["foo", "bar"], classic_member_metadata=ClassicMemberMetadata(45_000, (("range", b""),))
    )
    assert log.member("A").uses_classic_protocol
    assert commit(log, "A", E0 + 1, P1, mode=mode, api_version=2) == {P1: E.NONE}
    assert commit(log, "A", E0, P1, mode=mode) == {P1: E.ILLEGAL_GENERATION}
    assert commit(log, "A", E0 + 2, P1, mode=mode, transactional=True) == {P1: E.ILLEGAL_GENERATION}


def test_a_consumer_protocol_member_committing_to_a_classic_group() -> None:
    """The other way round: a classic group does not know a KIP-848 member id (UNKNOWN_MEMBER_ID)."""
    group = ClassicGroup("g", 0)
    group.add(ClassicMember(member_id="c-1", group_instance_id=None, client_id="c", client_host="h",
                            rebalance_timeout_ms=1000, session_timeout_ms=1000, protocol_type="consumer"))  # fmt: skip
    assert group.validate_offset_commit("kip848-member", None, 6) == E.UNKNOWN_MEMBER_ID


# -- members replayed from records without kcoord's revocation epoch --------------------------------------------


def test_a_member_from_a_record_without_the_revocation_epoch_is_strict_until_it_next_loses_partitions() -> (
    None
):
    log = ConsumerLog()
    log.bump_group_epoch(E0)
    log.subscribe("A", ["foo"])
    # What Kafka (or an older kcoord) wrote: no revocation epoch, no assignment epochs.
    value = ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=E0, previous_member_epoch=E0 - 1, state=0, partitions_pending_revocation=[],
        assigned_partitions=[ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions(
            topic_id=FOO, partitions=[0, 1], assignment_epochs=None)],
    )  # fmt: skip
    log.write(Record(ConsumerGroupCurrentMemberAssignmentKey(group_id="grp", member_id="A"), value))
    assert log.member("A").revocation_epoch == -1
    assert log.member("A").assigned_partitions == {FOO: {0: E0, 1: E0}}
    log.reconcile("A", epoch=E0 + 1, assigned={FOO: [0, 1]})  # a bump without revocation
    assert commit(log, "A", E0, P1, mode=REVOCATION) == {P1: E.STALE_MEMBER_EPOCH}  # still strict
    assert commit(log, "A", E0, P1, mode=ASSIGNMENT) == {P1: E.NONE}  # the record's epoch, E0
    log.reconcile(
        "A", epoch=E0 + 1, assigned={FOO: [0]}, pending={FOO: [1]}, state=MemberState.UNREVOKED_PARTITIONS
    )
    log.reconcile("A", epoch=E0 + 2, assigned={FOO: [0]})
    assert log.member("A").revocation_epoch == E0 + 1
    assert commit(log, "A", E0 + 1, P1, mode=REVOCATION) == {P1: E.STALE_MEMBER_EPOCH}
    log.reconcile("A", epoch=E0 + 3, assigned={FOO: [0]})
    assert commit(log, "A", E0 + 2, P1, mode=REVOCATION) == {P1: E.NONE}  # relaxed from now on


# -- static members ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_static_member_that_leaves_and_rejoins(mode: OffsetCommitFencing) -> None:
    """Leaving with epoch -2 keeps its partitions at assignment epoch 0; the instance id rejoins
    under a new member id that inherits them; the old member id is gone."""
    log = ConsumerLog()
    log.bump_group_epoch(E0)
    log.subscribe("A", ["foo"], instance_id="i-A")
    log.target(E0, {"A": {FOO: [0, 1]}})
    log.reconcile("A", epoch=E0, assigned={FOO: [0, 1]})
    log.write(builders.consumer_group_current_assignment_record("grp", log.member("A").as_static_leave()))
    left = log.member("A")
    assert (left.member_epoch, left.assigned_partitions) == (-2, {FOO: {0: 0, 1: 0}})
    assert commit(log, "A", E0, P1, mode=mode) == {P1: E.STALE_MEMBER_EPOCH}  # newer than -2
    # The rejoin (Kafka's static member replacement): old member's tombstones, the new member's records.
    successor = left.replaced_by("A2")
    log.remove_member("A")
    log.write(builders.consumer_group_member_subscription_record("grp", successor))
    log.write(builders.consumer_group_target_assignment_record("grp", "A2", {FOO: [0, 1, 2]}))
    log.write(builders.consumer_group_current_assignment_record("grp", successor))
    log.reconcile("A2", epoch=E0, assigned={FOO: [0, 1, 2]})
    assert log.member("A2").assigned_partitions == {FOO: {0: 0, 1: 0, 2: E0}}
    assert log.group.static_members == {"i-A": "A2"}
    assert commit(log, "A", E0, P1, mode=mode) == {P1: E.UNKNOWN_MEMBER_ID}
    assert commit(log, "A2", E0, P1, (FOO, 2), mode=mode) == {P1: E.NONE, (FOO, 2): E.NONE}
    expected = E.STALE_MEMBER_EPOCH if mode is STRICT else E.NONE
    assert commit(log, "A2", 1, P1, mode=mode) == {P1: expected}  # epoch 1 >= assignment epoch 0
    assert commit(log, "A2", 1, (FOO, 2), mode=mode)[(FOO, 2)] == (
        E.NONE if mode is REVOCATION else E.STALE_MEMBER_EPOCH
    )
