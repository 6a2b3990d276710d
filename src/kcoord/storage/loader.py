"""Reading one shard's partition back: the load, and following transaction markers after it.

The load (:meth:`ShardLoader.entries`): ListOffsets (earliest, latest = high watermark at call
time), then Fetch from the log start up to that watermark. Records are compacted client-side as
they stream in (latest value per key, tombstoned keys dropped) and only the survivors are decoded,
so decoding and replay cost grows with live keys; with broker-side compaction the bytes fetched do
too. Transactional data (a client's transactional offset commits) is held per producer id until
its marker: an abort drops it; a commit applies each record unless its key was written after it
(Kafka's log-order rule for transactional offsets), and the survivors replay as plain records.
Transactions still open at the end are yielded as they are (``TransactionalRecords``, pending in
the shard), after the plain survivors, merged in log order with the latest writes of their keys
that came after them (tombstones included), so the shard's replay orders them as the log does.

Following (:meth:`ShardLoader.follow`): the markers written since the load or the last follow, up
to the high watermark at call time, each returned once.

A log whose batches end past the high watermark of the very Fetch answer that returned them is not
one a Kafka broker serves (the high watermark is at or after every batch it hands out). tansu 0.6
serves one after a topic was deleted and re-created: the batches it acknowledged into the deleted
topic come back in the re-created partition at offsets 0.., while its next offset starts over at 0
(docs/tansu.md). Writing there would land *inside* records the load already read: the writer
refuses to acknowledge such a write, and a later load would skip it as already read. So the scan
stops with :class:`RecordsPastWatermark` instead of loading, and the shard log moves the broker's
next offset past those records before it loads again (:meth:`kcoord.storage.kafka.KafkaShardLog.read`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from kcoord.protocol.primitives import CodecError
from kcoord.protocol.record_batch import CONTROL_COMMIT, decode_batches
from kcoord.protocol.records import EndTxnMarker, LogEntry, Record, TransactionalRecords, decode_record

from .base import StorageError
from .ownership import Ownership
from .partition import PartitionReads
from .position import LogPosition
from .writer import SEQUENCE_MASK

YIELD_RECORDS = 1000  # plain records per list the load yields


class RecordsPastWatermark(StorageError):
    """The partition holds batches ending past the high watermark the broker answered with them
    (module docstring): its next write would land inside records already there."""

    def __init__(self, topic: str, partition: int, high_watermark: int, records_end: int) -> None:
        super().__init__(
            f"{topic}[{partition}]: batches end at offset {records_end}, past the high watermark "
            f"{high_watermark} the same Fetch answered"
        )
        self.high_watermark = high_watermark
        self.records_end = records_end

    @property
    def gap(self) -> int:
        """Offsets the broker must hand out before a write lands past every record there."""
        return self.records_end - self.high_watermark


class OpenBatch:
    """A transactional batch read from the log whose transaction has no marker yet."""

    __slots__ = ("producer_id", "producer_epoch", "records")

    def __init__(
        self, producer_id: int, producer_epoch: int, records: list[tuple[int, bytes, bytes | None]]
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.records = records  # (offset, key, value)


# After the plain survivors: an open transaction's batch, or a later write of one of its keys.
TailEntry = OpenBatch | tuple[bytes, bytes | None]


class ShardLoader:
    """Reads one shard's partition (module docstring). ``client_sequences`` is the writer's table of
    clients' transactional sequences, which the load relearns from the log."""

    def __init__(
        self,
        reads: PartitionReads,
        position: LogPosition,
        ownership: Ownership,
        client_sequences: dict[int, tuple[int, int]],
    ) -> None:
        self.reads = reads
        self.topic = reads.topic
        self.partition = reads.partition
        self.position = position
        self.ownership = ownership
        self.client_sequences = client_sequences

    async def entries(self, scanned: tuple[dict[bytes, bytes], list[TailEntry]]) -> AsyncIterator[LogEntry]:
        """What :meth:`scan` found, as the load yields it: the partition's live records (compacted
        view) up to the watermark, then the transactions still open there. The caller took
        ownership before the scan."""
        latest, tail = scanned
        batch: list[Record] = []
        for key, value in latest.items():
            record = self._decode(key, value)
            if record is not None:
                batch.append(record)
                if len(batch) >= YIELD_RECORDS:
                    yield batch
                    batch = []
        if batch:
            yield batch
        for entry in tail:
            if isinstance(entry, OpenBatch):
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

    async def scan(self) -> tuple[dict[bytes, bytes], list[TailEntry]]:
        """(latest, tail): the latest value per key, in the offset order of each key's latest write,
        with committed transactional records applied by Kafka's rule and tombstoned keys absent; and
        the transactions still open at the end, merged by offset with the latest writes (tombstones
        too) of their keys that came after them, which ``latest`` then leaves out. Raises
        :class:`RecordsPastWatermark` (before it moves the position) when the batches read end past
        the last Fetch answer's high watermark."""
        start, end = await self.reads.bounds()
        records_read = 0
        latest: dict[bytes, bytes | None] = {}
        open_batches: dict[int, list[OpenBatch]] = {}  # producer id -> its batches since its last marker
        open_keys: dict[bytes, int] = {}  # key -> records of open transactions holding it
        written_at: dict[bytes, int] = {}  # key in open_keys -> offset of its latest write since then
        offset = start
        empty_fetches = 0
        first = True
        high_watermark = -1
        while offset < end:
            records, high_watermark = await self.reads.fetch(offset)
            if first:
                # tansu 0.6 answers ListOffsets(latest) with the last *batch's* base offset + 1; the
                # first Fetch's high watermark is exact, and still "at call time" for a shard that is
                # not writing while it loads.
                end = max(end, high_watermark)
                first = False
            if records is None:  # offset below the log start (retention/DeleteRecords): restart there
                offset = (await self.reads.bounds())[0]
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
                    if batch.producer_id != self.ownership.producer_id:
                        self.client_sequences[batch.producer_id] = (
                            batch.producer_epoch,
                            (batch.base_sequence + batch.next_offset - batch.base_offset) & SEQUENCE_MASK,
                        )
                    held: list[tuple[int, bytes, bytes | None]] = [
                        (off, k, v)
                        for off, _ts, k, v, _h in batch.records
                        if offset <= off < end and k is not None
                    ]
                    if held:
                        open_batches.setdefault(batch.producer_id, []).append(
                            OpenBatch(batch.producer_id, batch.producer_epoch, held)
                        )
                        for _, held_key, _ in held:
                            open_keys[held_key] = open_keys.get(held_key, 0) + 1
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
        if offset > high_watermark >= 0:  # the last answer's batches end past its own high watermark
            raise RecordsPastWatermark(self.topic, self.partition, high_watermark, offset)
        self.position.loaded(start, max(end, offset), records_read)
        tail: list[tuple[int, TailEntry]] = [
            (b.records[0][0], b) for batches in open_batches.values() for b in batches
        ]
        for k, at in written_at.items():  # latest writes after an open transaction's record of the key
            tail.append((at, (k, latest.pop(k))))
        tail.sort(key=lambda entry: entry[0])
        return {k: v for k, v in latest.items() if v is not None}, [entry for _, entry in tail]

    async def follow(self) -> list[EndTxnMarker]:
        """The markers written since the load or the last call, up to the high watermark now.
        Transient errors raise StorageError."""
        own = self.ownership
        start = self.position.followed
        if start < 0 or own.fenced is not None or own.lost is not None:
            return []
        markers: list[EndTxnMarker] = []
        offset = start
        target = -1  # the high watermark of the first answer: what this call reads up to
        wait_ms, empty = 1, 0
        while True:
            # The first attempt needs no data (min_bytes=0): at the log's end, the usual case every
            # follow interval, Kafka would park it for its max wait on the connection the shards'
            # appends use (ownership.tail_checks says why that matters).
            records, high_watermark, _ = await self.reads.fetch_once(
                offset, wait_ms, min_bytes=0 if wait_ms == 1 else 1
            )
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
        if self.position.followed != start:
            return []  # a load read the partition meanwhile: its replay has these markers
        self.position.followed = offset
        return markers


def _end_transaction(
    batches: list[OpenBatch],
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
