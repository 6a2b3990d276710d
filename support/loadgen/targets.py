"""kcoord's performance targets, checked against the results of a plan's runs (bench/run_all.py)."""

from __future__ import annotations

from typing import Any

from support.loadgen.plan import Run


def fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


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
        lines.append(
            f"| >= 30,000 heartbeats/s, p99 < 10 ms at 50k members | {rate:,.0f}/s, p99 {p99} ms "
            f"| {'yes' if rate >= 30_000 and p99 < 10 else 'no'} |"
        )
    else:
        biggest = max(
            (
                r.results["kcoord"]
                for r in runs
                if r.scenario == "steady" and "error" not in r.results.get("kcoord", {"error": 1})
            ),
            key=lambda k: k["params"]["members"],
            default=None,
        )
        if biggest and biggest.get("server_cores_per_1k_hb_s"):
            need = biggest["server_cores_per_1k_hb_s"] * 30
            lines.append(
                f"| >= 30,000 heartbeats/s, p99 < 10 ms at 50k members | not run (use --full); at "
                f"{biggest['params']['members']:,} members kcoord used {biggest['server_cores_per_1k_hb_s']} "
                f"cores per 1k hb/s, so 30k/s would need {need:.2f} cores | {'no (projected)' if need > 1 else 'not measured'} |"
            )
    storm = find(
        "join-storm", lambda run, k: k["params"]["members"] == 1000 and run.kcoord == "kcoord-nodelay"
    )
    storm_d = find("join-storm", lambda run, k: k["params"]["members"] == 1000 and run.kcoord == "kcoord")
    if storm or storm_d:
        text = []
        met = False
        if storm_d:
            text.append(
                f"default 3 s initial delay: {storm_d['after_last_join_s']} s after last join "
                f"({storm_d['after_rebalance_s']} s after the rebalance completed)"
            )
        if storm:
            text.append(f"initial delay 0: {storm['after_last_join_s']} s")
            met = storm["settled"] and storm["after_last_join_s"] < 2
        lines.append(
            f"| 1,000-member join storm settled < 2 s after the last member joined | {'; '.join(text)} "
            f"| {'yes (delay 0); no with the 3 s delay, by design' if met else 'no'} |"
        )
    bounce = find("rolling-bounce", lambda run, k: k["params"]["static"])
    if bounce:
        lines.append(
            f"| static rolling bounce of 20 members: 0 rebalances | {bounce['rebalances']} rebalances "
            f"| {'yes' if bounce['rebalances'] == 0 and bounce['settled_every_step'] else 'no'} |"
        )
    # the target is quoted for real clients only: an old-shape run (shared connections) flatters kcoord
    commits = [
        r.results["kcoord"]
        for r in runs
        if r.scenario == "commit-storm"
        and "error" not in r.results.get("kcoord", {"error": 1})
        and r.results["kcoord"]["params"].get("connections") == "per-member"
    ]
    if commits:
        best = max(commits, key=lambda k: k["commits_per_s"])
        lines.append(
            f"| >= 20,000 durable commits/s | {best['commits_per_s']:,.0f}/s with {best['params']['committers']:,} "
            f"committers (storage={best['params']['storage']}) | {'yes' if best['commits_per_s'] >= 20_000 else 'no'} |"
        )
    lines.append("| 1M-record shard load < 10 s | see the Storage section (`bench/storage.py`) | — |")
    cg = find("consumer-steady", lambda run, k: k["params"]["members"] >= 50_000)
    if cg:
        rate, p99 = cg["heartbeats_per_s"], cg["heartbeat"].get("p99_ms", float("inf"))
        lines.append(
            f"| KIP-848: >= 10,000 ConsumerGroupHeartbeat/s, p99 < 10 ms at 50k members | {rate:,.0f}/s, p99 {p99} ms "
            f"(groups of {cg['params']['group_size']}; kcoord run-queue wait {cg.get('server_runqueue_wait')}, other cores "
            f"{cg.get('other_cores')}) | {'yes' if rate >= 10_000 and p99 < 10 else 'no'} |"
        )
    fencing = [run for run in runs if run.scenario == "consumer-commit"]
    if fencing:
        lines += [
            "",
            "KIP-848 commits by fencing mode (same run, one kcoord per mode):",
            "",
            "| fencing | commits/s | p50 ms | p99 ms | max ms | errors | server cores |",
            "|---|---|---|---|---|---|---|",
        ]
        for run in fencing:
            k = run.results.get("kcoord") or {"error": "not run"}
            if "error" in k:
                lines.append(f"| {run.title.rsplit(' ', 1)[-1]} | failed | | | | | |")
                continue
            c = k.get("commit", {})
            lines.append(
                f"| {k['params']['fencing']} | {fmt(k['commits_per_s'])} | {fmt(c.get('p50_ms'))} | {fmt(c.get('p99_ms'))} "
                f"| {fmt(c.get('max_ms'))} | {k.get('commit_errors') or 'none'} | {fmt(k.get('server_cores'))} |"
            )
    return lines
