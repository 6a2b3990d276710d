"""Topics kcoord keeps on the upstream cluster: created when missing, and the internal topic checked.

:func:`ensure_topic` is the one place that creates a topic (Metadata with auto-creation off, then
CreateTopics sent to the controller when Metadata names one); the internal compacted topic
(:class:`InternalTopic`) and the event topic (:mod:`kcoord.coordinator.ops.event_topic`) both use it.

The internal topic is then validated (:meth:`InternalTopic.ensure`): an existing topic with another
partition count or a cleanup policy other than exactly ``compact`` stops startup with a
:class:`StorageError` naming the mismatch (``delete`` would expire committed offsets; another
partition count would route groups to the wrong shard). Its ``max.message.bytes`` (DescribeConfigs;
Kafka's default 1048588 when the topic does not report it) sizes records and batches, and its topic
id (Metadata v10+) is remembered, so a deleted or re-created topic is noticed
(:meth:`InternalTopic.gone`) and re-created before a shard that lost its log loads again
(:meth:`InternalTopic.recheck`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode

from .base import KAFKA_DEFAULT_MAX_MESSAGE_BYTES, StorageError, batch_bytes_for, max_record_bytes_for
from .kafka_client import KafkaCluster, request
from .retry import Retry, Verdict

log = logging.getLogger("kcoord.storage")

RESOURCE_TOPIC = 2  # DescribeConfigs resource type


@dataclass(frozen=True)
class TopicSpec:
    """A topic as kcoord creates it when it is missing."""

    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    replication_factor: int | None = None  # None: min(3, brokers in Metadata)
    label: str = "topic"  # how errors name it ("internal topic")


@dataclass(frozen=True)
class EnsuredTopic:
    """What :func:`ensure_topic` found or did."""

    # The topic's Metadata error: NONE when it exists or was just created; another error (not
    # UNKNOWN_TOPIC_OR_PARTITION) when Metadata refused to say, and nothing was created.
    metadata_error: int
    # CreateTopics' answer when the topic was missing (NONE, or TOPIC_ALREADY_EXISTS when someone
    # else created it meanwhile); None when it existed.
    create_error: int | None
    replication_factor: int  # what a creation asked for (0 when nothing was created)


class TopicCreationError(StorageError):
    """The cluster refused to create a missing topic."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


async def ensure_topic(cluster: KafkaCluster, spec: TopicSpec, timeout: float) -> EnsuredTopic:
    """Create ``spec``'s topic unless Metadata says it exists; raises :class:`TopicCreationError`
    when the cluster refuses to create it (TOPIC_ALREADY_EXISTS is no refusal)."""
    metadata = await cluster.metadata(spec.name)
    topic = next((t for t in metadata.topics if t.name == spec.name), None)
    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topic is None else topic.error_code
    if error != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return EnsuredTopic(int(error), None, 0)
    rf = spec.replication_factor or min(3, max(1, len(metadata.brokers)))
    C = sm.CreateTopicsRequest
    req = C(
        topics=[
            C.CreatableTopic(
                name=spec.name,
                num_partitions=spec.partitions,
                replication_factor=rf,
                configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in spec.configs.items()],
            )
        ],
        timeout_ms=int(timeout * 1000),
    )
    controller = getattr(metadata, "controller_id", -1)
    conn = await (cluster.node(controller) if controller in cluster.brokers else cluster.any_node())
    result = (await request(conn, req, timeout)).topics[0]
    if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
        raise TopicCreationError(
            result.error_code,
            f"cannot create {spec.label} {spec.name!r} ({spec.partitions} partitions, replication factor {rf}): "
            f"error {result.error_code} {result.error_message or ''}".rstrip(),
        )
    return EnsuredTopic(ErrorCode.NONE, int(result.error_code), rf)


# The cluster says the topic does not exist (:meth:`InternalTopic.current_id`).
MISSING: Any = object()


class InternalTopic:
    """The internal compacted topic: one partition per shard (module docstring)."""

    def __init__(
        self,
        cluster: KafkaCluster,
        name: str,
        *,
        replication_factor: int | None,
        request_timeout: float,
        max_batch_bytes: int | None,
    ) -> None:
        self.cluster = cluster
        self.name = name
        self.replication_factor = replication_factor
        self.request_timeout = request_timeout
        self.num_shards = 0
        # Both follow the topic's max.message.bytes once :meth:`ensure` read it; an explicit
        # max_batch_bytes caps the batches further.
        self.max_message_bytes = KAFKA_DEFAULT_MAX_MESSAGE_BYTES
        self.max_record_bytes = max_record_bytes_for(self.max_message_bytes)
        self._max_batch_bytes_cap = max_batch_bytes
        self.max_batch_bytes = batch_bytes_for(self.max_message_bytes, max_batch_bytes)
        self.topic_id: uuid.UUID | None = None  # when kcoord opened or re-checked it (Metadata v10+)
        self._recheck = asyncio.Lock()

    async def ensure(self, num_shards: int) -> None:
        """Create the topic if it is missing, then validate it (module docstring)."""
        self.num_shards = num_shards
        spec = TopicSpec(
            self.name,
            num_shards,
            {"cleanup.policy": "compact"},
            self.replication_factor,
            label="internal topic",
        )
        ensured = await ensure_topic(self.cluster, spec, self.request_timeout)
        if ensured.metadata_error != ErrorCode.NONE:
            raise StorageError(f"internal topic {self.name!r}: metadata error {ensured.metadata_error}")
        if ensured.create_error == ErrorCode.NONE:
            log.info(
                "created internal topic %s: %d partitions, replication factor %d, compacted",
                self.name,
                num_shards,
                ensured.replication_factor,
            )
        # TOPIC_ALREADY_EXISTS: someone else created it meanwhile; the validation decides.
        await self._validate(num_shards)
        topic_id = await self.current_id()
        self.topic_id = None if topic_id is MISSING else topic_id

    async def current_id(self) -> Any:
        """The topic's id; None when the cluster does not say (Metadata < v10, a zero id) or gives
        another error; :data:`MISSING` when the cluster says the topic does not exist."""
        resp = await self.cluster.metadata(self.name)
        topic = next((t for t in resp.topics if t.name == self.name), None)
        if topic is None or topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return MISSING
        if topic.error_code != ErrorCode.NONE:
            return None
        topic_id = getattr(topic, "topic_id", None)
        return None if topic_id is None or topic_id.int == 0 else topic_id

    async def gone(self) -> str:
        """Why the topic kcoord opened is gone upstream (deleted or re-created), or ""."""
        current = await self.current_id()
        if current is MISSING:
            return "the topic no longer exists upstream"
        if current is not None and self.topic_id is not None and current != self.topic_id:
            return f"the topic was re-created upstream (topic id {self.topic_id} is now {current})"
        return ""

    async def recheck(self) -> None:
        """After a shard found its log lost: make sure the topic exists again (re-created with the
        same partition count and policy if it is missing) before the shard re-takes and reloads it.
        Shards that lost their log together share one check."""
        async with self._recheck:
            current = await self.current_id()
            if current is not MISSING and current == self.topic_id:
                await self.cluster.refresh(self.name)
                return
            log.error(
                "internal topic %s: re-checking it after its log was lost (topic id was %s, now %s)",
                self.name,
                self.topic_id,
                "missing" if current is MISSING else current,
            )
            await self.ensure(self.num_shards)

    async def _validate(self, num_shards: int) -> None:
        retry = Retry(self.request_timeout, backoff=0.1, max_backoff=0.1)
        while True:
            await self.cluster.refresh(self.name)
            count = self.cluster.partition_count
            if count is not None and count != num_shards:
                raise StorageError(
                    f"internal topic {self.name!r} has {count} partitions but kcoord runs {num_shards} shards; "
                    f"start with --shards {count} or use another --internal-topic (a shard is a partition: "
                    "changing the count would move groups to shards that do not hold their state)"
                )
            if count == num_shards and all(self.cluster.leaders.get(p, -1) >= 0 for p in range(num_shards)):
                break
            # A topic just created has its partitions before their leaders: wait for them.
            if await retry.failed(ErrorCode.LEADER_NOT_AVAILABLE, "no leaders yet") is not Verdict.RETRY:
                raise StorageError(
                    f"internal topic {self.name!r}: partitions without a leader after {self.request_timeout}s"
                )
        configs = await self.configs()
        policy = configs.get("cleanup.policy")
        if policy is None or {p.strip() for p in policy.split(",")} != {"compact"}:
            shown = "delete (the default)" if policy is None else policy
            raise StorageError(
                f"internal topic {self.name!r} has cleanup.policy={shown}; kcoord needs cleanup.policy=compact "
                "(a delete policy would expire committed offsets); fix the topic's config or use another --internal-topic"
            )
        self._set_max_message_bytes(configs.get("max.message.bytes"))

    def _set_max_message_bytes(self, configured: str | None) -> None:
        """Size records and batches by the topic's max.message.bytes (Kafka's default when unset)."""
        try:
            value = KAFKA_DEFAULT_MAX_MESSAGE_BYTES if configured is None else int(configured)
        except ValueError:
            raise StorageError(
                f"internal topic {self.name!r}: max.message.bytes={configured!r} is not a number"
            ) from None
        self.max_message_bytes = value
        self.max_record_bytes = max_record_bytes_for(value)
        self.max_batch_bytes = batch_bytes_for(value, self._max_batch_bytes_cap)
        log.info(
            "internal topic %s: max.message.bytes=%d%s: records up to %d bytes, batches up to %d bytes",
            self.name,
            value,
            " (Kafka's default; the topic does not set it)" if configured is None else "",
            self.max_record_bytes,
            self.max_batch_bytes,
        )

    async def configs(self) -> dict[str, str | None]:
        """The topic's configs as DescribeConfigs reports them (name -> value)."""
        conn = await self.cluster.any_node()
        req = sm.DescribeConfigsRequest(
            resources=[
                sm.DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=RESOURCE_TOPIC, resource_name=self.name, configuration_keys=None
                )
            ]
        )
        resp = await request(conn, req, self.request_timeout)
        result = resp.results[0]
        if result.error_code != ErrorCode.NONE:
            raise StorageError(
                f"DescribeConfigs of {self.name!r}: error {result.error_code} {result.error_message or ''}"
            )
        return {entry.name: entry.value for entry in result.configs}
