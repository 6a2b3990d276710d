"""How fast kcoord serves its groups again after its internal topic was deleted upstream, on tansu
and on Apache Kafka side by side.

    python -m bench.topic_loss_heal [--upstreams tansu,kafka] [--nodes 1] [--shards 50] [--groups 200]
                                    [--warmup 5] [--runs 1]

Per run: a fresh upstream broker, one kcoord (or a cluster of ``--nodes``), ``--groups`` clients
each committing one partition in a loop and reading every acknowledged commit back
(support/topic_loss.py), ``--warmup`` seconds of that, the internal topic deleted, and the clients
kept committing until every group was served again. Prints per run the seconds from the delete
until every group was served again (and the median group), the shard loads and "log lost" events
kcoord logged after the delete, inconsistent reads, and how many of the groups served again lost
a commit acknowledged after the heal across a kill -9 and a restart (must be 0). ``KCOORD_BENCH_KEEP_LOG=DIR`` keeps the
kcoord logs there.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from support.broker import BrokerProcess, TansuBroker
from support.kafka_broker import KafkaBroker
from support.kcoord_cluster import KcoordCluster
from support.kcoord_process import KcoordProcess
from support.topic_loss import count_log_events, read_back, run_scenario
from support.workload import create_topic, unique

KEEP_LOGS = os.environ.get("KCOORD_BENCH_KEEP_LOG", "")


def start_upstream(kind: str, log_dir: Path) -> BrokerProcess:
    broker: BrokerProcess = TansuBroker(log_dir=log_dir) if kind == "tansu" else KafkaBroker(log_dir=log_dir)
    return broker.start()


def start_kcoord(upstream: str, nodes: int, shards: int, internal: str, check_ms: int) -> list[KcoordProcess]:
    check = ("--ownership-check-interval-ms", str(check_ms))
    if nodes == 1:
        args = ("--shards", str(shards), "--storage", "kafka", "--internal-topic", internal, *check)
        return [KcoordProcess(*args, bootstrap=upstream).start()]
    cluster = KcoordCluster(upstream, size=nodes, shards=shards, extra=check)
    cluster.topic = internal
    for node_id in cluster.nodes:
        cluster.nodes[node_id] = cluster._process(node_id)
    cluster.start()
    return list(cluster.nodes.values())


def one_run(kind: str, args: argparse.Namespace, run: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        broker = start_upstream(kind, Path(tmp))
        try:
            data_topic, internal = unique("heal-data"), unique("__kcoord_heal")
            create_topic(broker.bootstrap, data_topic, args.partitions)
            nodes = start_kcoord(broker.bootstrap, args.nodes, args.shards, internal, args.check_interval_ms)
            bootstrap = ",".join(p.bootstrap for p in nodes)
            names = [f"heal-{i:04d}" for i in range(args.groups)]
            try:
                before = sum(count_log_events(p.log_path, "shard.loaded") for p in nodes)
                report = asyncio.run(
                    run_scenario(
                        bootstrap,
                        broker.bootstrap,
                        internal,
                        data_topic,
                        names,
                        bound=args.bound,
                        warmup=args.warmup,
                        partitions=args.partitions,
                    )  # fmt: skip
                )
                loads = sum(count_log_events(p.log_path, "shard.loaded") for p in nodes) - before
                lost = sum(count_log_events(p.log_path, "shard.lost") for p in nodes)
            finally:
                for i, p in enumerate(nodes):
                    p.kill()
                    if KEEP_LOGS:
                        shutil.copy(p.log_path, Path(KEEP_LOGS) / f"{kind}-run{run}-node{i}.log")
            restarted = start_kcoord(
                broker.bootstrap, args.nodes, args.shards, internal, args.check_interval_ms
            )
            try:
                after = asyncio.run(read_back(restarted[0].bootstrap, data_topic, names))
            finally:
                for p in restarted:
                    p.kill()
            # Only a group served again has its last acknowledged commit after the heal; what was
            # acknowledged before the delete went with the topic.
            lost_commits = [
                g.group
                for g in report.groups
                if g.served_again_at is not None and not (g.acknowledged <= after[g.group][1] <= g.attempted)
            ]
            within = report.served_within()
            return {
                "heal_s": report.heal_seconds,
                "median_s": statistics.median(within) if within else None,
                "unserved": len(report.timed_out),
                "shard_loads": loads,
                "log_lost_events": lost,
                "inconsistent_reads": len(report.inconsistent_reads()),
                "lost_acked_commits": len(lost_commits),
            }
        finally:
            broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--upstreams", default="tansu,kafka")
    parser.add_argument("--nodes", type=int, default=1, help="kcoord nodes (more than 1: cluster mode)")
    parser.add_argument("--shards", type=int, default=50)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=1, help="partitions each commit names")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds of commits before the delete")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--bound", type=float, default=120.0, help="give up waiting after this many seconds")
    parser.add_argument("--check-interval-ms", type=int, default=1000)
    args = parser.parse_args()
    print(
        f"{args.groups} groups committing {args.partitions} partition(s), {args.shards} shards, {args.nodes} kcoord node(s), {args.warmup:g} s of commits "
        f"before the delete, ownership check every {args.check_interval_ms} ms"
    )
    for kind in args.upstreams.split(","):
        for run in range(args.runs):
            result = one_run(kind, args, run)
            fields = "  ".join(
                f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()
            )
            print(f"{kind:6s} run {run + 1}: {fields}", flush=True)


if __name__ == "__main__":
    main()
