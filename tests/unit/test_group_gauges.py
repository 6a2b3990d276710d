"""The group and member gauges count every group a loaded shard holds: classic groups, KIP-848
consumer groups and consumer groups with classic members (an online migration under way), by type
and state, and members by the protocol each speaks. Read from the shards' state at scrape time."""

from __future__ import annotations

from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kcoord.coordinator.core.consumer.subscriptions import TopicMetadata
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.result import RequestContext
from kcoord.coordinator.ops.metrics import Metrics
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from tests.unit.consumer_context import FOO, ConsumerLog
from tests.unit.test_group_migration import Migration, stable_classic_group

Labels = tuple[tuple[str, str], ...]


class Loaded:
    """What the collector reads of a shard runtime: loaded, and its state."""

    fenced = False
    lost = None
    loaded = True

    def __init__(self, state: Any) -> None:
        self.state = state


def gauges(metrics: Metrics, name: str) -> dict[Labels, float]:
    text = generate_latest(metrics.registry).decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def consumer_join(log: ConsumerLog, member_id: str, instance_id: str | None = None) -> Any:
    req = m.ConsumerGroupHeartbeatRequest(
        group_id=log.group_id, member_id=member_id, member_epoch=0, rebalance_timeout_ms=60_000,
        subscribed_topic_names=["foo"], topic_partitions=[], instance_id=instance_id,
    )  # fmt: skip
    ctx = RequestContext(1, "client", "/127.0.0.1")
    decoded = type(req).decode(req.encode(1), 1)
    result = log.shard.handle(ApiKey.CONSUMER_GROUP_HEARTBEAT, ctx, decoded)
    log.write(*result.records)
    return result.replies[0][1]


def test_a_kip848_consumer_group_is_counted_by_type_state_and_its_members_by_protocol() -> None:
    log = ConsumerLog(
        "kip848", GroupConfig(consumer_assignment_interval_ms=0), {FOO: TopicMetadata("foo", 4)}
    )
    assert consumer_join(log, "a").error_code == ErrorCode.NONE
    assert consumer_join(log, "b", instance_id="i-b").error_code == ErrorCode.NONE
    state = log.shard.consumer.groups["kip848"].state_name  # "a" must still revoke: Reconciling
    assert state == "Reconciling"
    metrics = Metrics()
    metrics.watch_shards(lambda: [Loaded(log.shard)], lambda: 1)

    assert gauges(metrics, "kcoord_groups") == {
        (("protocol_type", "consumer"), ("state", "Reconciling"), ("type", "consumer")): 1
    }
    assert gauges(metrics, "kcoord_group_members") == {
        (("kind", "dynamic"), ("protocol", "consumer"), ("state", "Reconciling"), ("type", "consumer")): 1,
        (("kind", "static"), ("protocol", "consumer"), ("state", "Reconciling"), ("type", "consumer")): 1,
    }
    assert gauges(metrics, "kcoord_mixed_groups") == {}  # no classic member: not a mixed group


def test_a_mixed_group_and_a_classic_group_side_by_side() -> None:
    migration = Migration()
    (leader, follower), _ = stable_classic_group(migration)  # group "g": classic, Stable
    migration.stable_group("still-classic", 1)
    assert migration.consumer_heartbeat("new", 0).error_code == ErrorCode.NONE  # converts "g"
    group = migration.consumer_group()
    assert group.state_name == "Reconciling" and group.num_classic_protocol_members == 2
    metrics = Metrics()
    metrics.watch_shards(lambda: [Loaded(migration.shard)], lambda: 1)

    assert gauges(metrics, "kcoord_groups") == {
        (("protocol_type", "consumer"), ("state", "Reconciling"), ("type", "consumer")): 1,
        (("protocol_type", "consumer"), ("state", "Stable"), ("type", "classic")): 1,
    }
    assert gauges(metrics, "kcoord_mixed_groups") == {(("state", "Reconciling"),): 1}
    assert gauges(metrics, "kcoord_group_members") == {
        (("kind", "dynamic"), ("protocol", "classic"), ("state", "Reconciling"), ("type", "consumer")): 2,
        (("kind", "dynamic"), ("protocol", "consumer"), ("state", "Reconciling"), ("type", "consumer")): 1,
        (("kind", "dynamic"), ("protocol", "classic"), ("state", "Stable"), ("type", "classic")): 1,
    }


def test_shards_not_serving_count_no_groups() -> None:
    log = ConsumerLog(
        "kip848", GroupConfig(consumer_assignment_interval_ms=0), {FOO: TopicMetadata("foo", 4)}
    )
    consumer_join(log, "a")
    fenced = Loaded(log.shard)
    fenced.fenced = True
    metrics = Metrics()
    metrics.watch_shards(lambda: [fenced], lambda: 2)
    assert gauges(metrics, "kcoord_groups") == {}
    assert gauges(metrics, "kcoord_group_members") == {}
    assert gauges(metrics, "kcoord_shards")[(("status", "fenced"),)] == 1
    assert gauges(metrics, "kcoord_shards")[(("status", "loading"),)] == 1  # the one not created yet


def test_static_classic_members_of_a_mixed_group_are_counted_apart_from_its_consumer_members() -> None:
    migration = Migration()
    stable_classic_group(migration, static=True)
    assert migration.consumer_heartbeat("new", 0, instance_id="i-new").error_code == ErrorCode.NONE
    metrics = Metrics()
    metrics.watch_shards(lambda: [Loaded(migration.shard)], lambda: 1)
    assert gauges(metrics, "kcoord_group_members") == {
        (("kind", "static"), ("protocol", "classic"), ("state", "Reconciling"), ("type", "consumer")): 2,
        (("kind", "static"), ("protocol", "consumer"), ("state", "Reconciling"), ("type", "consumer")): 1,
    }
