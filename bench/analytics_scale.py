"""The analytics pipeline at scale: synthetic event records → ``kcoord analytics`` with local[N].

    .venv/bin/python -m bench.analytics_scale --events 1000000 10000000 --master local[2]

The events are *synthetic* and read from Parquet files (``--input-parquet``), not from a topic:
writing 10M records through a broker on this 2-core machine would measure the broker. The files
hold exactly what the event topic holds (Spark's Kafka-source columns, values in JSON schema v1),
so everything after the read is the production pipeline. Mix per 100 events: 60 per-second commit
sums (some with fenced/rejected counts), 10 joins, 5 leaves, 2 expiries, 3 fenced members, 8
rebalance started/completed pairs with 4 assignments of 6 partitions among 3 members, one in 10k
corrupt. Memory is the peak resident set of this process and its children (the JVM and Python
workers), sampled every 0.2 s.

Beside each Spark run, the floor: :mod:`bench.analytics_duckdb` (DuckDB, the same files, the core
tables) in a child process, its peak resident set sampled the same way (``--no-duckdb`` skips it).
Each line also gives the load averages before and after: the machine is shared.
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

T0 = 1_790_000_000_000


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


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(stat[1]), []).append(int(d))
            rss[int(d)] = int(stat[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        total += rss.get(p, 0)
        stack.extend(children.get(p, []))
    return total


def sampled_peak(pid: int, stop: threading.Event, peak: list[int]) -> threading.Thread:
    """A thread that keeps ``peak[0]`` at the largest resident set of ``pid``'s tree until ``stop``."""

    def sample() -> None:
        while not stop.wait(0.2):
            peak[0] = max(peak[0], tree_rss(pid))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    return thread


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
    peak, stop = [0], threading.Event()
    sampled_peak(child.pid, stop, peak)
    out, _ = child.communicate()
    stop.set()
    if child.returncode != 0:
        return {"failed": child.returncode}
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    result.update(wall_seconds=round(time.monotonic() - started, 1), peak_rss_mib=peak[0] >> 20)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000])
    p.add_argument("--master", default="local[2]")
    p.add_argument("--work", default="/tmp/kcoord-analytics-scale")
    p.add_argument("--no-duckdb", action="store_true", help="skip the DuckDB floor")
    p.add_argument("--driver-memory", help="spark.driver.memory (default: kcoord analytics' own)")
    p.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)"
    )
    args = p.parse_args()
    from kcoord.analytics.run import run

    for n in args.events:
        data = Path(args.work) / f"events-{n}"
        if not data.exists():  # generated into a side directory, renamed when complete
            t = time.monotonic()
            partial = data.with_name(data.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            generate(n, partial)
            partial.rename(data)
            print(f"generated {n:,} events in {time.monotonic() - t:.1f} s", flush=True)
        load_before = [round(x, 2) for x in os.getloadavg()]
        floor = None if args.no_duckdb else duckdb_floor(data, threads=2)
        peak, stop = [0], threading.Event()
        sampled_peak(os.getpid(), stop, peak)
        started = time.monotonic()
        summary = run(
            argparse.Namespace(
                bootstrap_server=None,
                out=str(Path(args.work) / f"out-{n}"),
                since=None,
                master=args.master,
                events_topic="__kcoord_events",
                offsets_topic="",
                source="auto",
                input_parquet=str(data),
                no_report=False,
                lag_points=5,
                driver_memory=args.driver_memory,
                conf=args.conf,
            )
        )
        wall = time.monotonic() - started
        stop.set()
        print(
            json.dumps(
                {
                    "events": n,
                    "master": args.master,
                    "wall_seconds": round(wall, 1),
                    "pipeline_seconds": summary["pipeline_seconds"],
                    "session_seconds": summary["session_seconds"],
                    "peak_rss_mib": peak[0] >> 20,
                    "report_seconds": summary.get("report_seconds"),
                    "table_seconds": summary["table_seconds"],
                    "rows": summary["rows"],
                    "duckdb": floor,
                    "load_before": load_before,
                    "load_after": [round(x, 2) for x in os.getloadavg()],
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
