"""The asyncio runtime around one shard's pure group state.

Invariants:
- Single writer: ``GroupCoordinatorShard.handle``/``poll`` run synchronously on the event loop, so
  no two handlers of a shard ever interleave; there is no await inside a handler.
- Write-then-reply: the records a handler returns are replayed into the state at once and
  appended to the shard's log in order; every reply produced at or after that point is held
  until the log acknowledged every record written before it (a "barrier" on the shard's write
  sequence). A reply never reveals state the log does not hold.
- Pipelined group commit: up to ``max_in_flight`` appends are in flight at once (Kafka's own
  idempotent producer keeps up to 5), so a commit does not wait for the round trip of the append
  before it; the records of one loop iteration go out together, and with every slot taken new
  records accumulate and go out together in the next append. The log writes the appends in the
  order they were sent, each only if every earlier one was (``ShardLog.send``: the broker checks
  the shard producer's sequences), and acknowledgements are taken in that order, so a reply is
  released only once every record written before it is in the log.
- A failed append fails every request waiting on the shard with NOT_COORDINATOR (clients
  rediscover and retry), the later appends in flight included, whatever their outcome (a commit
  the log holds but answered with an error, as after a timeout), and reloads the shard from its
  log, so it never serves state the log does not hold. While a shard loads, its requests get
  COORDINATOR_LOAD_IN_PROGRESS.
- The log may also find out between appends that the shard lost it (``ShardLog.on_lost``):
  fenced by another kcoord — every request gets NOT_COORDINATOR from then on, for good (in a
  cluster, ``on_fenced`` tells the router, which has it released or reloaded) — or the
  log no longer holds what the shard loaded (topic deleted, re-created, truncated) — the shard
  stops serving and reloads once the log is back.
- Transactions (docs/transactions.md): a handler's transactional writes (``Result.transactional``)
  are replayed at once like records and appended in the same queue, in replay order, each as a
  batch of the client's producer, so the log holds plain and transactional writes in the order the
  state saw them: a transactional batch goes out alone, once every append before it is
  acknowledged, and nothing goes out behind it until it is. The transaction coordinator writes its
  markers into the shard's partition; while a transaction is open there the shard follows the log (``follow.interval``) and replays each
  marker it finds, and :meth:`ShardRuntime.catch_up` replays every marker already written before a
  new transaction opens or commits, so a marker is never replayed after a later transaction's writes
  of its producer. A transactional batch the cluster refuses for the producer's sake answers its
  request with that error; the shard then reloads, since the state replayed what the log lacks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from kcoord.coordinator.core.clock import Clock
from kcoord.coordinator.core.events import GroupEvent
from kcoord.coordinator.core.responses import error_response, loading_response
from kcoord.coordinator.core.result import RequestContext, Result, TransactionalWrite
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.records import EndTxnMarker, Record, TransactionalRecords
from kcoord.storage.base import FencedError, ShardLog, StorageError, TransactionalAppendError

log = logging.getLogger("kcoord.shard")
txn_log = logging.getLogger("kcoord.txn")  # DEBUG: each transactional write and marker, for diagnosis

# Called with a request's response once it may be sent. It must not raise: a reply callback runs
# inside the shard's write path, where one failing caller must not cost the others their replies.
Reply = Callable[[Message], None]


class ShardState(Protocol):
    """The pure state the runtime drives (``GroupCoordinatorShard``). ``handle`` and ``poll`` never
    raise: a bug costs the request UNKNOWN_SERVER_ERROR (``responses.unexpected_failure``) or the
    timer, never the shard, so the runtime does not catch around them."""

    def handle(self, api_key: int, ctx: RequestContext, request: Message) -> Result: ...
    def replay(self, record: Record, producer_id: int = ..., producer_epoch: int = ...) -> None: ...
    def replay_begin_transaction(self, producer_id: int, producer_epoch: int) -> None: ...
    def replay_end_transaction_marker(
        self, producer_id: int, producer_epoch: int, committed: bool
    ) -> None: ...
    def poll(self, now_ms: int) -> Result: ...
    def next_deadline(self) -> int | None: ...
    def on_loaded(self) -> Result: ...
    def has_open_transactions(self) -> bool: ...
    def transaction_ending(self, producer_id: int) -> bool: ...
    def awaits_marker(self, producer_id: int) -> bool: ...


def replay_transaction_entry(state: ShardState, entry: TransactionalRecords | EndTxnMarker) -> int:
    """Replay what a log holds of a transaction; returns the records it held (a marker is one)."""
    if isinstance(entry, EndTxnMarker):
        state.replay_end_transaction_marker(entry.producer_id, entry.producer_epoch, entry.committed)
        return 1
    if not entry.records:  # none of the shard's records (AddOffsetsToTxn's batch): it opens the transaction
        state.replay_begin_transaction(entry.producer_id, entry.producer_epoch)
    for record in entry.records:
        state.replay(record, entry.producer_id, entry.producer_epoch)
    return len(entry.records)


class ShardObserver(Protocol):
    """Hooks for metrics; every method is optional in effect (a no-op default is provided).

    ``group_events(shard, events)`` may also be defined: it receives each Result's
    :mod:`kcoord.coordinator.core.events` as the handler returns (observability.ShardEventObserver).
    """

    def append_done(self, shard: int, records: int, seconds: float) -> None: ...
    def shard_loaded(self, shard: int, records: int, seconds: float, records_read: int) -> None: ...
    def shard_lost(self, shard: int, fenced: bool, reason: str) -> None: ...


class _NoObserver:
    def append_done(self, shard: int, records: int, seconds: float) -> None:
        pass

    def shard_loaded(self, shard: int, records: int, seconds: float, records_read: int) -> None:
        pass

    def shard_lost(self, shard: int, fenced: bool, reason: str) -> None:
        pass


class ShardRuntime:
    def __init__(
        self,
        index: int,
        make_state: Callable[[], ShardState],
        shard_log: ShardLog,
        clock: Clock,
        observer: ShardObserver | None = None,
        follow_interval: float = 0.05,
        marker_wait: float = 3.0,
        max_in_flight: int = 1,
    ) -> None:
        self.index = index
        self.max_in_flight = max_in_flight  # appends of plain records in flight at once (module docstring)
        self._make_state = make_state
        self.state: ShardState = make_state()
        self.log = shard_log
        self.clock = clock
        self.observer: ShardObserver = observer or _NoObserver()
        self._report_events: Callable[[int, list[GroupEvent]], None] | None = getattr(
            self.observer, "group_events", None
        )
        self.loaded = False
        self.fenced = False  # another kcoord owns this shard now: answer NOT_COORDINATOR for good
        # Cluster mode: told when the log says another node took the shard (the router then has the
        # cluster release it or give it back, to be reloaded).
        self.on_fenced: Callable[[int], None] | None = None
        # Called after the replies an append released were handed out (the server writes them to
        # their clients then, not a loop iteration later: under relayed traffic an iteration is long).
        self.after_replies: Callable[[], None] | None = None
        self.lost: str | None = None  # why the shard's log was lost, until it is loaded again
        self._reloading = False
        self._closing = False
        shard_log.on_lost = self._log_lost
        self._waiting: dict[RequestContext, tuple[Reply, int, Message]] = {}
        # Writes replayed but not yet handed to the log, in replay order: runs of plain records, and
        # transactional batches (each its own append).
        self._pending: list[list[Record] | TransactionalWrite] = []
        self._written_seq = (
            0  # writes handed to the log so far (replayed into the state): a record or a batch each
        )
        self._acked_seq = 0  # writes the log acknowledged
        self._sent_seq = 0  # writes handed to the log
        # Appends in flight, oldest first: [write sequence at its end, acknowledged, records, started].
        self._in_flight: deque[list[Any]] = deque()
        self._wake: asyncio.Future[None] | None = None  # the flush task waits on it for room or records
        self.follow_interval = follow_interval
        self.marker_wait = marker_wait  # how long AddOffsetsToTxn waits for the previous transaction's marker
        self._following = False  # a task follows the log for transaction markers
        self._follow_lock = asyncio.Lock()
        self._deferred: deque[tuple[int, RequestContext, Message]] = deque()
        self._flushing = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline: int | None = None
        self._generation = 0  # bumps on every reload; stale flushes notice and stop

    # -- loading ------------------------------------------------------------------------------------
    async def load(self) -> None:
        """Rebuild the state by replaying the shard's log from the start."""
        self.loaded = False
        started = time.perf_counter()
        state = self._make_state()
        count = 0
        async for entry in self.log.read():
            if isinstance(entry, list):
                for record in entry:
                    state.replay(record)
                count += len(entry)
            else:
                count += replay_transaction_entry(state, entry)
        self.state = state
        self._pending = []
        self._in_flight.clear()
        self._written_seq = self._acked_seq = self._sent_seq = 0
        self.loaded = True
        self.lost = None
        records_read = self.log.records_read
        self.observer.shard_loaded(self.index, count, time.perf_counter() - started, records_read)
        self._apply(state.on_loaded())
        self._follow_markers()

    async def first_load(self) -> None:
        """The load at start: a failure does not stop the process (its other shards serve); this
        shard retries in the background with back-off, and answers COORDINATOR_LOAD_IN_PROGRESS
        meanwhile, as Kafka's coordinator does for a partition it cannot load yet."""
        try:
            await self.load()
        except FencedError as exc:
            self._log_lost(exc)
        except Exception as exc:
            log.error("shard %d: load failed: %s; retrying in the background", self.index, exc)
            asyncio.get_running_loop().create_task(self._fail_and_reload())

    # -- requests -----------------------------------------------------------------------------------
    def submit_with(self, api_key: int, ctx: RequestContext, request: Message, reply: Reply) -> None:
        """Hand a request to the state; ``reply(response)`` is called once it may be sent.

        Most replies need no log acknowledgement (heartbeats, most syncs, reads of acknowledged
        state) and are delivered before this returns, with no future and no loop hop; the rest
        are delivered when the log acknowledged every record written before them.
        """
        if not self.loaded:
            if self.fenced:
                reply(error_response(api_key, ctx.api_version, request, ErrorCode.NOT_COORDINATOR))
            else:
                reply(loading_response(api_key, ctx.api_version, request))
            return
        self._waiting[ctx] = (reply, api_key, request)
        self._apply(self.state.handle(api_key, ctx, request))

    def submit(self, api_key: int, ctx: RequestContext, request: Message) -> asyncio.Future[Message]:
        """:meth:`submit_with` for callers that await: the future resolves with the response."""
        fut: asyncio.Future[Message] = asyncio.get_running_loop().create_future()

        def settle(response: Message) -> None:
            if not fut.done():
                fut.set_result(response)

        self.submit_with(api_key, ctx, request, settle)
        return fut

    def _apply(self, result: Result) -> None:
        if result.events and self._report_events is not None:
            try:
                self._report_events(self.index, result.events)
            except Exception:  # reporting must never cost the shard
                log.exception("shard %d: reporting group events failed", self.index)
        if result.records or result.transactional:
            pending = self._pending
            if result.records:
                for record in result.records:
                    self.state.replay(record)
                if pending and type(pending[-1]) is list:
                    pending[-1].extend(result.records)
                else:
                    pending.append(list(result.records))
                self._written_seq += len(result.records)
            if result.transactional:
                for write in result.transactional:
                    replay_transaction_entry(self.state, write.batch)
                    pending.append(write)
                self._written_seq += len(result.transactional)
                self._follow_markers()
            if not self._flushing:
                self._flushing = True
                asyncio.get_running_loop().create_task(self._flush(self._generation))
            elif len(self._in_flight) < self.max_in_flight:
                self._wake_flush()
        barrier = self._written_seq
        for ctx, response in result.replies:
            if barrier <= self._acked_seq:
                self._resolve(ctx, response)
            else:
                self._deferred.append((barrier, ctx, response))
        self._reschedule_timer()

    def _resolve(self, ctx: RequestContext, response: Message) -> None:
        entry = self._waiting.pop(ctx, None)
        if entry is not None:
            entry[0](response)

    async def _flush(self, generation: int) -> None:
        try:
            # No extra loop iteration before the first append: this task starts in the iteration
            # after the one that wrote the records, so every request read in that one has joined
            # the batch already; while every slot is taken the next batch gathers anyway.
            while generation == self._generation:
                pending = self._pending
                if not pending:
                    if not self._in_flight:
                        return
                elif type(pending[0]) is list:
                    if len(self._in_flight) < self.max_in_flight:
                        await self._send(generation, pending.pop(0))  # type: ignore[arg-type]
                        continue
                elif not self._in_flight:  # a transactional write: alone, behind every earlier one
                    write = pending.pop(0)
                    assert isinstance(write, TransactionalWrite)
                    if not await self._append_transactional(generation, write):
                        return
                    continue
                wake = self._wake = asyncio.get_running_loop().create_future()
                await wake
        finally:
            if generation == self._generation:
                self._flushing = False

    def _wake_flush(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def _send(self, generation: int, records: list[Record]) -> None:
        """Hand one append to the log; its acknowledgement comes to :meth:`_append_done`."""
        entry: list[Any] = [self._sent_seq + len(records), False, len(records), time.perf_counter()]
        self._sent_seq = entry[0]
        self._in_flight.append(entry)
        try:
            await self.log.send(records, lambda error: self._append_done(generation, entry, error))
        except Exception as exc:
            self._append_failed(generation, exc)

    def _append_done(self, generation: int, entry: list[Any], error: StorageError | None) -> None:
        """An append's answer (the log's callback): acknowledgements are taken in the order the
        appends were sent; a failure fails the shard (module docstring)."""
        if generation != self._generation:
            return
        if error is not None:
            self._append_failed(generation, error)
            return
        entry[1] = True
        self.observer.append_done(self.index, entry[2], time.perf_counter() - entry[3])
        in_flight = self._in_flight
        while in_flight and in_flight[0][1]:
            self._acked_seq = in_flight.popleft()[0]
        self._release()
        if self._pending:
            self._wake_flush()

    def _append_failed(self, generation: int, exc: Exception) -> None:
        if generation != self._generation:
            return
        if isinstance(exc, FencedError):
            self._log_lost(exc)
            return
        log.error("shard %d: append failed: %s; reloading", self.index, exc)
        self._fail_waiting()  # now: no later append's acknowledgement releases anything
        asyncio.get_running_loop().create_task(self._fail_and_reload())

    def _release(self) -> None:
        """Hand out the replies every record written before them is acknowledged for."""
        released = False
        deferred = self._deferred
        while deferred and deferred[0][0] <= self._acked_seq:
            _, ctx, response = deferred.popleft()
            self._resolve(ctx, response)
            released = True
        if released and self.after_replies is not None:
            self.after_replies()

    async def _append_transactional(self, generation: int, write: TransactionalWrite) -> bool:
        """Write one transactional batch (nothing else in flight); False if the shard failed."""
        started = time.perf_counter()
        batch = write.batch
        self._sent_seq += 1
        try:
            await self.log.append_transactional(
                write.transactional_id, batch.producer_id, batch.producer_epoch, batch.records
            )
            if txn_log.isEnabledFor(logging.DEBUG):
                txn_log.debug(
                    "shard %d: transactional batch of producer %d epoch %d written (%d offsets; log end %s)",
                    self.index,
                    batch.producer_id,
                    batch.producer_epoch,
                    len(batch.records),
                    self.log.log_end,
                )
        except FencedError as exc:
            if generation == self._generation:
                self._log_lost(exc)
            return False
        except TransactionalAppendError as exc:
            if generation == self._generation:
                self._refuse_transactional(write, exc)
                await self._fail_and_reload()
            return False
        except Exception as exc:
            log.error("shard %d: append failed: %s; reloading", self.index, exc)
            if generation == self._generation:
                await self._fail_and_reload()
            return False
        if generation != self._generation:
            return False
        self.observer.append_done(self.index, 1, time.perf_counter() - started)
        self._acked_seq = self._sent_seq
        self._release()
        return True

    def _refuse_transactional(self, write: TransactionalWrite, exc: TransactionalAppendError) -> None:
        """The cluster refused a client's transactional batch for the producer's sake: its request
        gets that error (as Kafka's coordinator answers a failed transactional write)."""
        log.info(
            "shard %d: transactional write of %r (producer %d, epoch %d) refused: %s",
            self.index,
            write.transactional_id,
            write.batch.producer_id,
            write.batch.producer_epoch,
            exc,
        )
        entry = self._waiting.pop(write.ctx, None)
        if entry is not None:
            reply, api_key, request = entry
            reply(error_response(api_key, write.ctx.api_version, request, ErrorCode(exc.error_code)))

    # -- transaction markers ------------------------------------------------------------------------
    def _follow_markers(self) -> None:
        """Follow the log for markers while a transaction is open in the shard (module docstring)."""
        if self._following or not self.loaded or not self.state.has_open_transactions():
            return
        self._following = True
        asyncio.get_running_loop().create_task(self._follow_loop(self._generation))

    async def _follow_loop(self, generation: int) -> None:
        try:
            while generation == self._generation and self.loaded and self.state.has_open_transactions():
                await asyncio.sleep(self.follow_interval)
                try:
                    await self.catch_up()
                except StorageError as exc:  # the next round tries again; a lost log reloads anyway
                    log.debug("shard %d: following transaction markers failed: %s", self.index, exc)
        finally:
            if generation == self._generation:
                self._following = False

    def has_open_transactions(self) -> bool:
        return self.loaded and self.state.has_open_transactions()

    async def catch_up(self) -> None:
        """Replay every transaction marker written into the shard's partition so far."""
        async with self._follow_lock:
            generation = self._generation
            if not self.loaded:
                return
            markers = await self.log.follow()
            if generation != self._generation or not self.loaded:
                return  # a reload reads them
            for marker in markers:
                txn_log.debug(
                    "shard %d: marker of producer %d epoch %d (%s) replayed",
                    self.index,
                    marker.producer_id,
                    marker.producer_epoch,
                    "commit" if marker.committed else "abort",
                )
                replay_transaction_entry(self.state, marker)
            if markers:
                self._reschedule_timer()

    def transaction_ended(self, producer_id: int) -> None:
        """The client's EndTxn for this producer was answered: its marker is on its way here if its
        transaction is open in this shard."""
        if self.loaded:
            marker_awaited = self.state.transaction_ending(producer_id)
            if marker_awaited and txn_log.isEnabledFor(logging.DEBUG):
                txn_log.debug(
                    "shard %d: producer %d's transaction ended; its marker is awaited",
                    self.index,
                    producer_id,
                )

    async def previous_transaction_ended(self, producer_id: int) -> bool:
        """Wait (up to ``marker_wait`` seconds, following the log) until the marker of the
        producer's ended transaction is replayed here; False if it did not come. Called before the
        shard's partition is added to the producer's next transaction: an upstream that lets the
        next transaction add partitions while the previous one's markers are still being written
        (tansu does) may lose the partition from it, and the next transaction's marker never comes."""
        if not self.loaded or not self.state.awaits_marker(producer_id):
            return True
        await self.catch_up()
        deadline = time.monotonic() + self.marker_wait
        while self.loaded and self.state.awaits_marker(producer_id) and time.monotonic() < deadline:
            await asyncio.sleep(min(self.follow_interval, 0.01))
            await self.catch_up()
        if self.loaded and self.state.awaits_marker(producer_id):
            log.warning(
                "shard %d: the marker of producer %d's ended transaction is not in the log after %.1f s "
                "(followed up to offset %s); its next AddOffsetsToTxn gets CONCURRENT_TRANSACTIONS",
                self.index, producer_id, self.marker_wait, self.log.followed,
            )  # fmt: skip
            return False
        return True

    async def add_offsets_to_txn(self, ctx: RequestContext, request: Message) -> Message:
        """AddOffsetsToTxn once the shard's partition is in the client's transaction upstream: every
        marker already written is replayed first, then the transaction opens in the log (the
        handler answers CONCURRENT_TRANSACTIONS while the previous transaction's marker is still
        to come: :meth:`previous_transaction_ended` runs before the partition is added)."""
        if not self.loaded:
            error = ErrorCode.NOT_COORDINATOR if self.fenced else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            return error_response(ApiKey.ADD_OFFSETS_TO_TXN, ctx.api_version, request, error)
        await self.catch_up()
        return await self.submit(ApiKey.ADD_OFFSETS_TO_TXN, ctx, request)

    def _fail_waiting(self, fenced: bool = False) -> None:
        """Stop serving: every waiting request gets NOT_COORDINATOR, so clients rediscover and retry."""
        self._generation += 1
        self._flushing = False
        self._following = False
        self.loaded = False
        self.fenced = self.fenced or fenced
        self._cancel_timer()
        waiting, self._waiting = self._waiting, {}
        self._deferred.clear()
        self._pending = []
        self._in_flight.clear()
        self._wake_flush()  # the flush task of the old generation ends
        for ctx, (reply, api_key, request) in waiting.items():
            reply(error_response(api_key, ctx.api_version, request, ErrorCode.NOT_COORDINATOR))

    def _log_lost(self, exc: StorageError) -> None:
        """The log says this shard may no longer serve from its state (see the module docstring)."""
        fenced = isinstance(exc, FencedError)
        if fenced and self.fenced:
            return
        self.observer.shard_lost(self.index, fenced, str(exc))
        if fenced:
            log.error(
                "shard %d: fenced by another kcoord (%s); this process stops serving it", self.index, exc
            )
            self._fail_waiting(fenced=True)
            self._report_fenced()
            return
        self.lost = str(exc)
        if not self._reloading:
            self._fail_waiting()  # now, not when the reload task first runs: no answer from the lost state
            asyncio.get_running_loop().create_task(self._fail_and_reload())

    def _report_fenced(self) -> None:
        if self.on_fenced is not None:
            try:
                self.on_fenced(self.index)
            except Exception:  # the cluster's bookkeeping must not cost the shard's own handling
                log.exception("shard %d: reporting the fence failed", self.index)

    async def _fail_and_reload(self) -> None:
        if self._reloading:
            return
        self._reloading = True
        try:
            self._fail_waiting()
            delay = 0.5
            while not self._closing and not self.fenced:
                try:
                    await self.load()
                    return
                except FencedError as exc:
                    log.error(
                        "shard %d: fenced while reloading (%s); this process stops serving it",
                        self.index,
                        exc,
                    )
                    self.fenced = True
                    self._report_fenced()
                    return
                except Exception as exc:
                    log.error("shard %d: reload failed: %s; retrying in %.1f s", self.index, exc, delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 10.0)
        finally:
            self._reloading = False

    # -- timers -------------------------------------------------------------------------------------
    def _reschedule_timer(self) -> None:
        deadline = self.state.next_deadline()
        if deadline == self._timer_deadline:
            return
        self._cancel_timer()
        if deadline is None:
            return
        delay = max(0.0, (deadline - self.clock.now_ms()) / 1000.0)
        self._timer_deadline = deadline
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_deadline = None

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_deadline = None
        if not self.loaded:
            return
        self._apply(self.state.poll(self.clock.now_ms()))

    # -- cluster mode: the shard moves between nodes ------------------------------------------------
    def release(self) -> None:
        """Another node serves this shard from now on (cluster mode): fail what waits with
        NOT_COORDINATOR, drop the state, and never write the log again until :meth:`reacquire`.
        (``fenced`` is what stops a reload still running and makes every request NOT_COORDINATOR.)"""
        self.log.release()
        self.fenced = True
        self.lost = None
        self._fail_waiting(fenced=True)
        self.state = self._make_state()

    async def reacquire(self) -> None:
        """This node serves the shard (again): take the log's ownership and load it (requests get
        COORDINATOR_LOAD_IN_PROGRESS meanwhile; a failed load retries in the background)."""
        self.log.reacquire()
        self.fenced = False
        self.lost = None
        await self.first_load()

    # -- shutdown -----------------------------------------------------------------------------------
    async def drain(self, timeout: float = 5.0) -> None:
        """Wait until every record written so far is acknowledged (used on graceful shutdown)."""
        end = time.monotonic() + timeout
        while (self._pending or self._acked_seq < self._written_seq) and time.monotonic() < end:
            await asyncio.sleep(0.01)

    def close(self) -> None:
        self._closing = True  # stops a reload loop retrying against an unreachable cluster
        self._fail_waiting()
