"""Human-readable output: a per-API table for one run, a side-by-side table for two."""

from __future__ import annotations

from typing import Any

_COLS = ("count", "rate_per_s", "p50_ms", "p99_ms", "p999_ms", "max_ms")

# The headline figure of each scenario and whether more is better.
HEADLINE: dict[str, list[tuple[str, bool]]] = {
    "steady": [
        ("heartbeats_per_s", True),
        ("heartbeat.p50_ms", False),
        ("heartbeat.p99_ms", False),
        ("heartbeat.p999_ms", False),
        ("server_cores", False),
        ("server_cores_per_1k_hb_s", False),
    ],
    "join-storm": [("total_s", False), ("after_last_join_s", False), ("after_rebalance_s", False)],
    "rolling-bounce": [
        ("bounced", True),
        ("rebalances", False),
        ("total_s", False),
        ("unowned_any_s", False),
        ("unowned_partition_s", False),
    ],
    "commit-storm": [
        ("commits_per_s", True),
        ("commit.p50_ms", False),
        ("commit.p99_ms", False),
        ("commit.p999_ms", False),
        ("server_cores", False),
    ],
    "consumer-steady": [
        ("heartbeats_per_s", True),
        ("heartbeat.p50_ms", False),
        ("heartbeat.p99_ms", False),
        ("heartbeat.max_ms", False),
        ("server_cores", False),
        ("server_cores_per_1k_hb_s", False),
    ],
    "consumer-commit": [
        ("commits_per_s", True),
        ("commit.p50_ms", False),
        ("commit.p99_ms", False),
        ("commit.max_ms", False),
        ("heartbeat.p99_ms", False),
        ("server_cores", False),
    ],
}


def lookup(result: dict[str, Any], path: str) -> Any:
    cur: Any = result
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def api_table(result: dict[str, Any]) -> str:
    window = result.get("window", {})
    lines = [f"{'api':<16}" + "".join(f"{c:>12}" for c in _COLS)]
    for api, row in window.get("apis", {}).items():
        lines.append(f"{api:<16}" + "".join(f"{row.get(c, ''):>12}" for c in _COLS))
    if window.get("errors"):
        lines.append("errors: " + ", ".join(f"{k}={v}" for k, v in window["errors"].items()))
    return "\n".join(lines)


def summary(result: dict[str, Any]) -> str:
    keys = HEADLINE.get(result.get("scenario", ""), [])
    parts = [f"{k}={lookup(result, k)}" for k, _ in keys]
    return f"[{result.get('target')}] {result.get('scenario')} {result.get('params', {})}\n  " + "  ".join(
        parts
    )


def ratio(kcoord: Any, peer: Any, higher_is_better: bool) -> str:
    """kcoord relative to the peer, phrased so that > 1 always means kcoord is better."""
    if not isinstance(kcoord, int | float) or not isinstance(peer, int | float) or isinstance(kcoord, bool):
        return "n/a"
    if higher_is_better:
        return f"{kcoord / peer:.2f}x" if peer else ("equal" if not kcoord else "∞")
    return f"{peer / kcoord:.2f}x" if kcoord else ("equal" if not peer else "∞")


def side_by_side(kcoord: dict[str, Any], peer: dict[str, Any] | None) -> list[str]:
    """Markdown rows: metric | kcoord | peer | kcoord better by."""
    rows = []
    for key, better_high in HEADLINE.get(kcoord.get("scenario", ""), []):
        a = lookup(kcoord, key)
        b = lookup(peer, key) if peer else None
        rows.append(f"| {key} | {a} | {b if peer else '—'} | {ratio(a, b, better_high) if peer else '—'} |")
    return rows
