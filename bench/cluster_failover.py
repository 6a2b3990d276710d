"""Failover time of a kcoord cluster: kill -9 the node serving a group, time until an
OffsetCommit for that group is acknowledged by the new owner.

A committer asks FindCoordinator (at any live node) and sends OffsetCommit (simple-consumer commit:
generation -1) every 20 ms, re-finding the coordinator after any error; so the figure is the
server side (the cluster's group expiring the dead node, tansu holding the rejoin, the new owner
loading the shard) plus at most 20 ms, without any client library's back-off. After each kill the
node is restarted and the cluster settles before the next kill.

    python -m bench.cluster_failover --kills 10 --session-timeout-ms 4000
"""

from __future__ import annotations

import argparse
import statistics
import time

from kcoord.client import BlockingConnection, KafkaClientError
from kcoord.coordinator.runtime.router import shard_for_group
from kcoord.protocol import messages as m
from support.broker import TansuBroker
from support.kcoord_cluster import BASE_NODE_ID, KcoordCluster
from support.workload import create_topic, unique


def commit_once(bootstrap: list[tuple[str, int]], group: str, topic: str, offset: int) -> int | None:
    """The node id that acknowledged the commit, or None."""
    for address in bootstrap:
        try:
            with BlockingConnection(address, timeout=1.0) as conn:
                found = conn.request(m.FindCoordinatorRequest(key=group, key_type=0), 3)
            if found.error_code:
                return None
            with BlockingConnection((found.host, found.port), timeout=1.0) as conn:
                P = m.OffsetCommitRequest.OffsetCommitRequestPartition
                T = m.OffsetCommitRequest.OffsetCommitRequestTopic
                resp = conn.request(
                    m.OffsetCommitRequest(
                        group_id=group,
                        generation_id_or_member_epoch=-1,
                        member_id="",
                        topics=[T(name=topic, partitions=[P(partition_index=0, committed_offset=offset)])],
                    ),
                    8,
                )
            errors = {p.error_code for t in resp.topics for p in t.partitions}
            return found.node_id if errors == {0} else None
        except (KafkaClientError, OSError, TimeoutError):
            continue
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--shards", type=int, default=50)
    parser.add_argument("--session-timeout-ms", type=int, default=4000)
    args = parser.parse_args()
    broker = TansuBroker().start()
    cluster = KcoordCluster(
        broker.bootstrap, size=3, shards=args.shards, session_timeout_ms=args.session_timeout_ms
    )
    cluster.start()
    samples: list[float] = []
    try:
        topic = unique("failover-bench")
        create_topic(cluster.bootstrap, topic, 1)
        for i in range(args.kills):
            victim = BASE_NODE_ID + i % 3
            owned = cluster.latest_view()[victim][1]
            group = next(
                g for g in (unique("fo") for _ in range(100_000)) if shard_for_group(g, args.shards) in owned
            )
            live = [(p.bootstrap.split(":")[0], p.port) for n, p in cluster.nodes.items() if n != victim]
            assert commit_once(live, group, topic, 1) == victim
            cluster.kill(victim)
            killed = time.monotonic()
            offset = 2
            while commit_once(live, group, topic, offset) is None:
                time.sleep(0.02)
                offset += 1
                if time.monotonic() - killed > 120:
                    raise SystemExit("no failover within 120 s")
            seconds = time.monotonic() - killed
            samples.append(seconds)
            print(
                f"kill {i + 1}: node {victim}: first acknowledged commit on the new owner after {seconds:.2f} s",
                flush=True,
            )
            cluster.restart(victim, graceful=False)
            cluster.wait_for_members(set(cluster.nodes), timeout=90)
    finally:
        cluster.stop()
        broker.stop()
    samples.sort()
    p99 = samples[min(len(samples) - 1, round(0.99 * (len(samples) - 1)))]
    print(
        f"kills={len(samples)} shards={args.shards} cluster.session.timeout.ms={args.session_timeout_ms}: "
        f"p50 {statistics.median(samples):.2f} s, p99 {p99:.2f} s, min {samples[0]:.2f} s, max {samples[-1]:.2f} s"
    )


if __name__ == "__main__":
    main()
