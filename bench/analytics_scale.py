"""The analytics pipeline at scale: synthetic event records → ``kcoord analytics`` with local[N].

    .venv/bin/python -m bench.analytics_scale --events 1000000 10000000 --master local[2]

The events are *synthetic* and read from Parquet files (``--input-parquet``), not from a topic:
writing 10M records through a broker on this 2-core machine would measure the broker. The files
hold exactly what the event topic holds (Spark's Kafka-source columns, values in JSON schema v1),
so everything after the read is the production pipeline. Mix per 100 events: 60 per-second commit
sums (some with fenced/rejected counts), 10 joins, 5 leaves, 2 expiries, 3 fenced members, 8
rebalance started/completed pairs with 4 assignments of 6 partitions among 3 members, one in 10k
corrupt.

Each size runs ``kcoord analytics`` in a child process of its own (a fresh interpreter and JVM, so
the wall time includes the Spark session's start, and nothing a run before it grew is counted):
memory is the peak proportional set size (PSS) of that child's process tree (its Python, the JVM,
Spark's Python workers), sampled every second, with the processes that made up the peak; CPU-seconds are the tree's
user + system time (``/proc``, every process seen) and, with ``--event-log``, per table, the Spark
tasks' CPU time from Spark's event log (``executorCpuTime`` of the jobs run while the table was
written: a loaded machine inflates wall time, much less task CPU). The event log is off by default:
writing it costs the run time of its own, and without it the run is the command a user runs.

Beside each Spark run, the floor: :mod:`bench.analytics_duckdb` (DuckDB, the same files, the core
tables) in another child process, its peak memory sampled the same way (``--no-duckdb`` skips
it). Each line also gives the load averages before and after: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from support.process_tree import tree

T0 = 1_790_000_000_000
# kcoord.analytics.run.TABLE_TAG, spelled here: the checkout compared (--compare) may predate it
TABLE_TAG = "kcoord-table-"


def _events(n: int, seed: int, gen: dict[str, int]) -> list[bytes]:
    """``n`` event values; ``gen`` (group → last generation) carries over between chunks."""
    rnd = random.Random(seed)
    out: list[bytes] = []
    ts = T0 + seed * 10_000_000
    while len(out) < n:
        g = f"group-{rnd.randrange(2000)}"
        ts += rnd.randrange(50)
        k = rnd.randrange(100)
        if k < 60:
            fenced = {"ILLEGAL_GENERATION": 1} if k < 3 else {}
            out.append(
                json.dumps(
                    {
                        "v": 1,
                        "type": "commits",
                        "ts": ts,
                        "shard": 1,
                        "group": g,
                        "count": 40,
                        "requests": 20,
                        "fenced": fenced,
                        "rejected": {},
                        "mode": "classic:generation",
                    }
                ).encode()
            )
        elif k < 75:
            t = "member_joined" if k < 70 else "member_left"
            out.append(
                json.dumps(
                    {
                        "v": 1,
                        "type": t,
                        "ts": ts,
                        "shard": 1,
                        "group": g,
                        "member": f"c{k}-{ts}",
                        "kind": "dynamic",
                        "client_id": f"app-{k % 7}",
                        "host": f"/10.0.0.{k % 13}",
                        "reason": "leave_group",
                    }
                ).encode()
            )
        elif k < 77:
            out.append(
                json.dumps(
                    {
                        "v": 1,
                        "type": "member_expired",
                        "ts": ts,
                        "shard": 1,
                        "group": g,
                        "member": f"c{k}-{ts}",
                        "kind": "static",
                        "instance": f"i{k}",
                        "client_id": f"app-{k % 7}",
                        "host": "/10.0.0.9",
                        "timeout_ms": 45000,
                    }
                ).encode()
            )
        elif k < 80:
            out.append(
                json.dumps(
                    {
                        "v": 1,
                        "type": "member_fenced",
                        "ts": ts,
                        "shard": 1,
                        "group": g,
                        "member": "z",
                        "error": "FENCED_INSTANCE_ID",
                        "api": "offset_commit",
                        "kind": "static",
                        "mode": "classic:generation",
                    }
                ).encode()
            )
        else:
            if len(out) + 3 > n:
                continue
            g_gen = gen.get(g, 0) + 1
            gen[g] = g_gen
            proto = "range" if int(g.rsplit("-", 1)[1]) % 2 else "cooperative-sticky"
            out.append(
                json.dumps(
                    {
                        "v": 1,
                        "type": "rebalance_started",
                        "ts": ts,
                        "shard": 1,
                        "group": g,
                        "reason": "member_joined",
                        "generation": g_gen - 1,
                        "members": 3,
                    }
                ).encode()
            )
            out.append(
                json.dumps(
                    {
                        "v": 1,
                        "type": "rebalance_completed",
                        "ts": ts + 40,
                        "shard": 1,
                        "group": g,
                        "generation": g_gen,
                        "duration_ms": 40,
                        "members": 3,
                        "protocol": proto,
                    }
                ).encode()
            )
            owners = [rnd.randrange(3) for _ in range(6)]
            out.append(
                json.dumps(
                    {
                        "v": 1,
                        "type": "assignment",
                        "ts": ts + 40,
                        "shard": 1,
                        "group": g,
                        "generation": g_gen,
                        "protocol_type": "consumer",
                        "protocol": proto,
                        "members": 3,
                        "assignment": [
                            {
                                "member": f"m{i}",
                                "instance": None,
                                "bytes": 30,
                                "partitions": [f"t:{p}" for p in range(6) if owners[p] == i],
                            }
                            for i in range(3)
                        ],
                    }
                ).encode()
            )
        if rnd.randrange(10_000) == 0:
            out.append(b"\x00garbage")
    return out[:n]


def generate(n: int, directory: Path, chunk: int = 500_000) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    offset = 0
    gen: dict[str, int] = {}
    for i, start in enumerate(range(0, n, chunk)):
        values = _events(min(chunk, n - start), seed=i, gen=gen)
        m = len(values)
        table = pa.table(
            {
                "partition": pa.array([(offset + j) % 6 for j in range(m)], pa.int32()),
                "offset": pa.array(range(offset, offset + m), pa.int64()),
                "timestamp": pa.array([T0 + offset + j for j in range(m)], pa.int64()),
                "key": pa.array([b"g"] * m, pa.binary()),
                "value": pa.array(values, pa.binary()),
            }
        )
        pq.write_table(table, directory / f"part-{i:05d}.parquet")
        offset += m


class TreeSampler:
    """Samples ``pid``'s process tree until :meth:`stop`: the CPU-seconds of every process seen (its
    last sample, every 0.2 s) and the peak memory (PSS, and the processes then, every second).

    PSS is read once a second, not every 0.2 s: each read of a 2-3 GiB JVM's costs ~30 ms of CPU
    and its memory map's lock (:func:`support.process_tree.tree`), and five a second made a 10M run
    take 121.6 s of wall instead of 104.4 (2026-11-29, bench/RESULTS.md). The JVM's memory grows
    and shrinks over seconds, not fractions of one."""

    CPU_EVERY = 0.2  # seconds
    MEMORY_EVERY = 5  # CPU samples

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self.at_peak: list[tuple[str, int]] = []
        self.cpu: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self, memory: bool) -> None:
        procs = tree(self.pid, pss=memory)
        for p, (_, _, _, cpu) in procs.items():
            self.cpu[p] = cpu
        if not memory:
            return
        pss = sum(r for _, _, r, _ in procs.values())
        if pss > self.peak:
            self.peak = pss
            self.at_peak = sorted(((name, r >> 20) for _, name, r, _ in procs.values()), key=lambda x: -x[1])

    def _run(self) -> None:
        samples = 0
        while not self._stop.wait(self.CPU_EVERY):
            samples += 1
            self._sample(memory=samples % self.MEMORY_EVERY == 0)

    def stop(self) -> None:
        self._sample(memory=True)
        self._stop.set()
        self._thread.join()

    @property
    def cpu_seconds(self) -> float:
        return round(sum(self.cpu.values()), 1)


def event_log_cpu(directory: Path, windows: dict[str, tuple[float, float]]) -> dict[str, object]:
    """Spark tasks' CPU-seconds (``executorCpuTime``) and GC seconds from the event log in
    ``directory``: in all, and per table (the jobs submitted while it was written, ``windows``:
    name → (start, end) epoch seconds); also the events table's largest stage's tasks and spill."""
    # Spark 4 writes a directory of rolled files (events_1_..., events_2_...) per application
    logs = sorted(f for f in directory.rglob("events_*") if f.is_file())
    if not logs:
        return {}
    job_time: dict[int, float] = {}
    job_table: dict[int, str] = {}
    stage_job: dict[int, int] = {}
    stages: dict[int, dict[str, float]] = {}
    for log in logs:
        for line in log.read_text().splitlines():
            e = json.loads(line)
            ev = e["Event"]
            if ev == "SparkListenerJobStart":
                job_time[e["Job ID"]] = e["Submission Time"] / 1000
                tags = (e.get("Properties") or {}).get("spark.job.tags") or ""
                named = [t.split(TABLE_TAG, 1)[1] for t in tags.split(",") if TABLE_TAG in t]
                if named:  # tagged by the table it wrote (tables are written two at a time)
                    job_table[e["Job ID"]] = named[0]
                for s in e["Stage IDs"]:
                    stage_job[s] = e["Job ID"]
            elif ev == "SparkListenerStageCompleted":
                info = e["Stage Info"]
                acc = {a["Name"]: a.get("Value") or 0 for a in info.get("Accumulables", [])}
                stages[info["Stage ID"]] = {
                    "cpu": acc.get("internal.metrics.executorCpuTime", 0) / 1e9,
                    "gc": acc.get("internal.metrics.jvmGCTime", 0) / 1e3,
                    "tasks": info["Number of Tasks"],
                    "spill_mib": acc.get("internal.metrics.diskBytesSpilled", 0) / 2**20,
                }
    per_table: dict[str, float] = {}
    biggest: dict[str, float] = {}
    for s, st in stages.items():
        job = stage_job.get(s, -1)
        when = job_time.get(job, 0.0)
        name = job_table.get(job) or next((n for n, (a, b) in windows.items() if a <= when <= b), "other")
        per_table[name] = per_table.get(name, 0.0) + st["cpu"]
        if name == "events" and st["cpu"] > biggest.get("cpu", 0.0):
            biggest = st
    return {
        "task_cpu_seconds": round(sum(st["cpu"] for st in stages.values()), 1),
        "gc_seconds": round(sum(st["gc"] for st in stages.values()), 1),
        "table_task_cpu_seconds": {k: round(v, 1) for k, v in per_table.items()},
        "events_stage": {k: round(v, 1) for k, v in biggest.items()},
    }


def duckdb_floor(data: Path, threads: int) -> dict[str, object]:
    """bench.analytics_duckdb over ``data`` in a child process: its result, wall time and peak RSS."""
    import subprocess
    import sys

    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.analytics_duckdb", str(data), "--threads", str(threads)],
        stdout=subprocess.PIPE,
        text=True,
    )
    sampler = TreeSampler(child.pid)
    out, _ = child.communicate()
    sampler.stop()
    if child.returncode != 0:
        return {"failed": child.returncode}
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    result.update(wall_seconds=round(time.monotonic() - started, 1), peak_rss_mib=sampler.peak >> 20)
    return result


def run_one(args: argparse.Namespace, n: int) -> dict[str, object]:
    """``kcoord analytics`` over the ``n`` events' files, in this process (the child's part): its
    summary, and the Spark tasks' CPU per table from the event log."""
    from kcoord.analytics import tables
    from kcoord.analytics.run import run

    work = Path(args.work)
    log_dir = work / f"eventlog-{n}-{args.tag}"
    shutil.rmtree(log_dir, ignore_errors=True)
    event_log = []
    if args.event_log:
        log_dir.mkdir(parents=True)
        event_log = [
            "spark.eventLog.enabled=true",
            "spark.eventLog.compress=false",
            f"spark.eventLog.dir={log_dir}",
        ]
    windows: dict[str, tuple[float, float]] = {}
    write_table = tables.write_table

    def timed_write(spark: object, df: object, out: str, name: str, *a: object, **kw: object) -> None:
        t = time.time()
        write_table(spark, df, out, name, *a, **kw)  # type: ignore[arg-type]
        windows[name] = (t, time.time())

    tables.write_table = timed_write
    summary = run(
        argparse.Namespace(
            bootstrap_server=None,
            out=str(work / f"out-{n}-{args.tag}"),
            since=None,
            master=args.master,
            events_topic="__kcoord_events",
            offsets_topic="",
            source="auto",
            input_parquet=str(work / f"events-{n}"),
            no_report=False,
            lag_points=5,
            driver_memory=args.driver_memory,
            conf=[*args.conf, *event_log],
        )
    )
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()  # flushes the event log
    summary["event_log"] = event_log_cpu(log_dir, windows) if args.event_log else {}
    return summary


def spark_run(
    args: argparse.Namespace, n: int, src: str | None = None, tag: str = "this"
) -> dict[str, object]:
    """:func:`run_one` in a child process, its tree sampled: the summary, wall, peak, CPU. ``src``:
    another checkout's ``src`` directory, whose ``kcoord`` the child imports instead."""
    import subprocess
    import sys

    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))

    cmd = [
        sys.executable,
        "-m",
        "bench.analytics_scale",
        "--child",
        str(n),
        "--tag",
        tag,
        "--work",
        args.work,
    ]
    cmd += ["--master", args.master] + [f"--conf={c}" for c in args.conf]
    if args.event_log:
        cmd.append("--event-log")
    if args.driver_memory:
        cmd += ["--driver-memory", args.driver_memory]
    started = time.monotonic()
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    sampler = TreeSampler(child.pid)
    out, _ = child.communicate()
    wall = time.monotonic() - started
    sampler.stop()
    if child.returncode != 0:
        raise SystemExit(f"the {n:,} events run failed ({child.returncode})")
    summary: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    summary.update(
        wall_seconds=round(wall, 1),
        peak_rss_mib=sampler.peak >> 20,
        peak_processes_mib=sampler.at_peak,
        tree_cpu_seconds=sampler.cpu_seconds,
    )
    return summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000])
    p.add_argument("--master", default="local[2]")
    p.add_argument("--work", default="/tmp/kcoord-analytics-scale")
    p.add_argument("--no-duckdb", action="store_true", help="skip the DuckDB floor")
    p.add_argument("--driver-memory", help="spark.driver.memory (default: kcoord analytics' own)")
    p.add_argument(
        "--event-log",
        action="store_true",
        help="Spark's event log on: the tasks' CPU per table (it costs the run time of its own)",
    )
    p.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)"
    )
    p.add_argument(
        "--compare",
        metavar="SRC",
        help="another checkout's src directory (main's): each size runs with this one, then with it",
    )
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)  # one run, in this process
    p.add_argument("--tag", default="this", help=argparse.SUPPRESS)  # its output: out-N-TAG
    args = p.parse_args()
    if args.child is not None:
        print(json.dumps(run_one(args, args.child)), flush=True)
        return

    for n in args.events:
        data = Path(args.work) / f"events-{n}"
        if not data.exists():  # generated into a side directory, renamed when complete
            t = time.monotonic()
            partial = data.with_name(data.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            generate(n, partial)
            partial.rename(data)
            print(f"generated {n:,} events in {time.monotonic() - t:.1f} s", flush=True)
        floor = None if args.no_duckdb else duckdb_floor(data, threads=2)
        for code, src in [("this", None)] + ([("base", args.compare)] if args.compare else []):
            load_run = [round(x, 2) for x in os.getloadavg()]
            summary = spark_run(args, n, src, code)
            print(
                json.dumps(
                    {
                        "events": n,
                        "code": code,
                        "master": args.master,
                        "wall_seconds": summary["wall_seconds"],
                        "pipeline_seconds": summary["pipeline_seconds"],
                        "session_seconds": summary["session_seconds"],
                        "parse_seconds": summary.get("parse_seconds"),
                        "peak_rss_mib": summary["peak_rss_mib"],
                        "peak_processes_mib": summary["peak_processes_mib"],
                        "tree_cpu_seconds": summary["tree_cpu_seconds"],
                        "report_seconds": summary.get("report_seconds"),
                        "table_seconds": summary["table_seconds"],
                        "rows": summary["rows"],
                        "event_log": summary["event_log"],
                        "duckdb": floor,
                        "load_before": load_run,
                        "load_after": [round(x, 2) for x in os.getloadavg()],
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
