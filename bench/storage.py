"""Storage benchmarks: durable commit throughput and shard load time through KafkaStorage.

    .venv/bin/python -m bench.storage                      # embedded tansu, both benchmarks
    .venv/bin/python -m bench.storage --bootstrap HOST:PORT --only load

(a) ``append``: many concurrent committers drive the real :class:`kcoord.coordinator.runtime.shard.ShardRuntime`
    (so group commit is exactly kcoord's: one append in flight per shard, the next takes every
    record that accumulated meanwhile) over :class:`kcoord.storage.kafka.KafkaStorage`; each commit is
    one OffsetCommit record and counts only once its append was acknowledged (acks=-1).
(b) ``load``: 1,000,000 offset records over 10,000 keys are written to one partition (one shard),
    then a fresh KafkaStorage times ``read()`` of it — ListOffsets, Fetch, CRC, decode, client-side
    compaction and record decoding included — next to a control partition holding only the
    10,000 live records, to show what grows with history and what with live keys.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from dataclasses import dataclass
from typing import Any

from kcoord.coordinator.core.clock import SystemClock
from kcoord.coordinator.core.result import RequestContext, Result
from kcoord.coordinator.ops.settings import Settings, parse_host_port
from kcoord.coordinator.runtime.shard import ShardRuntime
from kcoord.protocol.records import OffsetCommitKey, OffsetCommitValue, Record
from kcoord.storage.kafka import KafkaStorage


def commit_record(group: int, partition: int, offset: int) -> Record:
    return Record(
        OffsetCommitKey(group=f"bench-group-{group}", topic="bench-topic", partition=partition),
        OffsetCommitValue(offset=offset, leader_epoch=-1, metadata="", commit_timestamp=1_700_000_000_000),
    )


class CommitState:
    """The smallest ShardState: every request is one offset commit record and an "ok" reply."""

    def handle(self, api_key: int, ctx: RequestContext, request: Any) -> Result:
        return Result(records=[request], replies=[(ctx, "ok")])

    def replay(self, record: Record) -> None:
        pass

    def poll(self, now_ms: int) -> Result:
        return Result()

    def next_deadline(self) -> int | None:
        return None

    def on_loaded(self) -> Result:
        return Result()


@dataclass
class AppendStats:
    seconds: float
    commits: int
    appends: int
    latencies_ms: list[float]

    @property
    def rate(self) -> float:
        return self.commits / self.seconds


class _Observer:
    def __init__(self) -> None:
        self.appends = 0

    def append_done(self, shard: int, records: int, seconds: float) -> None:
        self.appends += 1

    def shard_loaded(self, shard: int, records: int, seconds: float, records_read: int = 0) -> None:
        pass

    def shard_lost(self, shard: int, fenced: bool, reason: str) -> None:
        pass


async def bench_append(
    bootstrap: list[tuple[str, int]], shards: int, committers: int, seconds: float
) -> AppendStats:
    topic = f"bench_append_{int(time.time())}"
    storage = KafkaStorage(bootstrap, Settings(internal_topic=topic, storage="kafka"))
    await storage.open(shards)
    observer = _Observer()
    runtimes = [
        ShardRuntime(i, CommitState, storage.shard_log(i), SystemClock(), observer) for i in range(shards)
    ]
    await asyncio.gather(*(rt.load() for rt in runtimes))
    stop = time.monotonic() + seconds
    latencies: list[float] = []
    commits = 0

    async def committer(n: int) -> None:
        nonlocal commits
        rt = runtimes[n % shards]
        offset = 0
        while time.monotonic() < stop:
            offset += 1
            started = time.perf_counter()
            reply = await rt.submit(8, RequestContext(api_version=8), commit_record(n, n % 7, offset))
            assert reply == "ok", reply
            latencies.append((time.perf_counter() - started) * 1000)
            commits += 1

    observer.appends = 0
    started = time.perf_counter()
    await asyncio.gather(*(committer(n) for n in range(committers)))
    elapsed = time.perf_counter() - started
    for rt in runtimes:
        rt.close()
    await storage.close()
    return AppendStats(elapsed, commits, observer.appends, latencies)


@dataclass
class LoadStats:
    records_written: int
    live_keys: int
    write_seconds: float
    load_seconds: float
    loaded_records: int


async def _fill(storage: KafkaStorage, shard: int, total: int, keys: int, per_append: int) -> float:
    started = time.perf_counter()
    log = storage.shard_log(shard)
    rng = random.Random(shard)
    written = 0
    offsets = [0] * keys
    order = list(range(keys))
    while written < total:
        if written < keys:  # every key at least once, then random updates
            batch_keys = order[written : written + per_append]
        else:
            batch_keys = [rng.randrange(keys) for _ in range(min(per_append, total - written))]
        records = []
        for k in batch_keys:
            offsets[k] += 1
            records.append(commit_record(k // 10, k % 10, offsets[k]))
        await log.append(records)
        written += len(records)
    return time.perf_counter() - started


async def bench_load(bootstrap: list[tuple[str, int]], total: int, keys: int) -> tuple[LoadStats, LoadStats]:
    topic = f"bench_load_{int(time.time())}"
    settings = Settings(internal_topic=topic, storage="kafka")
    writer = KafkaStorage(bootstrap, settings)
    await writer.open(2)
    write_full = await _fill(writer, 0, total, keys, 5000)  # shard 0: the history
    write_live = await _fill(writer, 1, keys, keys, 5000)  # shard 1: live keys only
    await writer.close()

    results = []
    for shard, written, write_s in ((0, total, write_full), (1, keys, write_live)):
        reader = KafkaStorage(bootstrap, settings)
        await reader.open(2)
        started = time.perf_counter()
        loaded = 0
        async for batch in reader.shard_log(shard).read():
            loaded += len(batch)
        load_s = time.perf_counter() - started
        await reader.close()
        results.append(LoadStats(written, keys, write_s, load_s, loaded))
    return results[0], results[1]


async def main_async(args: argparse.Namespace) -> None:
    broker = None
    if args.bootstrap:
        bootstrap = [parse_host_port(x) for x in args.bootstrap.split(",")]
        where = args.bootstrap
    else:
        from kcoord.coordinator.net.embedded import EmbeddedBroker

        broker = EmbeddedBroker()
        await broker.start()
        bootstrap = [broker.address]
        where = "embedded tansu (memory storage)"
    try:
        print(f"upstream: {where}")
        if args.only in (None, "append"):
            for committers in args.committers:
                st = await bench_append(bootstrap, args.shards, committers, args.seconds)
                lat = sorted(st.latencies_ms)
                p50, p99 = lat[len(lat) // 2], lat[int(len(lat) * 0.99)]
                print(
                    f"append: {args.shards} shards, {committers} committers, {st.seconds:.1f}s: "
                    f"{st.rate:,.0f} durable commits/s, {st.appends} appends "
                    f"({st.commits / max(st.appends, 1):.1f} records/append), latency p50 {p50:.1f} ms p99 {p99:.1f} ms"
                )
        if args.only in (None, "load"):
            full, live = await bench_load(bootstrap, args.records, args.keys)
            for name, s in (("history", full), ("live-only", live)):
                print(
                    f"load ({name}): {s.records_written:,} records over {s.live_keys:,} keys, written in "
                    f"{s.write_seconds:.1f}s; read() {s.load_seconds:.2f}s -> {s.loaded_records:,} live records"
                )
    finally:
        if broker is not None:
            broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="", help="upstream HOST:PORT; empty starts an embedded tansu")
    parser.add_argument("--only", choices=["append", "load"], default=None)
    parser.add_argument("--shards", type=int, default=50)
    parser.add_argument("--committers", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.run(main_async(args))
    except ImportError:
        asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
