"""Blocking reads of a topic for the pipeline, on kcoord's own Kafka client (no other client library).

Used on the Spark driver (partitions, offsets, end offsets over time) and inside Spark's Python
workers (each reads one topic partition). Each call opens its own connections and closes them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator

from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.record_batch import CONTROL_COMMIT, RecordBatch, decode_batches
from kcoord.storage.kafka_client import KafkaCluster, request

EARLIEST, LATEST = -2, -1
TIMEOUT = 30.0
MAX_STALLS = 100  # fetches in a row without progress (20 ms apart) before a read gives up


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        host, _, port = item.strip().rpartition(":")
        out.append((host or "127.0.0.1", int(port or 9092)))
    return out


async def _leaders(cluster: KafkaCluster, topic: str) -> dict[int, int]:
    resp = await cluster.metadata(topic)
    for t in resp.topics:
        if t.name == topic:
            if t.error_code != ErrorCode.NONE:
                return {}
            return {p.partition_index: p.leader_id for p in t.partitions}
    return {}


def partitions(bootstrap: str, topic: str) -> list[int]:
    """The topic's partitions; [] when the topic does not exist."""

    async def run() -> list[int]:
        cluster = KafkaCluster(parse_bootstrap(bootstrap), 100 << 20, client_id="kcoord-analytics")
        try:
            return sorted(await _leaders(cluster, topic))
        finally:
            cluster.close()

    return asyncio.run(run())


async def _list_offsets(cluster: KafkaCluster, topic: str, timestamps: dict[int, int]) -> dict[int, int]:
    leaders = await _leaders(cluster, topic)
    by_leader: dict[int, list[int]] = {}
    for p in timestamps:
        by_leader.setdefault(leaders.get(p, -1), []).append(p)
    out: dict[int, int] = {}
    for leader, parts in by_leader.items():
        if leader < 0:
            continue
        R = sm.ListOffsetsRequest
        req = R(
            replica_id=-1,
            isolation_level=0,
            topics=[
                R.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        R.ListOffsetsPartition(partition_index=p, timestamp=timestamps[p]) for p in parts
                    ],
                )
            ],
        )
        resp = await request(await cluster.node(leader), req, TIMEOUT)
        for t in resp.topics:
            for p in t.partitions:
                out[p.partition_index] = p.offset if p.error_code == ErrorCode.NONE else -1
    return out


def list_offsets(bootstrap: str, topic: str, timestamps: dict[int, int]) -> dict[int, int]:
    """ListOffsets: partition → offset for each partition's timestamp (EARLIEST, LATEST or epoch
    ms: the first offset at or after it, -1 when there is none)."""

    async def run() -> dict[int, int]:
        cluster = KafkaCluster(parse_bootstrap(bootstrap), 100 << 20, client_id="kcoord-analytics")
        try:
            return await _list_offsets(cluster, topic, timestamps)
        finally:
            cluster.close()

    return asyncio.run(run())


async def _high_watermarks(cluster: KafkaCluster, topic: str, parts: list[int]) -> dict[int, int]:
    leaders = await _leaders(cluster, topic)
    out = {}
    for p in parts:
        if leaders.get(p, -1) >= 0:
            _, hwm, error = await _fetch(cluster, topic, p, 0, leaders[p], max_bytes=1)
            out[p] = hwm if error in (ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE) else -1
    return out


def end_offsets_over_time(
    bootstrap: str, topic: str, parts: list[int], times: list[int]
) -> dict[tuple[int, int], int]:
    """(partition, time) → the partition's end offset at that time: the first offset written at or
    after it (ListOffsets by timestamp), or today's end offset when nothing was written since.

    Today's end offset (the last time, and the upper bound of the others) is the larger of the
    listed end offset and a Fetch's high watermark: tansu lists a wrong end offset for batches of
    several records, and answers timestamp lookups with the log start (docs/tansu.md), so against
    tansu only the last point is right; against Kafka every point is."""

    async def run() -> dict[tuple[int, int], int]:
        cluster = KafkaCluster(parse_bootstrap(bootstrap), 100 << 20, client_id="kcoord-analytics")
        try:
            listed = await _list_offsets(cluster, topic, dict.fromkeys(parts, LATEST))
            hwm = await _high_watermarks(cluster, topic, parts)
            latest = {p: max(listed.get(p, -1), hwm.get(p, -1)) for p in parts}
            out = {}
            for t in times[:-1]:
                found = await _list_offsets(cluster, topic, dict.fromkeys(parts, t))
                for p in parts:
                    o = found.get(p, -1)
                    out[(p, t)] = min(o, latest[p]) if o >= 0 else latest[p]
            for p in parts:
                out[(p, times[-1])] = latest[p]
            return out
        finally:
            cluster.close()

    return asyncio.run(run())


def stable_end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition → where an incremental read of ``topic`` stops now: the high watermark a Fetch
    reports, or the last stable offset when a transaction is open below it (its records are not
    committed yet: the next run reads them once the marker is written). Not the listed end offset:
    tansu lists a wrong one for batches of several records (docs/tansu.md)."""

    async def run() -> dict[int, int]:
        cluster = KafkaCluster(parse_bootstrap(bootstrap), 100 << 20, client_id="kcoord-analytics")
        try:
            leaders = await _leaders(cluster, topic)
            out = {}
            for p, leader in sorted(leaders.items()):
                if leader < 0:
                    raise RuntimeError(f"{topic}[{p}] has no leader")
                _, hwm, error, lso = await _fetch_with_lso(cluster, topic, p, 0, leader, max_bytes=1)
                if error not in (ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE) or hwm < 0:
                    raise RuntimeError(f"Fetch {topic}[{p}]: error {error}, high watermark {hwm}")
                out[p] = lso if 0 <= lso < hwm else hwm
            return out
        finally:
            cluster.close()

    return asyncio.run(run())


async def _fetch(
    cluster: KafkaCluster, topic: str, partition: int, offset: int, leader: int, max_bytes: int = 8 << 20
) -> tuple[bytes, int, int]:
    data, hwm, error, _ = await _fetch_with_lso(cluster, topic, partition, offset, leader, max_bytes)
    return data, hwm, error


async def _fetch_with_lso(
    cluster: KafkaCluster, topic: str, partition: int, offset: int, leader: int, max_bytes: int = 8 << 20
) -> tuple[bytes, int, int, int]:
    F = sm.FetchRequest
    req = F(
        replica_id=-1,
        max_wait_ms=1,
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        topics=[
            F.FetchTopic(
                topic=topic,
                partitions=[
                    F.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)
                ],
            )
        ],
    )
    resp = await request(await cluster.node(leader), req, TIMEOUT)
    for t in resp.responses:
        for p in t.partitions:
            if p.partition_index == partition:
                return p.records or b"", p.high_watermark, p.error_code, p.last_stable_offset
    return b"", -1, 0, -1


Row = tuple[int, int, bytes | None, bytes | None]  # offset, timestamp, key, value


def take_committed(
    batches: Iterable[RecordBatch],
    offset: int,
    end: int | None,
    queue: list[Row],
    open_txns: dict[int, list[Row]],
) -> int:
    """Append the committed records of ``batches`` at or after ``offset`` (and below ``end``) to
    ``queue``; a transaction's records wait in ``open_txns`` (by producer id) for its marker: given
    out at a commit, dropped at an abort. Returns the offset after the last batch."""
    nxt = offset
    for batch in batches:
        if batch.next_offset <= offset:
            continue
        if batch.is_control:
            held = open_txns.pop(batch.producer_id, [])
            if batch.control_type() == CONTROL_COMMIT:
                queue.extend(held)
        else:
            into = open_txns.setdefault(batch.producer_id, []) if batch.is_transactional else queue
            for r in batch.records:
                if r.offset >= offset and (end is None or r.offset < end):
                    into.append((r.offset, r.timestamp, r.key, r.value))
        nxt = max(nxt, batch.next_offset)
    return nxt


def read_partition(
    bootstrap: str, topic: str, partition: int, start: int, end: int | None
) -> Iterator[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of ``partition`` from ``start`` up to ``end`` (exclusive;
    None: up to the high watermark the fetches report). A fetch that brings nothing below the high
    watermark is retried; after MAX_STALLS in a row the read fails rather than returning less than
    the partition holds.

    Read committed, by the markers in the log rather than the broker's aborted-transaction list
    (tansu sends none, docs/tansu.md): a transaction's records are held until its control batch,
    given out at a commit and dropped at an abort, as Kafka's group coordinator replays its own
    topic (an aborted TxnOffsetCommit is no commit). A transaction still open at ``end`` is left out."""
    queue: list[Row] = []
    open_txns: dict[int, list[Row]] = {}  # producer id → its records, until the transaction's marker
    stalls = [0]  # fetches in a row that brought nothing below the high watermark

    async def chunk(cluster: KafkaCluster, leader: int, offset: int) -> tuple[int, bool]:
        data, hwm, error = await _fetch(cluster, topic, partition, offset, leader)
        if error not in (ErrorCode.NONE, 0):
            if error == ErrorCode.OFFSET_OUT_OF_RANGE:
                return offset, True
            raise RuntimeError(f"Fetch {topic}[{partition}] at {offset}: error {error}")
        nxt = take_committed(decode_batches(data), offset, end, queue, open_txns)
        done = nxt >= end if end is not None else (hwm >= 0 and nxt >= hwm)
        if nxt == offset and not done:
            # No progress below the high watermark: tansu sometimes answers a Fetch with nothing
            # (no partitions, or no records) although it has them. Ask again; give up loudly.
            stalls[0] += 1
            if stalls[0] > MAX_STALLS:
                if hwm < 0 and end is None:
                    return nxt, True  # the broker never said it has more: an idle partition
                raise RuntimeError(
                    f"Fetch {topic}[{partition}] makes no progress at offset {offset} "
                    f"(high watermark {hwm}, end {end})"
                )
            await asyncio.sleep(0.02)
        else:
            stalls[0] = 0
        return nxt, done

    async def run_some(offset: int) -> tuple[int, bool]:
        cluster = KafkaCluster(parse_bootstrap(bootstrap), 100 << 20, client_id="kcoord-analytics")
        try:
            leaders = await _leaders(cluster, topic)
            leader = leaders.get(partition, -1)
            if leader < 0:
                raise RuntimeError(f"{topic}[{partition}] has no leader")
            done = False
            for _ in range(16):  # a few fetches per event loop run; the caller yields in between
                offset, done = await chunk(cluster, leader, offset)
                if done:
                    break
            return offset, done
        finally:
            cluster.close()

    offset = start
    if end is not None and start >= end:
        return
    while True:
        offset, done = asyncio.run(run_some(offset))
        yield from queue
        queue.clear()
        if done:
            return


def read_all(bootstrap: str, topic: str) -> list[tuple[int, int, int, bytes | None, bytes | None]]:
    """Every record of ``topic`` as (partition, offset, timestamp, key, value): for small topics and tests."""
    out: list[tuple[int, int, int, bytes | None, bytes | None]] = []
    for p in partitions(bootstrap, topic):
        out.extend((p, *r) for r in read_partition(bootstrap, topic, p, 0, None))
    return out
