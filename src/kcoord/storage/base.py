"""The narrow interface between a shard and its durable log.

A shard owns one partition of the internal compacted topic. It appends batches of records and
waits for the cluster's acknowledgement; when it (re)loads it reads the partition from the start
to the high watermark and replays every record. Implementations: :mod:`kcoord.storage.memory` for unit
tests, :mod:`kcoord.storage.kafka` for real use.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Protocol

# The record size limits follow from the record batch format, so they live with it, where the pure
# group state (which refuses to emit a record the log cannot take) reads them too.
from kcoord.protocol.record_batch import DEFAULT_MAX_RECORD_BYTES as DEFAULT_MAX_RECORD_BYTES
from kcoord.protocol.record_batch import KAFKA_DEFAULT_MAX_MESSAGE_BYTES as KAFKA_DEFAULT_MAX_MESSAGE_BYTES
from kcoord.protocol.record_batch import max_record_bytes_for as max_record_bytes_for
from kcoord.protocol.records import EndTxnMarker, LogEntry, Record

# What the writer counts per record on top of its key and value bytes when it sizes a batch.
RECORD_FRAMING_ESTIMATE = 16


def batch_bytes_for(max_message_bytes: int, cap: int | None = None) -> int:
    """How many record bytes one batch may hold, counted with :data:`RECORD_FRAMING_ESTIMATE` per
    record: an eighth of the topic's limit stays free for the batch header and for framing beyond
    that estimate."""
    limit = max_message_bytes - max_message_bytes // 8
    return limit if cap is None else min(cap, limit)


class StorageError(Exception):
    """An append or read the cluster did not acknowledge; nothing in it may be reported as done."""


class FencedError(StorageError):
    """Another kcoord process took over this shard; this one must stop writing it."""


class LogLostError(StorageError):
    """The log no longer holds what this shard loaded and wrote: the topic was deleted, re-created
    or truncated upstream, or another owner wrote to it in between. The shard's state is not the
    log's any more; it must stop serving and load again."""


class TransactionalAppendError(StorageError):
    """The cluster refused a transactional batch written for a client's producer for that
    producer's sake (fenced, its transaction in the wrong state, not authorized): an answer for the
    client's request, not a fault of the shard's own writes (which stay owned and unfenced)."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


# What a log calls when it finds out on its own (not in an append or read) that the shard lost it.
LostCallback = Callable[[StorageError], None]
# What a log calls when an append started by ``ShardLog.send`` is acknowledged (None) or failed.
# It runs inside the log's answer handling and must not raise.
AppendDone = Callable[[StorageError | None], None]


class ShardLog(Protocol):
    """Everything a shard's runtime uses of its log (:mod:`kcoord.coordinator.runtime.shard`)."""

    # Set by the shard's runtime: called with a FencedError or LogLostError when the log finds out
    # between appends that the shard may no longer serve from its state.
    on_lost: LostCallback | None

    @property
    def records_read(self) -> int:
        """Records the last :meth:`read` went through before any compaction on the client (what
        the load cost; the shard counts what it replayed itself)."""
        ...

    @property
    def log_end(self) -> int:
        """The offset after the last one this process loaded or wrote (-1 before a load)."""
        ...

    @property
    def followed(self) -> int:
        """The offset up to which the partition was read for transaction markers (-1 before a load)."""
        ...

    async def append(self, records: list[Record]) -> None:
        """Durably append ``records`` in order; returns once the cluster acknowledged all of them."""
        ...

    async def send(self, records: list[Record], done: AppendDone) -> None:
        """Start appending ``records`` behind the appends still in flight and return once they are
        on their way (or, if they cannot be pipelined, written); ``done`` is called once: None when
        the cluster acknowledged them, else the StorageError. Appends are written in the order they
        were sent, each only if every earlier one was; one that fails leaves the log needing a
        reload, as a failed :meth:`append` does. Raises StorageError if they could not be sent."""
        ...

    async def append_transactional(
        self, transactional_id: str, producer_id: int, producer_epoch: int, records: list[Record]
    ) -> None:
        """Durably append one transactional batch for a client's producer (its records stay pending
        until that producer's marker); no records opens its transaction with a placeholder record
        the shard's replay skips. Raises :class:`TransactionalAppendError` when the cluster refuses
        it for the producer's sake, StorageError/FencedError as :meth:`append` does otherwise."""
        ...

    def read(self) -> AsyncIterator[LogEntry]:
        """Read the partition from the beginning to the high watermark at call time, in log order:
        plain records in lists, each transactional batch and each transaction marker on its own
        (:data:`~kcoord.protocol.records.LogEntry`)."""
        ...

    async def follow(self) -> list[EndTxnMarker]:
        """The transaction markers written into the partition since the last read or follow, up to
        its high watermark now, in log order (the transaction coordinator writes them; the shard
        learns of them only by reading). Each is returned once."""
        ...

    def release(self) -> None:
        """Cluster mode: another node serves this shard now; refuse every later append and read
        (as fenced) until :meth:`reacquire`."""
        ...

    def reacquire(self) -> None:
        """Cluster mode: this node serves the shard (again); its next read takes ownership and loads
        the log from the start."""
        ...


# The record a transactional batch with no offsets holds (a batch holds at least one record): a
# tombstone of kcoord's private record type, which the shard's replay and Kafka's loader skip as an
# unknown type (docs/storage.md).
TXN_OPEN_KEY = bytes.fromhex("4b43") + b"kcoord-txn-open"


def transactional_pairs(pairs: list[tuple[bytes, bytes | None]]) -> list[tuple[bytes, bytes | None]]:
    return pairs or [(TXN_OPEN_KEY, None)]


class Storage(Protocol):
    @property
    def max_record_bytes(self) -> int:
        """The largest record (key + value bytes) the log accepts as a batch of its own; known once
        open() returned. The group state refuses to emit a larger one (it could never be written)."""
        ...

    async def open(self, num_shards: int) -> None: ...

    def shard_log(self, shard: int) -> ShardLog: ...

    async def add_partition_to_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, shard: int
    ) -> int:
        """Add ``shard``'s partition to the client's transaction at the upstream transaction
        coordinator (AddPartitionsToTxn v3, the client form, with the client's ids); returns the
        partition's error code (0 when added)."""
        ...

    async def close(self) -> None: ...
