"""What authorizing the group APIs adds to a commit's CPU, off and on in the same process.

    .venv/bin/python -m bench.authorization_cost                 # OffsetCommit v9, 32 per read
    .venv/bin/python -m bench.authorization_cost --scenario heartbeat
    .venv/bin/python -m bench.authorization_cost --scenario describe-groups   # one 20,000-group check
    .venv/bin/python -m bench.authorization_cost --scenario describe-groups-served

The harness of ``bench.request_path`` (a real ``ClientConnection`` and ``App`` over memory storage,
no sockets), fed the same frames in alternating passes: authorization off (as without an
authorizer upstream), then on (``authorizer.mode=upstream`` with 1,002 ACLs, the principal allowed:
a prefixed ACL on its groups, a literal one on its topic). Alternating in one process keeps the
machine's load and clock the same for both; the figure is each mode's best pass (and median), in
µs of process CPU per request, and the ratio of the bests. ``describe-groups`` times the check of
one DescribeGroups of 20,000 allowed groups alone, first with no decision cached, then again (it runs
in one loop iteration). ``describe-groups-served`` sends such a request through the connection and
reports the longest loop iteration (CPU time) until it is answered, without ACLs, with ACLs and no decision
cached, and with every decision cached: what every other client may wait at most.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from bench.request_path import (
    BENCH_PRINCIPAL,
    authorize_with_acls,
    bench_acls,
    commit_frames,
    heartbeat_frames,
)
from kcoord.coordinator.cli import tune_gc_for_serving
from kcoord.coordinator.net import group_authz
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey
from support.in_process import Harness, split_responses


async def run(args: argparse.Namespace) -> dict[str, list[float]]:
    h = Harness(args.shards)
    await h.start()
    groups = {
        f"bench-group-{g}": await h.join_group(f"bench-group-{g}", args.group_size)
        for g in range(args.groups)
    }
    make = heartbeat_frames if args.scenario == "heartbeat" else commit_frames
    batch_frames = make(h, groups, args.requests)
    reads = [b"".join(batch_frames[i : i + args.batch]) for i in range(0, len(batch_frames), args.batch)]
    h.transport.take()
    authorization = h.app.authorization
    authorize_with_acls(h, [h.conn])
    rules = authorization.rules
    tune_gc_for_serving()

    async def one_pass() -> float:
        started = time.process_time()
        for data in reads:
            h.conn.data_received(data)
            await asyncio.sleep(0)  # the shards' group-commit flushes, as the loop would run them
            await asyncio.sleep(0)
        while h.conn._slots:
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        spent = time.process_time() - started
        answered = len(split_responses(h.transport.take()))
        assert answered == len(batch_frames), (answered, len(batch_frames))
        return spent / len(batch_frames) * 1e6

    results: dict[str, list[float]] = {"off": [], "acls": []}
    for round_ in range(args.rounds):
        # Which goes first alternates: every pass appends to the shards' in-memory logs, so a later
        # pass may be a little slower, and neither mode should always be the later one.
        for mode in ("off", "acls") if round_ % 2 == 0 else ("acls", "off"):
            authorization.allow_all, authorization.rules = (True, None) if mode == "off" else (False, rules)
            results[mode].append(await one_pass())
    return results


def describe_groups(count: int) -> None:
    request = m.DescribeGroupsRequest(groups=[f"bench-group-{i}" for i in range(count)])
    may = bench_acls().decider(BENCH_PRINCIPAL, "127.0.0.1")
    tune_gc_for_serving()
    for cache in ("cold", "warm"):
        started = time.process_time()
        assert group_authz.check(ApiKey.DESCRIBE_GROUPS, 5, request, may) is None
        print(
            f"DescribeGroups of {count} allowed groups, decisions {cache}: {(time.process_time() - started) * 1e3:.1f} ms"
        )


async def describe_groups_served(count: int, rounds: int) -> None:
    h = Harness(50)
    await h.start()
    authorization = h.app.authorization
    authorize_with_acls(h, [h.conn])
    request = m.DescribeGroupsRequest(groups=[f"bench-group-{i}" for i in range(count)])
    frame = h.frame(ApiKey.DESCRIBE_GROUPS, 5, request)
    loop = asyncio.get_running_loop()
    tune_gc_for_serving()

    async def longest_iteration() -> tuple[float, float]:
        """(longest loop iteration, total) in ms while the request is served: an iteration's
        length in CPU time (thread_time), so that the machine's other work does not count."""
        ticks: list[float] = []

        def tick() -> None:
            ticks.append(time.thread_time())
            if not answered:
                loop.call_soon(tick)

        answered = False
        started = time.perf_counter()
        loop.call_soon(tick)
        h.conn.data_received(frame)
        while not h.transport.chunks:
            await asyncio.sleep(0)
        answered = True
        total = time.perf_counter() - started
        await asyncio.sleep(0)
        assert len(split_responses(h.transport.take())) == 1
        gaps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
        return max(gaps) * 1e3, total * 1e3

    figures: dict[str, list[tuple[float, float]]] = {"no ACLs": [], "ACLs, cold": [], "ACLs, warm": []}
    for _ in range(rounds):
        authorization.allow_all, authorization.rules = True, None
        figures["no ACLs"].append(await longest_iteration())
        authorization.allow_all, authorization.rules = False, bench_acls()  # a fresh decision cache
        figures["ACLs, cold"].append(await longest_iteration())
        figures["ACLs, warm"].append(await longest_iteration())
    for mode, runs in figures.items():
        longest = statistics.median(r[0] for r in runs)
        total = statistics.median(r[1] for r in runs)
        print(f"DescribeGroups of {count} groups served, {mode}: longest loop iteration {longest:.2f} ms "
              f"(median of {rounds}), answered in {total:.0f} ms")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--scenario",
        choices=["commit", "heartbeat", "describe-groups", "describe-groups-served"],
        default="commit",
    )
    p.add_argument("--groups", type=int, default=10)
    p.add_argument("--group-size", type=int, default=100)
    p.add_argument("--shards", type=int, default=50)
    p.add_argument("--requests", type=int, default=20_000)
    p.add_argument("--batch", type=int, default=32, help="frames per data_received call")
    p.add_argument("--rounds", type=int, default=15, help="alternating off/acls passes")
    args = p.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    if args.scenario == "describe-groups":
        describe_groups(20_000)
        return
    if args.scenario == "describe-groups-served":
        asyncio.run(describe_groups_served(20_000, args.rounds))
        return
    results = asyncio.run(run(args))
    best = {mode: min(us) for mode, us in results.items()}
    for mode, us in results.items():
        print(
            f"{args.scenario} authorization {mode:4s}: best {best[mode]:6.2f} µs, median {statistics.median(us):6.2f} µs per request"
        )
    added = best["acls"] - best["off"]
    print(
        f"authorization adds {added:+.2f} µs ({added / best['off'] * 100:+.1f}%) per {args.scenario} (bests of {args.rounds})"
    )


if __name__ == "__main__":
    main()
