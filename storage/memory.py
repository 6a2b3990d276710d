"""In-memory storage for unit tests: the same interface as the Kafka log, with failure injection.

Records are kept as encoded bytes, exactly as they would be on the topic, so replay in tests
goes through the real record codec; compaction is applied on read like a fully compacted topic
would be (latest value per key, tombstones dropped) when ``compacted_reads`` is set. An append
holding a record larger than ``max_record_bytes`` fails as a Kafka broker fails a batch over the
topic's max.message.bytes (MESSAGE_TOO_LARGE).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from kcoord.protocol.records import Record, decode_record, encode_record

from .base import DEFAULT_MAX_RECORD_BYTES, LostCallback, StorageError


class MemoryShardLog:
    def __init__(self, compacted_reads: bool = False, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        self.entries: list[tuple[bytes, bytes | None]] = []
        self.fail_next_appends = 0
        self.compacted_reads = compacted_reads
        self.max_record_bytes = max_record_bytes
        self.append_calls = 0
        self.on_lost: LostCallback | None = None

    async def append(self, records: list[Record]) -> None:
        self.append_calls += 1
        if self.fail_next_appends > 0:
            self.fail_next_appends -= 1
            raise StorageError("injected append failure")
        pairs = [encode_record(r) for r in records]
        for key, value in pairs:
            # What a Kafka broker does with a batch over max.message.bytes: refuse the append.
            size = len(key) + (0 if value is None else len(value))
            if size > self.max_record_bytes:
                raise StorageError(f"MESSAGE_TOO_LARGE: a {size}-byte record, the log takes {self.max_record_bytes}")
        self.entries.extend(pairs)

    async def read(self) -> AsyncIterator[list[Record]]:
        entries = self.entries
        if self.compacted_reads:
            latest: dict[bytes, bytes | None] = {}
            for k, v in entries:
                latest.pop(k, None)
                latest[k] = v
            entries = [(k, v) for k, v in latest.items() if v is not None]
        batch: list[Record] = []
        for k, v in entries:
            rec = decode_record(k, v)
            if rec is not None:
                batch.append(rec)
            if len(batch) >= 1000:
                yield batch
                batch = []
        if batch:
            yield batch


class MemoryStorage:
    def __init__(self, compacted_reads: bool = False, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        """``max_record_bytes`` defaults to what a topic with Kafka's default max.message.bytes takes."""
        self.logs: dict[int, MemoryShardLog] = {}
        self.compacted_reads = compacted_reads
        self.max_record_bytes = max_record_bytes

    async def open(self, num_shards: int) -> None:
        for i in range(num_shards):
            self.logs.setdefault(i, MemoryShardLog(self.compacted_reads, self.max_record_bytes))

    def shard_log(self, shard: int) -> MemoryShardLog:
        return self.logs[shard]

    async def close(self) -> None:
        return None
