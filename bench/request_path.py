"""kcoord's CPU per request, with no sockets: frames go straight into a real ClientConnection.

    .venv/bin/python -m bench.request_path                      # heartbeats and commits, the table
    .venv/bin/python -m bench.request_path --profile heartbeat  # cProfile of one scenario, top 30

The loadgen scenarios measure kcoord over loopback TCP, where syscalls, the event loop and the
load generator share the machine with it. This bench isolates what kcoord's own code costs per
request: a ``ClientConnection`` wired to a real ``App`` (router, shards, group state, metrics, the
codec) over in-memory storage, fed pipelined frames the way a socket read delivers them
(``--batch`` frames per ``data_received``), its writes collected by a fake transport. Members are
joined and synced through the same path first. The figure is process CPU time per request over
``--requests`` requests, best of ``--repeat`` runs, with the garbage collector tuned as
``kcoord serve`` tunes it.

It is a profile target and a regression guard for the per-request path, not a throughput claim:
the loadgen figures (bench/RESULTS.md) are the ones that count.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kcoord.coordinator.cli import tune_gc_for_serving
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.net.connection import ClientConnection
from kcoord.coordinator.net.gateway import ClusterView
from kcoord.coordinator.net.server import App, Listener
from kcoord.coordinator.ops.settings import Settings
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey
from kcoord.storage.memory import MemoryStorage

CONSUMER_METADATA = b"\x00\x01" + m.ConsumerProtocolSubscription(topics=["t"]).encode(1)


class FakeTransport:
    """Collects what the connection writes; the bench parses responses out of it."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.chunks.append(data)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass

    def take(self) -> bytes:
        data = b"".join(self.chunks)
        self.chunks.clear()
        return data


async def _no_listener(broker: Any) -> int:
    raise AssertionError("the bench has no upstream brokers")


def split_responses(data: bytes) -> list[bytes]:
    dec = frames.FrameDecoder()
    return dec.feed(data)


class Harness:
    def __init__(self, shards: int) -> None:
        group = GroupConfig(initial_rebalance_delay_ms=0)
        self.app = App(Settings(shards=shards, storage="memory", group=group), storage=MemoryStorage())
        self.correlation = 0

    async def start(self) -> None:
        app = self.app
        assert app.storage is not None
        await app.storage.open(app.settings.shards)
        app._make_shards()
        await asyncio.gather(*(s.load() for s in app.shards))
        # No upstream: a cluster view that knows the commits' topic, as after its first lookup.
        app.cluster = ClusterView([("upstream", 9092)], "127.0.0.1", 0, 1_000_000, _no_listener)
        app.cluster.topics.partitions["t"] = 1000
        self.transport = FakeTransport()
        self.conn = ClientConnection(Listener(app, None))
        self.conn.connection_made(self.transport)  # type: ignore[arg-type]

    def frame(self, api_key: int, version: int, request: Any) -> bytes:
        self.correlation += 1
        return frames.encode_request(api_key, version, self.correlation, "bench", request)

    async def roundtrip(self, api_key: int, version: int, requests: list[Any]) -> list[Any]:
        self.conn.data_received(b"".join(self.frame(api_key, version, r) for r in requests))
        out: list[bytes] = []
        for _ in range(200):
            await asyncio.sleep(0.005)
            out += split_responses(self.transport.take())
            if len(out) >= len(requests):
                break
        return [frames.decode_response(api_key, version, raw)[1] for raw in out]

    async def join_group(self, group_id: str, size: int) -> list[tuple[str, int]]:
        """Static members join and sync; returns (member id, generation) per member."""
        joins = [
            m.JoinGroupRequest(
                group_id=group_id,
                session_timeout_ms=60_000,
                rebalance_timeout_ms=60_000,
                member_id="",
                group_instance_id=f"{group_id}-i{i}",
                protocol_type="consumer",
                protocols=[
                    m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=CONSUMER_METADATA)
                ],
            )
            for i in range(size)
        ]
        answers = await self.roundtrip(ApiKey.JOIN_GROUP, 9, joins)
        assert all(a.error_code == 0 for a in answers), [a.error_code for a in answers]
        members = [(a.member_id, a.generation_id) for a in answers]
        leader = answers[0].leader
        syncs = []
        for (member_id, generation), join in zip(members, joins, strict=True):
            assignments = []
            if member_id == leader:
                assignments = [
                    m.SyncGroupRequest.SyncGroupRequestAssignment(member_id=mid, assignment=b"")
                    for mid, _ in members
                ]
            syncs.append(
                m.SyncGroupRequest(
                    group_id=group_id,
                    generation_id=generation,
                    member_id=member_id,
                    group_instance_id=join.group_instance_id,
                    protocol_type="consumer",
                    protocol_name="range",
                    assignments=assignments,
                )
            )
        # The leader's sync goes last so the followers' are parked first, as with real clients.
        synced = await self.roundtrip(ApiKey.SYNC_GROUP, 5, syncs)
        assert all(s.error_code == 0 for s in synced), [s.error_code for s in synced]
        return members


def heartbeat_frames(h: Harness, groups: dict[str, list[tuple[str, int]]], count: int) -> list[bytes]:
    out: list[bytes] = []
    members = [(g, mid, gen) for g, ms in groups.items() for mid, gen in ms]
    i = 0
    while len(out) < count:
        g, mid, gen = members[i % len(members)]
        i += 1
        out.append(
            h.frame(ApiKey.HEARTBEAT, 4, m.HeartbeatRequest(group_id=g, generation_id=gen, member_id=mid))
        )
    return out


def commit_frames(h: Harness, groups: dict[str, list[tuple[str, int]]], count: int) -> list[bytes]:
    R = m.OffsetCommitRequest
    out: list[bytes] = []
    members = [(g, mid, gen, p) for g, ms in groups.items() for p, (mid, gen) in enumerate(ms)]
    i = 0
    while len(out) < count:
        g, mid, gen, p = members[i % len(members)]
        i += 1
        req = R(
            group_id=g,
            generation_id_or_member_epoch=gen,
            member_id=mid,
            topics=[
                R.OffsetCommitRequestTopic(
                    name="t",
                    partitions=[R.OffsetCommitRequestPartition(partition_index=p, committed_offset=i)],
                )
            ],
        )
        out.append(h.frame(ApiKey.OFFSET_COMMIT, 9, req))
    return out


async def run_connections(scenario: str, args: argparse.Namespace, profile: bool) -> float:
    """``--connections N``: N client connections with one request in flight each, as a storm of
    committers with a connection each offers them: every loop iteration each connection
    reads one frame, and the answers go out one write per connection."""
    h = Harness(args.shards)
    await h.start()
    groups = {
        f"bench-group-{g}": await h.join_group(f"bench-group-{g}", args.group_size)
        for g in range(args.groups)
    }
    make = heartbeat_frames if scenario == "heartbeat" else commit_frames
    batch_frames = make(h, groups, args.requests)
    conns = []
    for _ in range(args.connections):
        transport = FakeTransport()
        conn = ClientConnection(Listener(h.app, None))
        conn.connection_made(transport)  # type: ignore[arg-type]
        conns.append((conn, transport))
    rounds = [batch_frames[i : i + len(conns)] for i in range(0, len(batch_frames), len(conns))]
    tune_gc_for_serving()

    async def one_pass() -> None:
        for frames_of_round in rounds:
            for (conn, _), frame in zip(conns, frames_of_round, strict=False):
                conn.data_received(frame)
            while any(conn._slots for conn, _ in conns):  # every answer written before the next request
                await asyncio.sleep(0)
            await asyncio.sleep(0)

    def answers() -> int:
        return sum(len(split_responses(t.take())) for _, t in conns)

    return await _best_us_per_request(one_pass, answers, len(batch_frames), args.repeat, profile)


async def _best_us_per_request(
    one_pass: Callable[[], Awaitable[None]],
    answers: Callable[[], int],
    requests: int,
    repeat: int,
    profile: bool,
) -> float:
    """The best of ``repeat`` timed passes, in µs of CPU per request. After each pass, outside the
    timing, ``answers()`` counts what was written: every request must have been answered. With
    ``profile``, cProfile's table of all passes."""
    best = float("inf")
    prof = cProfile.Profile() if profile else None
    for _ in range(repeat):
        started = time.process_time()
        if prof:
            prof.enable()
        await one_pass()
        if prof:
            prof.disable()
        best = min(best, time.process_time() - started)
        answered = answers()
        assert answered == requests, (answered, requests)
    if prof:
        pstats.Stats(prof).sort_stats("tottime").print_stats(int(os.environ.get("KCOORD_PROFILE_ROWS", "30")))
    return best / requests * 1e6


async def run(scenario: str, args: argparse.Namespace, profile: bool) -> float:
    if args.connections:
        return await run_connections(scenario, args, profile)
    h = Harness(args.shards)
    await h.start()
    groups = {
        f"bench-group-{g}": await h.join_group(f"bench-group-{g}", args.group_size)
        for g in range(args.groups)
    }
    make = heartbeat_frames if scenario == "heartbeat" else commit_frames
    batch_frames = make(h, groups, args.requests)
    reads = [b"".join(batch_frames[i : i + args.batch]) for i in range(0, len(batch_frames), args.batch)]
    h.transport.take()
    tune_gc_for_serving()  # as `kcoord serve` does once its shards are loaded

    async def one_pass() -> None:
        for data in reads:
            h.conn.data_received(data)
            if scenario == "commit":
                await asyncio.sleep(0)  # let the shards' group-commit flushes run, as the loop would
                await asyncio.sleep(0)
        while h.conn._slots:
            await asyncio.sleep(0)
        await asyncio.sleep(0)  # the last answers' coalesced write

    def answers() -> int:
        return len(split_responses(h.transport.take()))

    return await _best_us_per_request(one_pass, answers, len(batch_frames), args.repeat, profile)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--groups", type=int, default=10)
    p.add_argument("--group-size", type=int, default=100)
    p.add_argument("--shards", type=int, default=50)
    p.add_argument("--requests", type=int, default=50_000)
    p.add_argument("--batch", type=int, default=32, help="frames per data_received call")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument(
        "--connections",
        type=int,
        default=0,
        help="N connections with one request in flight each, one frame per read (0: one connection, --batch per read)",
    )
    p.add_argument("--only", choices=["heartbeat", "commit"], default=None)
    p.add_argument("--profile", choices=["heartbeat", "commit"], default=None)
    args = p.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    if args.profile:
        args.repeat = 1
        print(
            f"{args.profile}: {asyncio.run(run(args.profile, args, True)):.2f} µs CPU per request (profiled)"
        )
        return
    for scenario in [args.only] if args.only else ["heartbeat", "commit"]:
        us = asyncio.run(run(scenario, args, False))
        shape = (
            f"{args.connections} connections, 1 in flight each"
            if args.connections
            else f"{args.batch} per read"
        )
        print(
            f"{scenario:10s} {us:7.2f} µs CPU per request  ({args.requests} requests, {shape}, best of {args.repeat})"
        )


if __name__ == "__main__":
    main()
