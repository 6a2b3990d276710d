"""The ownership life-cycle of one shard's partition: take it, keep it, learn it was lost.

Each shard owner uses the stable transactional id ``kcoord:<topic>:<shard>``. Taking ownership
(:meth:`Ownership.take`) = InitProducerId for that id (the transaction coordinator bumps the epoch
and returns the same producer id), then an acknowledged *fence batch* at the new epoch: one
tombstone with a kcoord-private record type (:data:`FENCE_RECORD_TYPE`, skipped by
:func:`kcoord.protocol.records.decode_record` and by Kafka's own loader as an unknown type). After
that batch the partition leader knows the new epoch, so Apache Kafka rejects the previous owner's
produces with INVALID_PRODUCER_EPOCH (or PRODUCER_FENCED); tansu already rejects them with
PRODUCER_FENCED right after InitProducerId.

Invariant: a shard reads (loads) only after its fence batch was acknowledged, so every write of a
previous owner is either before the fence (and therefore read) or rejected. A fenced shard stays
fenced: append and read raise :class:`FencedError` until the process restarts (or, in cluster
mode, until :meth:`Ownership.reacquire`) — two kcoord processes never take a shard back and forth.

Finding out without a write (:meth:`Ownership.check_tail`, every ``ownership.check.interval.ms``
through :class:`OwnershipWatch`): each serving shard reads its partition's tail past what it
loaded and wrote (``checked``), all shards together in one Fetch per leader (:func:`tail_checks`).
Another owner's fence, or a write with our producer id at an epoch we never used, fences the
shard; a high watermark below ``checked`` or a log start past what was loaded means the log is lost
(:class:`LogLostError`). Either way :attr:`Ownership.on_lost` tells
the runtime at once.

Ownership is re-taken every ``ownership.refresh.interval.ms`` (:meth:`Ownership.refresh`) so the
transactional id never reaches Kafka's ``transactional.id.expiration.ms`` (7 days by default; an
expired id would get a *new* producer id and leave a zombie's old id unfenced). The refresh runs
the tail check first and never re-takes a fenced shard; another owner's fence found after its
bump means our state misses that owner's writes: the log is lost and the shard reloads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.primitives import INT16
from kcoord.protocol.record_batch import RecordBatch, decode_batches

from .base import FencedError, LogLostError, LostCallback, StorageError
from .kafka_client import KafkaCluster, request
from .partition import PartitionReads
from .position import LogPosition
from .retry import Retry, Verdict

log = logging.getLogger("kcoord.storage")

FENCE_RECORD_TYPE = 0x4B43  # "KC": a record type Kafka's __consumer_offsets does not use
FENCE_KEY = INT16.pack(FENCE_RECORD_TYPE) + b"kcoord-shard-owner"

FENCING_ERRORS = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED})

Pair = tuple[bytes, bytes | None]


def transactional_id_prefix(topic: str) -> str:
    """What every shard's transactional id starts with (the relay refuses it to clients)."""
    return f"kcoord:{topic}:"


def transactional_id(topic: str, shard: int) -> str:
    return f"{transactional_id_prefix(topic)}{shard}"


class Ownership:
    """Whether this process may write one shard's partition, and with which producer id and epoch
    (module docstring). ``write_fence`` produces one batch of the shard's own at the current
    producer id, epoch and sequence and returns its base offset (the writer's)."""

    def __init__(
        self,
        cluster: KafkaCluster,
        topic: str,
        partition: int,
        position: LogPosition,
        reads: PartitionReads,
        *,
        init_timeout: float,
        request_timeout: float,
    ) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partition = partition
        self.position = position
        self.reads = reads
        self.init_timeout = init_timeout
        self.request_timeout = request_timeout
        self.transactional_id = transactional_id(topic, partition)
        self.producer_id = -1
        self.producer_epoch = -1
        self.sequence = 0  # the next batch's base sequence
        self.owned = False  # fence batch acknowledged at the current epoch
        self.fenced: FencedError | None = None
        self.lost: LogLostError | None = None  # set until the shard re-checks the topic and reloads
        self.on_lost: LostCallback | None = None
        # (producer id, epoch) pairs this process wrote with: a batch with any other pair that is a
        # fence, or that uses our producer id, is another owner's.
        self.own_producers: set[tuple[int, int]] = set()
        self.lock = asyncio.Lock()  # appends, fencing and ownership changes never interleave
        # Batches of the shard's own sent and not yet answered (ShardWriter.send pipelines them
        # outside the lock); taking ownership waits until there are none, so a batch at the old
        # epoch never meets the new one (its epoch error would look like another owner's fence).
        self.in_flight = 0
        self.retrying = False  # the only batch in flight is being resent: none is sent behind it
        self._idle_waiters: list[asyncio.Future[None]] = []
        self.write_fence: Callable[[list[Pair]], Awaitable[int]] | None = None

    @property
    def serving(self) -> bool:
        """Owned, loaded and not known to be lost: what the periodic checks watch."""
        return self.owned and self.fenced is None and self.lost is None and self.position.checked >= 0

    # -- taking ownership -------------------------------------------------------------------------------
    async def writable(self) -> None:
        """Raise if this shard may not write its log; take ownership first if needed. Lock held."""
        if self.fenced is not None:
            raise self.fenced
        if self.lost is not None:
            raise self.lost
        if not self.owned:
            await self.take()

    async def ready_to_load(self, recheck_topic: Callable[[], Awaitable[None]]) -> None:
        """Before a load: raise if fenced; after a lost log, re-check (re-create) the topic and
        start over on what it holds now; take ownership unless this process holds it."""
        async with self.lock:
            # Batches still in flight (pipelined) land before the load reads, or fail and leave
            # the shard not owned (re-fenced below): none can land after it.
            await self.idle()
            if self.fenced is not None:
                raise self.fenced
            if self.lost is not None:
                await recheck_topic()
                self.lost = None
                self.position.forget()
            if not self.owned:
                self.position.checked = -1  # no checks until the load says where the log ends
                await self.take()

    async def idle(self) -> None:
        """Wait until no batch of the shard's own is in flight."""
        while self.in_flight:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._idle_waiters.append(waiter)
            await waiter

    def finished(self) -> None:
        """A batch in flight was answered (or failed for good)."""
        self.in_flight -= 1
        if not self.in_flight:
            waiters, self._idle_waiters = self._idle_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def take(self) -> None:
        """InitProducerId (epoch bump) + acknowledged fence batch. Caller holds the lock."""
        assert self.write_fence is not None, "the shard log wires the writer in"
        await self.idle()
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
        self.own_producers.add((pid, epoch))
        await self.write_fence([(FENCE_KEY, None)])
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
        # Only the transaction coordinator's own troubles are retried: each attempt finds it anew.
        retry = Retry(self.init_timeout, backoff=0.05, leadership=frozenset())
        req = sm.InitProducerIdRequest(transactional_id=self.transactional_id, transaction_timeout_ms=60_000)
        while True:
            try:
                conn = await self.cluster.transaction_coordinator(self.transactional_id)
                resp = await request(conn, req, self.request_timeout)
            except StorageError as exc:
                verdict = await retry.failed(None, str(exc))
            else:
                if resp.error_code == ErrorCode.NONE:
                    return int(resp.producer_id), int(resp.producer_epoch)
                if resp.error_code in FENCING_ERRORS:
                    raise self.fence(f"InitProducerId error {resp.error_code}")
                verdict = await retry.failed(resp.error_code, f"error {resp.error_code}")
                if verdict is Verdict.GIVE_UP:
                    raise StorageError(
                        f"InitProducerId for {self.transactional_id!r}: error {resp.error_code}"
                    )
            if verdict is not Verdict.RETRY:
                raise StorageError(
                    f"InitProducerId for {self.transactional_id!r} failed until the deadline: {retry.last}"
                )

    # -- losing it ----------------------------------------------------------------------------------------
    def fence(self, why: str) -> FencedError:
        """Another kcoord took the shard: this process never writes it again."""
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

    # -- cluster mode: the shard moves between kcoord nodes -----------------------------------------------
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
        self.position.forget()

    # -- keeping it -----------------------------------------------------------------------------------------
    async def refresh(self) -> None:
        """Re-take ownership (epoch bump) of a shard this process still serves, so its transactional
        id never expires. Never of a shard another kcoord fenced in the meantime: the tail is read
        first, and a fence found there stops the shard instead. Another owner's fence found *after*
        the bump (it took the shard in between) means our state misses its writes: the shard reloads.
        """
        async with self.lock:
            if not self.serving:
                return
            await self.check_tail()
            if not self.serving:
                return
            await self.take()
            previous_epochs = self.own_producers - {(self.producer_id, self.producer_epoch)}
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
        start = self.position.checked
        if start < 0:
            return None
        try:
            # min_bytes=0: answered at once at the tail, not parked for the max wait on the
            # connection the shard's appends use (tail_checks below says why).
            records, high_watermark, log_start = await self.reads.fetch_once(start, min_bytes=0)
        except StorageError as exc:
            log.debug("shard %d: tail check at %d failed: %s", self.partition, start, exc)
            return None
        return self.classify_tail(start, records, high_watermark, log_start, report)

    def classify_tail(
        self, start: int, records: bytes | None, high_watermark: int, log_start: int, report: bool = True
    ) -> str | None:
        """:meth:`check_tail` once the tail past ``start`` was read (``records`` None: ``start`` is
        below the log start)."""
        position = self.position
        if position.checked != start or self.fenced is not None or self.lost is not None:
            return None  # the state moved while we waited (an append, a reload): check again next time
        if records is None or (0 <= high_watermark < start):
            if report:
                self.lose(
                    f"its high watermark is {high_watermark} but this process loaded and wrote up to {start} "
                    "(the topic was deleted, re-created or truncated)"
                )
            return "log truncated"
        if position.log_start >= 0 and log_start > position.log_start:
            if report:
                self.lose(
                    f"its log start moved from {position.log_start} to {log_start}, past records this process loaded"
                )
            return "log start moved"
        for batch in decode_batches(records):
            if batch.next_offset <= position.checked:
                continue
            foreign = self._foreign_owner(batch)
            if foreign is not None:
                if report:
                    newer = (
                        batch.producer_id != self.producer_id or batch.producer_epoch > self.producer_epoch
                    )
                    if newer:
                        self._notify(self.fence(foreign))
                    else:
                        self.lose(foreign)
                return foreign
            position.checked = batch.next_offset
        return None

    def _foreign_owner(self, batch: RecordBatch) -> str | None:
        """Whether ``batch`` was written by another owner of this shard: a fence or a write with our
        transactional id's producer id, at a (producer id, epoch) this process never used."""
        pair = (batch.producer_id, batch.producer_epoch)
        if pair in self.own_producers or batch.is_control:
            return None
        if batch.producer_id == self.producer_id or any(r[2] == FENCE_KEY for r in batch.records):
            return f"a write by producer id {pair[0]} epoch {pair[1]} at offset {batch.base_offset}"
        return None


class OwnershipWatch:
    """The periodic ownership work of every shard of one topic: the tail check every
    ``check_interval`` (the topic still there with the same id, each serving shard's tail only its
    own writes) and the ownership refresh every ``refresh_interval``."""

    def __init__(
        self,
        topic: str,
        shards: Callable[[], Iterable[Ownership]],
        topic_gone: Callable[[], Awaitable[str]],
        *,
        check_interval: float,
        refresh_interval: float,
    ) -> None:
        self.topic = topic
        self.shards = shards
        self.topic_gone = topic_gone
        self.check_interval = check_interval
        self.refresh_interval = refresh_interval
        self._tasks: list[asyncio.Task[None]] = []
        self._last_check_warning = 0.0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.refresh_interval > 0:
            self._tasks.append(loop.create_task(self._refresh_loop()))
        if self.check_interval > 0:
            self._tasks.append(loop.create_task(self._check_loop()))

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_interval)
            for shard in list(self.shards()):
                try:
                    await shard.refresh()
                except StorageError as exc:  # the next append/read surfaces it; keep the others going
                    log.warning("shard %d: periodic ownership refresh failed: %s", shard.partition, exc)

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

    async def check_once(self) -> None:
        owned = [shard for shard in self.shards() if shard.serving]
        if not owned:
            return
        why = await self.topic_gone()
        if why:
            for shard in owned:
                shard.lose(why)
            return
        await tail_checks(owned)


async def tail_checks(shards: list[Ownership]) -> None:
    """Every shard's :meth:`Ownership.check_tail` at once, in one Fetch per partition leader.

    Why one request: a broker answers one connection's requests in order, and the shards' appends
    share the leader connection with these reads. One Fetch per shard, 50 of them every second,
    held whatever was sent behind them ~90-100 ms on Kafka 4.0 (each parked ~2 ms at the log's end
    with min_bytes=1) and still 16-37 ms with min_bytes=0 (bench/RESULTS.md, 2026-11-28); one
    request with every partition is answered in about the time of one.
    """
    starts = {shard.partition: shard.position.checked for shard in shards if shard.position.checked >= 0}
    if not starts:
        return
    try:
        answers = await shards[0].reads.fetch_tails(starts)
    except StorageError as exc:  # no leader map, the cluster unreachable: the next check tries again
        log.debug("internal topic %s: tail checks failed: %s", shards[0].topic, exc)
        return
    except Exception:  # a bug: say so, and keep the periodic check alive for the next round
        log.exception("internal topic %s: tail checks failed", shards[0].topic)
        return
    for shard in shards:
        start = starts.get(shard.partition)
        answer = answers.get(shard.partition)
        if start is None or answer is None:
            continue  # not loaded yet, or a transient failure: the next check tries again
        try:
            shard.classify_tail(start, *answer)
        except Exception:  # one shard's bug must not cost the others their check
            log.exception("shard %d: tail check failed", shard.partition)
