"""KIP-848 reconciliation time: from a group epoch bump until every member reports the target
assignment of the group epoch, measured by the consumer group manager on the injected clock and
reported as one ReconciliationCompleted event (the observer turns it into
``kcoord_consumer_group_reconciliation_seconds``)."""

from __future__ import annotations

from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kcoord.coordinator.core import events as ev
from kcoord.coordinator.core.consumer.subscriptions import TopicMetadata
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.result import RequestContext, Result
from kcoord.coordinator.ops.metrics import Metrics
from kcoord.coordinator.ops.observability import ShardEventObserver
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from tests.unit.consumer_context import FOO, ConsumerLog
from tests.unit.test_group_migration import GROUP, Migration, classic_rejoin, stable_classic_group

REQ = m.ConsumerGroupHeartbeatRequest


class Members(ConsumerLog):
    """A KIP-848 group of clients that do what the coordinator tells them: each heartbeat reports
    the partitions the member's last answer gave it, and its epoch."""

    def __init__(self, config: GroupConfig | None = None) -> None:
        super().__init__(
            "grp", config or GroupConfig(consumer_assignment_interval_ms=0), {FOO: TopicMetadata("foo", 6)}
        )
        self.events: list[Any] = []
        self.epoch: dict[str, int] = {}
        self.owned: dict[str, list[int]] = {}

    def send(self, member_id: str, epoch: int, **fields: Any) -> Any:
        req = REQ(group_id=self.group_id, member_id=member_id, member_epoch=epoch, **fields)
        ctx = RequestContext(1, "client", "/127.0.0.1")
        result = self.shard.handle(ApiKey.CONSUMER_GROUP_HEARTBEAT, ctx, REQ.decode(req.encode(1), 1))
        self.write(*result.records)
        self.events += result.events
        response = result.replies[0][1]
        assert response.error_code == ErrorCode.NONE, response
        return response

    def join(self, member_id: str) -> None:
        response = self.send(
            member_id, 0, rebalance_timeout_ms=60_000, subscribed_topic_names=["foo"], topic_partitions=[]
        )
        self._remember(member_id, response)

    def heartbeat(self, member_id: str) -> None:
        owned = [REQ.TopicPartitions(topic_id=FOO, partitions=self.owned[member_id])]
        self._remember(member_id, self.send(member_id, self.epoch[member_id], topic_partitions=owned))

    def leave(self, member_id: str) -> None:
        self.send(member_id, -1)
        del self.epoch[member_id], self.owned[member_id]

    def _remember(self, member_id: str, response: Any) -> None:
        self.epoch[member_id] = response.member_epoch
        if response.assignment is not None:
            self.owned[member_id] = sorted(
                p for tp in response.assignment.topic_partitions for p in tp.partitions
            )

    def settle(self, step_ms: int = 100) -> None:
        """Every member heartbeats, ``step_ms`` apart, until the group is Stable."""
        for _ in range(20):
            if self.group.state_name == "Stable":
                return
            for member_id in sorted(self.epoch):
                self.clock.advance(step_ms)
                self.heartbeat(member_id)
        raise AssertionError(f"the group did not settle: {self.group.state_name}")

    def reconciliations(self) -> list[ev.ReconciliationCompleted]:
        done = [e for e in self.events if isinstance(e, ev.ReconciliationCompleted)]
        self.events.clear()
        return done


def test_a_lone_member_is_reconciled_in_its_first_heartbeat() -> None:
    group = Members()
    group.join("a")
    assert group.reconciliations() == [ev.ReconciliationCompleted("grp", 1, 0, 1)]


def test_a_second_member_counts_until_the_first_revoked_and_the_second_took_the_partitions() -> None:
    group = Members()
    group.join("a")
    group.reconciliations()
    group.clock.advance(1_000)
    group.join("b")  # epoch 2: "a" must give up 3 partitions, which "b" waits for
    assert group.group.state_name == "Reconciling"
    group.clock.advance(300)
    group.heartbeat("a")  # told to revoke
    group.clock.advance(300)
    group.heartbeat("a")  # revoked: at epoch 2
    assert group.reconciliations() == []  # "b" does not own its partitions yet
    group.clock.advance(400)
    group.heartbeat("b")  # gets the released partitions: everybody is at epoch 2
    assert group.group.state_name == "Stable"
    assert group.reconciliations() == [ev.ReconciliationCompleted("grp", 2, 1_000, 2)]
    assert sorted(group.owned["a"] + group.owned["b"]) == list(range(6))
    group.clock.advance(5_000)
    group.heartbeat("a")
    group.heartbeat("b")
    assert group.reconciliations() == []  # heartbeats of a Stable group measure nothing


def test_bumps_before_the_members_settle_count_as_one_reconciliation_from_the_first() -> None:
    group = Members()
    for member_id in ("a", "b"):
        group.join(member_id)
    group.settle()
    group.reconciliations()
    start = group.clock.now_ms()
    group.join("c")  # epoch 3
    group.heartbeat("a")
    group.clock.advance(250)
    group.join("d")  # epoch 4, while epoch 3 is still being reconciled
    group.settle()
    assert group.reconciliations() == [ev.ReconciliationCompleted("grp", 4, group.clock.now_ms() - start, 4)]


def test_a_member_leaving_starts_a_reconciliation_the_last_one_leaving_does_not() -> None:
    group = Members()
    for member_id in ("a", "b"):
        group.join(member_id)
    group.settle()
    group.reconciliations()
    group.clock.advance(1_000)
    group.leave("b")  # epoch bump: "a" gets every partition at its next heartbeat
    group.clock.advance(700)
    group.heartbeat("a")
    assert group.reconciliations() == [ev.ReconciliationCompleted("grp", group.group.group_epoch, 700, 1)]
    group.leave("a")
    group.clock.advance(1_000)
    group.join("a")  # the group starts over: measured from this bump, not from the leave
    assert group.reconciliations() == [ev.ReconciliationCompleted("grp", group.group.group_epoch, 0, 1)]


def test_a_batched_target_counts_from_the_bump_not_from_the_assignment() -> None:
    config = GroupConfig(consumer_assignment_interval_ms=3_000, consumer_assignment_batch_min_members=1)
    group = Members(config)
    group.join("a")
    group.reconciliations()
    group.clock.advance(500)
    start = group.clock.now_ms()
    group.join("b")  # epoch 2; the target waits for the assignment interval
    assert group.group.target_assignment_epoch == 1
    group.clock.advance(3_000)
    group.settle()
    done = group.reconciliations()
    assert done == [ev.ReconciliationCompleted("grp", 2, group.clock.now_ms() - start, 2)]
    assert done[0].duration_ms > 3_000  # it waited for the target, then for the members


class MixedGroup(Migration):
    """The online-migration context, keeping every event the shard reported."""

    def apply(self, result: Result) -> None:
        if not hasattr(self, "events"):
            self.events: list[Any] = []
        self.events.extend(result.events)
        super().apply(result)


def test_classic_members_of_a_mixed_group_complete_its_reconciliation() -> None:
    ctx = MixedGroup()
    (leader, follower), generation = stable_classic_group(ctx)
    ctx.events.clear()
    start = ctx.clock.now_ms()
    epoch = ctx.consumer_heartbeat("new", 0).member_epoch  # converts the group, bumps its epoch
    ctx.sleep(200)
    for member_id in (leader, follower):
        classic_rejoin(ctx, member_id, generation)  # eager: they gave everything up, get their share
    assert not [e for e in ctx.events if isinstance(e, ev.ReconciliationCompleted)]
    ctx.sleep(300)
    ctx.consumer_heartbeat("new", epoch, owned=set())  # takes what the classic members released
    assert ctx.consumer_group().state_name == "Stable"
    done = [e for e in ctx.events if isinstance(e, ev.ReconciliationCompleted)]
    assert done == [ev.ReconciliationCompleted(GROUP, epoch, ctx.clock.now_ms() - start, 3)]
    assert done[0].duration_ms >= 500


def test_the_observer_turns_it_into_the_histogram_and_rebalances_into_protocol_labels() -> None:
    metrics = Metrics()
    ShardEventObserver(metrics).group_events(
        0,
        [
            ev.RebalanceStarted("c", "member_joined", 0, 1),
            ev.RebalanceCompleted("c", 1, 2_000, 1, "range"),
            ev.RebalanceStarted("k", "member_joined", 0, 1, group_type="consumer"),
            ev.RebalanceCompleted("k", 1, 0, 1, "uniform", group_type="consumer"),
            ev.ReconciliationCompleted("k", 1, 1_500, 1),
        ],
    )
    text = generate_latest(metrics.registry).decode()
    got = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert got[("kcoord_rebalances_total", (("protocol", "classic"), ("reason", "member_joined")))] == 1
    assert got[("kcoord_rebalances_total", (("protocol", "consumer"), ("reason", "member_joined")))] == 1
    assert got[("kcoord_rebalance_duration_seconds_sum", (("protocol", "classic"),))] == 2.0
    assert got[("kcoord_rebalance_duration_seconds_count", (("protocol", "consumer"),))] == 1
    assert got[("kcoord_consumer_group_reconciliation_seconds_sum", ())] == 1.5
    assert got[("kcoord_consumer_group_reconciliation_seconds_bucket", (("le", "1.0"),))] == 0
    assert got[("kcoord_consumer_group_reconciliation_seconds_bucket", (("le", "2.5"),))] == 1
