"""ListGroups, DescribeGroups and DeleteGroups over a shard holding classic and KIP-848 consumer
groups, through ``GroupCoordinatorShard.handle``; consumer groups are built by replaying the records
the record builders write (tests/unit/consumer_context.py).

Kafka 4.x: ListGroups lists a consumer group with protocol type "consumer", its state and group type
"consumer" (``ModernGroup.asListedGroup``), filtered by state (v4) and type (v5), case-insensitively;
DescribeGroups looks ids up as classic groups only, so a consumer group reads as Dead, with
GROUP_ID_NOT_FOUND "Group <id> is not a classic group." from v6; DeleteGroups refuses a consumer group
with members (NON_EMPTY_GROUP) and deletes an Empty one with its offsets and every record.
"""

from __future__ import annotations

from typing import Any

from kcoord.coordinator.core import records as builders
from kcoord.coordinator.core.consumer.group import ResolvedRegularExpression
from kcoord.coordinator.core.events import GroupDeleted
from kcoord.coordinator.core.records import group_metadata_record, offset_commit_record, offset_tombstone
from kcoord.coordinator.core.result import RequestContext
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.messages import ApiKey
from tests.unit.consumer_context import FOO, ConsumerLog, compacted


def stable_consumer_group(log: ConsumerLog) -> None:
    log.bump_group_epoch(3)
    log.subscribe("m1", ["foo"])
    log.target(3, {"m1": {FOO: [0, 1]}})
    log.reconcile("m1", epoch=3, assigned={FOO: [0, 1]})
    resolved = ResolvedRegularExpression(topics=frozenset({"foo"}), version=1, timestamp_ms=0)
    log.write(builders.consumer_group_regular_expression_record(log.group_id, "f.*", resolved))


def with_other_groups(log: ConsumerLog) -> None:
    """A classic consumer group "classic" (Empty, generation 1) and a simple group "simple"."""
    log.write(
        group_metadata_record("classic", protocol_type="consumer", generation=1, protocol=None, leader=None,
                              current_state_timestamp=1, members=[]),
        offset_commit_record("simple", "foo", 0, offset=1, leader_epoch=-1, metadata="", commit_timestamp=1),
    )  # fmt: skip


def commit(log: ConsumerLog, group_id: str, topic: str, partition: int) -> None:
    log.write(
        offset_commit_record(
            group_id, topic, partition, offset=5, leader_epoch=-1, metadata="", commit_timestamp=1
        )
    )


def list_groups(log: ConsumerLog, *, version: int = 5, states: list[str] | None = None,
                types: list[str] | None = None) -> dict[str, tuple[str, str, str]]:  # fmt: skip
    request = m.ListGroupsRequest(states_filter=states or [], types_filter=types or [])
    response = log.send(ApiKey.LIST_GROUPS, version, request)
    assert response.error_code == 0
    return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in response.groups}


def delete_groups(log: ConsumerLog, *group_ids: str) -> tuple[dict[str, int], Any]:
    request = m.DeleteGroupsRequest(groups_names=list(group_ids))
    decoded = type(request).decode(request.encode(2), 2)
    result = log.shard.handle(ApiKey.DELETE_GROUPS, RequestContext(2, "client", "/127.0.0.1"), decoded)
    log.write(*result.records)
    [(_, response)] = result.replies
    return {r.group_id: r.error_code for r in response.results}, result


# -- ListGroups ------------------------------------------------------------------------------------------------


def test_list_groups_lists_consumer_groups_with_their_protocol_type_state_and_type() -> None:
    log = ConsumerLog()
    stable_consumer_group(log)
    with_other_groups(log)
    assert list_groups(log) == {
        "grp": ("consumer", "Stable", "consumer"),
        "classic": ("consumer", "Empty", "classic"),
        "simple": ("", "Empty", "classic"),
    }
    # v3 has neither state nor type.
    assert list_groups(log, version=3) == {"grp": ("consumer", "", ""), "classic": ("consumer", "", ""),
                                           "simple": ("", "", "")}  # fmt: skip


def test_list_groups_filters_by_state_and_type_case_insensitively() -> None:
    log = ConsumerLog()
    stable_consumer_group(log)
    with_other_groups(log)
    assert set(list_groups(log, states=["STABLE"])) == {"grp"}
    assert set(list_groups(log, states=[" empty "])) == {"classic", "simple"}
    assert set(list_groups(log, types=["Consumer"])) == {"grp"}
    assert set(list_groups(log, types=["classic"])) == {"classic", "simple"}
    assert set(list_groups(log, types=["share"])) == set()  # a type no group has
    assert set(list_groups(log, types=["nonsense"])) == set()  # Kafka parses it as UNKNOWN
    assert set(list_groups(log, states=["empty"], types=["consumer"])) == set()
    # The filters are ignored before the versions that carry them.
    assert set(list_groups(log, version=4, states=["stable"], types=["classic"])) == {"grp"}
    assert set(list_groups(log, version=3, states=["stable"])) == {"grp", "classic", "simple"}


def test_list_groups_shows_each_consumer_group_state() -> None:
    log = ConsumerLog()
    log.bump_group_epoch(1)
    log.subscribe("m1", ["foo"])
    assert list_groups(log)["grp"][1] == "Assigning"
    log.target(1, {"m1": {FOO: [0]}})
    assert list_groups(log)["grp"][1] == "Reconciling"
    log.reconcile("m1", epoch=1, assigned={FOO: [0]})
    assert list_groups(log)["grp"][1] == "Stable"
    log.remove_member("m1")
    assert list_groups(log)["grp"] == ("consumer", "Empty", "consumer")


# -- DescribeGroups ----------------------------------------------------------------------------------------------


def test_describe_groups_answers_a_consumer_group_as_kafka_does_it_is_not_a_classic_group() -> None:
    log = ConsumerLog()
    stable_consumer_group(log)
    with_other_groups(log)
    request = m.DescribeGroupsRequest(groups=["grp", "classic", "nope"])
    v6 = log.send(ApiKey.DESCRIBE_GROUPS, 6, request).groups
    assert [(g.group_id, g.group_state, g.error_code, g.error_message) for g in v6] == [
        ("grp", "Dead", E.GROUP_ID_NOT_FOUND, "Group grp is not a classic group."),
        ("classic", "Empty", 0, None),
        ("nope", "Dead", E.GROUP_ID_NOT_FOUND, "Group nope not found."),
    ]
    assert v6[0].members == [] and v6[0].protocol_type == ""
    v5 = log.send(ApiKey.DESCRIBE_GROUPS, 5, request).groups
    assert [(g.group_id, g.group_state, g.error_code) for g in v5] == [
        ("grp", "Dead", 0), ("classic", "Empty", 0), ("nope", "Dead", 0)
    ]  # fmt: skip


# -- DeleteGroups ----------------------------------------------------------------------------------------------


def test_delete_groups_refuses_a_consumer_group_with_members() -> None:
    log = ConsumerLog()
    stable_consumer_group(log)
    commit(log, "grp", "foo", 0)
    before = len(log.records)
    errors, result = delete_groups(log, "grp")
    assert errors == {"grp": E.NON_EMPTY_GROUP}
    assert result.records == [] and len(log.records) == before
    assert log.shard.consumer.get("grp") is not None


def test_delete_groups_deletes_an_empty_consumer_group_with_its_offsets_and_every_record() -> None:
    log = ConsumerLog()
    stable_consumer_group(log)
    with_other_groups(log)
    commit(log, "grp", "foo", 0)
    commit(log, "grp", "gone", 1)
    log.remove_member("m1")
    group = log.group
    assert group.state_name == "Empty" and group.resolved_regular_expressions
    expected = [offset_tombstone("grp", "foo", 0), offset_tombstone("grp", "gone", 1),
                *builders.consumer_group_tombstones(group)]  # fmt: skip
    errors, result = delete_groups(log, "grp", "nope")
    assert errors == {"grp": E.NONE, "nope": E.GROUP_ID_NOT_FOUND}
    assert result.records == expected
    assert GroupDeleted("grp", "delete_groups") in result.events
    assert log.shard.consumer.get("grp") is None and group.state_name == "Dead"
    assert "grp" not in log.shard.classic.groups
    assert log.shard.offsets.store.group("grp") is None
    assert set(list_groups(log)) == {"classic", "simple"}
    live = log.shard.durable_view()
    assert live["consumer_groups"] == {} and "grp" not in live["offsets"]
    assert log.fresh_replay().durable_view() == live
    assert log.fresh_replay(compacted(log.records)).durable_view() == live
    assert delete_groups(log, "grp")[0] == {"grp": E.GROUP_ID_NOT_FOUND}


def test_delete_groups_mixes_classic_and_consumer_groups() -> None:
    log = ConsumerLog()
    stable_consumer_group(log)
    with_other_groups(log)
    errors, _ = delete_groups(log, "grp", "classic", "simple")
    assert errors == {"grp": E.NON_EMPTY_GROUP, "classic": E.NONE, "simple": E.NONE}
    assert set(list_groups(log)) == {"grp"}
    assert log.fresh_replay().durable_view() == log.shard.durable_view()
