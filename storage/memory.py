"""In-memory storage for unit tests: the same interface as the Kafka log, with failure injection.

Records are kept as encoded bytes, exactly as they would be on the topic, so replay in tests
goes through the real record codec; compaction is applied on read like a fully compacted topic
would be (latest value per key, tombstones dropped) when ``compacted_reads`` is set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from kcoord.protocol.records import Record, decode_record, encode_record

from .base import LostCallback, StorageError


class MemoryShardLog:
    def __init__(self, compacted_reads: bool = False) -> None:
        self.entries: list[tuple[bytes, bytes | None]] = []
        self.fail_next_appends = 0
        self.compacted_reads = compacted_reads
        self.append_calls = 0
        self.on_lost: LostCallback | None = None

    async def append(self, records: list[Record]) -> None:
        self.append_calls += 1
        if self.fail_next_appends > 0:
            self.fail_next_appends -= 1
            raise StorageError("injected append failure")
        self.entries.extend(encode_record(r) for r in records)

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
    def __init__(self, compacted_reads: bool = False) -> None:
        self.logs: dict[int, MemoryShardLog] = {}
        self.compacted_reads = compacted_reads

    async def open(self, num_shards: int) -> None:
        for i in range(num_shards):
            self.logs.setdefault(i, MemoryShardLog(self.compacted_reads))

    def shard_log(self, shard: int) -> MemoryShardLog:
        return self.logs[shard]

    async def close(self) -> None:
        return None
