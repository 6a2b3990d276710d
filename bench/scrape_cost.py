"""What a /metrics scrape costs the event loop, by the groups and members kcoord holds, in process.

    .venv/bin/python -m bench.scrape_cost                                  # 10k and 50k members, both protocols
    .venv/bin/python -m bench.scrape_cost --members 50000 --only consumer

A scrape runs on the event loop (the collectors read shard state, which only the loop may touch),
so while it runs no request is served. The group gauges are counted at scrape time: one walk over
the classic groups (their member counts are kept) and, for KIP-848 consumer groups, one over their
members (each member's protocol and kind). This measures that walk and the whole exposition.

Each protocol runs in a fresh process: the groups are settled through the server's own path (the
harness of ``bench/member_memory.py``: a real ``App`` over memory storage, encoded frames through a
real ``ClientConnection``), groups of ``--group-size`` members, then ``--scrapes`` scrapes are
timed: ``generate_latest`` of the App's registry (what /metrics answers) and the group collector's
``collect()`` alone. Medians, in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from prometheus_client import generate_latest

from kcoord.coordinator.ops.metrics import GroupStateCollector

from .member_memory import MemoryBench, settle_classic, settle_consumer


def _median_ms(run: Any, times: int) -> float:
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        run()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def measure(protocol: str, members: int, group_size: int, scrapes: int) -> dict[str, Any]:
    h = MemoryBench(shards=8)
    await h.start_with_topics(1, group_size)
    groups = members // group_size
    if protocol == "classic":
        await settle_classic(h, groups, group_size, False, "t0", 1)
    else:
        await settle_consumer(h, groups, group_size, False, "t0")
    h.drop_log()
    app = h.app
    collector = GroupStateCollector(app.router.owned_shards, lambda: len(app.serving_shards()))
    registry = app.metrics.registry
    registry.register(collector)  # what App.start() registers (metrics.watch_shards)
    exposition = generate_latest(registry).decode()
    gauge_lines = [line for line in exposition.splitlines() if line.startswith("kcoord_group_members{")]
    return {
        "protocol": protocol, "members": groups * group_size, "groups": groups,
        "scrape_ms": round(_median_ms(lambda: generate_latest(registry), scrapes), 2),
        "group_collector_ms": round(_median_ms(lambda: list(collector.collect()), scrapes), 2),
        "exposition_bytes": len(exposition), "member_series": gauge_lines,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--members", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--group-size", type=int, default=10)
    parser.add_argument("--scrapes", type=int, default=21)
    parser.add_argument("--only", choices=("classic", "consumer"))
    parser.add_argument("--child", choices=("classic", "consumer"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = asyncio.run(measure(args.child, args.members[0], args.group_size, args.scrapes))
        print(json.dumps(result))
        return
    print(
        f"{'protocol':<9} {'members':>8} {'groups':>7} {'scrape ms':>10} {'group collector ms':>19} {'bytes':>7}"
    )
    for members in args.members:
        for protocol in (args.only,) if args.only else ("classic", "consumer"):
            cmd = [sys.executable, "-m", "bench.scrape_cost", "--child", protocol, "--members", str(members),
                   "--group-size", str(args.group_size), "--scrapes", str(args.scrapes)]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=os.getcwd())
            if done.returncode != 0:
                raise SystemExit(done.stderr)
            r = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"{r['protocol']:<9} {r['members']:>8} {r['groups']:>7} {r['scrape_ms']:>10} "
                f"{r['group_collector_ms']:>19} {r['exposition_bytes']:>7}"
            )
            for line in r["member_series"]:
                print(f"    {line}")


if __name__ == "__main__":
    main()
