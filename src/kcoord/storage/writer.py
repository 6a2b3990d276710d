"""Writing one shard's partition: the shard's own idempotent batches and clients' transactional ones.

Every batch goes through one produce path (:meth:`ShardWriter._produce`), ``acks=-1``; what differs
between the two kinds is a parameter (:class:`Producer`):

- the shard's own batches (:meth:`ShardWriter.append`, and the fence batch of
  :mod:`kcoord.storage.ownership`) carry its producer id, epoch and per-partition base sequence, and
  share a Produce request with the other shards' batches bound for the same broker
  (:class:`ProduceCombiner`);
- a client's transactional batch (:meth:`ShardWriter.append_transactional`) carries that client's
  transactional id, producer id and epoch and its next sequence on this partition, in a Produce
  request of its own (Kafka takes one transactional id per request).

Retries after a lost connection, a timeout or a leadership change resend the *same* batch with the
*same* sequence, so the broker deduplicates it (DUPLICATE_SEQUENCE_NUMBER on a retry means "already
written"), until ``append_timeout``. Any other failure raises :class:`StorageError`; the shard then
reloads, and the next read re-fences first so a straggling copy of a failed batch of its own can
only land *before* the fence — inside what the reload reads — never after it.

An acknowledged batch must land at or above the end of what this process loaded and wrote: one
below it went into a log that lost them (tansu acknowledges a Produce to a deleted topic), so it
loses the shard's log (:class:`LogLostError`) instead of returning. A write refused with
UNKNOWN_TOPIC_OR_PARTITION while the topic is gone upstream loses the log at once.

Shards share a broker's connection, and a broker handles a connection's requests one at a time,
so one Produce per shard append would queue the shards behind each other. Appends made in the same
event-loop iteration for partitions led by the same broker go out as *one* Produce request with a
batch per partition (:class:`ProduceCombiner`), as Kafka's own producer drains every ready partition
of a broker into one request; each shard still gets its own partition's answer and retries on its
own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kcoord.client import Connection
from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.record_batch import encode_batch

from .base import RECORD_FRAMING_ESTIMATE, StorageError, TransactionalAppendError
from .kafka_client import REQUEST_FAILURES, KafkaCluster, as_storage_error, request
from .ownership import FENCING_ERRORS, Ownership, Pair
from .position import LogPosition
from .retry import Retry, Verdict

log = logging.getLogger("kcoord.storage")

SEQUENCE_MASK = 0x7FFFFFFF  # base sequences count records per partition, mod 2**31

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

# Told a batch's partition response, or the StorageError that stands for it (once; must not raise).
Settle = Callable[[Any, StorageError | None], None]
# One queued batch of a combined request: (partition, batch, who is told its answer).
_Queued = tuple[int, bytes, Settle]


class ProduceCombiner:
    """One Produce request per broker for the appends of one loop iteration (module docstring)."""

    def __init__(self, topic: str, timeout: float, max_request_bytes: int = 8 << 20) -> None:
        self.topic = topic
        self.timeout = timeout
        self.max_request_bytes = max_request_bytes
        self._queued: dict[Connection, list[_Queued]] = {}  # in arrival order

    async def produce(self, conn: Connection, partition: int, batch: bytes) -> Any:
        """Send ``batch`` to ``partition`` with the others bound for ``conn``; its partition response.

        Connection trouble and timeouts raise StorageError for every batch of the request.
        """
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def settle(part: Any, failure: StorageError | None) -> None:
            if fut.done():
                return
            if failure is not None:
                fut.set_exception(failure)
            else:
                fut.set_result(part)

        self.enqueue(conn, partition, batch, settle)
        return await fut

    def enqueue(self, conn: Connection, partition: int, batch: bytes, settle: Settle) -> None:
        """:meth:`produce` without the coroutine: ``settle`` is called with ``batch``'s partition
        response (or the StorageError) right where the answer is handled, not a loop iteration later
        as a future's callbacks would be. Batches queued for ``conn`` go out in the order they were
        queued."""
        queue = self._queued.get(conn)
        if queue is None:
            queue = self._queued[conn] = []
            asyncio.get_running_loop().call_soon(self._send, conn)
        queue.append((partition, batch, settle))

    def _send(self, conn: Connection) -> None:
        queue = self._queued.pop(conn, [])
        entries: list[_Queued] = []
        partitions: set[int] = set()
        size = 0
        for entry in queue:
            # A second batch of one partition (a shard with several appends in flight) goes in the
            # next request: a Produce request holds one batch per partition, and the connection
            # keeps the requests, hence the partition's batches, in order.
            if entries and (size + len(entry[1]) > self.max_request_bytes or entry[0] in partitions):
                self._send_one(conn, entries)
                entries, size = [], 0
                partitions.clear()
            entries.append(entry)
            partitions.add(entry[0])
            size += len(entry[1])
        if entries:
            self._send_one(conn, entries)

    def _send_one(self, conn: Connection, entries: list[_Queued]) -> None:
        P = sm.ProduceRequest
        req = P(
            transactional_id=None,
            acks=-1,
            timeout_ms=int(self.timeout * 1000),
            topic_data=[
                P.TopicProduceData(
                    name=self.topic,
                    partition_data=[P.PartitionProduceData(index=p, records=b) for p, b, _ in entries],
                )
            ],
        )
        # The request's own future, answered inside the connection's read, and the request written
        # now: a coroutine around it and the connection's end-of-iteration write each cost a loop
        # iteration, and under relayed traffic every iteration is long (every client's reads and
        # writes run in it), so each one added milliseconds to every commit's wait for its append.
        try:
            answer = conn.request(req, timeout=self.timeout)
            conn.flush()
            answer.add_done_callback(lambda done: self._answer(conn, done, entries))
        except Exception as exc:
            # This runs as a loop callback: whatever went wrong, every batch must be answered (a
            # shard whose append never finishes would never answer its requests again). A request
            # that went out anyway has an unknown outcome, which StorageError means: the shard
            # reloads and re-fences.
            if not isinstance(exc, REQUEST_FAILURES):
                log.exception("sending a combined produce request to %s failed", conn.name)
            self._answer_failed(entries, as_storage_error(conn, exc))

    @staticmethod
    def _answer(conn: Connection, done: asyncio.Future[Any], entries: list[_Queued]) -> None:
        if done.cancelled():
            ProduceCombiner._answer_failed(entries, StorageError("produce request cancelled"))
            return
        failure = done.exception()
        if failure is not None:
            ProduceCombiner._answer_failed(entries, as_storage_error(conn, failure))
            return
        by_partition: dict[int, Any] = {}
        for topic in done.result().responses:
            for part in topic.partition_responses:
                by_partition[part.index] = part
        for partition, _, settle in entries:
            if partition in by_partition:
                ProduceCombiner._settle(settle, by_partition[partition], None)
            else:
                failure = StorageError(f"produce response has no answer for partition {partition}")
                ProduceCombiner._settle(settle, None, failure)

    @staticmethod
    def _answer_failed(entries: list[_Queued], failure: StorageError) -> None:
        """Connection trouble or a timeout: every batch of the request fails with it."""
        for _, _, settle in entries:
            ProduceCombiner._settle(settle, None, failure)

    @staticmethod
    def _settle(settle: Settle, part: Any, failure: StorageError | None) -> None:
        try:
            settle(part, failure)
        except Exception:  # one shard's bug must not cost the other batches of the request their answer
            log.exception("handling a produce answer failed")


@dataclass(frozen=True, slots=True)
class Producer:
    """Whose batch it is: the shard's own (``transactional_id`` None: idempotent, in a combined
    request) or a client's transaction (transactional, in a request of its own)."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional_id: str | None = None


class ProduceRefused(StorageError):
    """The cluster refused a batch with an error another attempt cannot fix."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def chunks(pairs: list[Pair], limit: int) -> list[list[Pair]]:
    """One chunk unless the batch would pass ``limit`` record bytes (the broker's max.message.bytes).

    Splitting is safe: a failure between chunks leaves a prefix in the log, and the shard's
    reload after a failed append rebuilds its state from exactly what the log holds.
    """

    def size(pair: Pair) -> int:
        return len(pair[0]) + (len(pair[1]) if pair[1] else 0) + RECORD_FRAMING_ESTIMATE

    if sum(size(p) for p in pairs) <= limit:
        return [pairs]
    out: list[list[Pair]] = [[]]
    used = 0
    for pair in pairs:
        n = size(pair)
        if out[-1] and used + n > limit:
            out.append([])
            used = 0
        out[-1].append(pair)
        used += n
    return out


class ShardWriter:
    """Appends to one shard's partition (module docstring). ``max_batch_bytes`` and ``topic_gone``
    come from the internal topic: its current batch limit, and why it is gone upstream ("" if not)."""

    def __init__(
        self,
        cluster: KafkaCluster,
        topic: str,
        partition: int,
        combiner: ProduceCombiner,
        ownership: Ownership,
        position: LogPosition,
        *,
        append_timeout: float,
        max_batch_bytes: Callable[[], int],
        topic_gone: Callable[[], Awaitable[str]],
    ) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partition = partition
        self.combiner = combiner
        self.ownership = ownership
        self.position = position
        self.append_timeout = append_timeout
        self.max_batch_bytes = max_batch_bytes
        self.topic_gone = topic_gone
        # A client's producer id -> (epoch, next sequence) of the transactional batches written for it
        # here: Kafka checks their sequences per partition like any producer's (docs/tansu.md). A
        # load relearns them from the log.
        self.client_sequences: dict[int, tuple[int, int]] = {}
        self._resending: set[asyncio.Task[None]] = set()  # batches of send() being resent

    async def append(self, pairs: list[Pair]) -> None:
        """The shard's own records, in order, in as few batches as the batch limit allows."""
        async with self.ownership.lock:
            await self.ownership.idle()
            await self.ownership.writable()
            for chunk in chunks(pairs, self.max_batch_bytes()):
                await self.produce_own(chunk)

    async def send(self, pairs: list[Pair], done: Callable[[StorageError | None], None]) -> None:
        """The shard's own records as one batch sent behind those still in flight (pipelined):
        returns once it is on its way; ``done`` (which must not raise) is called once, with None
        when the cluster acknowledged it, else with the StorageError.

        Its sequence is taken at sending, so the broker, which checks each producer's sequences
        per partition (Kafka and tansu: OUT_OF_ORDER_SEQUENCE_NUMBER on a gap), writes the batches
        in the order they were sent, each only after every earlier one. A batch retries (the same
        batch and sequence, as :meth:`append`) only while it is the only one in flight, and none is
        sent while it does; a failed attempt with others in flight fails it, leaving the shard not
        owned: the runtime fails the later ones too and reloads, and the re-fence waits until none
        is in flight (:meth:`Ownership.take`). Records over the batch limit, or a partition without
        a known leader, take :meth:`append`'s path: written before this returns."""
        own = self.ownership
        async with own.lock:
            while True:
                if own.retrying:
                    await own.idle()
                await own.writable()
                parts = chunks(pairs, self.max_batch_bytes())
                if len(parts) > 1:
                    break
                try:
                    conn = await self.cluster.leader(self.partition)
                except StorageError:
                    break
                if own.owned and not own.retrying:
                    self._send_now(conn, pairs, done)
                    return
            await own.idle()
            await own.writable()
            for chunk in parts:
                await self.produce_own(chunk)
        done(None)

    def _send_now(
        self, conn: Connection, pairs: list[Pair], done: Callable[[StorageError | None], None]
    ) -> None:
        own = self.ownership
        producer = Producer(own.producer_id, own.producer_epoch, own.sequence)
        batch = self._encode(pairs, producer)
        own.sequence = (own.sequence + len(pairs)) & SEQUENCE_MASK
        own.in_flight += 1

        def answered(part: Any, failure: StorageError | None) -> None:
            self._answered(part, failure, producer, pairs, batch, done)

        self.combiner.enqueue(conn, self.partition, batch, answered)

    def _answered(
        self,
        part: Any,
        failure: StorageError | None,
        producer: Producer,
        pairs: list[Pair],
        batch: bytes,
        done: Callable[[StorageError | None], None],
    ) -> None:
        """The first answer to a batch of :meth:`send`, where the combiner handles the response (a
        coroutine or a future here would cost the commit behind it loop iterations)."""
        own = self.ownership
        count = len(pairs)
        error: int | None = None
        if failure is not None:
            detail = str(failure) or type(failure).__name__
        else:
            error = int(part.error_code)
            if error == ErrorCode.NONE:
                own.finished()
                done(self._acknowledged_or_lost(int(part.base_offset), count))
                return
            detail = f"error {error} {getattr(part, 'error_message', None) or ''}".rstrip()
        if error in FENCING_ERRORS:
            own.finished()
            done(own.fence(f"Produce error {error}"))
            return
        if own.in_flight > 1 or own.retrying or not own.owned:
            own.owned = False
            own.finished()
            done(
                StorageError(
                    f"append to {self.topic}[{self.partition}] failed, not retried (other appends in "
                    f"flight, or the shard no longer owned): {detail}"
                )
            )
            return
        own.retrying = True
        task = asyncio.get_running_loop().create_task(
            self._resend(pairs, producer, batch, (error, detail), done)
        )
        self._resending.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._resending.discard)

    async def _resend(
        self,
        pairs: list[Pair],
        producer: Producer,
        batch: bytes,
        failed: tuple[int | None, str],
        done: Callable[[StorageError | None], None],
    ) -> None:
        """The only batch in flight failed an attempt: resend it as :meth:`append` does."""
        own = self.ownership
        try:
            base_offset = await self._produce(pairs, producer, "append", batch=batch, failed=failed)
        except StorageError as exc:
            failure = self._own_failure(exc)
            own.retrying = False
            own.finished()
            done(failure)
            return
        except BaseException:
            own.owned = own.retrying = False
            own.finished()
            done(StorageError(f"append to {self.topic}[{self.partition}] stopped"))
            raise
        own.retrying = False
        own.finished()
        done(self._acknowledged_or_lost(base_offset, len(pairs)))

    def _acknowledged_or_lost(self, base_offset: int, count: int) -> StorageError | None:
        try:
            self._acknowledged(base_offset, count)
        except StorageError as exc:
            return exc
        return None

    def _own_failure(self, exc: StorageError) -> StorageError:
        """A batch of the shard's own failed: the outcome is unknown, so the shard is not owned
        (it re-fences before anything else); a fencing error fences it."""
        own = self.ownership
        own.owned = False
        if isinstance(exc, ProduceRefused) and exc.error_code in FENCING_ERRORS:
            return own.fence(f"Produce error {exc.error_code}")
        return exc

    async def produce_own(self, pairs: list[Pair]) -> int:
        """One batch of the shard's own at the current producer id, epoch and sequence; returns its
        base offset. Lock held. Any failure leaves the shard not owned: the outcome is unknown, so
        it re-fences before anything else."""
        own = self.ownership
        try:
            base_offset = await self._produce(
                pairs, Producer(own.producer_id, own.producer_epoch, own.sequence), "append"
            )
        except StorageError as exc:
            failure = self._own_failure(exc)
            if failure is exc:
                raise
            raise failure from None
        own.sequence = (own.sequence + len(pairs)) & SEQUENCE_MASK
        self._acknowledged(base_offset, len(pairs))
        return base_offset

    async def append_transactional(
        self, transactional_id: str, producer_id: int, producer_epoch: int, pairs: list[Pair]
    ) -> None:
        """One transactional batch of a client's producer, at that producer's next sequence on this
        partition (a new epoch starts over at 0)."""
        async with self.ownership.lock:
            await self.ownership.idle()  # the log holds the shard's writes in the order it made them
            await self.ownership.writable()
            epoch, sequence = self.client_sequences.get(producer_id, (producer_epoch, 0))
            if epoch != producer_epoch:
                sequence = 0
            producer = Producer(producer_id, producer_epoch, sequence, transactional_id)
            try:
                base_offset = await self._produce(pairs, producer, "transactional append")
            except ProduceRefused as exc:
                if exc.error_code in CLIENT_TRANSACTION_ERRORS:
                    raise TransactionalAppendError(
                        exc.error_code,
                        f"transactional append for {transactional_id!r} (producer {producer_id}, epoch "
                        f"{producer_epoch}) to {self.topic}[{self.partition}]: error {exc.error_code}",
                    ) from None
                # A sequence kcoord got wrong, or worse: the shard reloads and relearns it from the log.
                self.client_sequences.pop(producer_id, None)
                raise
            self.client_sequences[producer_id] = (producer_epoch, (sequence + len(pairs)) & SEQUENCE_MASK)
            self._acknowledged(base_offset, len(pairs))

    @staticmethod
    def _encode(pairs: list[Pair], producer: Producer) -> bytes:
        return encode_batch(
            pairs,
            timestamp=int(time.time() * 1000),
            producer_id=producer.producer_id,
            producer_epoch=producer.producer_epoch,
            base_sequence=producer.base_sequence,
            transactional=producer.transactional_id is not None,
        )

    async def _produce(
        self,
        pairs: list[Pair],
        producer: Producer,
        what: str,
        *,
        batch: bytes | None = None,
        failed: tuple[int | None, str] | None = None,
    ) -> int:
        """Produce one batch until the cluster acknowledges it; returns its base offset (-1 when
        a deduplicated retry does not say). Raises :class:`ProduceRefused` for an error retrying
        cannot fix, StorageError when ``append_timeout`` ran out. Lock held, or (``failed``: the
        cluster's error code or None, and what it said) the batch's first attempt, made by
        :meth:`send`, failed and no other batch of the shard is in flight."""
        transactional_id = producer.transactional_id
        if batch is None:
            batch = self._encode(pairs, producer)
        retry = Retry(
            self.append_timeout,
            refresh_leaders=lambda: self.cluster.refresh(self.topic),
            topic_gone=self.topic_gone,
        )
        where = f"{self.topic}[{self.partition}]"
        while True:
            error: int = ErrorCode.NONE
            if failed is not None:  # the first attempt, made by send(), failed so
                first_error, detail = failed
                failed = None
                if first_error is not None:
                    error = first_error
                verdict = await retry.failed(first_error, detail)
            else:
                try:
                    conn = await self.cluster.leader(self.partition)
                    part = await self._send(conn, batch, transactional_id)
                except (StorageError, IndexError) as exc:  # IndexError: an answer without our partition
                    verdict = await retry.failed(None, str(exc) or type(exc).__name__)
                else:
                    error = part.error_code
                    if error == ErrorCode.NONE or (
                        error == ErrorCode.DUPLICATE_SEQUENCE_NUMBER and retry.attempts > 0
                    ):
                        return int(part.base_offset)
                    detail = f"error {error} {getattr(part, 'error_message', None) or ''}".rstrip()
                    verdict = await retry.failed(error, detail)
            if verdict is Verdict.TOPIC_GONE:
                raise self.ownership.lose(
                    f"a write was refused with UNKNOWN_TOPIC_OR_PARTITION: {retry.gone}"
                )
            if verdict is Verdict.GIVE_UP:
                raise ProduceRefused(error, f"{what} to {where} rejected: {retry.last}")
            if verdict is Verdict.EXPIRED:
                raise StorageError(f"{what} to {where} failed: {retry.last}")

    async def _send(self, conn: Connection, batch: bytes, transactional_id: str | None) -> Any:
        """The partition's answer to ``batch``: combined with other shards' batches for the shard's
        own, in a request of its own for a client's transaction."""
        if transactional_id is None:
            return await self.combiner.produce(conn, self.partition, batch)
        P = sm.ProduceRequest
        req = P(
            transactional_id=transactional_id, acks=-1, timeout_ms=int(self.append_timeout * 1000),
            topic_data=[P.TopicProduceData(name=self.topic, partition_data=[P.PartitionProduceData(index=self.partition, records=batch)])],
        )  # fmt: skip
        resp = await request(conn, req, self.append_timeout)
        return resp.responses[0].partition_responses[0]

    def _acknowledged(self, base_offset: int, count: int) -> None:
        """Account for an acknowledged batch; one that landed below what this process already
        loaded and wrote went into a log that lost them, so it is not acknowledged to anyone."""
        if base_offset < 0:
            return  # a retry the broker deduplicated without saying where: the tail check sees it
        if base_offset < self.position.log_end:
            raise self.ownership.lose(
                f"a write was acknowledged at offset {base_offset}, below the {self.position.log_end} this process "
                "loaded and wrote (the topic was deleted, re-created or truncated upstream)"
            )
        self.position.written(base_offset, count)
