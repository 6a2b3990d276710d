"""Which load generator runs a full benchmark makes: each scenario at each size, and its connections.

Every member has one connection of its own (as real clients), unless a run says otherwise: a size
whose per-member connections would not fit this machine's descriptor limit or ephemeral ports runs
shared, and its title says so. bench/run_all.py runs this plan against kcoord and a peer.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Run:
    """One scenario at one size: the loadgen arguments and which servers it runs against."""

    scenario: str
    title: str
    args: list[str]
    peer: bool = True
    kcoord: str = "kcoord"  # which kcoord instance: "kcoord", "kcoord-nodelay" or "kcoord-fencing-MODE"
    results: dict[str, Any] = field(default_factory=dict)


def connection_budget() -> int:
    """How many connections one process may open to one server here: the descriptor limit (hard:
    the loadgen and the runner's children lift their soft limit to it) and the ephemeral ports."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        ports = high - low + 1
    except (OSError, ValueError):
        ports = 28_000
    limit = ports if hard == resource.RLIM_INFINITY else min(hard, ports)
    return limit - 200  # the server's own descriptors: listener, upstream, logs


def shape(n: int, shared: int, budget: int) -> tuple[list[str], str]:
    """(loadgen args, title suffix) for ``n`` members: one connection each when they fit, else ``shared``."""
    if n <= budget:
        return [], ""
    return (
        ["--connections", str(shared)],
        f" ({shared} shared connections: {n:,} per-member connections exceed this machine's limit of {budget:,})",
    )


def plan(full: bool, budget: int | None = None) -> list[Run]:
    budget = connection_budget() if budget is None else budget
    steady_sizes = [1_000, 10_000] + ([50_000] if full else [])
    storm_sizes = [100, 1_000] + ([5_000] if full else [])
    committers = [100] + ([1_000, 2_000] if full else [])
    runs: list[Run] = []
    for n in steady_sizes:
        conns, note = shape(n, 32, budget)
        runs.append(
            Run(
                "steady",
                f"steady {n:,} members, heartbeat 3 s{note}",
                [
                    "--members",
                    str(n),
                    "--interval",
                    "3",
                    "--duration",
                    "15" if full else "10",
                    "--lanes",
                    "10000" if n > 10_000 else "5000",
                    *conns,
                ],
            )
        )
    if full:
        # The old shape beside its per-member twin: on 16 shared connections a server that
        # answers a connection's requests one at a time queues heartbeats behind each other.
        runs.append(
            Run(
                "steady",
                "steady 10,000 members, heartbeat 3 s, 16 shared connections (old shape)",
                [
                    "--members",
                    "10000",
                    "--interval",
                    "3",
                    "--duration",
                    "15",
                    "--lanes",
                    "5000",
                    "--connections",
                    "16",
                ],
            )
        )
        # the throughput target: 50k members heartbeating every 1.5 s offer 33k heartbeats/s
        conns, note = shape(50_000, 32, budget)
        runs.append(
            Run(
                "steady",
                f"steady 50,000 members, heartbeat 1.5 s (target run){note}",
                ["--members", "50000", "--interval", "1.5", "--duration", "15", "--lanes", "10000", *conns],
            )
        )
    for n in storm_sizes:
        runs.append(Run("join-storm", f"join storm {n:,} members", ["--members", str(n)]))
        runs.append(
            Run(
                "join-storm",
                f"join storm {n:,} members, kcoord initial delay 0",
                ["--members", str(n)],
                peer=False,
                kcoord="kcoord-nodelay",
            )
        )
    for static in (True, False):
        kind = "static" if static else "dynamic"
        runs.append(
            Run(
                "rolling-bounce",
                f"rolling bounce 20 {kind} members",
                [
                    "--members",
                    "20",
                    "--static" if static else "--no-static",
                    "--session-timeout-ms",
                    "6000",
                    "--interval",
                    "1",
                ],
            )
        )
    for c in committers:
        runs.append(
            Run(
                "commit-storm",
                f"commit storm {c:,} committers",
                ["--committers", str(c), "--duration", "15" if full else "10"],
            )
        )
    # The shape the figures before 2026-11-24 used, next to its per-member twin above: 100
    # committers on 16 shared connections let kcoord pipeline what Kafka and tansu serialize.
    runs.append(
        Run(
            "commit-storm",
            "commit storm 100 committers, 16 shared connections (old shape, flatters a pipelining server)",
            ["--committers", "100", "--duration", "15" if full else "10", "--connections", "16"],
        )
    )
    # KIP-848 (tansu 0.6.0 has no ConsumerGroupHeartbeat: kcoord only). The server's heartbeat
    # interval (Kafka's default, 5 s); many groups of 50 while the heartbeat is O(group size), and
    # one 1,000-member group to measure that cost itself.
    for n in [5_000] + ([20_000, 50_000] if full else []):
        conns, note = shape(n, 32, budget)
        runs.append(
            Run(
                "consumer-steady",
                f"KIP-848 steady {n:,} members in groups of 50, server heartbeat interval{note}",
                [
                    "--members",
                    str(n),
                    "--group-size",
                    "50",
                    "--duration",
                    "15",
                    *conns,
                    "--join-rate",
                    "2000",
                    "--settle-timeout",
                    "300",
                ],
                peer=False,
            )
        )
    runs.append(
        Run(
            "consumer-steady",
            "KIP-848 steady one group of 1,000 members, server heartbeat interval",
            [
                "--members",
                "1000",
                "--group-size",
                "1000",
                "--duration",
                "15",
                "--join-rate",
                "2000",
                "--settle-timeout",
                "300",
            ],
            peer=False,
        )
    )
    for mode in FENCING_MODES:
        runs.append(
            Run(
                "consumer-commit",
                f"KIP-848 commits, 1,000 members in groups of 10, fencing {mode}",
                [
                    "--members",
                    "1000",
                    "--group-size",
                    "10",
                    "--duration",
                    "15" if full else "10",
                    "--join-rate",
                    "2000",
                    "--settle-timeout",
                    "300",
                    "--fencing",
                    mode,
                ],
                peer=False,
                kcoord=f"kcoord-fencing-{mode}",
            )
        )
    return runs


def shared_everywhere(runs: list[Run], connections: int) -> None:
    """``--connections N``: every run in the old shape, N shared connections (to reproduce old figures)."""
    for run in runs:
        if "--connections" not in run.args:
            run.args += ["--connections", str(connections)]
            run.title += f" ({connections} shared connections)"


FENCING_MODES = ("strict", "revocation-epoch", "assignment-epoch")
