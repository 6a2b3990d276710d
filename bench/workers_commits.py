"""Durable commits at 1,000 connections: ``kcoord serve --workers 2``, one kcoord process, and
Apache Kafka 4.0's own coordinator, in one run.

    .venv/bin/python -m bench.workers_commits --rounds 2 --committers 1000 --duration 15

One Kafka 4.0 broker (support/kafka_broker.py) is the upstream of both kcoord targets (``--storage
kafka``, each on an internal topic of its own: a commit is answered once it is durable on Kafka)
and the third target itself (its coordinator, ``__consumer_offsets``). Each run is the load
generator's commit storm (``python -m bench.loadgen --scenario commit-storm``): one connection per
committer, one OffsetCommit in flight each, the committers' connections opened to the coordinator
FindCoordinator names for their group (so with workers, to the worker serving it). Rounds
interleave the three targets, so each sees the same machine load; nothing is pinned (workers need
the cores). Reported per run: commits/s, p50/p99, the CPU of the target's processes (kcoord: the
supervisor and its workers; Kafka: its JVM) and the load average. For kcoord the upstream Kafka's CPU
in the same window is reported too (``upstream_cores``: the appends of kcoord's records, its
metadata answers), and the CPU per commit with it: Kafka's own figure includes its log writes, so
"kcoord + upstream" is the like-for-like comparison, "kcoord" alone the cost of kcoord's code.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from support import REPO, procs
from support.kafka_broker import KafkaBroker
from support.kcoord_process import serve_command
from support.loadgen.procstat import child_pids
from support.ports import free_port_block
from support.workload import unique


def start_kcoord(
    name: str,
    upstream: str,
    workers: int,
    options: list[str] | None = None,
    python: str = sys.executable,
) -> tuple[procs.Child, str, list[int]]:
    """(child, its bootstrap address, the pids to charge) once every worker serves. ``python``: the
    interpreter kcoord runs under (a venv of it with kcoord installed)."""
    listen = f"127.0.0.1:{free_port_block(4)}"
    extra = ["--internal-topic", unique("__kcoord_bench"), "--workers", str(workers), *(options or [])]
    child = procs.Child(name, serve_command(listen, upstream, extra, python), None).start()
    child.wait_for_log("kcoord workers serving on" if workers > 1 else "kcoord serving on", 120)
    assert child.proc is not None
    pids = [child.proc.pid]
    if workers > 1:
        pids += [
            p
            for p in child_pids(child.proc.pid)
            if "workers.worker" in Path(f"/proc/{p}/cmdline").read_text()
        ]
        time.sleep(8)  # the workers' first rebalance: every shard served before anything is timed
    return child, listen, pids


def run_loadgen(
    label: str,
    bootstrap: str,
    pids: list[int],
    upstream_pids: list[int],
    loadgen_args: list[str],
    timeout: float,
) -> dict[str, Any]:
    """One ``python -m bench.loadgen`` run against ``bootstrap`` (``loadgen_args``: its scenario and
    sizes), charging ``pids`` to the target and reporting ``upstream_pids`` apart; its result with
    the load average before and after, or ``{"target", "error"}``."""
    out = Path(tempfile.mkstemp(prefix=f"loadgen-{label}-", suffix=".json")[1])
    cmd = [sys.executable, "-m", "bench.loadgen", "--bootstrap", bootstrap, "--label", label,
           "--json", str(out), *loadgen_args]  # fmt: skip
    for pid in pids:
        cmd += ["--server-pid", str(pid)]
    for pid in upstream_pids:
        cmd += ["--upstream-pid", str(pid)]
    load_before = os.getloadavg()[0]
    try:
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"target": label, "error": f"no result after {timeout:.0f}s"}
    if proc.returncode != 0:
        return {"target": label, "error": proc.stderr[-1500:]}
    result: dict[str, Any] = json.loads(out.read_text())
    result["load_average"] = (round(load_before, 2), round(os.getloadavg()[0], 2))
    return result


def run_storm(
    label: str, bootstrap: str, pids: list[int], upstream_pids: list[int], args: argparse.Namespace
) -> dict[str, Any]:
    storm = ["--scenario", "commit-storm", "--committers", str(args.committers), "--duration", str(args.duration),
             "--storage", "kafka"]  # fmt: skip
    return run_loadgen(label, bootstrap, pids, upstream_pids, storm, args.timeout)


def line(result: dict[str, Any]) -> str:
    if "error" in result:
        return f"{result['target']}: FAILED {result['error']}"
    commit = result.get("commit", {})
    cpu = result.get("server_cores", "?")
    rate = result["commits_per_s"]
    per_commit = f"{cpu / rate * 1e6:.0f} µs CPU/commit" if isinstance(cpu, float) and rate else "?"
    upstream = result.get("upstream_cores")
    if isinstance(cpu, float) and isinstance(upstream, float) and rate:
        per_commit += f"; upstream {upstream} cores, with it {(cpu + upstream) / rate * 1e6:.0f} µs/commit"
    return (
        f"{result['target']}: {result['commits_per_s']:,.0f} commits/s, p50 {commit.get('p50_ms')} ms, "
        f"p99 {commit.get('p99_ms')} ms, server CPU {cpu} cores ({per_commit}), "
        f"errors {sum(result.get('commit_errors', {}).values())}, load {result['load_average']}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--committers", type=int, default=1000)
    ap.add_argument("--duration", type=float, default=15.0)
    ap.add_argument("--timeout", type=float, default=400.0, help="per load generator run, seconds")
    ap.add_argument("--json", help="write every run's result here")
    args = ap.parse_args()
    results: list[dict[str, Any]] = []
    with KafkaBroker(Path(tempfile.mkdtemp(prefix="bench-workers-")) / "kafka") as kafka:
        kafka_pids = [kafka.process.pid] if kafka.process is not None else []
        one, one_at, one_pids = start_kcoord("kcoord-1", kafka.bootstrap, 1)
        two, two_at, two_pids = start_kcoord("kcoord-workers-2", kafka.bootstrap, 2)
        try:
            targets = [("kafka-4.0", kafka.bootstrap, kafka_pids, []), ("kcoord", one_at, one_pids, kafka_pids),
                       ("kcoord-workers-2", two_at, two_pids, kafka_pids)]  # fmt: skip
            for round_ in range(args.rounds):
                for label, bootstrap, pids, upstream_pids in targets:
                    result = run_storm(label, bootstrap, pids, upstream_pids, args)
                    result["round"] = round_ + 1
                    results.append(result)
                    print(f"round {round_ + 1}: {line(result)}", flush=True)
        finally:
            two.stop()
            one.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
