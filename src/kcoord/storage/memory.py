"""In-memory storage for unit tests: the same interface as the Kafka log, with failure injection.

Records are kept as encoded bytes, exactly as they would be on the topic, so replay in tests
goes through the real record codec. An append holding a record larger than ``max_record_bytes``
fails as a Kafka broker fails a batch over the topic's max.message.bytes (MESSAGE_TOO_LARGE).

Transactions: :meth:`MemoryShardLog.append_transactional` appends a transactional batch for a
producer (what kcoord writes for a client's TxnOffsetCommit and AddOffsetsToTxn) and
:meth:`MemoryShardLog.write_marker` a COMMIT or ABORT marker (what the transaction coordinator
writes). A read yields them in log order as :class:`TransactionalRecords` and :class:`EndTxnMarker`
between lists of plain records; :meth:`MemoryShardLog.follow` returns the markers written since.
``refuse_transactional`` makes the next transactional appends fail as the cluster refuses a fenced
producer's (:class:`TransactionalAppendError`); :attr:`MemoryStorage.add_partition_errors` gives the
error code AddPartitionsToTxn answers for a producer id (none: added).

``compacted_reads`` reads the log as Kafka's log cleaner leaves it when it has cleaned everything it
may: only below the last stable offset (the first offset of a transaction still open), where every
transaction is decided. There, aborted data is gone, plain and committed transactional records keep
only each key's latest write (by offset; a latest tombstone goes too), and a marker stays while its
transaction keeps a record. From the first open transaction on, the log is read as written.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from kcoord.protocol.records import (
    EndTxnMarker,
    LogEntry,
    Record,
    TransactionalRecords,
    decode_record,
    encode_record,
)

from .base import (
    DEFAULT_MAX_RECORD_BYTES,
    AppendDone,
    LostCallback,
    StorageError,
    TransactionalAppendError,
    transactional_pairs,
)

Pair = tuple[bytes, bytes | None]


class TxnBatch:
    """A transactional batch in the memory log: encoded records and their producer."""

    __slots__ = ("producer_id", "producer_epoch", "pairs")

    def __init__(self, producer_id: int, producer_epoch: int, pairs: list[Pair]) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.pairs = pairs


# One log entry: a plain record, a transactional batch, or a marker (one offset each here).
Entry = Pair | TxnBatch | EndTxnMarker


class MemoryShardLog:
    def __init__(
        self, compacted_reads: bool = False, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    ) -> None:
        self.entries: list[Entry] = []
        self.fail_next_appends = 0
        self.compacted_reads = compacted_reads
        self.max_record_bytes = max_record_bytes
        self.append_calls = 0
        self.on_lost: LostCallback | None = None
        self.refuse_transactional: list[int] = []  # error codes the next transactional appends get
        self.followed = 0  # entries read or followed so far
        self.records_read = 0  # records, transactional records and markers the last read yielded
        self._sending: set[asyncio.Task[None]] = set()

    @property
    def log_end(self) -> int:
        """One offset per entry here."""
        return len(self.entries)

    def release(self) -> None:
        """Nothing to give up: a memory log belongs to this process alone."""

    def reacquire(self) -> None:
        """Nothing to take back (:meth:`release`)."""

    def _encode(self, records: list[Record]) -> list[Pair]:
        self.append_calls += 1
        if self.fail_next_appends > 0:
            self.fail_next_appends -= 1
            raise StorageError("injected append failure")
        pairs = [encode_record(r) for r in records]
        for key, value in pairs:
            # What a Kafka broker does with a batch over max.message.bytes: refuse the append.
            size = len(key) + (0 if value is None else len(value))
            if size > self.max_record_bytes:
                raise StorageError(
                    f"MESSAGE_TOO_LARGE: a {size}-byte record, the log takes {self.max_record_bytes}"
                )
        return pairs

    async def append(self, records: list[Record]) -> None:
        self.entries.extend(self._encode(records))

    async def send(self, records: list[Record], done: AppendDone) -> None:
        """:meth:`append` in a task of its own (a test's ``append`` may hold it open); in flight
        together, they finish in the order they started unless a test's ``append`` says otherwise."""

        def finished(task: asyncio.Task[None]) -> None:
            if task.cancelled():
                done(StorageError("append cancelled"))
                return
            exc = task.exception()
            if exc is None or isinstance(exc, StorageError):
                done(exc)
            else:
                done(StorageError(f"append failed: {exc!r}"))

        task = asyncio.get_running_loop().create_task(self.append(records))
        self._sending.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._sending.discard)
        task.add_done_callback(finished)

    async def append_transactional(
        self, transactional_id: str, producer_id: int, producer_epoch: int, records: list[Record]
    ) -> None:
        """One transactional batch of ``producer_id`` (its records stay pending until a marker)."""
        pairs = self._encode(records)
        if self.refuse_transactional:
            code = self.refuse_transactional.pop(0)
            raise TransactionalAppendError(code, f"injected refusal of producer {producer_id}: error {code}")
        self.entries.append(TxnBatch(producer_id, producer_epoch, transactional_pairs(pairs)))

    def write_marker(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """What the transaction coordinator writes when ``producer_id``'s transaction ends."""
        self.entries.append(EndTxnMarker(producer_id, producer_epoch, committed))

    async def follow(self) -> list[EndTxnMarker]:
        markers = [e for e in self.entries[self.followed :] if isinstance(e, EndTxnMarker)]
        self.followed = len(self.entries)
        return markers

    async def read(self) -> AsyncIterator[LogEntry]:
        self.followed = len(self.entries)
        self.records_read = 0
        entries = self._compacted() if self.compacted_reads else self.entries
        batch: list[Record] = []
        for entry in entries:
            if type(entry) is tuple:
                rec = decode_record(*entry)
                if rec is not None:
                    batch.append(rec)
                if len(batch) >= 1000:
                    self.records_read += len(batch)
                    yield batch
                    batch = []
                continue
            if batch:
                self.records_read += len(batch)
                yield batch
                batch = []
            if isinstance(entry, TxnBatch):
                records = [r for r in (decode_record(k, v) for k, v in entry.pairs) if r is not None]
                self.records_read += len(records)
                yield TransactionalRecords(entry.producer_id, entry.producer_epoch, records)
            else:
                assert isinstance(entry, EndTxnMarker)
                self.records_read += 1
                yield entry
        if batch:
            self.records_read += len(batch)
            yield batch

    def _compacted(self) -> list[Entry]:
        """The entries as the log cleaner leaves them (module docstring)."""
        entries = self.entries
        # Each transactional batch's fate: its producer's next marker (None: still open).
        fate: dict[int, bool | None] = {}
        open_txn: dict[int, list[int]] = {}  # producer id -> its batches since its last marker
        for i, entry in enumerate(entries):
            if isinstance(entry, TxnBatch):
                open_txn.setdefault(entry.producer_id, []).append(i)
            elif isinstance(entry, EndTxnMarker):
                for j in open_txn.pop(entry.producer_id, []):
                    fate[j] = entry.committed
        stable = min((js[0] for js in open_txn.values()), default=len(entries))  # the last stable offset
        # Latest write per key below it: (entry index, record index in a batch).
        latest: dict[bytes, tuple[int, int]] = {}
        for i in range(stable):
            entry = entries[i]
            if type(entry) is tuple:
                latest[entry[0]] = (i, 0)
            elif isinstance(entry, TxnBatch) and fate[i]:
                for n, (k, _) in enumerate(entry.pairs):
                    latest[k] = (i, n)
        keep = set(latest.values())
        out: list[Entry] = []
        kept_txn: dict[int, bool] = {}  # producer id -> a batch of its current transaction kept
        for i in range(stable):
            entry = entries[i]
            if type(entry) is tuple:
                if (i, 0) in keep and entry[1] is not None:
                    out.append(entry)
            elif isinstance(entry, TxnBatch):
                if fate[i]:
                    pairs = [p for n, p in enumerate(entry.pairs) if (i, n) in keep and p[1] is not None]
                    if pairs:
                        out.append(TxnBatch(entry.producer_id, entry.producer_epoch, pairs))
                        kept_txn[entry.producer_id] = True
            else:
                assert isinstance(entry, EndTxnMarker)
                if kept_txn.pop(entry.producer_id, False):
                    out.append(entry)
        out.extend(entries[stable:])
        return out


class MemoryStorage:
    def __init__(
        self, compacted_reads: bool = False, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    ) -> None:
        """``max_record_bytes`` defaults to what a topic with Kafka's default max.message.bytes takes."""
        self.logs: dict[int, MemoryShardLog] = {}
        self.compacted_reads = compacted_reads
        self.max_record_bytes = max_record_bytes
        self.add_partition_errors: dict[int, int] = {}  # producer id -> AddPartitionsToTxn's error code
        self.added_partitions: list[tuple[str, int, int, int]] = []  # (transactional id, pid, epoch, shard)

    async def add_partition_to_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, shard: int
    ) -> int:
        error = self.add_partition_errors.get(producer_id, 0)
        if error == 0:
            self.added_partitions.append((transactional_id, producer_id, producer_epoch, shard))
        return error

    async def open(self, num_shards: int) -> None:
        for i in range(num_shards):
            self.logs.setdefault(i, MemoryShardLog(self.compacted_reads, self.max_record_bytes))

    def shard_log(self, shard: int) -> MemoryShardLog:
        return self.logs[shard]

    async def close(self) -> None:
        return None
