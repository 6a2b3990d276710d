"""The benchmark side of the KIP-848 scaling scenarios (bench/autoscaling.py, bench/eos_scaling.py):
one fresh tansu and kcoord per fencing mode, and the command line both share.

Every mode gets its own tansu (memory engine) and kcoord (``--storage kafka``, the mode as
``--group-consumer-offset-commit-fencing``, /metrics on a free port) so no mode inherits another's
groups, and the scenario is given kcoord's address and metrics URL.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol, TypeVar

from support.broker import pinned_tansu
from support.kcoord_process import pinned_kcoord
from support.ports import free_port_block
from support.scaling import MODES


class ScenarioResult(Protocol):
    peer_errors: list[str]


R = TypeVar("R", bound=ScenarioResult)


def run_mode(
    name: str,
    mode: str,
    cpu_servers: int | None,
    kcoord_args: list[str],
    scenario: Callable[[str, str], R],
) -> R:
    """``scenario(kcoord bootstrap, metrics url)`` against a fresh tansu and kcoord in fencing ``mode``;
    kcoord's first tracebacks and errors are added to the result's peer errors."""
    upstream, upstream_addr = pinned_tansu(f"{name}-tansu-{mode}", cpu_servers)
    metrics_port = free_port_block(1)
    kcoord = None
    try:
        kcoord, listen = pinned_kcoord(f"{name}-kcoord-{mode}", upstream_addr, cpu_servers,
                                       "--storage", "kafka", "--group-consumer-offset-commit-fencing", mode,
                                       "--metrics", f"127.0.0.1:{metrics_port}", *kcoord_args)  # fmt: skip
        result = scenario(listen, f"http://127.0.0.1:{metrics_port}/metrics")
        result.peer_errors += [
            line for line in kcoord.log_text().splitlines() if "Traceback" in line or " ERROR " in line
        ][:5]
        return result
    finally:
        if kcoord is not None:
            kcoord.stop()
        upstream.stop()


def parser(
    prog: str, description: str, config: Any, choices: dict[str, Sequence[str]]
) -> argparse.ArgumentParser:
    """``--mode``, one option per field of the scenario's ``config`` dataclass (``choices`` by field
    name), ``--cpu``, kcoord's session and heartbeat settings, and ``--json``."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument(
        "--mode", action="append", choices=MODES, help="fencing mode (repeatable; default all three)"
    )
    for name, value in asdict(config).items():
        ap.add_argument(
            "--" + name.replace("_", "-"),
            type=type(value),
            default=value,
            choices=choices.get(name),
            help=f"default {value}",
        )
    ap.add_argument(
        "--cpu", type=int, default=None, help="pin tansu and kcoord to this CPU (default: no pinning)"
    )
    ap.add_argument(
        "--session-timeout-ms",
        type=int,
        help="kcoord's group.consumer.session.timeout.ms (default: its own, 45000)",
    )
    ap.add_argument(
        "--heartbeat-interval-ms",
        type=int,
        help="kcoord's group.consumer.heartbeat.interval.ms (default: its own, 5000)",
    )
    ap.add_argument("--json", type=Path, help="write the results here as JSON")
    return ap


def prepare(args: argparse.Namespace) -> list[str]:
    """Before the first mode: SIGTERM unwinds like Ctrl-C (so the finally blocks stop the members,
    kcoord and tansu), the Java peers are compiled; returns kcoord's extra arguments."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    from support.java import compile_peers

    compile_peers()
    kcoord_args = []
    if args.session_timeout_ms:
        kcoord_args += ["--group-consumer-session-timeout-ms", str(args.session_timeout_ms)]
    if args.heartbeat_interval_ms:
        kcoord_args += ["--group-consumer-heartbeat-interval-ms", str(args.heartbeat_interval_ms)]
    return kcoord_args


def print_footer(module: str, argv: list[str] | None) -> None:
    """When, where and how the figures above were measured: date, CPUs, the command, the commit."""
    print(f"\n{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; nproc {os.cpu_count()}; "
          f"{' '.join([sys.executable.split('/')[-1], '-m', module, *(argv or sys.argv[1:])])}")  # fmt: skip
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        print(
            "commit",
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
            ).stdout.strip(),
        )
