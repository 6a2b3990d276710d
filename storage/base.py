"""The narrow interface between a shard and its durable log.

A shard owns one partition of the internal compacted topic. It appends batches of records and
waits for the cluster's acknowledgement; when it (re)loads it reads the partition from the start
to the high watermark and replays every record. Implementations: :mod:`kcoord.storage.memory` for unit
tests, :mod:`kcoord.storage.kafka` for real use.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Protocol

from kcoord.protocol.record_batch import HEADER_SIZE, MAX_RECORD_FRAMING
from kcoord.protocol.records import LogEntry, Record

# Kafka's default max.message.bytes (broker message.max.bytes): 1 MiB plus the 12 bytes of log
# overhead. A topic whose configs do not say otherwise accepts batches up to this size.
KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588


def max_record_bytes_for(max_message_bytes: int) -> int:
    """The largest record (key + value bytes) a topic with this ``max.message.bytes`` accepts as a
    batch of its own: the batch header and the record's own framing at their largest come off."""
    return max_message_bytes - HEADER_SIZE - MAX_RECORD_FRAMING


DEFAULT_MAX_RECORD_BYTES = max_record_bytes_for(KAFKA_DEFAULT_MAX_MESSAGE_BYTES)


class StorageError(Exception):
    """An append or read the cluster did not acknowledge; nothing in it may be reported as done."""


class FencedError(StorageError):
    """Another kcoord process took over this shard; this one must stop writing it."""


class LogLostError(StorageError):
    """The log no longer holds what this shard loaded and wrote: the topic was deleted, re-created
    or truncated upstream, or another owner wrote to it in between. The shard's state is not the
    log's any more; it must stop serving and load again."""


# What a log calls when it finds out on its own (not in an append or read) that the shard lost it.
LostCallback = Callable[[StorageError], None]


class ShardLog(Protocol):
    # Set by the shard's runtime: called with a FencedError or LogLostError when the log finds out
    # between appends that the shard may no longer serve from its state.
    on_lost: LostCallback | None

    async def append(self, records: list[Record]) -> None:
        """Durably append ``records`` in order; returns once the cluster acknowledged all of them."""
        ...

    def read(self) -> AsyncIterator[LogEntry]:
        """Read the partition from the beginning to the high watermark at call time, in log order:
        plain records in lists, each transactional batch and each transaction marker on its own
        (:data:`~kcoord.protocol.records.LogEntry`)."""
        ...


class Storage(Protocol):
    # The largest record (key + value bytes) the log accepts as a batch of its own; known once
    # open() returned. The group state refuses to emit a larger one (it could never be written).
    max_record_bytes: int

    async def open(self, num_shards: int) -> None: ...

    def shard_log(self, shard: int) -> ShardLog: ...

    async def close(self) -> None: ...
