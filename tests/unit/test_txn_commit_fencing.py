"""Relaxed fencing for *transactional* offset commits of KIP-848 members.

A consume-transform-produce member sends TxnOffsetCommit with ``consumer.groupMetadata()``: the
member epoch it last heard, often one bump stale (KAFKA-19779). With
``group.consumer.offset.commit.fencing``:

- a commit one bump stale for a partition the member still owns is accepted under
  ``revocation-epoch`` and ``assignment-epoch`` and refused under ``strict`` with ILLEGAL_GENERATION
  (TxnOffsetCommit has no STALE_MEMBER_EPOCH; Kafka converts it);
- a commit of a partition the member has revoked is refused under every mode.

Checked twice: against the validator (:func:`validate_offset_commit`) and through the shard's
TxnOffsetCommit handler with the mode set in the group config, where an accepted commit becomes the
producer's transactional batch (visible at its COMMIT marker) and a refused one writes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from kcoord.coordinator.core.consumer.commit_fencing import OffsetCommitFencing, validate_offset_commit
from kcoord.coordinator.core.consumer.member import MemberState
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.messages import ApiKey
from tests.unit.consumer_context import BAR, FOO, ConsumerLog

STRICT = OffsetCommitFencing.STRICT
REVOCATION = OffsetCommitFencing.REVOCATION_EPOCH
ASSIGNMENT = OffsetCommitFencing.ASSIGNMENT_EPOCH
E0 = 5  # A's epoch before B joins
P1, P2, P3 = (FOO, 0), (FOO, 1), (BAR, 0)
NAMES = {FOO: "foo", BAR: "bar"}
PID = 7000


def log_in(mode: OffsetCommitFencing) -> ConsumerLog:
    return ConsumerLog(
        config=GroupConfig(consumer_assignment_interval_ms=0, consumer_offset_commit_fencing=mode.value)
    )


def a_owns(mode: OffsetCommitFencing, *partitions: tuple[Any, int]) -> ConsumerLog:
    """A is STABLE at epoch E0 owning ``partitions`` (assigned at E0 - 2)."""
    log = log_in(mode)
    assignment: dict[Any, list[int]] = {}
    for topic, partition in partitions:
        assignment.setdefault(topic, []).append(partition)
    log.bump_group_epoch(E0 - 2)
    log.subscribe("A", ["foo", "bar"])
    log.target(E0 - 2, {"A": assignment})
    log.reconcile("A", epoch=E0 - 2, assigned=assignment)
    log.bump_group_epoch(E0)
    log.target(E0, {"A": assignment})
    log.reconcile("A", epoch=E0, assigned=assignment)
    return log


def b_joins_and_a_keeps_p1(mode: OffsetCommitFencing) -> ConsumerLog:
    """B joins and gets P3, which nobody owned; A is bumped to E0 + 1 and keeps P1."""
    log = a_owns(mode, P1)
    log.bump_group_epoch(E0 + 1)
    log.subscribe("B", ["bar"])
    log.target(E0 + 1, {"A": {FOO: [0]}, "B": {BAR: [0]}})
    log.reconcile("A", epoch=E0 + 1, assigned={FOO: [0]})
    log.reconcile("B", epoch=E0 + 1, assigned={BAR: [0]})
    assert log.member("A").member_epoch == E0 + 1
    return log


def b_joins_and_takes_p2(mode: OffsetCommitFencing) -> ConsumerLog:
    """A owned P1 and P2; B joins and gets P2: A revokes it and moves to E0 + 1 with P1 only."""
    log = a_owns(mode, P1, P2)
    log.bump_group_epoch(E0 + 1)
    log.subscribe("B", ["foo"])
    log.target(E0 + 1, {"A": {FOO: [0]}, "B": {FOO: [1]}})
    log.reconcile(
        "A", epoch=E0, assigned={FOO: [0]}, pending={FOO: [1]}, state=MemberState.UNREVOKED_PARTITIONS
    )
    log.reconcile("B", epoch=E0 + 1, assigned={}, state=MemberState.UNRELEASED_PARTITIONS)
    log.reconcile("A", epoch=E0 + 1, assigned={FOO: [0]})
    log.reconcile("B", epoch=E0 + 1, assigned={FOO: [1]})
    return log


def txn_commit(
    log: ConsumerLog, member: str, epoch: int, offsets: dict[tuple[Any, int], int]
) -> dict[tuple[Any, int], E]:
    """TxnOffsetCommit v3 (member id and epoch, as the Java producer sends groupMetadata()) through
    the shard's handler; the producer's transaction was opened by AddOffsetsToTxn (replayed here)."""
    log.shard.replay_begin_transaction(PID, 0)
    T = m.TxnOffsetCommitRequest
    topics: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(NAMES[topic], []).append(
            T.TxnOffsetCommitRequestPartition(partition_index=partition, committed_offset=offset)
        )
    req = T(
        transactional_id="ctp", group_id=log.group_id, producer_id=PID, producer_epoch=0,
        generation_id_or_member_epoch=epoch, member_id=member,
        topics=[T.TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()],
    )  # fmt: skip
    resp = log.send(ApiKey.TXN_OFFSET_COMMIT, 3, req)
    ids = {v: k for k, v in NAMES.items()}
    return {(ids[t.name], p.partition_index): E(p.error_code) for t in resp.topics for p in t.partitions}


def visible(log: ConsumerLog) -> dict[tuple[Any, int], int]:
    """The group's committed offsets (OffsetFetch v7 with RequireStable: a pending one is -1)."""
    R = m.OffsetFetchRequest
    req = R(group_id=log.group_id, require_stable=True, topics=[
        R.OffsetFetchRequestTopic(name="foo", partition_indexes=[0, 1]),
        R.OffsetFetchRequestTopic(name="bar", partition_indexes=[0]),
    ])  # fmt: skip
    resp = log.send(ApiKey.OFFSET_FETCH, 7, req)
    ids = {v: k for k, v in NAMES.items()}
    return {
        (ids[t.name], p.partition_index): p.committed_offset
        for t in resp.topics
        for p in t.partitions
        if p.committed_offset >= 0
    }


# -- the validator -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"), [(STRICT, E.ILLEGAL_GENERATION), (REVOCATION, E.NONE), (ASSIGNMENT, E.NONE)]
)
def test_validator_one_bump_stale_transactional_commit_of_a_kept_partition(
    mode: OffsetCommitFencing, expected: E
) -> None:
    log = b_joins_and_a_keeps_p1(mode)
    assert validate_offset_commit(log.group, "A", None, E0, [P1], True, fencing=mode, api_version=3) == {
        P1: expected
    }
    assert validate_offset_commit(log.group, "A", None, E0 + 1, [P1], True, fencing=mode, api_version=3) == {
        P1: E.NONE
    }


@pytest.mark.parametrize("mode", list(OffsetCommitFencing))
def test_validator_transactional_commit_of_a_revoked_partition_is_refused_in_every_mode(
    mode: OffsetCommitFencing,
) -> None:
    log = b_joins_and_takes_p2(mode)
    assert validate_offset_commit(log.group, "A", None, E0, [P2], True, fencing=mode, api_version=3) == {
        P2: E.ILLEGAL_GENERATION
    }


# -- through the TxnOffsetCommit handler, the mode from the group config -------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"), [(STRICT, E.ILLEGAL_GENERATION), (REVOCATION, E.NONE), (ASSIGNMENT, E.NONE)]
)
def test_one_bump_stale_txn_offset_commit_of_a_kept_partition(mode: OffsetCommitFencing, expected: E) -> None:
    log = b_joins_and_a_keeps_p1(mode)
    assert txn_commit(log, "A", E0, {P1: 42}) == {P1: expected}
    if expected == E.NONE:
        [write] = log.txn_writes
        assert (write.batch.producer_id, write.batch.producer_epoch) == (PID, 0)
        assert [r.value.offset for r in write.batch.records] == [42]
        assert visible(log) == {}  # pending until the transaction's marker
        log.shard.replay_end_transaction_marker(PID, 0, committed=True)
        assert visible(log) == {P1: 42}
    else:
        assert log.txn_writes == []  # refused: nothing written, nothing ever visible
        log.shard.replay_end_transaction_marker(PID, 0, committed=True)
        assert visible(log) == {}


@pytest.mark.parametrize("mode", list(OffsetCommitFencing))
def test_txn_offset_commit_of_a_revoked_partition_is_refused_in_every_mode(mode: OffsetCommitFencing) -> None:
    log = b_joins_and_takes_p2(mode)
    # A's epoch-E0 commit of P1 (kept) and P2 (now B's): Kafka refuses the whole request
    assert txn_commit(log, "A", E0, {P1: 10, P2: 20}) == {P1: E.ILLEGAL_GENERATION, P2: E.ILLEGAL_GENERATION}
    assert txn_commit(log, "A", E0, {P2: 20}) == {P2: E.ILLEGAL_GENERATION}
    assert log.txn_writes == []
    log.shard.replay_end_transaction_marker(PID, 0, committed=True)
    assert visible(log) == {}
    # B, the new owner, commits it at its epoch
    assert txn_commit(log, "B", E0 + 1, {P2: 20}) == {P2: E.NONE}
    log.shard.replay_end_transaction_marker(PID, 0, committed=True)
    assert visible(log) == {P2: 20}
