"""Two kcoord builds side by side in one session: the commit storm with one connection per committer.

    .venv/bin/python -m bench.commit_side_by_side --base /work/wt-commit-base --rounds 3
    .venv/bin/python -m bench.commit_side_by_side --base /work/wt-commit-base --profile new
    .venv/bin/python -m bench.commit_side_by_side --storage-split --rounds 3   # this build: durable vs memory

The commit target is set against Kafka at 1,000 committers, each on its own connection, commits
durable on the upstream. This runner starts one tansu upstream (CPU 1, beside the load generator,
as ``bench.run_all`` pins it) and two kcoord processes on CPU 0, ``--storage kafka`` each on its own
internal topic: "base" from another checkout's own venv (``--base DIR``: ``DIR/.venv/bin/python``)
and "new" from this one. The commit storm (``python -m bench.loadgen --scenario commit-storm
--connections N``) runs against them in turn, alternating, so both see the same machine load; only
the one under load does work (the other is idle). Reported per run: commits/s, p50/p99, kcoord's
CPU (cores, and µs per commit) and the load average; then the new/base ratios per round.
``--profile new|base`` runs ``py-spy record`` on that kcoord during its runs (py-spy in this venv).

``--storage-split`` compares this build with itself instead: "base" is ``--storage kafka`` (durable,
as above) and "new" is ``--storage memory`` (no log), both on CPU 0 against the same tansu, so the
difference in CPU per commit is what the durable append costs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from support import REPO, procs
from support.broker import pinned_tansu
from support.kcoord_process import SERVING_LINE, serve_command
from support.ports import free_port_block

SERVER_CPU = 0
LOADGEN_CPU = 1
UPSTREAM_CPU = 1


def start_kcoord(
    name: str, python: str, upstream: str, topic: str, storage: str = "kafka"
) -> tuple[procs.Child, str]:
    port = free_port_block(4)
    listen = f"127.0.0.1:{port}"
    extra = ["--storage", storage, "--metrics", f"127.0.0.1:{free_port_block(1)}"]
    if storage == "kafka":
        extra += ["--internal-topic", topic]
    child = procs.Child(name, serve_command(listen, upstream, extra, python), SERVER_CPU).start()
    child.wait_for_log(SERVING_LINE, 90)
    return child, listen


def append_totals(child: procs.Child) -> dict[str, float]:
    """The shard log's append counters from kcoord's /metrics: appends, records, seconds."""
    metrics = child.args[child.args.index("--metrics") + 1]
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    wanted = {
        "kcoord_storage_append_batch_records_count": "appends",
        "kcoord_storage_append_batch_records_sum": "records",
        "kcoord_storage_append_seconds_sum": "seconds",
    }
    totals = dict.fromkeys(wanted.values(), 0.0)
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in wanted:
            totals[wanted[name]] = float(value)
    return totals


def run_storm(
    label: str, bootstrap: str, pid: int, args: argparse.Namespace, storage: str = "kafka"
) -> dict[str, Any]:
    out = Path(tempfile.mkstemp(prefix=f"commit-{label}-", suffix=".json")[1])
    cmd = [
        *procs.taskset_prefix(LOADGEN_CPU),
        sys.executable,
        "-m",
        "bench.loadgen",
        "--bootstrap",
        bootstrap,
        "--scenario",
        "commit-storm",
        "--label",
        label,
        "--json",
        str(out),
        "--server-pid",
        str(pid),
        "--committers",
        str(args.committers),
        "--connections",
        str(args.connections),
        "--duration",
        str(args.duration),
        "--storage",
        "kafka (durable, acks=-1 on the upstream tansu)" if storage == "kafka" else storage,
    ]
    spy = None
    if args.profile == label:
        svg = Path(tempfile.gettempdir()) / f"py-spy-{label}-{int(time.time())}.txt"
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        spy = subprocess.Popen(
            [
                py_spy,
                "record",
                "--pid",
                str(pid),
                "--format",
                "raw",
                "--output",
                str(svg),
                "--rate",
                "200",
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        print(f"     py-spy -> {svg}", flush=True)
    load = os.getloadavg()[0]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=args.timeout)
    if spy is not None:
        spy.send_signal(2)
        spy.wait(30)
    if proc.returncode != 0:
        raise RuntimeError(f"loadgen against {label} failed:\n{proc.stderr[-2000:]}")
    r = json.loads(out.read_text())
    c = r.get("commit", {})
    rate = r["commits_per_s"]
    cores = r.get("server_cores")
    return {
        "label": label,
        "commits_per_s": rate,
        "p50_ms": c.get("p50_ms"),
        "p99_ms": c.get("p99_ms"),
        "server_cores": cores,
        "us_per_commit": round(cores / rate * 1e6, 1) if cores and rate else None,
        "loadgen_cores": r.get("loadgen_cores"),
        "other_cores": r.get("other_cores"),
        "errors": r.get("commit_errors"),
        "load_1m": round(load, 2),
    }


def _or_dash(value: float | None) -> str:
    return "—" if value is None else str(value)


def main() -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.commit_side_by_side",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--base", help="checkout of the base build, with its own .venv")
    ap.add_argument(
        "--storage-split",
        action="store_true",
        help="no base build: this build with --storage kafka (base) and --storage memory (new)",
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--committers", type=int, default=1000)
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--profile", choices=["base", "new"], default=None)
    ap.add_argument("--only", choices=["base", "new"], default=None, help="run one build only")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.storage_split == bool(args.base):
        ap.error("give either --base DIR or --storage-split")
    base_python = sys.executable if args.storage_split else str(Path(args.base) / ".venv" / "bin" / "python")
    storage = {"base": "kafka", "new": "memory" if args.storage_split else "kafka"}
    children: list[procs.Child] = []
    results: list[dict[str, Any]] = []
    try:
        upstream, upstream_addr = pinned_tansu("tansu-upstream", UPSTREAM_CPU)
        children.append(upstream)
        builds: dict[str, tuple[procs.Child, str]] = {}
        for label, python in (("base", base_python), ("new", sys.executable)):
            if args.only in (None, label):
                builds[label] = start_kcoord(
                    f"kcoord-{label}", python, upstream_addr, f"__kcoord_offsets_{label}", storage[label]
                )
                children.append(builds[label][0])
        if args.storage_split:
            print(
                "storage split: base = this build --storage kafka, new = this build --storage memory",
                flush=True,
            )
        print(
            f"upstream {upstream_addr}; "
            + ", ".join(f"{k} {a} (pid {c.pid})" for k, (c, a) in builds.items()),
            flush=True,
        )
        for rnd in range(args.rounds):
            order = list(builds) if rnd % 2 == 0 else list(reversed(builds))
            for label in order:
                child, addr = builds[label]
                before = append_totals(child)
                r = run_storm(label, addr, child.pid, args, storage[label])
                after = append_totals(child)
                appends = after["appends"] - before["appends"]
                # Over the whole storm (setup and warm-up too): how much each durable append carried.
                r["records_per_append"] = (
                    round((after["records"] - before["records"]) / appends, 1) if appends else None
                )
                r["append_ms"] = (
                    round((after["seconds"] - before["seconds"]) / appends * 1000, 1) if appends else None
                )
                r["round"] = rnd + 1
                results.append(r)
                print(
                    f"  round {rnd + 1} {label:4s}: {r['commits_per_s']:>9,.0f}/s p50 {r['p50_ms']} ms p99 {r['p99_ms']} ms "
                    f"cores {r['server_cores']} ({r['us_per_commit']} µs/commit) loadgen {r['loadgen_cores']} "
                    f"other {r['other_cores']} load {r['load_1m']} records/append {r['records_per_append']} "
                    f"append {r['append_ms']} ms errors {r['errors'] or 'none'}",
                    flush=True,
                )
    finally:
        for child in reversed(children):
            child.stop()
    print(
        "\n| round | build | commits/s | p50 ms | p99 ms | kcoord cores | µs CPU/commit | records/append | append ms | load (1 min) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['round']} | {r['label']} | {r['commits_per_s']:,.0f} | {r['p50_ms']} | {r['p99_ms']} | "
            f"{r['server_cores']} | {r['us_per_commit']} | {_or_dash(r['records_per_append'])} | {_or_dash(r['append_ms'])} | {r['load_1m']} |"
        )
    if args.only is None:
        print("\n| round | commits/s new/base | p99 base/new | µs per commit base/new |")
        print("|---|---:|---:|---:|")
        for rnd in range(1, args.rounds + 1):
            b = next(r for r in results if r["round"] == rnd and r["label"] == "base")
            n = next(r for r in results if r["round"] == rnd and r["label"] == "new")
            cpu = (
                f"{b['us_per_commit'] / n['us_per_commit']:.2f}x"
                if b["us_per_commit"] and n["us_per_commit"]
                else "—"
            )
            print(
                f"| {rnd} | {n['commits_per_s'] / b['commits_per_s']:.2f}x | {b['p99_ms'] / n['p99_ms']:.2f}x | {cpu} |"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
