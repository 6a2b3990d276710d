"""Total commit throughput of a kcoord cluster with 1, 2 and 3 nodes on this machine.

For each size: a fresh tansu, ``n`` nodes in cluster mode (50 shards), ``--groups`` groups whose
coordinators come from FindCoordinator (spread over the nodes by shard ownership), and per group
one committer that keeps one OffsetCommit (simple-consumer commit, generation -1, acks=-1 on the
upstream) in flight on a connection to its coordinator, for ``--seconds`` after a warm-up. Prints
commits/s and each process's CPU share (utime+stime over the window, 1.0 = one core busy), the
generator's (this process) included, and the machine's load average.

    python -m bench.cluster_throughput --nodes 1,2,3 --groups 600 --seconds 15
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from kcoord.client import Connection, KafkaClientError, connect
from kcoord.protocol import messages as m
from support.broker import TansuBroker
from support.kcoord_cluster import BASE_NODE_ID, KcoordCluster
from support.loadgen.procstat import cpu_seconds
from support.workload import create_topic, unique

CONNECTIONS_PER_NODE = 4


async def coordinators(bootstrap: tuple[str, int], groups: list[str]) -> dict[str, int]:
    conn = await connect(bootstrap)
    try:
        found: dict[str, int] = {}
        deadline = time.monotonic() + 60
        while len(found) < len(groups):
            missing = [g for g in groups if g not in found]
            resp = await conn.request(m.FindCoordinatorRequest(key_type=0, coordinator_keys=missing), 4)
            for c in resp.coordinators:
                if c.error_code == 0:
                    found[c.key] = c.port
            if time.monotonic() > deadline:
                raise SystemExit(f"no coordinator for {len(groups) - len(found)} groups")
            if len(found) < len(groups):
                await asyncio.sleep(0.5)
        return found
    finally:
        conn.close()


async def drive(
    ports: list[int], groups: list[str], topic: str, warmup: float, seconds: float, pids: dict[str, int]
) -> dict[str, float]:
    owner = await coordinators(("127.0.0.1", ports[0]), groups)
    conns: dict[int, list[Connection]] = {
        p: [await connect(("127.0.0.1", p)) for _ in range(CONNECTIONS_PER_NODE)] for p in ports
    }
    counting = False
    done = 0
    errors = 0
    stop = False
    P = m.OffsetCommitRequest.OffsetCommitRequestPartition
    T = m.OffsetCommitRequest.OffsetCommitRequestTopic

    async def committer(i: int, group: str) -> None:
        nonlocal done, errors
        conn = conns[owner[group]][i % CONNECTIONS_PER_NODE]
        offset = 0
        while not stop:
            offset += 1
            try:
                resp = await conn.request(
                    m.OffsetCommitRequest(
                        group_id=group,
                        generation_id_or_member_epoch=-1,
                        member_id="",
                        topics=[T(name=topic, partitions=[P(partition_index=0, committed_offset=offset)])],
                    ),
                    8,
                    timeout=30,
                )
            except (KafkaClientError, OSError, TimeoutError):
                errors += 1
                await asyncio.sleep(0.1)
                continue
            if resp.topics[0].partitions[0].error_code:
                errors += counting
                await asyncio.sleep(0.05)
            elif counting:
                done += 1

    tasks = [asyncio.ensure_future(committer(i, g)) for i, g in enumerate(groups)]
    await asyncio.sleep(warmup)
    cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    started = time.monotonic()
    counting = True
    await asyncio.sleep(seconds)
    counting = False
    elapsed = time.monotonic() - started
    cpu1 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    stop = True
    await asyncio.gather(*tasks, return_exceptions=True)
    for pool in conns.values():
        for conn in pool:
            conn.close()
    result = {"commits_per_s": done / elapsed, "errors": float(errors)}
    result.update({f"cpu_{name}": (cpu1[name] - cpu0[name]) / elapsed for name in pids})
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", default="1,2,3")
    parser.add_argument("--groups", type=int, default=600)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    args = parser.parse_args()
    for size in [int(x) for x in args.nodes.split(",")]:
        broker = TansuBroker().start()
        cluster = KcoordCluster(broker.bootstrap, size=size, shards=50, session_timeout_ms=10000)
        try:
            cluster.start(timeout=120)
            topic = unique("throughput")
            create_topic(cluster.bootstrap, topic, 1)
            groups = [f"tp-{i}" for i in range(args.groups)]
            pids = {f"node{n - BASE_NODE_ID}": p.process.pid for n, p in cluster.nodes.items() if p.process}
            assert broker.process is not None
            pids["tansu"] = broker.process.pid
            pids["generator"] = os.getpid()
            ports = [p.port for p in cluster.nodes.values()]
            result = asyncio.run(drive(ports, groups, topic, args.warmup, args.seconds, pids))
            shown = " ".join(f"{k}={v:.2f}" for k, v in result.items() if k.startswith("cpu_"))
            print(
                f"nodes={size} groups={args.groups}: {result['commits_per_s']:.0f} commits/s, "
                f"errors={result['errors']:.0f}, cpu: {shown}, load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        finally:
            cluster.stop()
            broker.stop()


if __name__ == "__main__":
    main()
