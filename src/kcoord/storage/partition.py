"""Reads of one partition of the internal topic from its leader: ListOffsets and Fetch.

:meth:`PartitionReads.fetch` and :meth:`PartitionReads.bounds` retry leadership and transient
errors until the request timeout (:class:`~kcoord.storage.retry.Retry`), for the load;
:meth:`PartitionReads.fetch_once` does not retry and hardly waits, for the periodic checks and
following transaction markers, which try again at their next round anyway;
:meth:`PartitionReads.fetch_tails` is the same for many partitions in one request per leader.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Any

from kcoord.protocol import storage_messages as sm
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode

from .base import StorageError
from .kafka_client import KafkaCluster, request
from .retry import Retry, Verdict

log = logging.getLogger("kcoord.storage")


def _check_answers(resp: Any) -> Iterator[tuple[int, int, tuple[bytes | None, int, int]]]:
    """Each partition of a check's Fetch answer: ``(partition, error, (records, high watermark,
    log start))``. Below the log start is an answer (records None, error 0: the caller restarts),
    not an error; records are ``b""`` when there is nothing new."""
    for t in resp.responses:
        for p in t.partitions:
            error = int(p.error_code)
            out_of_range = error == ErrorCode.OFFSET_OUT_OF_RANGE
            records = None if out_of_range else (p.records or b"")
            log_start = int(getattr(p, "log_start_offset", -1))
            yield (
                int(p.partition_index),
                0 if out_of_range else error,
                (records, int(p.high_watermark), log_start),
            )


EARLIEST = -2  # ListOffsets timestamps
LATEST = -1


class PartitionReads:
    """ListOffsets and Fetch of one partition (module docstring)."""

    def __init__(
        self, cluster: KafkaCluster, topic: str, partition: int, request_timeout: float, fetch_max_bytes: int
    ) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partition = partition
        self.request_timeout = request_timeout
        self.fetch_max_bytes = fetch_max_bytes

    async def bounds(self) -> tuple[int, int]:
        """(log start, end): ListOffsets EARLIEST and LATEST."""
        start, end = await asyncio.gather(self.list_offset(EARLIEST), self.list_offset(LATEST))
        return start, end

    async def list_offset(self, timestamp: int) -> int:
        L = sm.ListOffsetsRequest
        req = L(
            replica_id=-1,
            isolation_level=0,
            topics=[
                L.ListOffsetsTopic(
                    name=self.topic,
                    partitions=[L.ListOffsetsPartition(partition_index=self.partition, timestamp=timestamp)],
                )
            ],
        )
        resp = await self._leader_request(req, lambda r: int(r.topics[0].partitions[0].error_code))
        return int(resp.topics[0].partitions[0].offset)

    def _fetch_request(
        self, offsets: dict[int, int], max_wait_ms: int, max_bytes: int, min_bytes: int = 1
    ) -> sm.FetchRequest:
        """A Fetch of this topic's partitions from ``offsets`` (partition -> offset), up to
        ``max_bytes`` each (and 50 MiB in all when there are several)."""
        F = sm.FetchRequest
        return F(
            replica_id=-1,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max(max_bytes, min(max_bytes * len(offsets), 50 << 20)),
            isolation_level=0,
            topics=[
                F.FetchTopic(
                    topic=self.topic,
                    partitions=[
                        F.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=max_bytes)
                        for p, o in offsets.items()
                    ],
                )
            ],
        )

    async def fetch(self, offset: int) -> tuple[bytes | None, int]:
        """``(records, high_watermark)``; records is None when ``offset`` is below the log start."""
        req = self._fetch_request({self.partition: offset}, 500, self.fetch_max_bytes)

        def error_of(resp: Any) -> int:
            if resp.error_code:
                return int(resp.error_code)
            for t in resp.responses:
                for p in t.partitions:
                    if p.partition_index == self.partition:
                        # Below the log start is an answer here, not an error (the caller restarts).
                        return 0 if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE else int(p.error_code)
            return ErrorCode.NONE

        resp = await self._leader_request(req, error_of)
        for t in resp.responses:
            for p in t.partitions:
                if p.partition_index == self.partition:
                    if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        return None, int(p.high_watermark)
                    return p.records or b"", int(p.high_watermark)
        return b"", -1  # some brokers (tansu) answer an idle fetch with no partitions at all

    async def fetch_once(
        self, offset: int, max_wait_ms: int = 1, min_bytes: int = 1
    ) -> tuple[bytes | None, int, int]:
        """One Fetch from ``offset`` that hardly waits for data: ``(records, high watermark, log
        start)``, records None when ``offset`` is out of range. Errors raise StorageError (no retry).
        (``max_wait_ms=1``, not 0: tansu answers a zero-wait Fetch with no partitions at all.)
        ``min_bytes=0``: answered at once even at the log's end, never parked for ``max_wait_ms``
        (what a check wants: the connection carries the shards' appends too, and a broker answers
        one connection's requests in order)."""
        req = self._fetch_request({self.partition: offset}, max_wait_ms, 1 << 20, min_bytes)
        conn = await self.cluster.leader(self.partition)
        resp = await request(conn, req, self.request_timeout)
        if resp.error_code:
            raise StorageError(f"Fetch on {self.topic}[{self.partition}]: error {resp.error_code}")
        for index, error, answer in _check_answers(resp):
            if index != self.partition:
                continue
            if error:
                raise StorageError(f"Fetch on {self.topic}[{self.partition}]: error {error}")
            return answer
        return b"", -1, -1  # tansu answers an idle fetch with no partitions at all

    async def fetch_tails(self, starts: dict[int, int]) -> dict[int, tuple[bytes | None, int, int]]:
        """:meth:`fetch_once` (``min_bytes=0``) of several partitions of this topic from ``starts``
        (partition -> offset): one Fetch per leader, sent at once. Partitions whose leader is not
        known or whose request or answer failed are left out (no retry: the caller tries again at
        its next round)."""
        by_leader: dict[Any, list[int]] = {}
        for partition in starts:
            try:
                conn = await self.cluster.leader(partition)
            except StorageError as exc:
                log.debug("%s[%d]: no leader for the tail check: %s", self.topic, partition, exc)
                continue
            by_leader.setdefault(conn, []).append(partition)
        answers: dict[int, tuple[bytes | None, int, int]] = {}

        async def one(conn: Any, partitions: list[int]) -> None:
            req = self._fetch_request({p: starts[p] for p in partitions}, 1, 1 << 20, min_bytes=0)
            try:
                resp = await request(conn, req, self.request_timeout)
            except StorageError as exc:
                log.debug("%s: tail checks of %d partitions failed: %s", self.topic, len(partitions), exc)
                return
            if resp.error_code:
                return
            for index, error, answer in _check_answers(resp):
                if index in starts and not error:
                    answers[index] = answer
            # A broker that leaves an idle partition out (tansu) gave no answer for it: fetch_once
            # reads that as nothing new; so does the caller here, by leaving it out.

        results = await asyncio.gather(
            *(one(conn, parts) for conn, parts in by_leader.items()), return_exceptions=True
        )
        for result in results:
            if isinstance(result, Exception):  # not a broker's failure (those are StorageErrors): a bug
                log.error("%s: tail checks failed: %r", self.topic, result)
        return answers

    async def _leader_request(self, req: Message, error_of: Callable[[Any], int]) -> Any:
        """A request to the partition leader, retried on leadership and transient errors."""
        name = f"{type(req).__name__} on {self.topic}[{self.partition}]"
        retry = Retry(self.request_timeout, refresh_leaders=lambda: self.cluster.refresh(self.topic))
        while True:
            try:
                conn = await self.cluster.leader(self.partition)
                resp = await request(conn, req, self.request_timeout)
                err = error_of(resp)
            except StorageError as exc:
                verdict = await retry.failed(None, str(exc))
            else:
                if err == ErrorCode.NONE:
                    return resp
                verdict = await retry.failed(err, f"error {err}")
            if verdict is Verdict.GIVE_UP:
                raise StorageError(f"{name}: {retry.last}")
            if verdict is not Verdict.RETRY:
                raise StorageError(f"{name} failed: {retry.last}")
