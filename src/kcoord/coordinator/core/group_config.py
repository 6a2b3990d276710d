"""Group coordinator settings, with Kafka's names and Kafka 4.0 defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1  # group.max.size (unlimited)
    new_member_join_timeout_ms: int = 300_000  # Kafka's GroupCoordinator NewMemberJoinTimeoutMs (5 min)
    offsets_retention_ms: int = 10_080 * 60_000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    # group.consumer.offset.commit.fencing (kcoord name): which commits at an older member epoch a
    # consumer group accepts; see consumer/commit_fencing.py. Kafka 4.3's rule is the default.
    consumer_offset_commit_fencing: str = "assignment-epoch"
    # KIP-848 consumer groups (ConsumerGroupHeartbeat), Kafka's names and defaults.
    consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    consumer_heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    consumer_max_size: int = 2**31 - 1  # group.consumer.max.size (unlimited)
    # group.consumer.assignment.interval.ms (KIP-1263, Kafka 4.3): a new target assignment is
    # computed at most once per interval; 0 computes one on every group epoch bump.
    consumer_assignment_interval_ms: int = 1_000
    # group.consumer.assignment.batch.min.members (kcoord's): a group with fewer members than this
    # computes its target on every group epoch bump, as Kafka 4.0 does, whatever the interval: its
    # assignor run is cheap, and a joining member then gets its partitions in its first answer.
    consumer_assignment_batch_min_members: int = 100
    # group.consumer.assignors: the server assignors members may name; the first is the default.
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # group.consumer.migration.policy: whether a live classic group of the consumer protocol type
    # converts to a consumer group (upgrade) and back (downgrade); see migration.py.
    consumer_migration_policy: str = "bidirectional"
