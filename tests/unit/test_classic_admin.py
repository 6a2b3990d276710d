"""DescribeGroups, ListGroups, DeleteGroups, and the shard's never-raise guarantee."""

from __future__ import annotations

from kcoord.coordinator.core.result import RequestContext
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.records import GroupMetadataKey, OffsetCommitKey, Record
from tests.unit.classic_context import RANGE, ClassicContext, subscription


def test_describe_a_stable_group_shows_members_with_metadata_and_assignments() -> None:
    c = ClassicContext()
    (leader, follower), gen = c.stable_group("g", 2, static=True)
    [described] = c.describe("g", version=5).groups
    assert (
        described.error_code,
        described.group_state,
        described.protocol_type,
        described.protocol_data,
    ) == (0, "Stable", "consumer", RANGE)
    group = c.group("g")
    assert [(d.member_id, d.group_instance_id, d.client_id, d.client_host, d.member_metadata, d.member_assignment)
            for d in described.members] == [
        (mid, group.member(mid).group_instance_id, "client", "/127.0.0.1", subscription(), group.member(mid).assignment)
        for mid in (leader, follower)
    ]  # fmt: skip


def test_describe_a_rebalancing_group_hides_metadata() -> None:
    c = ClassicContext()
    (leader, _), _ = c.stable_group("g", 2)
    c.join("g", leader)
    [described] = c.describe("g").groups
    assert described.group_state == "PreparingRebalance" and described.protocol_data == ""
    assert all(d.member_metadata == b"" for d in described.members)


def test_describe_unknown_groups_by_version() -> None:
    c = ClassicContext()
    [old] = c.describe("nope", version=5).groups
    assert (old.error_code, old.group_state, old.error_message) == (0, "Dead", None)
    [new] = c.describe("nope", version=6).groups
    assert (new.error_code, new.group_state, new.error_message) == (
        E.GROUP_ID_NOT_FOUND,
        "Dead",
        "Group nope not found.",
    )


def test_describe_answers_every_group_in_request_order() -> None:
    c = ClassicContext()
    c.commit("b", {("t", 0): 1})
    response = c.describe("a", "b", version=0)
    assert [(g.group_id, g.group_state) for g in response.groups] == [("a", "Dead"), ("b", "Empty")]


def test_list_groups_with_state_and_type_filters() -> None:
    c = ClassicContext()
    c.stable_group("stable", 1)
    c.commit("simple", {("t", 0): 1})
    listed = c.list_groups(version=5).groups
    assert sorted((g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed) == [
        ("simple", "", "Empty", "classic"),
        ("stable", "consumer", "Stable", "classic"),
    ]
    assert [g.group_id for g in c.list_groups(version=4, states=["STABLE"]).groups] == ["stable"]
    assert c.list_groups(version=5, types=["consumer"]).groups == []
    assert len(c.list_groups(version=5, types=["Classic"]).groups) == 2
    v0 = c.list_groups(version=0, states=["Stable"])  # no filter before v4
    assert len(v0.groups) == 2 and v0.error_code == 0


def test_delete_groups() -> None:
    c = ClassicContext()
    c.stable_group("busy", 1)
    c.commit("idle", {("t", 0): 1, ("t", 1): 2})
    response = c.delete_groups("busy", "idle", "nope")
    assert [(r.group_id, r.error_code) for r in response.results] == [
        ("busy", E.NON_EMPTY_GROUP),
        ("idle", 0),
        ("nope", E.GROUP_ID_NOT_FOUND),
    ]
    assert c.last_records == [
        Record(OffsetCommitKey(group="idle", topic="t", partition=0), None),
        Record(OffsetCommitKey(group="idle", topic="t", partition=1), None),
        Record(GroupMetadataKey(group="idle"), None),
    ]
    assert c.group("idle") is None and c.fetched("idle", None) == {}
    assert c.shard.durable_view() == c.fresh_replay_view()


def test_handle_never_raises_and_answers_unknown_server_error() -> None:
    c = ClassicContext()
    ctx = RequestContext(5)
    bogus = m.DescribeGroupsRequest(groups=None)  # not decodable from the wire, but must not escape
    result = c.shard.handle(ApiKey.DESCRIBE_GROUPS, ctx, bogus)
    [(answered, response)] = result.replies
    assert answered is ctx and isinstance(response, m.DescribeGroupsResponse)
    ctx = RequestContext(0)
    result = c.shard.handle(ApiKey.API_VERSIONS, ctx, m.ApiVersionsRequest())
    [(answered, response)] = result.replies
    assert answered is ctx and response.error_code == E.UNKNOWN_SERVER_ERROR and result.records == []
