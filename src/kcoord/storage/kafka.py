"""Group state on the upstream Kafka cluster: one compacted topic, one partition per shard.

Speaks Kafka through kcoord's own codec (:mod:`kcoord.protocol.storage_messages`,
:mod:`kcoord.protocol.record_batch`); no third-party Kafka client at run time. This module only
wires the parts together; each part's module says what it guarantees:

- :mod:`kcoord.storage.topic` — the internal topic: created when missing, validated (partition
  count, ``cleanup.policy=compact``, ``max.message.bytes``), re-checked after a shard lost its log;
- :mod:`kcoord.storage.writer` — appends: idempotent, fenced, combined per broker, one produce
  path for the shard's own batches and clients' transactional ones;
- :mod:`kcoord.storage.loader` — the load (client-side compaction, open transactions) and
  following transaction markers; :mod:`kcoord.storage.partition` — the partition reads under it;
- :mod:`kcoord.storage.ownership` — taking ownership (epoch bump + fence batch), fencing, a lost
  log, the periodic tail check and ownership refresh;
- :mod:`kcoord.storage.retry` — the one rule every retrying request follows;
- :mod:`kcoord.storage.txn_partitions` — a shard's partition joining a client's transaction.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from kcoord.client import PLAINTEXT, UpstreamSecurity
from kcoord.protocol.records import EndTxnMarker, LogEntry, Record, encode_record

from .base import AppendDone, FencedError, LogLostError, LostCallback, StorageError, transactional_pairs
from .kafka_client import KafkaCluster
from .loader import RecordsPastWatermark, ShardLoader, TailEntry
from .ownership import FENCE_KEY, FENCE_RECORD_TYPE, Ownership, OwnershipWatch, transactional_id
from .partition import PartitionReads
from .position import LogPosition
from .topic import InternalTopic
from .txn_partitions import add_partition_to_txn
from .writer import ProduceCombiner, ShardWriter

log = logging.getLogger("kcoord.storage")

# Rounds of writing past stray records in one load: one per stray batch the broker held back; a
# shard's writes into a deleted topic stop at its first (it loses the log on that write's offset).
MAX_STRAY_ROUNDS = 20

__all__ = [
    "FENCE_KEY",
    "FENCE_RECORD_TYPE",
    "KafkaShardLog",
    "KafkaStorage",
    "ProduceCombiner",
    "transactional_id",
]


class KafkaStorage:
    """The :class:`kcoord.storage.base.Storage` over the upstream cluster (see the module docstring)."""

    def __init__(
        self,
        bootstrap: list[tuple[str, int]],
        settings: Any,
        *,
        request_timeout: float = 30.0,
        append_timeout: float = 30.0,
        max_batch_bytes: int | None = None,
        fetch_max_bytes: int = 8 << 20,
        refence_interval: float | None = None,
        security: UpstreamSecurity = PLAINTEXT,
    ) -> None:
        self.settings = settings
        self.topic: str = getattr(settings, "internal_topic", "__kcoord_offsets")
        self.cluster = KafkaCluster(
            bootstrap, settings.max_frame_size, request_timeout=request_timeout, security=security
        )
        self.request_timeout = request_timeout
        self.append_timeout = append_timeout
        self.fetch_max_bytes = fetch_max_bytes
        self.internal_topic = InternalTopic(
            self.cluster,
            self.topic,
            replication_factor=getattr(settings, "replication_factor", None),
            request_timeout=request_timeout,
            max_batch_bytes=max_batch_bytes,
        )
        refresh_interval: float = (
            getattr(settings, "ownership_refresh_interval_ms", 3_600_000) / 1000
            if refence_interval is None
            else refence_interval
        )
        self.watch = OwnershipWatch(
            self.topic,
            lambda: [shard_log.ownership for shard_log in self.logs.values()],
            self.topic_gone,
            check_interval=getattr(settings, "ownership_check_interval_ms", 1000) / 1000,
            refresh_interval=refresh_interval,
        )
        self.logs: dict[int, KafkaShardLog] = {}
        self.produce_combiner = ProduceCombiner(self.topic, append_timeout)

    # The topic's limits, known once open() read its max.message.bytes.
    @property
    def max_message_bytes(self) -> int:
        return self.internal_topic.max_message_bytes

    @property
    def max_record_bytes(self) -> int:
        return self.internal_topic.max_record_bytes

    @property
    def max_batch_bytes(self) -> int:
        return self.internal_topic.max_batch_bytes

    # -- Storage ----------------------------------------------------------------------------------------
    async def open(self, num_shards: int) -> None:
        await self.internal_topic.ensure(num_shards)
        self.logs = {i: KafkaShardLog(self, i) for i in range(num_shards)}
        self.watch.start()

    def shard_log(self, shard: int) -> KafkaShardLog:
        return self.logs[shard]

    async def add_partition_to_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, shard: int
    ) -> int:
        return await add_partition_to_txn(
            self.cluster,
            self.topic,
            shard,
            transactional_id,
            producer_id,
            producer_epoch,
            self.request_timeout,
        )

    async def close(self) -> None:
        await self.watch.stop()
        self.cluster.close()

    # -- the internal topic and the checks ------------------------------------------------------------
    async def topic_gone(self) -> str:
        """Why the internal topic kcoord opened is gone upstream (deleted or re-created), or ""."""
        return await self.internal_topic.gone()

    async def recheck_topic(self) -> None:
        await self.internal_topic.recheck()

    async def check_once(self) -> None:
        """One round of the periodic ownership check (:class:`~kcoord.storage.ownership.OwnershipWatch`)."""
        await self.watch.check_once()


class KafkaShardLog:
    """One shard's partition: idempotent, fenced appends and loads (the
    :class:`~kcoord.storage.base.ShardLog` over the parts named in the module docstring)."""

    def __init__(self, storage: KafkaStorage, partition: int) -> None:
        self.storage = storage
        self.topic = storage.topic
        self.partition = partition
        self.position = LogPosition()
        self.reads = PartitionReads(
            storage.cluster, storage.topic, partition, storage.request_timeout, storage.fetch_max_bytes
        )
        self.ownership = Ownership(
            storage.cluster,
            storage.topic,
            partition,
            self.position,
            self.reads,
            init_timeout=storage.append_timeout,
            request_timeout=storage.request_timeout,
        )
        self.writer = ShardWriter(
            storage.cluster,
            storage.topic,
            partition,
            storage.produce_combiner,
            self.ownership,
            self.position,
            append_timeout=storage.append_timeout,
            max_batch_bytes=lambda: storage.max_batch_bytes,
            topic_gone=storage.topic_gone,
        )
        self.ownership.write_fence = self.writer.produce_own
        self.loader = ShardLoader(self.reads, self.position, self.ownership, self.writer.client_sequences)

    # -- ShardLog --------------------------------------------------------------------------------------
    @property
    def on_lost(self) -> LostCallback | None:
        return self.ownership.on_lost

    @on_lost.setter
    def on_lost(self, callback: LostCallback | None) -> None:
        self.ownership.on_lost = callback

    @property
    def records_read(self) -> int:
        return self.position.records_read

    @property
    def log_end(self) -> int:
        return self.position.log_end

    @property
    def followed(self) -> int:
        return self.position.followed

    async def append(self, records: list[Record]) -> None:
        """Durably append ``records`` in order (acks=-1); raises StorageError/FencedError otherwise."""
        if records:
            await self.writer.append([encode_record(r) for r in records])

    async def send(self, records: list[Record], done: AppendDone) -> None:
        """:meth:`append` pipelined (:meth:`~kcoord.storage.writer.ShardWriter.send`)."""
        if records:
            await self.writer.send([encode_record(r) for r in records], done)
        else:
            done(None)

    async def append_transactional(
        self, transactional_id: str, producer_id: int, producer_epoch: int, records: list[Record]
    ) -> None:
        """One transactional batch for a client's producer (:class:`~kcoord.storage.base.ShardLog`)."""
        pairs = transactional_pairs([encode_record(r) for r in records])
        await self.writer.append_transactional(transactional_id, producer_id, producer_epoch, pairs)

    async def read(self) -> AsyncIterator[LogEntry]:
        """Take ownership if needed (after re-checking a lost log's topic), then the partition's
        live records up to the watermark and the transactions still open there."""
        await self.ownership.ready_to_load(self.storage.recheck_topic)
        async for entry in self.loader.entries(await self._scan_past_stray_records()):
            yield entry

    async def _scan_past_stray_records(self) -> tuple[dict[bytes, bytes], list[TailEntry]]:
        """The load's scan, after moving the broker's next offset past records it holds above its
        high watermark (:class:`~kcoord.storage.loader.RecordsPastWatermark`: tansu, after the topic
        was deleted and re-created, brings back there what it acknowledged into the deleted topic).

        Without this the shard would serve, its next write would land inside what it loaded, and the
        writer would rightly refuse to acknowledge it and lose the log: one reload per write, until
        the writes alone had carried the broker's offsets past those records (minutes and thousands
        of reloads after a burst of big batches went into the deleted topic). Instead the load writes
        that many offsets at once, as kcoord-private fence tombstones (skipped by every loader, ours
        and Kafka's), and scans again; the check on every acknowledged write stays as it is. Each
        round reads on to the next stray batch, if the broker held back more than one."""
        for _ in range(MAX_STRAY_ROUNDS):
            try:
                return await self.loader.scan()
            except RecordsPastWatermark as exc:
                log.warning(
                    "shard %d: %s; writing %d offsets of fence tombstones so that its next write lands past them",
                    self.partition,
                    exc,
                    exc.gap,
                )
                await self.writer.append([(FENCE_KEY, None)] * exc.gap)
        raise StorageError(
            f"{self.topic}[{self.partition}]: still records past the high watermark after {MAX_STRAY_ROUNDS} rounds"
        )

    async def follow(self) -> list[EndTxnMarker]:
        return await self.loader.follow()

    def release(self) -> None:
        self.ownership.release()

    def reacquire(self) -> None:
        self.ownership.reacquire()

    # -- ownership, for the checks and tests -----------------------------------------------------------
    @property
    def serving(self) -> bool:
        return self.ownership.serving

    @property
    def producer_id(self) -> int:
        return self.ownership.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.ownership.producer_epoch

    @property
    def sequence(self) -> int:
        return self.ownership.sequence

    @property
    def fenced(self) -> FencedError | None:
        return self.ownership.fenced

    @property
    def lost(self) -> LogLostError | None:
        return self.ownership.lost

    async def refresh_ownership(self) -> None:
        await self.ownership.refresh()

    async def check_tail(self, report: bool = True) -> str | None:
        return await self.ownership.check_tail(report)

    def lose(self, why: str) -> LogLostError:
        return self.ownership.lose(why)

    async def read_latest(self) -> dict[bytes, bytes]:
        """Latest committed value per key from log start to the high watermark at call time (the
        plain part of :meth:`read`, without transactions still open)."""
        return (await self.loader.scan())[0]
