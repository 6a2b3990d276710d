"""The event topic on and off, over sockets: the same loadgen scenarios against two kcoord processes
that differ only in ``--events-topic``, side by side.

    .venv/bin/python -m bench.events_sockets [--rounds 2] [--members 5000] [--committers 100] [--duration 10] [--connections N]

One tansu upstream (CPU 1, with the load generator), two kcoord processes (CPU 0, one loaded at a
time, both ``--storage kafka``, each with its own internal topic): "on" writes ``__kcoord_events``
to the upstream (the default), "off" has ``--events-topic ''``. Each round runs ``steady`` (heartbeats)
and ``commit-storm`` (durable commits) against off, then on. Every child is stopped at the end.
One connection per member, as real clients; ``--connections N`` shares N instead (the
shape of the figures before 2026-11-24).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from bench.run_all import LOADGEN_CPU, SERVER_CPU, run_loadgen
from support import procs
from support.broker import pinned_tansu
from support.kcoord_process import pinned_kcoord
from support.loadgen.plan import Run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--members", type=int, default=5000)
    ap.add_argument("--committers", type=int, default=100)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument(
        "--connections", type=int, default=None, help="N shared connections (default: one per member)"
    )
    args = ap.parse_args()
    from bench.loadgen import raise_fd_limit

    raise_fd_limit()  # the kcoord children inherit it: one connection per member
    shared = [] if args.connections is None else ["--connections", str(args.connections)]
    assert LOADGEN_CPU != SERVER_CPU
    children: list[procs.Child] = []
    rows: list[tuple[str, str, dict[str, Any]]] = []
    try:
        upstream, upstream_addr = pinned_tansu("tansu-upstream", LOADGEN_CPU)
        children.append(upstream)
        servers = {}
        for label, extra in (("off", ["--events-topic", ""]), ("on", [])):
            child, addr = pinned_kcoord(
                f"kcoord-events-{label}",
                upstream_addr,
                SERVER_CPU,
                "--storage",
                "kafka",
                "--internal-topic",
                f"__kcoord_offsets_events_{label}",
                *extra,
            )
            children.append(child)
            servers[label] = (child, addr)
        runs = [
            Run(
                "steady",
                "steady",
                [
                    "--members",
                    str(args.members),
                    "--interval",
                    "3",
                    "--duration",
                    str(args.duration),
                    "--lanes",
                    "5000",
                    *shared,
                ],
            ),
            Run(
                "commit-storm",
                "commit-storm",
                ["--committers", str(args.committers), "--duration", str(args.duration), *shared],
            ),
        ]
        for rnd in range(args.rounds):
            for run in runs:
                for label in ("off", "on"):
                    child, addr = servers[label]
                    extra = ["--storage", "kafka"] if run.scenario == "commit-storm" else []
                    result = run_loadgen(run, f"events-{label}", addr, [child.pid], extra, 600)
                    rows.append((f"{run.scenario} #{rnd + 1}", label, result))
                    time.sleep(1)
    finally:
        for child in reversed(children):
            child.stop()
    from support.loadgen import report

    for title, label, result in rows:
        line = (
            report.summary(result).splitlines()[-1].strip()
            if "error" not in result
            else result["error"][:200]
        )
        print(f"{title:18} events {label:3}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
