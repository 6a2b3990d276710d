"""What the ownership checks cost an idle kcoord: CPU of two kcoord processes side by
side on one tansu, one with the tail check every ``--interval-ms``, one with it effectively off.

    python -m bench.ownership_checks [--shards 50] [--interval-ms 1000] [--seconds 30]

Prints each process's CPU share of one core over the window (from /proc/PID/stat), and tansu's,
which serves the checking kcoord's Metadata and Fetch requests.
"""

from __future__ import annotations

import argparse
import os
import time

from support.broker import pinned_tansu
from support.kcoord_process import pinned_kcoord


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shards", type=int, default=50)
    parser.add_argument("--interval-ms", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    broker, upstream = pinned_tansu("tansu", None)
    common = ("--shards", str(args.shards))
    checking, _ = pinned_kcoord(
        "checking",
        upstream,
        None,
        *common,
        "--internal-topic",
        "__bench_checks_on",
        "--ownership-check-interval-ms",
        str(args.interval_ms),
    )
    quiet, _ = pinned_kcoord(
        "quiet",
        upstream,
        None,
        *common,
        "--internal-topic",
        "__bench_checks_off",
        "--ownership-check-interval-ms",
        "3600000",
    )
    time.sleep(3.0)  # past start-up
    children = {
        f"kcoord, check every {args.interval_ms} ms": checking,
        "kcoord, check off": quiet,
        "tansu": broker,
    }
    before = {name: cpu_seconds(c.pid) for name, c in children.items()}
    time.sleep(args.seconds)
    after = {name: cpu_seconds(c.pid) for name, c in children.items()}
    print(f"idle, {args.shards} shards, {args.seconds:.0f} s window")
    for name in children:
        print(f"  {name:32s} {100 * (after[name] - before[name]) / args.seconds:6.2f} % of one core")
    for c in (checking, quiet, broker):
        c.stop()


if __name__ == "__main__":
    main()
