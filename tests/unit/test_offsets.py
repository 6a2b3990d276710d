"""OffsetCommit, OffsetFetch, OffsetDelete, TxnOffsetCommit and offset retention."""

from __future__ import annotations

from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, Record
from tests.unit.classic_context import ClassicContext, assignment, protocols, subscription

DAY = 24 * 3_600_000


def test_simple_commit_creates_a_simple_group_and_is_fetched_back() -> None:
    c = ClassicContext()
    response = c.commit("simple", {("t", 0): 10, ("t", 1): 11}, metadata="meta")
    assert c.commit_errors(response) == {("t", 0): 0, ("t", 1): 0}
    assert c.last_records[0] == Record(
        OffsetCommitKey(group="simple", topic="t", partition=0),
        OffsetCommitValue(offset=10, leader_epoch=3, metadata="meta", commit_timestamp=c.clock.now_ms(),
                          expire_timestamp=-1),
    )  # fmt: skip
    group = c.group("simple")
    assert group.state_name == "Empty" and group.protocol_type is None and group.snapshot is None
    assert c.fetched("simple", {"t": [0, 1, 2]}) == {("t", 0): 10, ("t", 1): 11, ("t", 2): -1}
    assert c.shard.durable_view() == c.fresh_replay_view()


def test_member_commits_are_fenced_by_generation_and_state() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group("g", 2)
    ok = c.commit("g", {("t", 0): 1}, member_id=leader, generation_id=gen)
    assert c.commit_errors(ok) == {("t", 0): 0}
    stale = c.commit("g", {("t", 0): 1}, member_id=leader, generation_id=gen - 1)
    assert c.commit_errors(stale) == {("t", 0): E.ILLEGAL_GENERATION}
    ghost = c.commit("g", {("t", 0): 1}, member_id="ghost", generation_id=gen)
    assert c.commit_errors(ghost) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # A "simple" commit to a group with members: Kafka answers UNKNOWN_MEMBER_ID.
    simple = c.commit("g", {("t", 0): 1})
    assert c.commit_errors(simple) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    c.join("g", leader)  # PreparingRebalance: commits of the current generation still go through
    assert c.commit_errors(c.commit("g", {("t", 1): 2}, member_id=follower, generation_id=gen)) == {
        ("t", 1): 0
    }


def test_commit_during_completing_rebalance_is_rebalance_in_progress() -> None:
    c = ClassicContext()
    ctx = c.join_dynamic("g")
    c.complete_initial_rebalance([ctx])
    response = c.reply(ctx)
    commit = c.commit("g", {("t", 0): 1}, member_id=response.member_id, generation_id=response.generation_id)
    assert c.commit_errors(commit) == {("t", 0): E.REBALANCE_IN_PROGRESS}


def test_commit_with_a_generation_to_an_unknown_group_depends_on_the_version() -> None:
    c = ClassicContext()
    v9 = c.commit("nope", {("t", 0): 1}, member_id="m", generation_id=3, version=9)
    assert c.commit_errors(v9) == {("t", 0): E.GROUP_ID_NOT_FOUND}
    v8 = c.commit("nope", {("t", 0): 1}, member_id="m", generation_id=3, version=8)
    assert c.commit_errors(v8) == {("t", 0): E.ILLEGAL_GENERATION}
    assert c.group("nope") is None and c.records == []


def test_too_large_metadata_fails_only_that_commit() -> None:
    c = ClassicContext(GroupConfig(offset_metadata_max_bytes=5))
    response = c.commit("g", {("t", 0): 1}, metadata="123456")
    assert c.commit_errors(response) == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}
    assert c.records == []
    assert c.commit_errors(c.commit("g", {("t", 0): 1}, metadata="12345")) == {("t", 0): 0}


def test_commit_keeps_the_members_session_alive() -> None:
    c = ClassicContext()
    (leader,), gen = c.stable_group("g", 1)
    for _ in range(5):
        c.sleep(8_000)
        c.commit("g", {("t", 0): 1}, member_id=leader, generation_id=gen)
    assert c.group("g").has_member(leader)


def test_v2_retention_time_writes_an_expire_timestamp_that_retention_honours() -> None:
    c = ClassicContext()
    c.commit("g", {("t", 0): 1}, version=2, retention_time_ms=1_000)
    value = c.last_records[0].value
    assert value.expire_timestamp == c.clock.now_ms() + 1_000
    c.sleep(c.config.offsets_retention_check_interval_ms)
    assert c.fetched("g", {"t": [0]}) == {("t", 0): -1}


def test_fetch_versions_and_fetch_all() -> None:
    c = ClassicContext()
    c.commit("g", {("t", 0): 5, ("u", 2): 7})
    v1 = c.fetch("g", {"t": [0]}, version=1)
    assert [
        (t.name, p.partition_index, p.committed_offset, p.metadata) for t in v1.topics for p in t.partitions
    ] == [("t", 0, 5, "")]
    assert c.fetched("g", None, version=7) == {("t", 0): 5, ("u", 2): 7}
    assert c.fetched("g", None, version=8) == {("t", 0): 5, ("u", 2): 7}
    epochs = c.fetch("g", {"t": [0]}, version=8).groups[0].topics[0].partitions[0].committed_leader_epoch
    assert epochs == 3
    assert c.fetched("unknown", None, version=8) == {}
    assert c.fetched("unknown", {"t": [0]}, version=6) == {("t", 0): -1}


def test_fetch_v8_answers_every_group_of_the_request() -> None:
    c = ClassicContext()
    c.commit("a", {("t", 0): 1})
    G = m.OffsetFetchRequest.OffsetFetchRequestGroup
    request = m.OffsetFetchRequest(
        groups=[G(group_id="a", topics=None), G(group_id="b", topics=None)], require_stable=True
    )
    response = c.reply(c.send(ApiKey.OFFSET_FETCH, 9, request))
    assert [(g.group_id, g.error_code, len(g.topics)) for g in response.groups] == [("a", 0, 1), ("b", 0, 0)]


def test_offset_delete() -> None:
    c = ClassicContext()
    assert c.offset_delete("nope", {"t": [0]}).error_code == E.GROUP_ID_NOT_FOUND
    assert c.offset_delete("", {"t": [0]}).error_code == E.INVALID_GROUP_ID
    (leader,), gen = c.stable_group("g", 1)
    c.commit("g", {("t", 0): 1, ("other", 0): 2}, member_id=leader, generation_id=gen)
    response = c.offset_delete("g", {"t": [0], "other": [0, 1]})
    assert response.error_code == 0
    assert [(t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions] == [
        ("t", 0, E.GROUP_SUBSCRIBED_TO_TOPIC),
        ("other", 0, 0),
        ("other", 1, 0),
    ]
    assert c.last_records == [Record(OffsetCommitKey(group="g", topic="other", partition=0), None)]
    assert c.fetched("g", None) == {("t", 0): 1}


def test_offset_delete_on_a_non_consumer_group_with_members_is_non_empty_group() -> None:
    c = ClassicContext()
    c.stable_group("connect", 1, protocol_type="connect", protos=protocols("sessioned", metadata=b"x"))
    assert c.offset_delete("connect", {"t": [0]}).error_code == E.NON_EMPTY_GROUP


def test_retention_counts_from_when_the_group_became_empty_then_deletes_the_group() -> None:
    cfg = GroupConfig(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=600_000)
    c = ClassicContext(cfg)
    (leader2,), gen2 = c.stable_group("g", 1)
    c.commit("g", {("t", 0): 1}, member_id=leader2, generation_id=gen2)
    c.sleep(DAY)
    assert c.fetched("g", {"t": [0]}) == {("t", 0): 1}  # commit is old, but the group only just became Empty
    became_empty = c.group("g").current_state_timestamp
    c.sleep(became_empty + DAY - c.clock.now_ms() + 600_000)
    assert c.fetched("g", {"t": [0]}) == {("t", 0): -1}
    assert c.group("g") is None
    assert c.records[-1] == Record(GroupMetadataKey(group="g"), None)
    assert c.shard.durable_view() == c.fresh_replay_view()


def test_stable_consumer_group_keeps_subscribed_offsets_and_expires_others_by_commit_time() -> None:
    cfg = GroupConfig(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=20_000)
    c = ClassicContext(cfg)
    (leader,), gen = c.stable_group("g", 1, session_timeout_ms=30_000)
    c.commit("g", {("t", 0): 1, ("gone", 0): 2}, member_id=leader, generation_id=gen)
    for _ in range(10):
        c.sleep(10_000)
        c.heartbeat("g", leader, gen)
    assert c.fetched("g", None) == {("t", 0): 1}
    assert c.group("g").state_name == "Stable"


def test_simple_group_offsets_expire_by_commit_time_and_the_group_goes() -> None:
    cfg = GroupConfig(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    c = ClassicContext(cfg)
    c.commit("s", {("t", 0): 1})
    c.sleep(50_000)
    c.commit("s", {("t", 1): 1})
    c.sleep(20_000)
    assert c.fetched("s", None) == {("t", 1): 1}
    c.sleep(50_000)
    assert c.group("s") is None


def test_an_empty_group_without_offsets_is_deleted_at_the_next_retention_check() -> None:
    c = ClassicContext()
    (only,), _ = c.stable_group("g", 1)
    c.leave("g", [(only, None)])
    assert c.group("g").state_name == "Empty"
    c.sleep(c.config.offsets_retention_check_interval_ms)
    assert c.group("g") is None


def test_fetch_after_commit_by_a_loaded_shard() -> None:
    c = ClassicContext()
    c.commit("g", {("t", 0): 42})
    loaded = ClassicContext()
    for record in c.records:
        loaded.shard.replay(record)
    assert loaded.fetched("g", {"t": [0]}) == {("t", 0): 42}
    assert subscription() and assignment([0])
