"""The narrow interface between a shard and its durable log.

A shard owns one partition of the internal compacted topic. It appends batches of records and
waits for the cluster's acknowledgement; when it (re)loads it reads the partition from the start
to the high watermark and replays every record. Implementations: :mod:`kcoord.storage.memory` for unit
tests, :mod:`kcoord.storage.kafka` for real use.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from kcoord.protocol.records import Record


class StorageError(Exception):
    """An append or read the cluster did not acknowledge; nothing in it may be reported as done."""


class FencedError(StorageError):
    """Another kcoord process took over this shard; this one must stop writing it."""


class ShardLog(Protocol):
    async def append(self, records: list[Record]) -> None:
        """Durably append ``records`` in order; returns once the cluster acknowledged all of them."""
        ...

    def read(self) -> AsyncIterator[list[Record]]:
        """Read the partition from the beginning to the high watermark at call time, in batches."""
        ...


class Storage(Protocol):
    async def open(self, num_shards: int) -> None: ...

    def shard_log(self, shard: int) -> ShardLog: ...

    async def close(self) -> None: ...
