"""OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete and offset retention for KIP-848
consumer groups, through ``GroupCoordinatorShard.handle``.

Every group is built by replaying the records the record builders write (tests/unit/consumer_context.py);
every request goes through ``handle`` encoded and decoded at its version, and the records it returns
are stored and replayed. After each scenario the live shard's durable view equals that of a fresh
shard replaying the log, uncompacted and compacted.

The founding scenario, per fencing mode (``group.consumer.offset.commit.fencing``): member A owns
P1 at epoch E0; B joins and A is bumped to E0 + 1 keeping P1. A's commit of P1 at E0 is accepted by
the relaxed modes, refused by strict; a partition A lost at the bump is refused in every mode (and,
as in Kafka 4.3, fails the whole commit); an epoch above A's is refused in every mode.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kcoord.coordinator.core.consumer.commit_fencing import OffsetCommitFencing
from kcoord.coordinator.core.consumer.member import MemberState
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.shard_state import GroupCoordinatorShard
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.records import OffsetCommitKey, Record
from tests.unit.consumer_context import BAR, FOO, ConsumerLog, compacted

STRICT = OffsetCommitFencing.STRICT
REVOCATION = OffsetCommitFencing.REVOCATION_EPOCH
ASSIGNMENT = OffsetCommitFencing.ASSIGNMENT_EPOCH
ALL_MODES = list(OffsetCommitFencing)
E0 = 5
P1, P2, P3 = ("foo", 0), ("foo", 1), ("bar", 0)
TOPIC_ID = {"foo": FOO, "bar": BAR}
DAY = 24 * 3_600_000


def new_log(mode: OffsetCommitFencing = ASSIGNMENT, **config: Any) -> ConsumerLog:
    return ConsumerLog(config=GroupConfig(consumer_offset_commit_fencing=mode.value, **config))


def by_topic_id(*partitions: tuple[str, int]) -> dict[uuid.UUID, list[int]]:
    out: dict[uuid.UUID, list[int]] = {}
    for topic, partition in partitions:
        out.setdefault(TOPIC_ID[topic], []).append(partition)
    return out


def a_owns(log: ConsumerLog, *partitions: tuple[str, int]) -> None:
    """A is STABLE at epoch E0 owning ``partitions``, assigned at E0."""
    assignment = by_topic_id(*partitions)
    log.bump_group_epoch(E0)
    log.subscribe("A", ["foo", "bar"])
    log.target(E0, {"A": assignment})
    log.reconcile("A", epoch=E0, assigned=assignment)


def b_joins_and_a_keeps_p1(log: ConsumerLog) -> None:
    a_owns(log, P1)
    log.bump_group_epoch(E0 + 1)
    log.subscribe("B", ["bar"])
    log.target(E0 + 1, {"A": by_topic_id(P1), "B": by_topic_id(P3)})
    log.reconcile("A", epoch=E0 + 1, assigned=by_topic_id(P1))
    log.reconcile("B", epoch=E0 + 1, assigned=by_topic_id(P3))


def b_joins_and_takes_p2(log: ConsumerLog) -> None:
    """A owns P1 and P2; B joins and gets P2: A revokes it at E0, then moves to E0 + 1 with P1."""
    a_owns(log, P1, P2)
    log.bump_group_epoch(E0 + 1)
    log.subscribe("B", ["foo"])
    log.target(E0 + 1, {"A": by_topic_id(P1), "B": by_topic_id(P2)})
    log.reconcile("A", epoch=E0, assigned=by_topic_id(P1), pending=by_topic_id(P2),
                  state=MemberState.UNREVOKED_PARTITIONS)  # fmt: skip
    log.reconcile("B", epoch=E0 + 1, assigned={}, state=MemberState.UNRELEASED_PARTITIONS)
    log.reconcile("A", epoch=E0 + 1, assigned=by_topic_id(P1))
    log.reconcile("B", epoch=E0 + 1, assigned=by_topic_id(P2))


def commit(
    log: ConsumerLog, member_id: str, epoch: int, offsets: dict[tuple[str, int], int], *, version: int = 9,
    metadata: str = "", group_id: str = "grp",
) -> dict[tuple[str, int], int]:  # fmt: skip
    T = m.OffsetCommitRequest.OffsetCommitRequestTopic
    P = m.OffsetCommitRequest.OffsetCommitRequestPartition
    topics: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            P(
                partition_index=partition,
                committed_offset=offset,
                committed_leader_epoch=-1,
                committed_metadata=metadata,
            )
        )
    request = m.OffsetCommitRequest(
        group_id=group_id, generation_id_or_member_epoch=epoch, member_id=member_id, group_instance_id=None,
        retention_time_ms=-1, topics=[T(name=t, partitions=ps) for t, ps in topics.items()],
    )  # fmt: skip
    response = log.send(ApiKey.OFFSET_COMMIT, version, request)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def txn_commit(
    log: ConsumerLog, member_id: str, epoch: int, partitions: list[tuple[str, int]], *, group_id: str = "grp"
) -> dict[tuple[str, int], int]:
    T = m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    P = m.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition
    topics: dict[str, list[Any]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(P(partition_index=partition, committed_offset=1))
    request = m.TxnOffsetCommitRequest(
        transactional_id="tx", group_id=group_id, producer_id=1, producer_epoch=0,
        generation_id_or_member_epoch=epoch, member_id=member_id, group_instance_id=None,
        topics=[T(name=t, partitions=ps) for t, ps in topics.items()],
    )  # fmt: skip
    response = log.send(ApiKey.TXN_OFFSET_COMMIT, 3, request)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def fetch(
    log: ConsumerLog, topics: dict[str, list[int]] | None, *, member_id: str | None = None, epoch: int = -1,
    version: int = 9,
) -> tuple[int, dict[tuple[str, int], int]]:  # fmt: skip
    """(the group's error code, partition -> committed offset)."""
    if version < 8:
        T7 = m.OffsetFetchRequest.OffsetFetchRequestTopic
        request = m.OffsetFetchRequest(
            group_id="grp",
            topics=None if topics is None else [T7(name=t, partition_indexes=ps) for t, ps in topics.items()],
        )
        response = log.send(ApiKey.OFFSET_FETCH, version, request)
        return response.error_code, {
            (t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions
        }
    G = m.OffsetFetchRequest.OffsetFetchRequestGroup
    T = m.OffsetFetchRequest.OffsetFetchRequestTopics
    group = G(group_id="grp", member_id=member_id, member_epoch=epoch,
              topics=None if topics is None else [T(name=t, partition_indexes=ps) for t, ps in topics.items()])  # fmt: skip
    response = log.send(ApiKey.OFFSET_FETCH, version, m.OffsetFetchRequest(groups=[group]))
    [answer] = response.groups
    return answer.error_code, {
        (t.name, p.partition_index): p.committed_offset for t in answer.topics for p in t.partitions
    }


def offset_delete(log: ConsumerLog, topics: dict[str, list[int]]) -> tuple[int, dict[tuple[str, int], int]]:
    T = m.OffsetDeleteRequest.OffsetDeleteRequestTopic
    P = m.OffsetDeleteRequest.OffsetDeleteRequestPartition
    request = m.OffsetDeleteRequest(
        group_id="grp",
        topics=[T(name=t, partitions=[P(partition_index=p) for p in ps]) for t, ps in topics.items()],
    )
    response = log.send(ApiKey.OFFSET_DELETE, 0, request)
    return response.error_code, {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


def assert_log_rebuilds_the_shard(log: ConsumerLog) -> None:
    live = log.shard.durable_view()
    assert log.fresh_replay().durable_view() == live
    assert log.fresh_replay(compacted(log.records)).durable_view() == live


def every(code: int, *partitions: tuple[str, int]) -> dict[tuple[str, int], int]:
    return dict.fromkeys(partitions, int(code))


# -- OffsetCommit: the founding scenario in each fencing mode --------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"), [(STRICT, E.STALE_MEMBER_EPOCH), (REVOCATION, E.NONE), (ASSIGNMENT, E.NONE)]
)
def test_a_commit_at_the_epoch_before_a_bump_that_kept_the_partition(
    mode: OffsetCommitFencing, expected: E
) -> None:
    log = new_log(mode)
    b_joins_and_a_keeps_p1(log)
    before = len(log.records)
    assert commit(log, "A", E0, {P1: 10}) == every(expected, P1)
    assert len(log.records) == before + (1 if expected == E.NONE else 0)
    assert fetch(log, {"foo": [0]}) == (0, {P1: 10 if expected == E.NONE else -1})
    assert commit(log, "A", E0 + 1, {P1: 11}) == every(E.NONE, P1)  # the current epoch: always
    assert commit(log, "B", E0 + 1, {P3: 12}) == every(E.NONE, P3)
    assert fetch(log, {"foo": [0], "bar": [0]}) == (0, {P1: 11, P3: 12})
    assert "grp" not in log.shard.classic.groups
    assert_log_rebuilds_the_shard(log)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_partition_revoked_at_the_bump_fails_the_whole_commit_in_every_mode(
    mode: OffsetCommitFencing,
) -> None:
    """Kafka 4.3 validates partition by partition and fails the request at the first one refused:
    P1, which A kept, is refused with P2, and nothing is written."""
    log = new_log(mode)
    b_joins_and_takes_p2(log)
    before = len(log.records)
    assert commit(log, "A", E0, {P1: 10, P2: 20}) == every(E.STALE_MEMBER_EPOCH, P1, P2)
    assert commit(log, "A", E0, {P2: 20}) == every(E.STALE_MEMBER_EPOCH, P2)
    assert len(log.records) == before
    # P1 alone: KIP-1251 knows A held it since E0; the revocation epoch is per member.
    assert commit(log, "A", E0, {P1: 10}) == every(E.NONE if mode is ASSIGNMENT else E.STALE_MEMBER_EPOCH, P1)
    assert commit(log, "B", E0 + 1, {P2: 21}) == every(E.NONE, P2)
    assert_log_rebuilds_the_shard(log)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_an_epoch_above_the_members_is_refused_in_every_mode(mode: OffsetCommitFencing) -> None:
    log = new_log(mode)
    b_joins_and_a_keeps_p1(log)
    before = len(log.records)
    assert commit(log, "A", E0 + 2, {P1: 10}) == every(E.STALE_MEMBER_EPOCH, P1)
    assert len(log.records) == before


def test_a_topic_the_resolver_does_not_know_is_held_by_no_member() -> None:
    log = new_log(ASSIGNMENT)
    b_joins_and_a_keeps_p1(log)
    assert commit(log, "A", E0, {("unknown", 0): 1}) == every(E.STALE_MEMBER_EPOCH, ("unknown", 0))
    assert commit(log, "A", E0 + 1, {("unknown", 0): 1}) == every(E.NONE, ("unknown", 0))


def test_a_shard_without_a_topic_resolver_accepts_only_the_current_epoch() -> None:
    """The default resolver knows no topic: the relaxed modes cannot show A held P1 at E0."""
    log = new_log(ASSIGNMENT)
    b_joins_and_a_keeps_p1(log)
    shard = GroupCoordinatorShard(log.shard.config, log.clock)  # the default resolver
    for record in log.records:
        shard.replay(record)
    log.shard = shard
    assert commit(log, "A", E0, {P1: 10}) == every(E.STALE_MEMBER_EPOCH, P1)
    assert commit(log, "A", E0 + 1, {P1: 10}) == every(E.NONE, P1)


def test_unknown_members_and_old_versions_are_refused() -> None:
    log = new_log()
    b_joins_and_a_keeps_p1(log)
    assert commit(log, "ghost", E0 + 1, {P1: 1}) == every(E.UNKNOWN_MEMBER_ID, P1)
    # A consumer-protocol member must use OffsetCommit v9 (it has the member epoch).
    assert commit(log, "A", E0 + 1, {P1: 1}, version=8) == every(E.UNSUPPORTED_VERSION, P1)


def test_a_partition_with_metadata_too_large_is_not_validated() -> None:
    log = new_log(ASSIGNMENT, offset_metadata_max_bytes=4)
    b_joins_and_a_keeps_p1(log)
    before = len(log.records)
    assert commit(log, "A", E0 + 1, {P1: 1, P3: 2}, metadata="too long") == every(
        E.OFFSET_METADATA_TOO_LARGE, P1, P3
    )
    assert len(log.records) == before


# -- simple commits -------------------------------------------------------------------------------------------


def test_a_simple_commit_needs_an_empty_consumer_group_and_never_makes_a_classic_group() -> None:
    log = new_log()
    b_joins_and_a_keeps_p1(log)
    # Epoch -1 is the admin client's (or a consumer without group management): refused while
    # the group has members, as Kafka does (no member "" in the group).
    assert commit(log, "", -1, {P1: 1}) == every(E.UNKNOWN_MEMBER_ID, P1)
    log.remove_member("A")
    log.remove_member("B")
    assert log.group.state_name == "Empty"
    assert commit(log, "", -1, {P1: 7, ("gone", 0): 8}) == every(E.NONE, P1, ("gone", 0))
    assert log.records[-1] == Record(
        OffsetCommitKey(group="grp", topic="gone", partition=0), log.records[-1].value
    )
    assert "grp" not in log.shard.classic.groups and log.shard.consumer.get("grp") is log.group
    assert fetch(log, None) == (0, {P1: 7, ("gone", 0): 8})
    assert_log_rebuilds_the_shard(log)
    assert "grp" not in log.fresh_replay().classic.groups


# -- TxnOffsetCommit -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ALL_MODES)
def test_txn_offset_commit_error_mapping(mode: OffsetCommitFencing) -> None:
    """Kafka's validateTransactionalOffsetCommit: a refused epoch is ILLEGAL_GENERATION (no
    STALE_MEMBER_EPOCH in this API). An accepted commit is written as the producer's transactional
    batch, never as plain records; a refused one writes nothing."""
    log = new_log(mode)
    b_joins_and_takes_p2(log)
    log.shard.replay_begin_transaction(1, 0)  # AddOffsetsToTxn opened producer 1's transaction here
    before = len(log.records)
    assert txn_commit(log, "ghost", E0 + 1, [P1]) == every(E.UNKNOWN_MEMBER_ID, P1)
    assert txn_commit(log, "A", E0 + 2, [P1]) == every(E.ILLEGAL_GENERATION, P1)
    assert txn_commit(log, "A", E0, [P1, P2]) == every(E.ILLEGAL_GENERATION, P1, P2)
    held_since = E.NONE if mode is ASSIGNMENT else E.ILLEGAL_GENERATION
    assert txn_commit(log, "A", E0, [P1]) == every(held_since, P1)
    assert txn_commit(log, "A", E0 + 1, [P1]) == every(E.NONE, P1)
    # A producer that sent no group metadata: not validated.
    assert txn_commit(log, "", -1, [P1]) == every(E.NONE, P1)
    # An unknown group with a generation (Kafka: ILLEGAL_GENERATION); without one it is a simple group.
    assert txn_commit(log, "m", 3, [P1], group_id="nope") == every(E.ILLEGAL_GENERATION, P1)
    assert txn_commit(log, "", -1, [P1], group_id="nope") == every(E.NONE, P1)
    assert len(log.records) == before
    accepted = 3 + (mode is ASSIGNMENT)
    assert [(w.batch.producer_id, len(w.batch.records)) for w in log.txn_writes] == [(1, 1)] * accepted


# -- OffsetFetch -----------------------------------------------------------------------------------------------


def test_offset_fetch_v9_validates_the_member_and_epoch() -> None:
    log = new_log()
    b_joins_and_a_keeps_p1(log)
    assert commit(log, "A", E0 + 1, {P1: 10}) == every(E.NONE, P1)
    assert fetch(log, {"foo": [0, 1]}, member_id="A", epoch=E0 + 1) == (0, {P1: 10, P2: -1})
    assert fetch(log, {"foo": [0]}, member_id="A", epoch=E0) == (E.STALE_MEMBER_EPOCH, {})
    assert fetch(log, {"foo": [0]}, member_id="A", epoch=E0 + 2) == (E.STALE_MEMBER_EPOCH, {})
    assert fetch(log, {"foo": [0]}, member_id="ghost", epoch=E0 + 1) == (E.UNKNOWN_MEMBER_ID, {})
    assert fetch(log, None, member_id="ghost", epoch=E0 + 1) == (E.UNKNOWN_MEMBER_ID, {})
    # The admin client, and clients before v9, name no member.
    assert fetch(log, {"foo": [0]}) == (0, {P1: 10})
    assert fetch(log, None) == (0, {P1: 10})
    assert fetch(log, {"foo": [0]}, version=8) == (0, {P1: 10})
    assert fetch(log, {"foo": [0]}, version=7) == (0, {P1: 10})
    assert fetch(log, None, version=7) == (0, {P1: 10})


# -- OffsetDelete ----------------------------------------------------------------------------------------------


def test_offset_delete_refuses_subscribed_topics_of_a_consumer_group_in_any_state() -> None:
    log = new_log()
    b_joins_and_a_keeps_p1(log)
    assert commit(log, "A", E0 + 1, {P1: 10, ("gone", 0): 3}) == every(E.NONE, P1, ("gone", 0))
    before = len(log.records)
    # A non-empty consumer group: no NON_EMPTY_GROUP (Kafka's ConsumerGroup.validateOffsetDelete).
    assert offset_delete(log, {"foo": [0, 1], "gone": [0, 1]}) == (
        0, {P1: E.GROUP_SUBSCRIBED_TO_TOPIC, P2: E.GROUP_SUBSCRIBED_TO_TOPIC, ("gone", 0): 0, ("gone", 1): 0}
    )  # fmt: skip
    assert log.records[before:] == [Record(OffsetCommitKey(group="grp", topic="gone", partition=0), None)]
    assert fetch(log, None) == (0, {P1: 10})
    assert_log_rebuilds_the_shard(log)


def test_offset_delete_counts_topics_a_resolved_regular_expression_subscribes_to() -> None:
    from kcoord.coordinator.core import records as builders
    from kcoord.coordinator.core.consumer.group import ResolvedRegularExpression

    log = new_log()
    b_joins_and_a_keeps_p1(log)
    resolved = ResolvedRegularExpression(topics=frozenset({"by-regex"}), version=1, timestamp_ms=0)
    log.write(builders.consumer_group_regular_expression_record("grp", "by-.*", resolved))
    assert offset_delete(log, {"by-regex": [0]}) == (0, {("by-regex", 0): E.GROUP_SUBSCRIBED_TO_TOPIC})


# -- retention -------------------------------------------------------------------------------------------------


def test_retention_expires_unsubscribed_offsets_by_commit_time_then_deletes_the_empty_group() -> None:
    """Kafka's ConsumerGroup.offsetExpirationCondition counts from the commit in any state and
    keeps subscribed topics; cleanupGroupMetadata then deletes an Empty group left with no offsets,
    with all its records."""
    log = new_log(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=600_000)
    b_joins_and_a_keeps_p1(log)
    assert commit(log, "A", E0 + 1, {P1: 10, ("gone", 0): 3}) == every(E.NONE, P1, ("gone", 0))
    log.sleep(DAY + 600_000)
    assert fetch(log, None) == (0, {P1: 10})  # "gone" expired while the group is Stable
    assert log.shard.consumer.get("grp") is not None
    log.remove_member("B")
    log.sleep(DAY)
    assert fetch(log, None) == (0, {P1: 10})  # A still subscribes to foo
    log.remove_member("A")
    group = log.group
    assert group.state_name == "Empty"
    log.sleep(600_000)
    assert log.shard.consumer.get("grp") is None and group.state_name == "Dead"
    assert fetch(log, None) == (0, {})
    assert "grp" not in log.shard.classic.groups
    assert_log_rebuilds_the_shard(log)
    assert log.fresh_replay().durable_view()["consumer_groups"] == {}
