"""Run every load scenario against kcoord and against tansu's own coordinator, side by side.

    .venv/bin/python -m bench.run_all                 # default sizes, ~12 minutes on 2 cores (mostly the peer)
    .venv/bin/python -m bench.run_all --full          # the issue's sizes (50k members, 5k storm, ...)
    .venv/bin/python -m bench.run_all --only steady,join-storm --no-write

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

from bench import procs
from bench.loadgen import report

RESULTS = procs.REPO / "bench" / "RESULTS.md"
SERVER_CPU = 0
LOADGEN_CPU = 1
UPSTREAM_CPU = 1  # kcoord's upstream cluster sits with the load generator, off the servers' core


@dataclass
class Run:
    """One scenario at one size: the loadgen arguments and which servers it runs against."""

    scenario: str
    title: str
    args: list[str]
    peer: bool = True
    kcoord: str = "kcoord"  # which kcoord instance: "kcoord", "kcoord-nodelay" or "kcoord-fencing-MODE"
    results: dict[str, Any] = field(default_factory=dict)


def plan(full: bool) -> list[Run]:
    steady_sizes = [1_000, 10_000] + ([50_000] if full else [])
    storm_sizes = [100, 1_000] + ([5_000] if full else [])
    committers = [100] + ([1_000, 2_000] if full else [])
    runs: list[Run] = []
    for n in steady_sizes:
        runs.append(Run("steady", f"steady {n:,} members, heartbeat 3 s",
                        ["--members", str(n), "--interval", "3", "--duration", "15" if full else "10",
                         "--lanes", "10000" if n > 10_000 else "5000", "--connections", "32" if n > 10_000 else "16"]))
    if full:
        # the throughput target: 50k members heartbeating every 1.5 s offer 33k heartbeats/s
        runs.append(Run("steady", "steady 50,000 members, heartbeat 1.5 s (target run)",
                        ["--members", "50000", "--interval", "1.5", "--duration", "15", "--lanes", "10000",
                         "--connections", "32"]))
    for n in storm_sizes:
        runs.append(Run("join-storm", f"join storm {n:,} members", ["--members", str(n)]))
        runs.append(Run("join-storm", f"join storm {n:,} members, kcoord initial delay 0", ["--members", str(n)],
                        peer=False, kcoord="kcoord-nodelay"))
    for static in (True, False):
        kind = "static" if static else "dynamic"
        runs.append(Run("rolling-bounce", f"rolling bounce 20 {kind} members",
                        ["--members", "20", "--static" if static else "--no-static", "--session-timeout-ms", "6000",
                         "--interval", "1"]))
    for c in committers:
        runs.append(Run("commit-storm", f"commit storm {c:,} committers",
                        ["--committers", str(c), "--duration", "15" if full else "10", "--connections", "16"]))
    # KIP-848 (tansu 0.6.0 has no ConsumerGroupHeartbeat: kcoord only). The server's heartbeat
    # interval (Kafka's default, 5 s); many groups of 50 while the heartbeat is O(group size), and
    # one 1,000-member group to measure that cost itself.
    for n in [5_000] + ([20_000, 50_000] if full else []):
        runs.append(Run("consumer-steady", f"KIP-848 steady {n:,} members in groups of 50, server heartbeat interval",
                        ["--members", str(n), "--group-size", "50", "--duration", "15", "--connections", "16" if n <= 5_000 else "32",
                         "--join-rate", "2000", "--settle-timeout", "300"], peer=False))
    runs.append(Run("consumer-steady", "KIP-848 steady one group of 1,000 members, server heartbeat interval",
                    ["--members", "1000", "--group-size", "1000", "--duration", "15", "--connections", "16",
                     "--join-rate", "2000", "--settle-timeout", "300"], peer=False))
    for mode in FENCING_MODES:
        runs.append(Run("consumer-commit", f"KIP-848 commits, 1,000 members in groups of 10, fencing {mode}",
                        ["--members", "1000", "--group-size", "10", "--duration", "15" if full else "10",
                         "--connections", "16", "--join-rate", "2000", "--settle-timeout", "300", "--fencing", mode],
                        peer=False, kcoord=f"kcoord-fencing-{mode}"))
    return runs


FENCING_MODES = ("strict", "revocation-epoch", "assignment-epoch")


def machine() -> dict[str, str]:
    def out(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=procs.REPO, timeout=10).stdout.strip()
        except OSError:
            return "?"

    return {
        "date": datetime.date.today().isoformat(),
        "commit": out("git", "rev-parse", "--short", "HEAD") + (" + uncommitted changes" if out("git", "status", "--porcelain") else ""),
        "nproc": str(os.cpu_count()),
        "arch": platform.machine(),
        "python": platform.python_version(),
        "taskset": "yes" if procs.taskset_prefix(0) else "no",
    }


def run_loadgen(run: Run, label: str, bootstrap: str, server_pids: list[int], extra: list[str], timeout: float) -> dict[str, Any]:
    out = Path(tempfile.mkstemp(prefix=f"loadgen-{label}-", suffix=".json")[1])
    args = [*procs.taskset_prefix(LOADGEN_CPU), sys.executable, "-m", "bench.loadgen", "--bootstrap", bootstrap,
            "--scenario", run.scenario, "--label", label, "--json", str(out), "-v", *run.args, *extra]
    for pid in server_pids:
        args += ["--server-pid", str(pid)]
    print(f"  -> {label}: {' '.join(args[3 if args[0] == 'taskset' else 0:])}", flush=True)
    started = time.monotonic()
    try:
        proc = subprocess.run(args, cwd=procs.REPO, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        # One hung run (a peer that stops answering) must not cost the figures of every other run.
        print(f"     FAILED: no result after {timeout:.0f}s; the load generator was killed", flush=True)
        return {"scenario": run.scenario, "target": label, "error": f"no result after {timeout:.0f}s"}
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-15:])
        print(f"     FAILED ({proc.returncode}) after {time.monotonic() - started:.0f}s:\n{tail}", flush=True)
        return {"scenario": run.scenario, "target": label, "error": tail[-800:]}
    result = json.loads(out.read_text())
    print(f"     {report.summary(result).splitlines()[-1].strip()}  ({time.monotonic() - started:.0f}s)", flush=True)
    return result


# -- markdown ---------------------------------------------------------------------------------------
def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def run_table(run: Run) -> list[str]:
    k = run.results.get("kcoord")
    p = run.results.get("peer")
    lines = [f"**{run.title}**", ""]
    if k is None or "error" in k:
        lines.append(f"kcoord run failed: `{(k or {}).get('error', 'not run')[-300:]}`")
        return lines
    lines += ["| metric | kcoord | tansu (peer) | kcoord better by |", "|---|---|---|---|"]
    peer_ok = p is not None and "error" not in p
    for key, higher in report.HEADLINE.get(run.scenario, []):
        a = report.lookup(k, key)
        b = report.lookup(p, key) if peer_ok else None
        ratio = report.ratio(a, b, higher) if peer_ok else "—"
        lines.append(f"| {key} | {_fmt(a)} | {_fmt(b) if peer_ok else ('failed' if p else '—')} | {ratio} |")
    extra = {"kcoord": _notes(k)}
    if peer_ok:
        extra["tansu"] = _notes(p)
    lines.append("")
    for who, note in extra.items():
        lines.append(f"- {who}: {note}")
    if p is not None and not peer_ok:
        lines.append(f"- tansu run failed: `{p.get('error', '')[-300:]}`")
    return lines


def _notes(r: dict[str, Any]) -> str:
    keys = ["params", "setup_s", "members_stable_at_end", "expected_heartbeats_per_s", "rejoins_in_window",
            "heartbeats_skipped_in_window", "settled", "generations", "join_phase_s", "unowned_excluding_downtime_s",
            "settled_every_step", "partitions_per_commit", "commit_errors", "ramp_s", "settle_s",
            "groups_unsettled_before_window", "unsettled_examples", "committers", "heartbeat_errors", "before_window", "in_window",
            "groups_settled_at_end", "members_in_group_at_end", "loadgen_tick_lag_p99_ms", "loadgen_tick_lag_max_ms",
            "heartbeat_timeline", "server_cores", "server_runqueue_wait", "loadgen_cores", "other_cores", "failures"]
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


def targets(runs: list[Run]) -> list[str]:
    def find(scenario: str, pred: Any) -> dict[str, Any] | None:
        for run in runs:
            k = run.results.get("kcoord")
            if run.scenario == scenario and k and "error" not in k and pred(run, k):
                return k
        return None

    lines = ["| target | measured (kcoord) | met? |", "|---|---|---|"]
    hb = find("steady", lambda run, k: k["params"]["members"] >= 50_000 and k["params"]["interval_s"] <= 1.5)
    if hb:
        rate, p99 = hb["heartbeats_per_s"], hb["heartbeat"].get("p99_ms", float("inf"))
        lines.append(f"| >= 30,000 heartbeats/s, p99 < 10 ms at 50k members | {rate:,.0f}/s, p99 {p99} ms "
                     f"| {'yes' if rate >= 30_000 and p99 < 10 else 'no'} |")
    else:
        biggest = max((r.results["kcoord"] for r in runs if r.scenario == "steady" and "error" not in r.results.get("kcoord", {"error": 1})),
                      key=lambda k: k["params"]["members"], default=None)
        if biggest and biggest.get("server_cores_per_1k_hb_s"):
            need = biggest["server_cores_per_1k_hb_s"] * 30
            lines.append(f"| >= 30,000 heartbeats/s, p99 < 10 ms at 50k members | not run (use --full); at "
                         f"{biggest['params']['members']:,} members kcoord used {biggest['server_cores_per_1k_hb_s']} "
                         f"cores per 1k hb/s, so 30k/s would need {need:.2f} cores | {'no (projected)' if need > 1 else 'not measured'} |")
    storm = find("join-storm", lambda run, k: k["params"]["members"] == 1000 and run.kcoord == "kcoord-nodelay")
    storm_d = find("join-storm", lambda run, k: k["params"]["members"] == 1000 and run.kcoord == "kcoord")
    if storm or storm_d:
        text = []
        met = False
        if storm_d:
            text.append(f"default 3 s initial delay: {storm_d['after_last_join_s']} s after last join "
                        f"({storm_d['after_rebalance_s']} s after the rebalance completed)")
        if storm:
            text.append(f"initial delay 0: {storm['after_last_join_s']} s")
            met = storm["settled"] and storm["after_last_join_s"] < 2
        lines.append(f"| 1,000-member join storm settled < 2 s after the last member joined | {'; '.join(text)} "
                     f"| {'yes (delay 0); no with the 3 s delay, by design' if met else 'no'} |")
    bounce = find("rolling-bounce", lambda run, k: k["params"]["static"])
    if bounce:
        lines.append(f"| static rolling bounce of 20 members: 0 rebalances | {bounce['rebalances']} rebalances "
                     f"| {'yes' if bounce['rebalances'] == 0 and bounce['settled_every_step'] else 'no'} |")
    commits = [r.results["kcoord"] for r in runs if r.scenario == "commit-storm" and "error" not in r.results.get("kcoord", {"error": 1})]
    if commits:
        best = max(commits, key=lambda k: k["commits_per_s"])
        lines.append(f"| >= 20,000 durable commits/s | {best['commits_per_s']:,.0f}/s with {best['params']['committers']:,} "
                     f"committers (storage={best['params']['storage']}) | {'yes' if best['commits_per_s'] >= 20_000 else 'no'} |")
    lines.append("| 1M-record shard load < 10 s | see the Storage section (`bench/storage.py`) | — |")
    cg = find("consumer-steady", lambda run, k: k["params"]["members"] >= 50_000)
    if cg:
        rate, p99 = cg["heartbeats_per_s"], cg["heartbeat"].get("p99_ms", float("inf"))
        lines.append(f"| KIP-848: >= 10,000 ConsumerGroupHeartbeat/s, p99 < 10 ms at 50k members | {rate:,.0f}/s, p99 {p99} ms "
                     f"(groups of {cg['params']['group_size']}; kcoord run-queue wait {cg.get('server_runqueue_wait')}, other cores "
                     f"{cg.get('other_cores')}) | {'yes' if rate >= 10_000 and p99 < 10 else 'no'} |")
    fencing = [run for run in runs if run.scenario == "consumer-commit"]
    if fencing:
        lines += ["", "KIP-848 commits by fencing mode (same run, one kcoord per mode):", "",
                  "| fencing | commits/s | p50 ms | p99 ms | max ms | errors | server cores |", "|---|---|---|---|---|---|---|"]
        for run in fencing:
            k = run.results.get("kcoord") or {"error": "not run"}
            if "error" in k:
                lines.append(f"| {run.title.rsplit(' ', 1)[-1]} | failed | | | | | |")
                continue
            c = k.get("commit", {})
            lines.append(f"| {k['params']['fencing']} | {_fmt(k['commits_per_s'])} | {_fmt(c.get('p50_ms'))} | {_fmt(c.get('p99_ms'))} "
                         f"| {_fmt(c.get('max_ms'))} | {k.get('commit_errors') or 'none'} | {_fmt(k.get('server_cores'))} |")
    return lines


def markdown(runs: list[Run], info: dict[str, str], full: bool, elapsed: float, command: str) -> str:
    lines = [
        f"## Load generator: kcoord vs tansu — {info['date']} ({'full' if full else 'default'} sizes)",
        "",
        f"- **Date:** {info['date']} · **Commit:** {info['commit']} · **Machine:** {info['nproc']} cores "
        f"({info['arch']}), Python {info['python']} + uvloop",
        f"- **Command:** `{command}` ({elapsed / 60:.1f} min)",
        f"- **Pinning:** {'taskset: servers under test (kcoord, the peer tansu) on CPU 0; kcoord upstream tansu and the load generator on CPU 1' if info['taskset'] == 'yes' else 'none (taskset missing): servers and load generator share both cores'}. "
        "kcoord runs `--storage kafka` (durable on its upstream tansu); the peer is tansu 0.6.0's own group coordinator "
        "(memory storage engine). `other_cores` is CPU used during the window by processes other than the server "
        "and the load generator (other work on the machine).",
        "- **Ratios** are from this run: \"kcoord better by\" > 1 means kcoord is faster / cheaper.",
        "",
        "### Targets",
        "",
        *targets(runs),
        "",
    ]
    for run in runs:
        lines += ["", *run_table(run)]
    return "\n".join(lines) + "\n"


def append_results(text: str) -> None:
    existing = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    RESULTS.write_text(existing.rstrip("\n") + "\n\n" + text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run_all", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="the issue's sizes (adds 50k steady, 5k storm, 1k committers)")
    ap.add_argument("--only", default="", help="comma-separated scenarios to run")
    ap.add_argument("--match", default="", help="only runs whose title contains one of these '|'-separated texts")
    ap.add_argument("--no-peer-for", default="", help="skip the peer for runs whose title contains one of these '|'-separated texts")
    ap.add_argument("--no-peer", action="store_true", help="measure kcoord only")
    ap.add_argument("--no-write", action="store_true", help="print the markdown instead of appending it to RESULTS.md")
    ap.add_argument("--json", default=None, help="also write every raw result here")
    ap.add_argument("--timeout", type=float, default=600, help="per loadgen run, seconds")
    args = ap.parse_args(argv)

    runs = plan(args.full)
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
        upstream, upstream_addr = procs.tansu("tansu-upstream", UPSTREAM_CPU)
        peer, peer_addr = procs.tansu("tansu-peer", SERVER_CPU)
        children += [upstream, peer]
        kc, kc_addr = procs.kcoord("kcoord", upstream_addr, SERVER_CPU, "--storage", "kafka")
        children.append(kc)
        kcoords = {"kcoord": (kc, kc_addr)}
        if any(r.kcoord == "kcoord-nodelay" for r in runs):
            kn, kn_addr = procs.kcoord("kcoord-nodelay", upstream_addr, SERVER_CPU, "--storage", "kafka",
                                       "--internal-topic", "__kcoord_offsets_nodelay", "--group-initial-rebalance-delay-ms", "0")
            children.append(kn)
            kcoords["kcoord-nodelay"] = (kn, kn_addr)
        for mode in FENCING_MODES:
            name = f"kcoord-fencing-{mode}"
            if any(r.kcoord == name for r in runs):
                kf, kf_addr = procs.kcoord(name, upstream_addr, SERVER_CPU, "--storage", "kafka",
                                           "--internal-topic", f"__kcoord_offsets_{mode.replace('-', '_')}",
                                           "--group-consumer-offset-commit-fencing", mode)
                children.append(kf)
                kcoords[name] = (kf, kf_addr)
        print(f"kcoord {kc_addr} (pid {kc.pid}, upstream {upstream_addr}), peer tansu {peer_addr} (pid {peer.pid})", flush=True)
        for run in runs:
            print(f"== {run.title}", flush=True)
            child, addr = kcoords[run.kcoord]
            durable = run.scenario in ("commit-storm", "consumer-commit")
            extra = ["--storage", "kafka (durable, acks=-1 on the upstream tansu)"] if durable else []
            run.results["kcoord"] = run_loadgen(run, "kcoord", addr, [child.pid], extra, args.timeout)
            if run.peer and not args.no_peer:
                extra = ["--storage", "tansu memory engine"] if run.scenario == "commit-storm" else []
                run.results["peer"] = run_loadgen(run, "tansu", peer_addr, [peer.pid], extra, args.timeout)
    finally:
        for child in reversed(children):
            child.stop()
    command = " ".join([".venv/bin/python -m bench.run_all", *(argv if argv is not None else sys.argv[1:])])
    text = markdown(runs, info, args.full, time.monotonic() - started, command)
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
