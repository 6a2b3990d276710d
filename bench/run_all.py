"""Run every load scenario against kcoord and against a peer coordinator, side by side.

    .venv/bin/python -m bench.run_all                 # default sizes, ~12 minutes on 2 cores (mostly the peer)
    .venv/bin/python -m bench.run_all --full          # the full sizes (50k members, 5k storm, ...)
    .venv/bin/python -m bench.run_all --only steady,join-storm --no-write
    .venv/bin/python -m bench.run_all --peer-bootstrap kafka1:9092 --peer-pid 4242   # Apache Kafka (any bootstrap) as the peer

Every member has one connection of its own (as real clients), unless a run says otherwise:
``--connections N`` runs everything in the old shape (N shared connections), and the plan keeps
one old-shape commit storm next to its per-member twin so the difference stays visible. A
size whose per-member connections would not fit this machine's descriptor limit or
ephemeral ports runs shared, and its title says so.

The peer is tansu 0.6.0's own coordinator, started here, unless ``--peer-bootstrap`` names another
(Apache Kafka, say: the generator finds the group coordinators through FindCoordinator, so any
broker of the cluster will do; ``--peer-pid`` charges that process's CPU to the peer when it runs
on this machine). ``--upstream-bootstrap`` puts kcoord in front of that cluster instead of a tansu
started here.

It starts, pinned to CPU 0 (the servers under test): kcoord (``--storage kafka``, so commits are
durable on its upstream), a second kcoord with ``--group-initial-rebalance-delay-ms 0`` for the
join storm, and a separate tansu broker as the PEER. Pinned to CPU 1: a tansu broker as kcoord's
upstream cluster (in production the Kafka cluster runs on other machines; on CPU 0 it would take
the core of the coordinator it serves) and, for each scenario, a ``python -m bench.loadgen``
process, first against kcoord, then against the peer,
and the results are appended to bench/RESULTS.md with the date, commit, machine and the
kcoord/peer ratio of that same run. Every child process is stopped at the end, even on failure.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.loadgen import raise_fd_limit
from support import REPO, procs
from support.broker import pinned_tansu
from support.kcoord_process import pinned_kcoord
from support.loadgen import report
from support.loadgen.plan import FENCING_MODES, Run, plan, shared_everywhere
from support.loadgen.targets import fmt, targets

RESULTS = REPO / "bench" / "RESULTS.md"
SERVER_CPU = 0
LOADGEN_CPU = 1
UPSTREAM_CPU = 1  # kcoord's upstream cluster sits with the load generator, off the servers' core


def machine() -> dict[str, str]:
    def out(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=10).stdout.strip()
        except OSError:
            return "?"

    return {
        "date": datetime.date.today().isoformat(),
        "commit": out("git", "rev-parse", "--short", "HEAD")
        + (" + uncommitted changes" if out("git", "status", "--porcelain") else ""),
        "nproc": str(os.cpu_count()),
        "arch": platform.machine(),
        "python": platform.python_version(),
        "taskset": "yes" if procs.taskset_prefix(0) else "no",
        "load_before": load_average(),
    }


def load_average() -> str:
    """The 1, 5 and 15 minute load averages: how busy the (shared) machine was."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_loadgen(
    run: Run, label: str, bootstrap: str, server_pids: list[int], extra: list[str], timeout: float
) -> dict[str, Any]:
    out = Path(tempfile.mkstemp(prefix=f"loadgen-{label}-", suffix=".json")[1])
    args = [
        *procs.taskset_prefix(LOADGEN_CPU),
        sys.executable,
        "-m",
        "bench.loadgen",
        "--bootstrap",
        bootstrap,
        "--scenario",
        run.scenario,
        "--label",
        label,
        "--json",
        str(out),
        "-v",
        *run.args,
        *extra,
    ]
    for pid in server_pids:
        args += ["--server-pid", str(pid)]
    print(f"  -> {label}: {' '.join(args[3 if args[0] == 'taskset' else 0 :])}", flush=True)
    started = time.monotonic()
    try:
        proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        # One hung run (a peer that stops answering) must not cost the figures of every other run.
        print(f"     FAILED: no result after {timeout:.0f}s; the load generator was killed", flush=True)
        return {"scenario": run.scenario, "target": label, "error": f"no result after {timeout:.0f}s"}
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-15:])
        print(f"     FAILED ({proc.returncode}) after {time.monotonic() - started:.0f}s:\n{tail}", flush=True)
        return {"scenario": run.scenario, "target": label, "error": tail[-800:]}
    result = json.loads(out.read_text())
    print(
        f"     {report.summary(result).splitlines()[-1].strip()}  ({time.monotonic() - started:.0f}s)",
        flush=True,
    )
    return result


# -- markdown ---------------------------------------------------------------------------------------
def run_table(run: Run, peer_label: str = "tansu") -> list[str]:
    k = run.results.get("kcoord")
    p = run.results.get("peer")
    lines = [f"**{run.title}**", ""]
    if k is None or "error" in k:
        lines.append(f"kcoord run failed: `{(k or {}).get('error', 'not run')[-300:]}`")
        return lines
    lines += [f"| metric | kcoord | {peer_label} (peer) | kcoord better by |", "|---|---|---|---|"]
    peer_ok = p is not None and "error" not in p
    for key, higher in report.HEADLINE.get(run.scenario, []):
        a = report.lookup(k, key)
        b = report.lookup(p, key) if peer_ok else None
        ratio = report.ratio(a, b, higher) if peer_ok else "—"
        lines.append(f"| {key} | {fmt(a)} | {fmt(b) if peer_ok else ('failed' if p else '—')} | {ratio} |")
    extra = {"kcoord": _notes(k)}
    if peer_ok:
        extra[peer_label] = _notes(p)
    lines.append("")
    for who, note in extra.items():
        lines.append(f"- {who}: {note}")
    if p is not None and not peer_ok:
        lines.append(f"- {peer_label} run failed: `{p.get('error', '')[-300:]}`")
    return lines


def _notes(r: dict[str, Any]) -> str:
    keys = [
        "params",
        "connections_opened",
        "setup_s",
        "members_stable_at_end",
        "expected_heartbeats_per_s",
        "rejoins_in_window",
        "heartbeats_skipped_in_window",
        "settled",
        "generations",
        "join_phase_s",
        "unowned_excluding_downtime_s",
        "settled_every_step",
        "partitions_per_commit",
        "commit_errors",
        "ramp_s",
        "settle_s",
        "groups_unsettled_before_window",
        "unsettled_examples",
        "committers",
        "heartbeat_errors",
        "before_window",
        "in_window",
        "groups_settled_at_end",
        "members_in_group_at_end",
        "loadgen_tick_lag_p99_ms",
        "loadgen_tick_lag_max_ms",
        "heartbeat_timeline",
        "server_cores",
        "server_runqueue_wait",
        "loadgen_cores",
        "other_cores",
        "failures",
    ]
    parts = []
    for key in keys:
        if key in r and r[key] not in (None, [], {}):
            v = r[key]
            if key == "params":
                v = {a: b for a, b in v.items() if a != "topic"}
            parts.append(f"{key}={v}")
    errors = r.get("window", {}).get("errors")
    if errors:
        parts.append(f"errors={errors}")
    return "; ".join(parts)


@dataclass
class Peer:
    """The coordinator kcoord is compared with: tansu started here, or any bootstrap given."""

    label: str = "tansu"
    description: str = "tansu 0.6.0's own group coordinator (memory storage engine), started here"
    storage: str = "tansu memory engine"
    bootstrap: str | None = None  # None: start a tansu
    pids: list[int] = field(default_factory=list)
    started_here: bool = True  # a tansu of ours, pinned with the server under test


def markdown(
    runs: list[Run],
    info: dict[str, str],
    full: bool,
    elapsed: float,
    command: str,
    peer: Peer | None = None,
    upstream: str = "its upstream tansu",
) -> str:
    peer = peer or Peer()
    pinned = (
        "kcoord, the peer tansu"
        if peer.started_here
        else "kcoord; the peer runs where it was started, unpinned"
    )
    lines = [
        f"## Load generator: kcoord vs {peer.label} — {info['date']} ({'full' if full else 'default'} sizes)",
        "",
        f"- **Date:** {info['date']} · **Commit:** {info['commit']} · **Machine:** {info['nproc']} cores "
        f"({info['arch']}), Python {info['python']} + uvloop · **Load average** (1/5/15 min) before "
        f"{info['load_before']}, after {info.get('load_after', '?')}",
        f"- **Command:** `{command}` ({elapsed / 60:.1f} min)",
        f"- **Pinning:** {f'taskset: servers under test ({pinned}) on CPU 0; the load generator (and an upstream tansu started here) on CPU 1' if info['taskset'] == 'yes' else 'none (taskset missing): servers and load generator share both cores'}. "
        f"kcoord runs `--storage kafka` (durable on {upstream}); the peer is {peer.description}. "
        "`other_cores` is CPU used during the window by processes other than the server "
        "and the load generator (other work on the machine).",
        "- **Connections:** one per member (each member's joins, heartbeats and commits on its own connection, as "
        "real clients) unless a run's title or `params.connections` says N shared.",
        '- **Ratios** are from this run: "kcoord better by" > 1 means kcoord is faster / cheaper.',
        "",
        "### Targets",
        "",
        *targets(runs),
        "",
    ]
    for run in runs:
        lines += ["", *run_table(run, peer.label)]
    return "\n".join(lines) + "\n"


def append_results(text: str) -> None:
    existing = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    RESULTS.write_text(existing.rstrip("\n") + "\n\n" + text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.run_all",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--full", action="store_true", help="the full sizes (adds 50k steady, 5k storm, 1k committers)"
    )
    ap.add_argument("--only", default="", help="comma-separated scenarios to run")
    ap.add_argument(
        "--match", default="", help="only runs whose title contains one of these '|'-separated texts"
    )
    ap.add_argument(
        "--no-peer-for",
        default="",
        help="skip the peer for runs whose title contains one of these '|'-separated texts",
    )
    ap.add_argument("--no-peer", action="store_true", help="measure kcoord only")
    ap.add_argument(
        "--no-write", action="store_true", help="print the markdown instead of appending it to RESULTS.md"
    )
    ap.add_argument("--json", default=None, help="also write every raw result here")
    ap.add_argument("--timeout", type=float, default=600, help="per loadgen run, seconds")
    ap.add_argument(
        "--connections",
        type=int,
        default=None,
        help="run everything in the old shape: N connections shared by all members (default: one per member)",
    )
    ap.add_argument(
        "--peer-bootstrap",
        default=None,
        metavar="HOST:PORT",
        help="compare with this Kafka-protocol endpoint (Apache Kafka, say) instead of a tansu started here",
    )
    ap.add_argument(
        "--peer-pid",
        type=int,
        action="append",
        default=[],
        help="charge this process's CPU to the peer (repeatable; the peer runs on this machine)",
    )
    ap.add_argument(
        "--peer-label",
        default=None,
        help="the peer's name in the tables (default: tansu, or 'peer' with --peer-bootstrap)",
    )
    ap.add_argument("--peer-storage", default=None, help="what the peer stores commits in, for the report")
    ap.add_argument(
        "--upstream-bootstrap",
        default=None,
        metavar="HOST:PORT",
        help="kcoord's upstream cluster (default: a tansu started here, on CPU 1)",
    )
    args = ap.parse_args(argv)

    if args.peer_bootstrap is None:
        peer = Peer(label=args.peer_label or "tansu")
    else:
        peer = Peer(
            label=args.peer_label or "peer",
            description=f"the coordinator at {args.peer_bootstrap} (not started here)",
            storage=args.peer_storage or "the peer's own (__consumer_offsets)",
            bootstrap=args.peer_bootstrap,
            pids=list(args.peer_pid),
            started_here=False,
        )
    if args.peer_storage:
        peer.storage = args.peer_storage
    raise_fd_limit()  # the children (kcoord, tansu) inherit it: one connection per member on both sides
    runs = plan(args.full)
    if args.connections is not None:
        shared_everywhere(runs, args.connections)
    if args.only:
        wanted = set(args.only.split(","))
        runs = [r for r in runs if r.scenario in wanted]
    if args.match:
        runs = [r for r in runs if any(x in r.title for x in args.match.split("|"))]
    for r in runs:
        if args.no_peer_for and any(x in r.title for x in args.no_peer_for.split("|")):
            r.peer = False
    info = machine()
    print(f"machine: {info}", flush=True)
    started = time.monotonic()
    children: list[procs.Child] = []
    try:
        if args.upstream_bootstrap is None:
            upstream, upstream_addr = pinned_tansu("tansu-upstream", UPSTREAM_CPU)
            children.append(upstream)
        else:
            upstream_addr = args.upstream_bootstrap
        if peer.bootstrap is None and not args.no_peer:
            peer_child, peer.bootstrap = pinned_tansu("tansu-peer", SERVER_CPU)
            children.append(peer_child)
            peer.pids = [peer_child.pid]
        kc, kc_addr = pinned_kcoord("kcoord", upstream_addr, SERVER_CPU, "--storage", "kafka")
        children.append(kc)
        kcoords = {"kcoord": (kc, kc_addr)}
        if any(r.kcoord == "kcoord-nodelay" for r in runs):
            kn, kn_addr = pinned_kcoord(
                "kcoord-nodelay",
                upstream_addr,
                SERVER_CPU,
                "--storage",
                "kafka",
                "--internal-topic",
                "__kcoord_offsets_nodelay",
                "--group-initial-rebalance-delay-ms",
                "0",
            )
            children.append(kn)
            kcoords["kcoord-nodelay"] = (kn, kn_addr)
        for mode in FENCING_MODES:
            name = f"kcoord-fencing-{mode}"
            if any(r.kcoord == name for r in runs):
                kf, kf_addr = pinned_kcoord(
                    name,
                    upstream_addr,
                    SERVER_CPU,
                    "--storage",
                    "kafka",
                    "--internal-topic",
                    f"__kcoord_offsets_{mode.replace('-', '_')}",
                    "--group-consumer-offset-commit-fencing",
                    mode,
                )
                children.append(kf)
                kcoords[name] = (kf, kf_addr)
        print(
            f"kcoord {kc_addr} (pid {kc.pid}, upstream {upstream_addr}), peer {peer.label} {peer.bootstrap} (pids {peer.pids})",
            flush=True,
        )
        for run in runs:
            print(f"== {run.title}", flush=True)
            child, addr = kcoords[run.kcoord]
            durable = run.scenario in ("commit-storm", "consumer-commit")
            extra = ["--storage", "kafka (durable, acks=-1 on the upstream tansu)"] if durable else []
            run.results["kcoord"] = run_loadgen(run, "kcoord", addr, [child.pid], extra, args.timeout)
            if run.peer and not args.no_peer:
                assert peer.bootstrap is not None
                extra = ["--storage", peer.storage] if run.scenario == "commit-storm" else []
                run.results["peer"] = run_loadgen(
                    run, peer.label, peer.bootstrap, peer.pids, extra, args.timeout
                )
    finally:
        for child in reversed(children):
            child.stop()
    info["load_after"] = load_average()
    command = " ".join([".venv/bin/python -m bench.run_all", *(argv if argv is not None else sys.argv[1:])])
    upstream_text = (
        "its upstream tansu" if args.upstream_bootstrap is None else f"its upstream {args.upstream_bootstrap}"
    )
    text = markdown(runs, info, args.full, time.monotonic() - started, command, peer, upstream_text)
    if args.json:
        Path(args.json).write_text(json.dumps([{"title": r.title, **r.results} for r in runs], indent=1))
    if args.no_write:
        print(text)
    else:
        append_results(text)
        print(f"appended to {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
