"""KIP-848 consumer groups report their lifecycle as events too (what the event topic carries)."""

from __future__ import annotations

from typing import Any

from kcoord.coordinator.core import events as ev
from kcoord.coordinator.core.consumer.subscriptions import TopicMetadata
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.result import RequestContext
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from tests.unit.consumer_context import FOO, ConsumerLog

REQ = m.ConsumerGroupHeartbeatRequest


class Recording(ConsumerLog):
    def __init__(self) -> None:
        super().__init__(
            "grp", GroupConfig(consumer_assignment_interval_ms=0), {FOO: TopicMetadata("foo", 6)}
        )
        self.events: list[Any] = []

    def heartbeat(self, **fields: Any) -> Any:
        fields.setdefault("group_id", self.group_id)
        req = REQ(**fields)
        ctx = RequestContext(1, "client-1", "/10.0.0.7")
        result = self.shard.handle(ApiKey.CONSUMER_GROUP_HEARTBEAT, ctx, REQ.decode(req.encode(1), 1))
        self.write(*result.records)
        self.events += result.events
        return result.replies[0][1]

    def join(self, member_id: str, instance: str | None = None) -> Any:
        return self.heartbeat(
            member_id=member_id,
            member_epoch=0,
            rebalance_timeout_ms=60_000,
            subscribed_topic_names=["foo"],
            topic_partitions=[],
            instance_id=instance,
        )

    def expire_all(self) -> None:
        self.clock.advance(10 * 60_000)
        result = self.shard.poll(self.clock.now_ms())
        self.write(*result.records)
        self.events += result.events


def kinds(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events]


def test_join_bump_assignment_leave_and_expiry() -> None:
    ctx = Recording()
    ctx.join("a")
    assert kinds(ctx.events) == [
        "MemberJoined",
        "RebalanceStarted",
        "AssignmentComputed",
        "RebalanceCompleted",
        "ReconciliationCompleted",  # a lone member owns its target at once
    ]
    joined, started, assigned, done, reconciled = ctx.events
    assert (started.group_type, done.group_type) == ("consumer", "consumer")
    assert (reconciled.epoch, reconciled.duration_ms, reconciled.members) == (1, 0, 1)
    assert (joined.client_id, joined.client_host, joined.protocol_type) == ("client-1", "/10.0.0.7", "kip848")
    assert (started.reason, started.generation) == ("member_joined", 0)
    assert (assigned.generation, assigned.protocol_type, assigned.protocol) == (1, "kip848", "uniform")
    assert assigned.members[0].partitions == tuple(("foo", p) for p in range(6))
    assert (done.generation, done.members) == (1, 1)

    ctx.events.clear()
    ctx.join("b", instance="i-b")
    assert kinds(ctx.events) == [
        "MemberJoined",
        "RebalanceStarted",
        "AssignmentComputed",
        "RebalanceCompleted",
    ]
    assert ctx.events[0].instance_id == "i-b"
    parts = {a.member_id: len(a.partitions or ()) for a in ctx.events[2].members}
    assert parts == {"a": 3, "b": 3}

    ctx.events.clear()
    response = ctx.heartbeat(member_id="a", member_epoch=-1)
    assert response.error_code == ErrorCode.NONE
    assert kinds(ctx.events)[:2] == ["MemberLeft", "RebalanceStarted"]
    assert ctx.events[1].reason == "member_left"

    ctx.events.clear()
    ctx.expire_all()
    assert "MemberExpired" in kinds(ctx.events)
    expired = next(e for e in ctx.events if isinstance(e, ev.MemberExpired))
    assert (expired.member_id, expired.instance_id) == ("b", "i-b")


def test_a_fenced_heartbeat_is_a_member_fenced_event() -> None:
    ctx = Recording()
    ctx.join("a")
    ctx.events.clear()
    response = ctx.heartbeat(member_id="a", member_epoch=7)
    assert response.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert [(e.reason, e.api) for e in ctx.events] == [("FENCED_MEMBER_EPOCH", "consumer_group_heartbeat")]
