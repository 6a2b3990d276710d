"""kcoord's CPU per request, with no sockets: frames go straight into a real ClientConnection.

    .venv/bin/python -m bench.request_path                      # heartbeats and commits, the table
    .venv/bin/python -m bench.request_path --profile heartbeat  # cProfile of one scenario, top 30
    .venv/bin/python -m bench.request_path --authorization acls # group APIs authorized by ACLs

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

from kcoord.coordinator.cli import tune_gc_for_serving
from kcoord.coordinator.net.acls import Acl, AclOperation, AclPermission, AclRules, PatternType, ResourceType
from kcoord.coordinator.net.connection import ClientConnection
from kcoord.coordinator.net.server import Listener
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey
from support.in_process import FakeTransport, Harness, split_responses


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


BENCH_PRINCIPAL = "User:bench"
NOISE_ACLS = 1000  # ACLs for other principals and resources, so the rules are not trivially small


def bench_acls() -> AclRules:
    """The bench principal may READ the bench groups (a PREFIXED ACL) and topic "t" (LITERAL),
    among NOISE_ACLS ACLs of other principals on other groups and topics."""
    allow, literal, prefixed = AclPermission.ALLOW, PatternType.LITERAL, PatternType.PREFIXED
    acls = [
        Acl(ResourceType.GROUP, prefixed, "bench-group-", BENCH_PRINCIPAL, "*", AclOperation.READ, allow),
        Acl(ResourceType.TOPIC, literal, "t", BENCH_PRINCIPAL, "*", AclOperation.READ, allow),
    ]
    for i in range(NOISE_ACLS):
        rtype = ResourceType.GROUP if i % 2 else ResourceType.TOPIC
        acls.append(
            Acl(
                rtype,
                literal if i % 3 else prefixed,
                f"other-{i}",
                f"User:u{i}",
                "*",
                AclOperation.READ,
                allow,
            )
        )
    return AclRules(acls, frozenset(), False)


def authorize_with_acls(h: Harness, conns: list[ClientConnection]) -> None:
    """``--authorization acls``: the group APIs checked as under authorizer.mode=upstream."""
    h.app.authorization.allow_all = False
    h.app.authorization.rules = bench_acls()
    for conn in conns:
        conn.principal = BENCH_PRINCIPAL


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
    if args.authorization == "acls":
        authorize_with_acls(h, [conn for conn, _ in conns])
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

    return await best_us_per_request(one_pass, answers, len(batch_frames), args.repeat, profile)


async def best_us_per_request(
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
    if args.authorization == "acls":
        authorize_with_acls(h, [h.conn])
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

    return await best_us_per_request(one_pass, answers, len(batch_frames), args.repeat, profile)


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
    p.add_argument(
        "--authorization",
        choices=["off", "acls"],
        default="off",
        help="acls: the group APIs authorized by ACLs (the principal allowed), as authorizer.mode=upstream",
    )
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
            f"{scenario:10s} {us:7.2f} µs CPU per request  ({args.requests} requests, {shape}, "
            f"authorization {args.authorization}, best of {args.repeat})"
        )


if __name__ == "__main__":
    main()
