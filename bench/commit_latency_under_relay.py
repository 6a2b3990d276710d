"""Commit latency under relayed traffic: Apache Kafka 4.0's own coordinator beside kcoord in front of
the same Kafka, in one run, rounds interleaved.

    .venv/bin/python -m bench.commit_latency_under_relay --rounds 3
    .venv/bin/python -m bench.commit_latency_under_relay --rounds 2 --targets kafka,kcoord,kcoord-workers-2

One Kafka 4.0 broker (support/kafka_broker.py) is the upstream of every kcoord target (``--storage
kafka``, each on an internal topic of its own: a commit is answered once it is durable on Kafka)
and the ``kafka`` target itself (clients bootstrap to Kafka: its coordinator, its
``__consumer_offsets``). Targets (``--targets``): ``kafka``; ``kcoord`` (one process);
``kcoord-workers-2`` (``kcoord serve --workers 2``); ``kcoord-base``, for an A/B, one process of
another kcoord tree (``--base-src DIR``: a copy of ``src/``, put first on its PYTHONPATH).

Per target and round, on a fresh topic of ``--partitions`` partitions and a fresh group, every
client in a process of its own (bench/commit_latency_clients.py), all bootstrapping to the target,
so for a kcoord target every fetched and produced byte goes through kcoord's relay (the run checks
kcoord's ``kcoord_upstream_bytes`` grew by at least what was produced):

- ``--producers`` producers send ``--rate`` records a second each, ``--record-bytes`` bytes, acks=all;
- ``--members`` KIP-848 consumers (``group.protocol=consumer``) consume and commit synchronously
  after every batch; after ``--phase-seconds`` ``--extra`` more join; after another phase that many
  of the first ones (``--stop oldest``) or of the newcomers (``newest``) close (leave the group);
  a third phase runs with ``--members`` again. The group goes 10 -> 15 -> 10 by default.

Reported per target and phase (by when a commit started) and over the whole run: commits, failed
commits (by error), commit latency p50/p99/max as the consumers timed ``commit()``; records
consumed, produced and failed, the producers' delivery latency p50/p99; the CPU seconds of the
target's processes (kcoord's, not its upstream's; Kafka: its JVM, which also serves every kcoord
target's upstream traffic) and of the Kafka JVM; the load average before and after. For kcoord
targets also, from its /metrics: the OffsetCommit, ConsumerGroupHeartbeat, Fetch and Produce latency inside kcoord
(from the frame read to the answer written; mean and the histogram's p99 bucket), the mean shard
log append, and the bytes relayed. One JSON line per round on stdout (``--json FILE``: all rounds),
then a table per target and phase over all rounds.

``--profile`` runs ``py-spy record`` (this venv's) on the one-process kcoord during its runs.
Nothing is pinned: the machine is shared, so the load average is part of every result.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support import REPO, procs
from support.kafka_broker import KafkaBroker
from support.kcoord_process import SERVING_LINE, serve_command
from support.loadgen import procstat
from support.ports import free_port_block
from support.workload import create_topic, unique

TARGETS = ("kafka", "kcoord", "kcoord-workers-2", "kcoord-base")
CLIENTS = "bench.commit_latency_clients"
# kcoord's latency histograms are read as "the first bucket holding 99% of the requests".
# (The relayed Fetch and Produce too: their latency is kcoord's hop plus the broker's answer.)
_BUCKETS_OF_INTEREST = ("offset_commit", "consumer_group_heartbeat", "fetch", "produce")


@dataclass
class Target:
    name: str
    bootstrap: str
    pids: list[int]
    metrics_url: str | None = None
    child: procs.Child | None = None


@dataclass
class Clients:
    """The client processes of one run, and the monotonic times its phases began."""

    consumers: list[subprocess.Popen[str]] = field(default_factory=list)
    stopped: list[subprocess.Popen[str]] = field(default_factory=list)
    producers: list[subprocess.Popen[str]] = field(default_factory=list)
    phase_starts: list[float] = field(default_factory=list)


# -- processes -------------------------------------------------------------------------------------


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of these processes (all their threads) so far; a process gone counts 0."""
    total = 0.0
    for pid in pids:
        try:
            total += procstat.cpu_seconds(pid)
        except OSError:
            continue
    return total


def start_kcoord(name: str, upstream: str, workers: int, extra: list[str], src: Path | None = None) -> Target:
    """A kcoord target; ``src``: another kcoord tree (a ``src/`` folder) to run instead of this one."""
    listen = f"127.0.0.1:{free_port_block(4)}"
    metrics = f"127.0.0.1:{free_port_block(1)}"
    args = [
        "--storage",
        "kafka",
        "--internal-topic",
        unique("__kcoord_relaylat"),
        "--metrics",
        metrics,
        *extra,
    ]
    if workers > 1:
        args += ["--workers", str(workers)]
    command = serve_command(listen, upstream, args)
    if src is not None:
        command = ["env", f"PYTHONPATH={src}", *command]  # env execs: the pid is kcoord's
    child = procs.Child(name, command).start()
    child.wait_for_log("kcoord workers serving on" if workers > 1 else SERVING_LINE, 120)
    pids = [child.pid]
    if workers > 1:
        pids += [
            p
            for p in procstat.child_pids(child.pid)
            if "workers.worker" in Path(f"/proc/{p}/cmdline").read_text()
        ]
        time.sleep(8)  # the workers' first rebalance: every shard served before anything is timed
    return Target(name, listen, pids, f"http://{metrics}/metrics", child)


def client(role: str, target: Target, topic: str, log: Path, *extra: str) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", CLIENTS, role, "--bootstrap", target.bootstrap, "--topic", topic, *extra]
    with open(log, "a") as stderr:
        return procs.spawn(
            args, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True
        )


def finish(proc: subprocess.Popen[str], timeout: float = 60.0) -> dict[str, Any]:
    """Close the client's stdin (its signal to stop) and read its report."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        procs.terminate(proc)
        return {"error": "no report: did not stop within its timeout"}
    procs.forget(proc)
    try:
        report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"no report (exit {proc.returncode})"}
    return report


def close_stdin(proc: subprocess.Popen[str]) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
        proc.stdin = None  # communicate() would flush it


# -- kcoord's own view -----------------------------------------------------------------------------


def scrape(url: str | None) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a /metrics page, summed over the ``worker`` label (a supervisor's merge)."""
    if url is None:
        return {}
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "worker")))
            samples[key] = samples.get(key, 0.0) + s.value
    return samples


def kcoord_view(before: dict[Any, float], after: dict[Any, float]) -> dict[str, Any]:
    """What kcoord's /metrics say about one run: its request latency per group API, the mean shard
    log append, the bytes relayed."""

    def grew(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    view: dict[str, Any] = {}
    for api in _BUCKETS_OF_INTEREST:
        count = grew("kcoord_request_latency_seconds_count", api=api)
        if not count:
            continue
        buckets = sorted(
            (float(dict(labels)["le"]), after[(n, labels)] - before.get((n, labels), 0.0))
            for (n, labels) in after
            if n == "kcoord_request_latency_seconds_bucket" and dict(labels).get("api") == api
        )
        p99_bucket = next((le for le, c in buckets if c >= 0.99 * count), math.inf)
        view[api] = {
            "requests": int(count),
            "mean_ms": round(grew("kcoord_request_latency_seconds_sum", api=api) / count * 1000, 2),
            "p99_at_most_ms": p99_bucket * 1000,
        }
    appends = grew("kcoord_storage_append_seconds_count")
    view["appends"] = int(appends)
    view["append_mean_ms"] = (
        round(grew("kcoord_storage_append_seconds_sum") / appends * 1000, 2) if appends else None
    )
    view["gc_pause_ms_by_generation"] = {
        g: round(grew("kcoord_gc_pause_seconds_sum", generation=g) * 1000, 1) for g in ("0", "1", "2")
    }
    view["relayed_bytes_out"] = int(grew("kcoord_upstream_bytes_total", direction="out"))
    view["relayed_bytes_in"] = int(grew("kcoord_upstream_bytes_total", direction="in"))
    return view


# -- one run ---------------------------------------------------------------------------------------


def drive(target: Target, topic: str, group: str, args: argparse.Namespace, log: Path) -> Clients:
    """The scenario's clients, phase by phase; returns them all still running except the stopped."""
    run = Clients()
    per_producer = ["--rate", str(args.rate), "--bytes", str(args.record_bytes)]
    for i in range(args.producers):
        run.producers.append(client("producer", target, topic, log, *per_producer, "--client-id", f"p{i}"))

    def consumer(i: int) -> subprocess.Popen[str]:
        return client("consumer", target, topic, log, "--group", group, "--client-id", f"c{i}",
                      "--max-batch", str(args.max_batch))  # fmt: skip

    run.phase_starts.append(time.monotonic())
    run.consumers = [consumer(i) for i in range(args.members)]
    time.sleep(args.phase_seconds)
    run.phase_starts.append(time.monotonic())
    newcomers = [consumer(args.members + i) for i in range(args.extra)]
    run.consumers += newcomers
    time.sleep(args.phase_seconds)
    run.phase_starts.append(time.monotonic())
    leaving = run.consumers[: args.extra] if args.stop == "oldest" else newcomers
    for proc in leaving:
        close_stdin(proc)
    run.stopped = leaving
    time.sleep(args.phase_seconds)
    run.phase_starts.append(time.monotonic())
    return run


def percentiles(values: list[float]) -> dict[str, float | None]:
    ordered = sorted(values)

    def rank(q: float) -> float | None:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else None

    return {"p50_ms": rank(0.50), "p99_ms": rank(0.99), "max_ms": ordered[-1] if ordered else None}


PHASES = ("members", "members+extra", "members again")


def by_phase(commits: list[list[Any]], starts: list[float]) -> dict[str, list[list[Any]]]:
    """Commits per phase, by when they started (the last phase also holds the closing consumers'
    last commits), and "all"."""
    spans = [*zip(PHASES, starts, starts[1:], strict=False), ("all", starts[0], math.inf)]
    phases = {name: [c for c in commits if begin <= c[0] < end] for name, begin, end in spans}
    phases[PHASES[-1]] += [c for c in commits if c[0] >= starts[-1]]
    return phases


def summarize(commits: list[list[Any]]) -> dict[str, Any]:
    """Count, failed by error, latency percentiles of the successful ones."""
    failed: dict[str, int] = {}
    for c in commits:
        if c[2] is not None:
            failed[c[2]] = failed.get(c[2], 0) + 1
    return {"commits": len(commits), "failed": failed, **percentiles([c[1] for c in commits if c[2] is None])}


def run_target(
    target: Target, kafka_pids: list[int], args: argparse.Namespace, round_no: int
) -> tuple[dict[str, Any], dict[str, list[list[Any]]]]:
    """One run against ``target``: its result, and its commits by phase."""
    topic, group = unique("relaylat"), unique("relaylat-g")
    create_topic(target.bootstrap, topic, args.partitions)
    log = Path(tempfile.mkstemp(prefix=f"relaylat-{target.name}-r{round_no}-", suffix=".log")[1])
    spy = start_profile(target) if args.profile and target.name == "kcoord" else None
    metrics_before = scrape(target.metrics_url)
    load_before = os.getloadavg()
    cpu_before = cpu_seconds(target.pids), cpu_seconds(kafka_pids)
    run = drive(target, topic, group, args, log)
    for proc in run.producers + run.consumers:
        close_stdin(proc)
    cpu_after = cpu_seconds(target.pids), cpu_seconds(kafka_pids)
    load_after = os.getloadavg()
    metrics_after = scrape(target.metrics_url)
    if spy is not None:
        spy.send_signal(2)
        spy.wait(60)
    consumers = [finish(p) for p in run.consumers]
    producers = [finish(p) for p in run.producers]
    phases = by_phase([c for r in consumers for c in r.get("commits", [])], run.phase_starts)
    produced = sum(r.get("delivered", 0) for r in producers)
    result: dict[str, Any] = {
        "round": round_no,
        "target": target.name,
        "phases": {name: summarize(commits) for name, commits in phases.items()},
        "consumed": sum(r.get("consumed", 0) for r in consumers),
        "produced": produced,
        "produce_failed": sum(sum(r.get("failed", {}).values()) for r in producers),
        "producer_delivery_ms": [r.get("delivery_ms") for r in producers],
        "client_errors": [r["error"] for r in consumers + producers if "error" in r],
        "target_cpu_s": round(cpu_after[0] - cpu_before[0], 1),
        "kafka_cpu_s": round(cpu_after[1] - cpu_before[1], 1),
        "seconds": round(run.phase_starts[-1] - run.phase_starts[0], 1),
        "load_average": [round(load_before[0], 2), round(load_after[0], 2)],
        "client_log": str(log),
    }
    if target.metrics_url is not None:
        view = kcoord_view(metrics_before, metrics_after)
        result["kcoord"] = view
        # Every produced byte must have gone through kcoord's relay for this run to count.
        result["relayed_all_produced"] = view["relayed_bytes_out"] >= produced * args.record_bytes
    return result, phases


def start_profile(target: Target) -> subprocess.Popen[bytes]:
    out = Path(tempfile.gettempdir()) / f"py-spy-relaylat-{int(time.time())}.txt"
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    print(f"  py-spy -> {out}", flush=True)
    return subprocess.Popen(
        [py_spy, "record", "--pid", str(target.pids[0]), "--format", "raw", "--output", str(out),
         "--rate", "200", "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )  # fmt: skip


# -- report ----------------------------------------------------------------------------------------


def line(r: dict[str, Any]) -> str:
    a = r["phases"]["all"]
    inside = r.get("kcoord", {}).get("offset_commit")
    extra = f", inside kcoord mean {inside['mean_ms']} ms" if inside else ""
    return (
        f"  {r['target']:<17} commits {a['commits']:>6} failed {sum(a['failed'].values()):>3} "
        f"p50 {a['p50_ms']} p99 {a['p99_ms']} max {a['max_ms']} ms{extra}; consumed {r['consumed']:,} "
        f"produced {r['produced']:,}; cpu {r['target_cpu_s']} s (kafka {r['kafka_cpu_s']} s); "
        f"load {r['load_average']}"
    )


def table(
    results: list[dict[str, Any]], commits: dict[str, dict[str, list[list[Any]]]], targets: list[str]
) -> str:
    """Markdown: every run's phases, then each target's phases over all rounds (percentiles of the
    pooled commits)."""
    rows = [
        "| round | target | phase | commits | failed | p50 ms | p99 ms | max ms | load (before, after) |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        for phase in (*PHASES, "all"):
            p = r["phases"][phase]
            rows.append(f"| {r['round']} | {r['target']} | {phase} | {p['commits']:,} | {sum(p['failed'].values())} | "
                        f"{p['p50_ms']} | {p['p99_ms']} | {p['max_ms']} | {r['load_average']} |")  # fmt: skip
    for target in targets:
        for phase in (*PHASES, "all"):
            pooled = commits.get(target, {}).get(phase, [])
            p = summarize(pooled)
            rows.append(f"| all | {target} | {phase} | {p['commits']:,} | {sum(p['failed'].values())} | "
                        f"{p['p50_ms']} | {p['p99_ms']} | {p['max_ms']} | |")  # fmt: skip
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.commit_latency_under_relay",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--targets", default="kafka,kcoord", help=f"comma-separated, of {', '.join(TARGETS)}")
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--extra", type=int, default=5)
    ap.add_argument("--stop", choices=("oldest", "newest"), default="oldest")
    ap.add_argument("--phase-seconds", type=float, default=20.0)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--rate", type=float, default=2000.0, help="records a second, per producer")
    ap.add_argument("--record-bytes", type=int, default=256)
    ap.add_argument("--max-batch", type=int, default=500, help="records per consume() at most")
    ap.add_argument("--kcoord-arg", action="append", default=[], help="an extra `kcoord serve` argument")
    ap.add_argument("--base-src", type=Path, help="kcoord-base: another kcoord tree's src/ folder (A/B)")
    ap.add_argument("--profile", action="store_true", help="py-spy record the one-process kcoord")
    ap.add_argument("--json", type=Path, help="write every run's result here")
    args = ap.parse_args(argv)
    targets = args.targets.split(",")
    unknown = set(targets) - set(TARGETS)
    if unknown:
        ap.error(f"unknown targets {sorted(unknown)}; known: {', '.join(TARGETS)}")
    if ("kcoord-base" in targets) != (args.base_src is not None):
        ap.error("the kcoord-base target and --base-src go together")
    results: list[dict[str, Any]] = []
    pooled: dict[str, dict[str, list[list[Any]]]] = {}
    with KafkaBroker(Path(tempfile.mkdtemp(prefix="bench-relaylat-")) / "kafka") as kafka:
        kafka_pids = [kafka.process.pid] if kafka.process is not None else []
        started: dict[str, Target] = {"kafka": Target("kafka", kafka.bootstrap, kafka_pids)}
        try:
            for name in targets:
                if name != "kafka":
                    started[name] = start_kcoord(
                        name, kafka.bootstrap, 2 if "workers" in name else 1, args.kcoord_arg
                    )
            for round_no in range(1, args.rounds + 1):
                shift = (round_no - 1) % len(targets)
                order = targets[shift:] + targets[:shift]  # each target goes first in turn
                runs = []
                for name in order:
                    r, phases = run_target(started[name], kafka_pids, args, round_no)
                    for phase, commits in phases.items():
                        pooled.setdefault(name, {}).setdefault(phase, []).extend(commits)
                    runs.append(r)
                    print(line(r), file=sys.stderr, flush=True)
                print(json.dumps({"round": round_no, "runs": runs}), flush=True)
                results += runs
        finally:
            for target in started.values():
                if target.child is not None:
                    target.child.stop()
    print(table(results, pooled, targets), file=sys.stderr)
    print(f"\ncommand: python -m bench.commit_latency_under_relay {' '.join(argv if argv is not None else sys.argv[1:])}",
          file=sys.stderr)  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
