"""Consume through the relay, interleaved: one stored topic, every target in turn.

    .venv/bin/python -m bench.relay_consume --kcoord base=../wt-base/.venv/bin/python \\
        --kcoord new=.venv/bin/python --client java --records 50000 --rounds 6

bench/relay.py gives each target a fresh tansu and produces before it consumes, so one slow
minute of a shared machine lands on one target. Here the records (``--size`` bytes each) are
produced once into one tansu, every kcoord runs beside it from the start, and each round consumes
all of them direct and through each kcoord, the order reversed every other round. Reported: records/s
per round, each kcoord's ratio to direct per round (direct seconds / its seconds) and their median.
tansu and the client on CPU 1, the kcoords on CPU 0 (as bench/relay.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from bench.relay import _start_kcoord, user_system_seconds
from support import procs
from support.broker import pinned_tansu
from support.throughput_clients import RUNS, create_one_partition_topic


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kcoord", action="append", default=[], metavar="NAME=PYTHON", required=True)
    ap.add_argument("--client", choices=sorted(RUNS), default="librdkafka")
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=10_240)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args(argv)
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})
    produce, consume = RUNS[args.client]
    print(f"load average at start: {os.getloadavg()}", flush=True)
    tansu, upstream = pinned_tansu("tansu-consume", cpu=1)
    children: list[procs.Child] = []
    try:
        create_one_partition_topic(upstream, "tp")
        produce(upstream, "tp", args.records, args.size)
        targets: dict[str, tuple[str, int]] = {"direct": (upstream, tansu.pid)}
        for spec in args.kcoord:
            name, _, python = spec.partition("=")
            child, bootstrap, _ = _start_kcoord(str(Path(python).absolute()), upstream)
            children.append(child)
            targets[name] = (bootstrap, child.pid)
        seconds: dict[str, list[float]] = {name: [] for name in targets}
        for r in range(args.rounds):
            for name in list(targets) if r % 2 == 0 else list(targets)[::-1]:
                bootstrap, pid = targets[name]
                c0 = sum(user_system_seconds(pid))
                s = consume(bootstrap, "tp", args.records)
                c1 = sum(user_system_seconds(pid))
                seconds[name].append(s)
                print(
                    f"round {r + 1} {name:8s} {args.records / s:9.0f} records/s  CPU {(c1 - c0) / s:.2f} s/s"
                    f"  load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    finally:
        for child in children:
            child.stop()
        tansu.stop()
    print(f"load average at end: {os.getloadavg()}")
    for name in list(targets)[1:]:
        ratios = [d / s for d, s in zip(seconds["direct"], seconds[name], strict=True)]
        print(
            f"{name:8s} {args.client} {args.records} x {args.size} B consume: median {statistics.median(ratios):.2f}x"
            f" of direct (rounds: {' '.join(f'{x:.2f}' for x in ratios)})"
        )


if __name__ == "__main__":
    sys.exit(main())
