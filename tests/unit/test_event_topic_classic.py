"""Classic groups' events for the event topic, from the pure state machine: the leader's assignment
of each generation, every accepted commit, refused commits by error; then the writer's JSON of them."""

from __future__ import annotations

from typing import Any

from kcoord.coordinator.core import events as ev
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.result import Result
from kcoord.coordinator.ops.event_topic import EventEncoder
from kcoord.protocol.errors import ErrorCode
from tests.unit.classic_context import TOPIC, ClassicContext


class Recording(ClassicContext):
    def __init__(self) -> None:
        self.events: list[Any] = []
        super().__init__(GroupConfig(initial_rebalance_delay_ms=0))

    def apply(self, result: Result) -> None:
        self.events += result.events
        super().apply(result)


def of(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def test_each_generation_reports_its_assignment_and_commits_are_counted() -> None:
    ctx = Recording()
    members, generation = ctx.stable_group("g", 2)
    [computed] = of(ctx.events, ev.AssignmentComputed)
    assert (computed.group, computed.generation, computed.protocol_type) == ("g", generation, "consumer")
    doc = EventEncoder().encode(0, 1, computed)
    assert doc is not None
    owned = {a["member"]: a["partitions"] for a in doc["assignment"]}
    assert sorted(p for ps in owned.values() for p in ps) == sorted(f"{TOPIC}:{p}" for p in range(6))
    assert set(owned) == set(members)

    response = ctx.commit("g", {(TOPIC, 0): 5, (TOPIC, 1): 6}, member_id=members[0], generation_id=generation)
    assert {p.error_code for t in response.topics for p in t.partitions} == {0}
    assert [(e.group, e.partitions) for e in of(ctx.events, ev.OffsetsCommitted)] == [("g", 2)]

    ctx.commit("g", {(TOPIC, 0): 7}, member_id=members[0], generation_id=generation + 5)
    ctx.commit("g", {(TOPIC, 0): 7}, member_id="nobody", generation_id=generation)
    fenced = [(e.reason, e.api) for e in of(ctx.events, ev.MemberFenced)]
    assert fenced == [("ILLEGAL_GENERATION", "offset_commit"), ("UNKNOWN_MEMBER_ID", "offset_commit")]
    assert len(of(ctx.events, ev.OffsetsCommitted)) == 1  # refused commits are not counted as commits


def test_a_commit_during_a_rebalance_is_a_rejected_commit() -> None:
    ctx = Recording()
    members, generation = ctx.stable_group("g", 1)
    ctx.join_dynamic("g")  # a second member: the group prepares a rebalance
    rejoined = ctx.reply(
        ctx.join("g", members[0])
    )  # the first rejoins: CompletingRebalance, awaiting SyncGroup
    assert rejoined is not None and rejoined.generation_id == generation + 1
    response = ctx.commit("g", {(TOPIC, 0): 1}, member_id=members[0], generation_id=generation + 1)
    assert {p.error_code for t in response.topics for p in t.partitions} == {ErrorCode.REBALANCE_IN_PROGRESS}
    assert [(e.error, e.api) for e in of(ctx.events, ev.CommitRejected)] == [
        ("REBALANCE_IN_PROGRESS", "offset_commit")
    ]
