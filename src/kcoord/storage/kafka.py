"""Group state on the upstream Kafka cluster: one compacted topic, one partition per shard.

Speaks Kafka through kcoord's own codec (:mod:`kcoord.protocol.storage_messages`,
:mod:`kcoord.protocol.record_batch`); no third-party Kafka client at run time.

Topic (:meth:`KafkaStorage.open`): ``settings.internal_topic`` is created with ``num_shards``
partitions, ``cleanup.policy=compact`` and ``settings.replication_factor`` (default
``min(3, brokers)``) when missing; an existing topic with another partition count or a cleanup
policy other than exactly ``compact`` stops startup with a :class:`StorageError` naming the
mismatch (``delete`` would expire committed offsets; a different partition count would route
groups to the wrong shard).

Record size: the topic's ``max.message.bytes`` (DescribeConfigs at start; Kafka's default 1048588
when the topic does not report it) sets :attr:`KafkaStorage.max_record_bytes`, the largest record
that fits a batch of its own, which the group state never exceeds (it refuses the request that
would need a larger one), and ``max_batch_bytes``, below the limit with a margin.

Write path (:meth:`KafkaShardLog.append`): one Produce request with one RecordBatch v2 holding
every record of the call (split only beyond ``max_batch_bytes``, see below), ``acks=-1``,
idempotent: the shard's producer id/epoch and a per-partition base sequence. Retries after a
lost connection, a timeout or a leadership change resend the *same* batch with the *same*
sequence, so the broker deduplicates it (DUPLICATE_SEQUENCE_NUMBER on a retry means "already
written"). Any other failure raises :class:`StorageError`; the shard then reloads, and the next
read re-fences first (below) so a straggling copy of the failed batch can only land *before*
the fence — inside what the reload reads — never after it.

Shards share a broker's connection, and a broker handles a connection's requests one at a time,
so one Produce per shard append would queue the shards behind each other. Appends made in the
same event-loop iteration for partitions led by the same broker go out as *one* Produce request
with a batch per partition (:class:`ProduceCombiner`), as Kafka's own producer drains every ready
partition of a broker into one request; each shard still gets its own partition's answer and
retries on its own. Each batch carries its shard's producer id, epoch and sequence.

Fencing: each shard owner uses the stable transactional id
``kcoord:<topic>:<shard>``. Taking ownership = InitProducerId for that id (the transaction
coordinator bumps the epoch and returns the same producer id), then an acknowledged *fence
batch* at the new epoch: one tombstone with a kcoord-private record type
(:data:`FENCE_RECORD_TYPE`, skipped by :func:`kcoord.protocol.records.decode_record` and by Kafka's own
loader as an unknown type). After that batch the partition leader knows the new epoch, so
Apache Kafka rejects the previous owner's produces with INVALID_PRODUCER_EPOCH (or
PRODUCER_FENCED); tansu already rejects them with PRODUCER_FENCED right after InitProducerId.
Invariant: a shard reads (loads) only after its fence batch was acknowledged, so every write of
a previous owner is either before the fence (and therefore read) or rejected. A fenced log stays
fenced: append and read raise :class:`FencedError` until the process restarts — two kcoord
processes never take a shard back and forth.

Finding out without a write (:meth:`KafkaStorage.check_once`, every ``ownership.check.interval.ms``):
a Metadata request sees a deleted or re-created topic (topic id), and each serving shard fetches
its partition's tail past what it loaded and wrote (``checked``; its own acknowledged batches move
it without a read). Another owner's fence, or a write with our producer id at an epoch we never
used, fences the shard; a high watermark below ``checked`` or a log start past what was loaded
means the log is lost (:class:`LogLostError`). Either way :attr:`KafkaShardLog.on_lost` tells the
runtime at once. An append acknowledged *below* the log end this process loaded and wrote went
into a log that lost it (tansu acknowledges a Produce to a deleted topic): it raises LogLostError
instead of returning. A lost log re-checks (re-creates) the topic before its next load.

Ownership is re-taken every ``ownership.refresh.interval.ms`` so the transactional id never
reaches Kafka's ``transactional.id.expiration.ms`` (7 days by default; an expired id would get a
*new* producer id and leave a zombie's old id unfenced). The refresh runs the tail check first and
never re-takes a fenced shard; another owner's fence found after its bump means our state misses
that owner's writes: the log is lost and the shard reloads.

Read path (:meth:`KafkaShardLog.read`): ListOffsets (earliest, latest = high watermark at call
time), then Fetch from the log start up to that watermark. Records are compacted client-side as
they stream in (latest value per key, tombstoned keys dropped) and only the survivors are decoded,
so decoding and replay cost grows with live keys; with broker-side compaction the bytes fetched do
too. Transactional data (a client's transactional offset commits) is held per producer id until
its marker: an abort drops it; a commit applies each record unless its key was written after it
(Kafka's log-order rule for transactional offsets), and the survivors replay as plain records.
Transactions still open at the end are yielded as they are (``TransactionalRecords``, pending in
the shard), after the plain survivors, merged in log order with the latest writes of their keys
that came after them (tombstones included), so the shard's replay orders them as the log does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.primitives import INT16, CodecError
from kcoord.protocol.record_batch import CONTROL_COMMIT, RecordBatch, decode_batches, encode_batch
from kcoord.protocol.records import (
    EndTxnMarker,
    LogEntry,
    Record,
    TransactionalRecords,
    decode_record,
    encode_record,
)

from .base import (
    KAFKA_DEFAULT_MAX_MESSAGE_BYTES,
    FencedError,
    LogLostError,
    LostCallback,
    StorageError,
    TransactionalAppendError,
    max_record_bytes_for,
    transactional_pairs,
)
from .kafka_client import LEADERSHIP_ERRORS, TRANSIENT_ERRORS, KafkaCluster, request

log = logging.getLogger("kcoord.storage")

FENCE_RECORD_TYPE = 0x4B43  # "KC": a record type Kafka's __consumer_offsets does not use
FENCE_KEY = INT16.pack(FENCE_RECORD_TYPE) + b"kcoord-shard-owner"

FENCING_ERRORS = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED})
# What the cluster answers a transactional batch written for a client's producer when the fault is
# that producer's (fenced, its transaction not ongoing, not authorized): the client's answer.
CLIENT_TRANSACTION_ERRORS = frozenset(
    {
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_TXN_STATE,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ErrorCode.UNKNOWN_PRODUCER_ID,
        ErrorCode.TRANSACTION_ABORTABLE,
    }
)
# AddPartitionsToTxn errors after which another attempt (after finding the coordinator again) may
# succeed soon; the rest are the client's answer.
_ADD_PARTITION_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
RESOURCE_TOPIC = 2
MISSING = object()  # the cluster says the internal topic does not exist


def transactional_id(topic: str, shard: int) -> str:
    return f"kcoord:{topic}:{shard}"


def batch_bytes_for(max_message_bytes: int, cap: int | None = None) -> int:
    """How many record bytes one batch may hold, as :meth:`KafkaShardLog._chunks` counts them (16
    bytes of framing per record): an eighth of the topic's limit stays free for the batch header
    and for framing beyond that estimate."""
    limit = max_message_bytes - max_message_bytes // 8
    return limit if cap is None else min(cap, limit)


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
    ) -> None:
        self.settings = settings
        self.topic: str = getattr(settings, "internal_topic", "__kcoord_offsets")
        self.replication_factor: int | None = getattr(settings, "replication_factor", None)
        self.cluster = KafkaCluster(bootstrap, settings.max_frame_size, request_timeout=request_timeout)
        self.request_timeout = request_timeout
        self.append_timeout = append_timeout
        # Both follow the topic's max.message.bytes once open() read it (_validate_topic); an explicit
        # max_batch_bytes caps the batches further.
        self.max_message_bytes = KAFKA_DEFAULT_MAX_MESSAGE_BYTES
        self.max_record_bytes = max_record_bytes_for(self.max_message_bytes)
        self._max_batch_bytes_cap = max_batch_bytes
        self.max_batch_bytes = batch_bytes_for(self.max_message_bytes, max_batch_bytes)
        self.fetch_max_bytes = fetch_max_bytes
        self.refence_interval = (
            getattr(settings, "ownership_refresh_interval_ms", 3_600_000) / 1000
            if refence_interval is None
            else refence_interval
        )
        self.check_interval: float = getattr(settings, "ownership_check_interval_ms", 1000) / 1000
        self.logs: dict[int, KafkaShardLog] = {}
        self.produce_combiner = ProduceCombiner(self.topic, append_timeout)
        self.num_shards = 0
        self.topic_id: Any = None  # the topic's id when kcoord opened or re-checked it (Metadata v10+)
        self._tasks: list[asyncio.Task[None]] = []
        self._recheck = asyncio.Lock()
        self._last_check_warning = 0.0

    # -- Storage ----------------------------------------------------------------------------------------
    async def open(self, num_shards: int) -> None:
        self.num_shards = num_shards
        await self._ensure_topic(num_shards)
        self.logs = {i: KafkaShardLog(self, i) for i in range(num_shards)}
        loop = asyncio.get_running_loop()
        if self.refence_interval > 0:
            self._tasks.append(loop.create_task(self._refence_loop()))
        if self.check_interval > 0:
            self._tasks.append(loop.create_task(self._check_loop()))

    def shard_log(self, shard: int) -> KafkaShardLog:
        return self.logs[shard]

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.cluster.close()

    # -- the internal topic -----------------------------------------------------------------------------
    async def add_partition_to_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, shard: int
    ) -> int:
        """AddPartitionsToTxn v3 (the client form) for ``shard``'s partition with the client's
        transactional id, producer id and epoch, on kcoord's own connection to that id's transaction
        coordinator. Coordinator moves are retried until the request timeout; any other error is
        the client's answer (docs/transactions.md)."""
        A = sm.AddPartitionsToTxnRequest
        req = A(
            v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
            v3_and_below_producer_epoch=producer_epoch,
            v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=self.topic, partitions=[shard])],
        )  # fmt: skip
        deadline = time.monotonic() + self.request_timeout
        backoff = 0.02
        while True:
            try:
                conn = await self.cluster.transaction_coordinator(transactional_id)
                resp = await request(conn, req, self.request_timeout, min(3, conn.version_for(A)))
                error = ErrorCode.UNKNOWN_SERVER_ERROR
                for topic in resp.results_by_topic_v3_and_below or []:
                    for part in topic.results_by_partition:
                        if topic.name == self.topic and part.partition_index == shard:
                            error = part.partition_error_code
            except StorageError as exc:
                log.debug("AddPartitionsToTxn for %r: %s", transactional_id, exc)
                error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            if error not in _ADD_PARTITION_RETRIABLE or time.monotonic() > deadline:
                return int(error)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 0.5)

    async def _ensure_topic(self, num_shards: int) -> None:
        resp = await self.cluster.metadata(self.topic)
        topic = next((t for t in resp.topics if t.name == self.topic), None)
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topic is None else topic.error_code
        if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            await self._create_topic(num_shards, resp)
        elif error != ErrorCode.NONE:
            raise StorageError(f"internal topic {self.topic!r}: metadata error {error}")
        await self._validate_topic(num_shards)
        topic_id = await self._current_topic_id()
        self.topic_id = None if topic_id is MISSING else topic_id

    async def _current_topic_id(self) -> Any:
        """The topic's id; None when the cluster does not say (Metadata < v10, a zero id) or gives
        another error; :data:`MISSING` when the cluster says the topic does not exist."""
        resp = await self.cluster.metadata(self.topic)
        topic = next((t for t in resp.topics if t.name == self.topic), None)
        if topic is None or topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return MISSING
        if topic.error_code != ErrorCode.NONE:
            return None
        topic_id = getattr(topic, "topic_id", None)
        return None if topic_id is None or topic_id.int == 0 else topic_id

    async def recheck_topic(self) -> None:
        """After a shard found its log lost: make sure the topic exists again (re-created with the
        same partition count and policy if it is missing) before the shard re-takes and reloads it.
        Shards that lost their log together share one check."""
        async with self._recheck:
            current = await self._current_topic_id()
            if current is not MISSING and current == self.topic_id:
                await self.cluster.refresh(self.topic)
                return
            log.error(
                "internal topic %s: re-checking it after its log was lost (topic id was %s, now %s)",
                self.topic,
                self.topic_id,
                "missing" if current is MISSING else current,
            )
            await self._ensure_topic(self.num_shards)

    async def _create_topic(self, num_shards: int, metadata: Any) -> None:
        rf = self.replication_factor or min(3, max(1, len(metadata.brokers)))
        req = sm.CreateTopicsRequest(
            topics=[
                sm.CreateTopicsRequest.CreatableTopic(
                    name=self.topic,
                    num_partitions=num_shards,
                    replication_factor=rf,
                    configs=[
                        sm.CreateTopicsRequest.CreatableTopicConfig(name="cleanup.policy", value="compact")
                    ],
                )
            ],
            timeout_ms=int(self.request_timeout * 1000),
        )
        controller = getattr(metadata, "controller_id", -1)
        conn = await (
            self.cluster.node(controller) if controller in self.cluster.brokers else self.cluster.any_node()
        )
        resp = await request(conn, req, self.request_timeout)
        result = resp.topics[0]
        if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return  # someone else created it meanwhile; validation decides
        if result.error_code != ErrorCode.NONE:
            raise StorageError(
                f"cannot create internal topic {self.topic!r} ({num_shards} partitions, replication factor {rf}): "
                f"error {result.error_code} {result.error_message or ''}".rstrip()
            )
        log.info(
            "created internal topic %s: %d partitions, replication factor %d, compacted",
            self.topic,
            num_shards,
            rf,
        )

    async def _validate_topic(self, num_shards: int) -> None:
        deadline = time.monotonic() + self.request_timeout
        while True:
            await self.cluster.refresh(self.topic)
            count = self.cluster.partition_count
            if count is not None and count != num_shards:
                raise StorageError(
                    f"internal topic {self.topic!r} has {count} partitions but kcoord runs {num_shards} shards; "
                    f"start with --shards {count} or use another --internal-topic (a shard is a partition: "
                    "changing the count would move groups to shards that do not hold their state)"
                )
            if count == num_shards and all(self.cluster.leaders.get(p, -1) >= 0 for p in range(num_shards)):
                break
            if time.monotonic() > deadline:
                raise StorageError(
                    f"internal topic {self.topic!r}: partitions without a leader after {self.request_timeout}s"
                )
            await asyncio.sleep(0.1)
        configs = await self._topic_configs()
        policy = configs.get("cleanup.policy")
        if policy is None or {p.strip() for p in policy.split(",")} != {"compact"}:
            shown = "delete (the default)" if policy is None else policy
            raise StorageError(
                f"internal topic {self.topic!r} has cleanup.policy={shown}; kcoord needs cleanup.policy=compact "
                "(a delete policy would expire committed offsets); fix the topic's config or use another --internal-topic"
            )
        self._set_max_message_bytes(configs.get("max.message.bytes"))

    def _set_max_message_bytes(self, configured: str | None) -> None:
        """Size records and batches by the topic's max.message.bytes (Kafka's default when unset)."""
        try:
            value = KAFKA_DEFAULT_MAX_MESSAGE_BYTES if configured is None else int(configured)
        except ValueError:
            raise StorageError(
                f"internal topic {self.topic!r}: max.message.bytes={configured!r} is not a number"
            ) from None
        self.max_message_bytes = value
        self.max_record_bytes = max_record_bytes_for(value)
        self.max_batch_bytes = batch_bytes_for(value, self._max_batch_bytes_cap)
        log.info(
            "internal topic %s: max.message.bytes=%d%s: records up to %d bytes, batches up to %d bytes",
            self.topic,
            value,
            " (Kafka's default; the topic does not set it)" if configured is None else "",
            self.max_record_bytes,
            self.max_batch_bytes,
        )

    async def _topic_configs(self) -> dict[str, str | None]:
        """The internal topic's configs as DescribeConfigs reports them (name -> value)."""
        conn = await self.cluster.any_node()
        req = sm.DescribeConfigsRequest(
            resources=[
                sm.DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=RESOURCE_TOPIC, resource_name=self.topic, configuration_keys=None
                )
            ]
        )
        resp = await request(conn, req, self.request_timeout)
        result = resp.results[0]
        if result.error_code != ErrorCode.NONE:
            raise StorageError(
                f"DescribeConfigs of {self.topic!r}: error {result.error_code} {result.error_message or ''}"
            )
        return {entry.name: entry.value for entry in result.configs}

    # -- ownership keepalive and checks ----------------------------------------------------------------
    async def _refence_loop(self) -> None:
        while True:
            await asyncio.sleep(self.refence_interval)
            for shard_log in list(self.logs.values()):
                try:
                    await shard_log.refresh_ownership()
                except StorageError as exc:  # the next append/read surfaces it; keep the others going
                    log.warning("shard %d: periodic ownership refresh failed: %s", shard_log.partition, exc)

    async def _check_loop(self) -> None:
        """Every ``check_interval``: is the topic still the one kcoord loaded (Metadata: present,
        same topic id), and does each owned partition's tail hold only this process's writes?"""
        while True:
            await asyncio.sleep(self.check_interval)
            log.debug("internal topic %s: ownership check", self.topic)
            try:
                await self.check_once()
            except (
                StorageError
            ) as exc:  # the cluster is unreachable: nothing can be learned; say so now and then
                now = time.monotonic()
                if now - self._last_check_warning > 60:
                    self._last_check_warning = now
                    log.warning("internal topic %s: ownership check failed: %s", self.topic, exc)

    async def topic_gone(self) -> str:
        """Why the internal topic kcoord opened is gone upstream (deleted or re-created), or ""."""
        current = await self._current_topic_id()
        if current is MISSING:
            return "the topic no longer exists upstream"
        if current is not None and self.topic_id is not None and current != self.topic_id:
            return f"the topic was re-created upstream (topic id {self.topic_id} is now {current})"
        return ""

    async def check_once(self) -> None:
        owned = [lg for lg in self.logs.values() if lg.serving]
        if not owned:
            return
        why = await self.topic_gone()
        if why:
            for shard_log in owned:
                shard_log.lose(why)
            return
        await asyncio.gather(*(shard_log.check_tail() for shard_log in owned), return_exceptions=True)


class ProduceCombiner:
    """One Produce request per broker for the appends of one loop iteration (module docstring)."""

    def __init__(self, topic: str, timeout: float, max_request_bytes: int = 8 << 20) -> None:
        self.topic = topic
        self.timeout = timeout
        self.max_request_bytes = max_request_bytes
        # connection -> [(partition, batch, future of its partition response)], in arrival order
        self._queued: dict[Any, list[tuple[int, bytes, asyncio.Future[Any]]]] = {}

    async def produce(self, conn: Any, partition: int, batch: bytes) -> Any:
        """Send ``batch`` to ``partition`` with the others bound for ``conn``; its partition response.

        Connection trouble and timeouts raise StorageError for every batch of the request.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        queue = self._queued.get(conn)
        if queue is None:
            queue = self._queued[conn] = []
            loop.call_soon(self._send, conn)
        queue.append((partition, batch, fut))
        return await fut

    def _send(self, conn: Any) -> None:
        queue = self._queued.pop(conn, [])
        request: list[tuple[int, bytes, asyncio.Future[Any]]] = []
        size = 0
        for entry in queue:
            if request and size + len(entry[1]) > self.max_request_bytes:
                self._send_one(conn, request)
                request, size = [], 0
            request.append(entry)
            size += len(entry[1])
        if request:
            self._send_one(conn, request)

    def _send_one(self, conn: Any, entries: list[tuple[int, bytes, asyncio.Future[Any]]]) -> None:
        req = sm.ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout_ms=int(self.timeout * 1000),
            topic_data=[
                sm.ProduceRequest.TopicProduceData(
                    name=self.topic,
                    partition_data=[
                        sm.ProduceRequest.PartitionProduceData(index=p, records=b) for p, b, _ in entries
                    ],
                )
            ],
        )
        task = asyncio.ensure_future(request(conn, req, self.timeout))
        task.add_done_callback(lambda t: self._answer(t, entries))

    @staticmethod
    def _answer(task: asyncio.Future[Any], entries: list[tuple[int, bytes, asyncio.Future[Any]]]) -> None:
        failure = StorageError("produce request cancelled") if task.cancelled() else task.exception()
        by_partition: dict[int, Any] = {}
        if failure is None:
            for topic in task.result().responses:
                for part in topic.partition_responses:
                    by_partition[part.index] = part
        for partition, _, fut in entries:
            if fut.done():
                continue
            if failure is not None:
                fut.set_exception(
                    failure if isinstance(failure, StorageError) else StorageError(repr(failure))
                )
            elif partition in by_partition:
                fut.set_result(by_partition[partition])
            else:
                fut.set_exception(StorageError(f"produce response has no answer for partition {partition}"))


class KafkaShardLog:
    """One shard's partition: idempotent, fenced appends and read_committed loads."""

    def __init__(self, storage: KafkaStorage, partition: int) -> None:
        self.storage = storage
        self.cluster = storage.cluster
        self.topic = storage.topic
        self.partition = partition
        self.transactional_id = transactional_id(storage.topic, partition)
        self.producer_id = -1
        self.producer_epoch = -1
        self.sequence = 0
        self.owned = False  # fence batch acknowledged at the current epoch
        self.fenced: FencedError | None = None
        self.lost: LogLostError | None = None  # set until the shard re-checks the topic and reloads
        self.on_lost: LostCallback | None = None
        # (producer id, epoch) pairs this process wrote with: a batch with any other pair that is a
        # fence, or that uses our producer id, is another owner's.
        self._own_producers: set[tuple[int, int]] = set()
        # Offsets below ``log_end`` hold what this process loaded or wrote; a write acknowledged
        # below it went into a log that lost them (deleted, re-created or truncated topic).
        self.log_end = -1
        # Offsets below ``checked`` are known to be this process's own writes or ones it loaded.
        self.checked = -1
        self.log_start = -1  # the log start offset the last load read from
        self.records_read = 0  # records the last load fetched (before client-side compaction)
        self._lock = asyncio.Lock()  # appends, fencing and ownership changes never interleave
        # Offsets below ``followed`` were read for transaction markers (by the load or :meth:`follow`).
        self.followed = -1
        # A client's producer id -> (epoch, next sequence) of the transactional batches written for it
        # here: Kafka checks their sequences per partition like any producer's (docs/tansu.md).
        self._txn_sequences: dict[int, tuple[int, int]] = {}

    @property
    def serving(self) -> bool:
        """Owned, loaded and not known to be lost: what the periodic checks watch."""
        return self.owned and self.fenced is None and self.lost is None and self.checked >= 0

    # -- ownership ------------------------------------------------------------------------------------
    async def _take_ownership(self) -> None:
        """InitProducerId (epoch bump) + acknowledged fence batch. Caller holds the lock."""
        self.owned = False
        pid, epoch = await self._init_producer_id()
        if self.producer_id not in (-1, pid):
            log.warning(
                "shard %d: transactional id %s got a new producer id %d (was %d)",
                self.partition,
                self.transactional_id,
                pid,
                self.producer_id,
            )
        self.producer_id, self.producer_epoch, self.sequence = pid, epoch, 0
        self._own_producers.add((pid, epoch))
        await self._produce([(FENCE_KEY, None)])
        self.owned = True
        log.info(
            "shard %d: owner of %s[%d] (producer id %d, epoch %d)",
            self.partition,
            self.topic,
            self.partition,
            pid,
            epoch,
        )

    async def _init_producer_id(self) -> tuple[int, int]:
        deadline = time.monotonic() + self.storage.append_timeout
        backoff = 0.05
        last = "no attempt"
        while time.monotonic() < deadline:
            try:
                conn = await self.cluster.transaction_coordinator(self.transactional_id)
                resp = await request(
                    conn,
                    sm.InitProducerIdRequest(
                        transactional_id=self.transactional_id, transaction_timeout_ms=60_000
                    ),
                    self.storage.request_timeout,
                )
            except StorageError as exc:
                last = str(exc)
            else:
                if resp.error_code == ErrorCode.NONE:
                    return resp.producer_id, resp.producer_epoch
                if resp.error_code in FENCING_ERRORS:
                    raise self._fence(f"InitProducerId error {resp.error_code}")
                if resp.error_code not in TRANSIENT_ERRORS:
                    raise StorageError(
                        f"InitProducerId for {self.transactional_id!r}: error {resp.error_code}"
                    )
                last = f"error {resp.error_code}"
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)
        raise StorageError(f"InitProducerId for {self.transactional_id!r} failed until the deadline: {last}")

    def _fence(self, why: str) -> FencedError:
        self.owned = False
        self.fenced = FencedError(
            f"shard {self.partition}: another kcoord took over {self.topic}[{self.partition}] "
            f"(transactional id {self.transactional_id!r}, {why}); this process no longer writes it"
        )
        log.error("%s", self.fenced)
        return self.fenced

    def lose(self, why: str) -> LogLostError:
        """The log no longer holds this shard's state: stop serving it until it is re-checked and reloaded."""
        if self.lost is None:
            self.owned = False
            self.lost = LogLostError(
                f"shard {self.partition}: the log of {self.topic}[{self.partition}] was lost: {why}"
            )
            log.error("%s; the shard stops serving and reloads once the topic is back", self.lost)
            self._notify(self.lost)
        return self.lost

    def _notify(self, exc: StorageError) -> None:
        if self.on_lost is not None:
            try:
                self.on_lost(exc)
            except Exception:  # the runtime's bookkeeping must not stop the checks of other shards
                log.exception("shard %d: on_lost callback failed", self.partition)

    # -- cluster mode: the shard moves between kcoord nodes ------------------------------------------
    def release(self) -> None:
        """This node gave the shard to another (cluster mode): refuse every later append and read
        (as fenced) and stop the periodic checks, until :meth:`reacquire`."""
        self.owned = False
        self.lost = None
        self.fenced = FencedError(f"shard {self.partition}: released to another kcoord node")

    def reacquire(self) -> None:
        """This node was given the shard (again): its next read takes ownership (epoch bump + fence
        batch, fencing whoever held it) and loads the log from the start."""
        self.owned = False
        self.fenced = None
        self.lost = None
        self.log_end = self.checked = self.log_start = self.followed = -1

    async def refresh_ownership(self) -> None:
        """Re-take ownership (epoch bump) of a shard this process still serves, so its transactional
        id never expires. Never of a shard another kcoord fenced in the meantime: the tail is read
        first, and a fence found there stops the shard instead. Another owner's fence found *after*
        the bump (it took the shard in between) means our state misses its writes: the shard reloads.
        """
        async with self._lock:
            if not self.serving:
                return
            await self.check_tail()
            if not self.serving:
                return
            await self._take_ownership()
            previous_epochs = self._own_producers - {(self.producer_id, self.producer_epoch)}
            foreign = await self.check_tail(report=False)
            if foreign is not None:
                self.lose(
                    f"another owner wrote to it while this process re-took it ({foreign}); "
                    f"earlier epochs of ours: {sorted(previous_epochs)}"
                )

    async def check_tail(self, report: bool = True) -> str | None:
        """Read the partition past ``checked`` and classify what another process wrote there.

        Returns a description of another owner's write found, or None. With ``report``, such a
        write fences this shard when it is newer than our epoch (or from another producer id), and
        loses it otherwise (we bumped past it but our state misses its writes). A log that went
        backwards (high watermark below what we loaded) or whose start moved past what we loaded
        is lost. Transient errors return None: the next check tries again.
        """
        start = self.checked
        if start < 0:
            return None
        try:
            records, high_watermark, log_start = await self._fetch_once(start)
        except StorageError as exc:
            log.debug("shard %d: tail check at %d failed: %s", self.partition, start, exc)
            return None
        if self.checked != start or self.fenced is not None or self.lost is not None:
            return None  # the state moved while we waited (an append, a reload): check again next time
        if records is None or (0 <= high_watermark < start):
            if report:
                self.lose(
                    f"its high watermark is {high_watermark} but this process loaded and wrote up to {start} "
                    "(the topic was deleted, re-created or truncated)"
                )
            return "log truncated"
        if self.log_start >= 0 and log_start > self.log_start:
            if report:
                self.lose(
                    f"its log start moved from {self.log_start} to {log_start}, past records this process loaded"
                )
            return "log start moved"
        for batch in decode_batches(records):
            if batch.next_offset <= self.checked:
                continue
            foreign = self._foreign_owner(batch)
            if foreign is not None:
                if report:
                    newer = (
                        batch.producer_id != self.producer_id or batch.producer_epoch > self.producer_epoch
                    )
                    if newer:
                        self._notify(self._fence(foreign))
                    else:
                        self.lose(foreign)
                return foreign
            self.checked = batch.next_offset
        return None

    def _foreign_owner(self, batch: RecordBatch) -> str | None:
        """Whether ``batch`` was written by another owner of this shard: a fence or a write with our
        transactional id's producer id, at a (producer id, epoch) this process never used."""
        pair = (batch.producer_id, batch.producer_epoch)
        if pair in self._own_producers or batch.is_control:
            return None
        if batch.producer_id == self.producer_id or any(r[2] == FENCE_KEY for r in batch.records):
            return f"a write by producer id {pair[0]} epoch {pair[1]} at offset {batch.base_offset}"
        return None

    # -- append ---------------------------------------------------------------------------------------
    async def append(self, records: list[Record]) -> None:
        """Durably append ``records`` in order (acks=-1); raises StorageError/FencedError otherwise."""
        if not records:
            return
        pairs = [encode_record(r) for r in records]
        async with self._lock:
            await self._writable()
            for chunk in self._chunks(pairs):
                await self._produce(chunk)

    async def _writable(self) -> None:
        """Raise if this shard may not write its log; take ownership first if needed. Lock held."""
        if self.fenced is not None:
            raise self.fenced
        if self.lost is not None:
            raise self.lost
        if not self.owned:
            await self._take_ownership()

    async def append_transactional(
        self, transactional_id: str, producer_id: int, producer_epoch: int, records: list[Record]
    ) -> None:
        """One transactional batch for a client's producer (:class:`~kcoord.storage.base.ShardLog`)."""
        pairs = transactional_pairs([encode_record(r) for r in records])
        async with self._lock:
            await self._writable()
            await self._produce_transactional(transactional_id, producer_id, producer_epoch, pairs)

    async def _produce_transactional(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        pairs: list[tuple[bytes, bytes | None]],
    ) -> None:
        """Its own Produce request (one transactional id per request), at the producer's next
        sequence on this partition; retries resend the same batch. Lock held."""
        epoch, sequence = self._txn_sequences.get(producer_id, (producer_epoch, 0))
        if epoch != producer_epoch:
            sequence = 0  # a new epoch starts its sequences over
        batch = encode_batch(
            pairs,
            timestamp=int(time.time() * 1000),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=sequence,
            transactional=True,
        )
        P = sm.ProduceRequest
        req = P(
            transactional_id=transactional_id, acks=-1, timeout_ms=int(self.storage.append_timeout * 1000),
            topic_data=[P.TopicProduceData(name=self.topic, partition_data=[P.PartitionProduceData(index=self.partition, records=batch)])],
        )  # fmt: skip
        deadline = time.monotonic() + self.storage.append_timeout
        attempt = 0
        backoff = 0.02
        last = ""
        while True:
            if attempt and time.monotonic() > deadline:
                raise StorageError(f"transactional append to {self.topic}[{self.partition}] failed: {last}")
            try:
                conn = await self.cluster.leader(self.partition)
                resp = await request(conn, req, self.storage.append_timeout)
                part = resp.responses[0].partition_responses[0]
            except (StorageError, IndexError) as exc:
                last = str(exc) or type(exc).__name__
                attempt += 1
                await self._after_leadership_error(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            err = part.error_code
            if err == ErrorCode.NONE or (err == ErrorCode.DUPLICATE_SEQUENCE_NUMBER and attempt > 0):
                self._txn_sequences[producer_id] = (producer_epoch, (sequence + len(pairs)) & 0x7FFFFFFF)
                self._written(part.base_offset, len(pairs))
                return
            if err in CLIENT_TRANSACTION_ERRORS:
                raise TransactionalAppendError(
                    err, f"transactional append for {transactional_id!r} (producer {producer_id}, epoch "
                    f"{producer_epoch}) to {self.topic}[{self.partition}]: error {err}",
                )  # fmt: skip
            attempt += 1
            last = f"error {err} {getattr(part, 'error_message', None) or ''}".rstrip()
            if not await self._wait_before_retry(err, backoff):
                # A sequence kcoord got wrong, or worse: the shard reloads and relearns it from the log.
                self._txn_sequences.pop(producer_id, None)
                raise StorageError(f"transactional append to {self.topic}[{self.partition}] rejected: {last}")
            backoff = min(backoff * 2, 1.0)

    async def follow(self) -> list[EndTxnMarker]:
        """The markers written since the load or the last call, up to the high watermark now
        (:class:`~kcoord.storage.base.ShardLog`). Transient errors raise StorageError."""
        start = self.followed
        if start < 0 or self.fenced is not None or self.lost is not None:
            return []
        markers: list[EndTxnMarker] = []
        offset = start
        target = -1  # the high watermark of the first answer: what this call reads up to
        wait_ms, empty = 1, 0
        while True:
            records, high_watermark, _ = await self._fetch_once(offset, wait_ms)
            if records is None:
                return []  # below the log start: the tail check finds the log lost
            if target < 0:
                target = high_watermark
            progressed = False
            for batch in decode_batches(records):
                if batch.next_offset <= offset:
                    continue
                progressed = True
                if batch.is_control:
                    markers.append(
                        EndTxnMarker(
                            batch.producer_id, batch.producer_epoch, batch.control_type() == CONTROL_COMMIT
                        )
                    )
                offset = batch.next_offset
            if offset >= target:
                break
            if not progressed:
                # Data is there (the high watermark says so) but the answer held none: tansu 0.6
                # answers a 1 ms Fetch of a partition of some thousands of batches so about half of
                # the time. Wait longer for it (it is there, so the broker answers at once), a few
                # times; then keep the position, and the next call reads on from it.
                empty += 1
                if empty > 5:
                    break
                wait_ms = 100
        if self.followed != start:
            return []  # a load read the partition meanwhile: its replay has these markers
        self.followed = offset
        return markers

    def _chunks(self, pairs: list[tuple[bytes, bytes | None]]) -> list[list[tuple[bytes, bytes | None]]]:
        """One chunk unless the batch would pass ``max_batch_bytes`` (the broker's max.message.bytes).

        Splitting is safe: a failure between chunks leaves a prefix in the log, and the shard's
        reload after a failed append rebuilds its state from exactly what the log holds.
        """
        limit = self.storage.max_batch_bytes
        size = sum(len(k) + (len(v) if v else 0) + 16 for k, v in pairs)
        if size <= limit:
            return [pairs]
        chunks: list[list[tuple[bytes, bytes | None]]] = [[]]
        used = 0
        for k, v in pairs:
            n = len(k) + (len(v) if v else 0) + 16
            if chunks[-1] and used + n > limit:
                chunks.append([])
                used = 0
            chunks[-1].append((k, v))
            used += n
        return chunks

    async def _produce(self, pairs: list[tuple[bytes, bytes | None]]) -> int:
        """Produce one idempotent batch at the current sequence; returns its base offset. Lock held."""
        batch = encode_batch(
            pairs,
            timestamp=int(time.time() * 1000),
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.sequence,
        )
        deadline = time.monotonic() + self.storage.append_timeout
        attempt = 0
        backoff = 0.02
        last = ""
        while True:
            if attempt and time.monotonic() > deadline:
                self.owned = False  # the outcome is unknown: re-fence before anything else
                raise StorageError(f"append to {self.topic}[{self.partition}] failed: {last}")
            try:
                conn = await self.cluster.leader(self.partition)
                part = await self.storage.produce_combiner.produce(conn, self.partition, batch)
            except StorageError as exc:
                last = str(exc)
                attempt += 1
                await self._after_leadership_error(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            err = part.error_code
            if err == ErrorCode.NONE or (err == ErrorCode.DUPLICATE_SEQUENCE_NUMBER and attempt > 0):
                self.sequence = (self.sequence + len(pairs)) & 0x7FFFFFFF
                self._written(part.base_offset, len(pairs))
                return part.base_offset
            if err in FENCING_ERRORS:
                raise self._fence(f"Produce error {err}")
            attempt += 1
            last = f"error {err} {getattr(part, 'error_message', None) or ''}".rstrip()
            if not await self._wait_before_retry(err, backoff):
                self.owned = False
                raise StorageError(f"append to {self.topic}[{self.partition}] rejected: {last}")
            backoff = min(backoff * 2, 1.0)

    def _written(self, base_offset: int, count: int) -> None:
        """Account for an acknowledged batch; one that landed below what this process already
        loaded and wrote went into a log that lost them, so it is not acknowledged to anyone."""
        if base_offset < 0:
            return  # a retry the broker deduplicated without saying where: the tail check sees it
        if base_offset < self.log_end:
            raise self.lose(
                f"a write was acknowledged at offset {base_offset}, below the {self.log_end} this process loaded "
                "and wrote (the topic was deleted, re-created or truncated upstream)"
            )
        if self.checked == base_offset:
            self.checked = base_offset + count  # our own batch right after what was checked: nothing to read
        self.log_end = base_offset + count

    async def _wait_before_retry(self, err: int, backoff: float) -> bool:
        """Both produce loops' retry rule: wait ``backoff`` and say True for an error worth retrying,
        False for one that is not (the caller raises). A write refused with UNKNOWN_TOPIC_OR_PARTITION
        while the topic is gone upstream loses the log at once: Apache Kafka refuses a Produce to a
        deleted topic so (tansu acknowledges it, which _written catches), and retrying until
        append_timeout would only hold the client."""
        if err == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and (gone := await self._topic_gone()):
            raise self.lose(f"a write was refused with UNKNOWN_TOPIC_OR_PARTITION: {gone}")
        if err in LEADERSHIP_ERRORS:
            await self._after_leadership_error(backoff)
        elif err in TRANSIENT_ERRORS:
            await asyncio.sleep(backoff)
        else:
            return False
        return True

    async def _topic_gone(self) -> str:
        """:meth:`KafkaStorage.topic_gone`, with a failed Metadata round trip counted as "not gone"
        (the write path then retries as for any leadership error)."""
        try:
            return await self.storage.topic_gone()
        except StorageError:
            return ""

    async def _after_leadership_error(self, backoff: float) -> None:
        await asyncio.sleep(backoff)
        with contextlib.suppress(StorageError):
            await self.cluster.refresh(self.topic)

    # -- read -----------------------------------------------------------------------------------------
    async def read(self) -> AsyncIterator[LogEntry]:
        """Fence if needed, then the partition's live records (compacted view) up to the watermark,
        and the transactions still open there (module docstring)."""
        async with self._lock:
            if self.fenced is not None:
                raise self.fenced
            if self.lost is not None:
                await self.storage.recheck_topic()
                # What was loaded and written is gone upstream: start over on what the topic holds now.
                self.lost = None
                self.log_end = self.checked = self.log_start = self.followed = -1
            if not self.owned:
                self.checked = -1  # no checks until the load below says where the log ends
                await self._take_ownership()
        latest, tail = await self._scan()
        batch: list[Record] = []
        for key, value in latest.items():
            record = self._decode(key, value)
            if record is not None:
                batch.append(record)
                if len(batch) >= 1000:
                    yield batch
                    batch = []
        if batch:
            yield batch
        for entry in tail:
            if isinstance(entry, _OpenBatch):
                records = [r for r in (self._decode(k, v) for _, k, v in entry.records) if r is not None]
                yield TransactionalRecords(entry.producer_id, entry.producer_epoch, records)
            else:
                record = self._decode(*entry)
                if record is not None:
                    yield [record]

    def _decode(self, key: bytes, value: bytes | None) -> Record | None:
        try:
            return decode_record(key, value)
        except CodecError as exc:
            raise StorageError(
                f"{self.topic}[{self.partition}]: undecodable record key {key.hex()}: {exc}"
            ) from exc

    async def read_latest(self) -> dict[bytes, bytes]:
        """Latest committed value per key from log start to the high watermark at call time (the
        plain part of :meth:`read`, without transactions still open)."""
        return (await self._scan())[0]

    async def _scan(self) -> tuple[dict[bytes, bytes], list[_OpenBatch | tuple[bytes, bytes | None]]]:
        """(latest, tail): the latest value per key, in the offset order of each key's latest write,
        with committed transactional records applied by Kafka's rule and tombstoned keys absent; and
        the transactions still open at the end, merged by offset with the latest writes (tombstones
        too) of their keys that came after them, which ``latest`` then leaves out."""
        start, end = await self._bounds()
        records_read = 0
        latest: dict[bytes, bytes | None] = {}
        open_batches: dict[int, list[_OpenBatch]] = {}  # producer id -> its batches since its last marker
        open_keys: dict[bytes, int] = {}  # key -> records of open transactions holding it
        written_at: dict[bytes, int] = {}  # key in open_keys -> offset of its latest write since then
        offset = start
        empty_fetches = 0
        first = True
        while offset < end:
            records, high_watermark = await self._fetch(offset)
            if first:
                # tansu 0.6 answers ListOffsets(latest) with the last *batch's* base offset + 1; the
                # first Fetch's high watermark is exact, and still "at call time" for a shard that is
                # not writing while it loads.
                end = max(end, high_watermark)
                first = False
            if records is None:  # offset below the log start (retention/DeleteRecords): restart there
                offset = (await self._bounds())[0]
                continue
            progressed = False
            for batch in decode_batches(records):
                if batch.next_offset <= offset:
                    continue
                if batch.base_offset >= end:
                    break
                progressed = True
                if batch.is_control:
                    ended = open_batches.pop(batch.producer_id, None)
                    if ended:
                        _end_transaction(
                            ended, batch.control_type() == CONTROL_COMMIT, latest, open_keys, written_at
                        )
                elif batch.is_transactional:
                    if batch.producer_id != self.producer_id:
                        self._txn_sequences[batch.producer_id] = (
                            batch.producer_epoch,
                            (batch.base_sequence + batch.next_offset - batch.base_offset) & 0x7FFFFFFF,
                        )
                    held = [
                        (off, k, v)
                        for off, _ts, k, v, _h in batch.records
                        if offset <= off < end and k is not None
                    ]
                    if held:
                        open_batches.setdefault(batch.producer_id, []).append(
                            _OpenBatch(batch.producer_id, batch.producer_epoch, held)
                        )
                        for _, k, _ in held:
                            open_keys[k] = open_keys.get(k, 0) + 1
                else:
                    pop = latest.pop
                    for off, _ts, k, v, _h in batch.records:
                        if k is not None and offset <= off < end:
                            pop(k, None)
                            latest[k] = v
                            if open_keys and k in open_keys:
                                written_at[k] = off
                records_read += len(batch.records)
                offset = batch.next_offset
            if not progressed:
                empty_fetches += 1
                if empty_fetches >= 20:
                    raise StorageError(
                        f"{self.topic}[{self.partition}]: fetch at {offset} made no progress towards {end}"
                    )
            else:
                empty_fetches = 0
        # What this process loaded ends at ``end``: later writes are its own or another owner's,
        # which the tail check reads from here.
        self.log_start, self.records_read = start, records_read
        self.log_end = self.checked = self.followed = max(end, offset)
        tail: list[tuple[int, _OpenBatch | tuple[bytes, bytes | None]]] = [
            (b.records[0][0], b) for batches in open_batches.values() for b in batches
        ]
        for k, at in written_at.items():  # latest writes after an open transaction's record of the key
            tail.append((at, (k, latest.pop(k))))
        tail.sort(key=lambda entry: entry[0])
        return {k: v for k, v in latest.items() if v is not None}, [entry for _, entry in tail]

    async def _bounds(self) -> tuple[int, int]:
        start, end = await asyncio.gather(self._list_offset(-2), self._list_offset(-1))
        return start, end

    async def _list_offset(self, timestamp: int) -> int:
        req = sm.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=[
                sm.ListOffsetsRequest.ListOffsetsTopic(
                    name=self.topic,
                    partitions=[
                        sm.ListOffsetsRequest.ListOffsetsPartition(
                            partition_index=self.partition, timestamp=timestamp
                        )
                    ],
                )
            ],
        )
        resp = await self._leader_request(req, lambda r: r.topics[0].partitions[0].error_code)
        return resp.topics[0].partitions[0].offset

    async def _fetch(self, offset: int) -> tuple[bytes | None, int]:
        """``(records, high_watermark)``; records is None when ``offset`` is below the log start."""
        max_bytes = self.storage.fetch_max_bytes
        req = sm.FetchRequest(
            replica_id=-1,
            max_wait_ms=500,
            min_bytes=1,
            max_bytes=max_bytes,
            isolation_level=0,
            topics=[
                sm.FetchRequest.FetchTopic(
                    topic=self.topic,
                    partitions=[
                        sm.FetchRequest.FetchPartition(
                            partition=self.partition, fetch_offset=offset, partition_max_bytes=max_bytes
                        )
                    ],
                )
            ],
        )

        def error_of(resp: Any) -> int:
            if resp.error_code:
                return resp.error_code
            for t in resp.responses:
                for p in t.partitions:
                    if p.partition_index == self.partition:
                        return (
                            ErrorCode.NONE if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE else p.error_code
                        )
            return ErrorCode.NONE

        resp = await self._leader_request(req, error_of)
        for t in resp.responses:
            for p in t.partitions:
                if p.partition_index == self.partition:
                    if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        return None, p.high_watermark
                    return p.records or b"", p.high_watermark
        return b"", -1  # some brokers (tansu) answer an idle fetch with no partitions at all

    async def _fetch_once(self, offset: int, max_wait_ms: int = 1) -> tuple[bytes | None, int, int]:
        """One Fetch from ``offset`` that hardly waits for data: ``(records, high watermark, log
        start)``, records None when ``offset`` is out of range. Errors raise StorageError (no retry).
        (``max_wait_ms=1``, not 0: tansu answers a zero-wait Fetch with no partitions at all.)"""
        max_bytes = 1 << 20
        req = sm.FetchRequest(
            replica_id=-1,
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            max_bytes=max_bytes,
            isolation_level=0,
            topics=[
                sm.FetchRequest.FetchTopic(
                    topic=self.topic,
                    partitions=[
                        sm.FetchRequest.FetchPartition(
                            partition=self.partition, fetch_offset=offset, partition_max_bytes=max_bytes
                        )
                    ],
                )
            ],
        )
        conn = await self.cluster.leader(self.partition)
        resp = await request(conn, req, self.storage.request_timeout)
        if resp.error_code:
            raise StorageError(f"Fetch on {self.topic}[{self.partition}]: error {resp.error_code}")
        for t in resp.responses:
            for p in t.partitions:
                if p.partition_index != self.partition:
                    continue
                log_start = getattr(p, "log_start_offset", -1)
                if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    return None, p.high_watermark, log_start
                if p.error_code != ErrorCode.NONE:
                    raise StorageError(f"Fetch on {self.topic}[{self.partition}]: error {p.error_code}")
                return p.records or b"", p.high_watermark, log_start
        return b"", -1, -1  # tansu answers an idle fetch with no partitions at all

    async def _leader_request(self, req: Any, error_of: Any) -> Any:
        """A request to the partition leader, retried on leadership and transient errors."""
        deadline = time.monotonic() + self.storage.request_timeout
        backoff = 0.02
        while True:
            try:
                conn = await self.cluster.leader(self.partition)
                resp = await request(conn, req, self.storage.request_timeout)
                err = error_of(resp)
            except StorageError as exc:
                err, last = -1, str(exc)
            else:
                if err == ErrorCode.NONE:
                    return resp
                last = f"error {err}"
                if err not in LEADERSHIP_ERRORS and err not in TRANSIENT_ERRORS:
                    raise StorageError(f"{type(req).__name__} on {self.topic}[{self.partition}]: {last}")
            if time.monotonic() > deadline:
                raise StorageError(f"{type(req).__name__} on {self.topic}[{self.partition}] failed: {last}")
            await self._after_leadership_error(backoff)
            backoff = min(backoff * 2, 1.0)


class _OpenBatch:
    """A transactional batch read from the log whose transaction has no marker yet."""

    __slots__ = ("producer_id", "producer_epoch", "records")

    def __init__(
        self, producer_id: int, producer_epoch: int, records: list[tuple[int, bytes, bytes | None]]
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.records = records  # (offset, key, value)


def _end_transaction(
    batches: list[_OpenBatch],
    commit: bool,
    latest: dict[bytes, bytes | None],
    open_keys: dict[bytes, int],
    written_at: dict[bytes, int],
) -> None:
    """A marker ended these batches' transaction: on COMMIT each record becomes the key's latest
    value unless the key was written after it (Kafka's ``replayEndTransactionMarker`` compares record
    offsets); either way its keys are no longer held by it."""
    for batch in batches:
        for off, k, v in batch.records:
            if commit and written_at.get(k, -1) < off:
                latest.pop(k, None)
                latest[k] = v
                written_at[k] = off
            left = open_keys[k] - 1
            if left:
                open_keys[k] = left
            else:
                del open_keys[k]
                written_at.pop(k, None)
