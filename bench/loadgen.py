"""``python -m bench.loadgen --bootstrap H:P --scenario steady|join-storm|rolling-bounce|commit-storm|consumer-steady|consumer-commit``.

One scenario against one endpoint; prints a summary and the per-API table, and writes the full
result as JSON with ``--json``. ``bench/run_all.py`` calls this once per scenario and target.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import resource
import sys
from typing import Any

from support.loadgen import consumer_scenarios, report, scenarios

SCENARIOS = {**scenarios.SCENARIOS, **consumer_scenarios.SCENARIOS}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.loadgen",
        description=__doc__,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--bootstrap", required=True, help="HOST:PORT of any Kafka-protocol endpoint (kcoord or a broker)"
    )
    p.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    p.add_argument("--label", default="target", help="name of the target in the report (kcoord, tansu, ...)")
    p.add_argument(
        "--server-pid",
        type=int,
        action="append",
        default=[],
        help="charge this process's CPU to the target (repeatable)",
    )
    p.add_argument(
        "--upstream-pid",
        type=int,
        action="append",
        default=[],
        help="the target's upstream broker: its CPU is reported apart as upstream_cores (repeatable)",
    )
    p.add_argument("--members", type=int, default=None, help="members (steady, join-storm, rolling-bounce)")
    p.add_argument("--group-size", type=int, default=None, help="members per group (steady, commit-storm)")
    p.add_argument(
        "--interval",
        type=float,
        default=None,
        help="heartbeat interval, seconds (consumer-*: default the server's heartbeat_interval_ms)",
    )
    p.add_argument(
        "--duration", type=float, default=None, help="measurement window, seconds (steady, commit-storm)"
    )
    p.add_argument(
        "--connections",
        type=int,
        default=None,
        help="N connections SHARED by all members for heartbeats and commits (the old shape, plus lanes for joins); "
        "default: one connection per member for everything, as real clients",
    )
    p.add_argument(
        "--lanes",
        type=int,
        default=None,
        help="max members joining at once (steady); in the shared shape also the max lane connections",
    )
    p.add_argument("--session-timeout-ms", type=int, default=None)
    p.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="partitions of the topic (join-storm, rolling-bounce, consumer-*: default the group size)",
    )
    p.add_argument(
        "--static",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="static members (group.instance.id)",
    )
    p.add_argument(
        "--downtime", type=float, default=None, help="seconds a bounced member stays down (rolling-bounce)"
    )
    p.add_argument("--committers", type=int, default=None, help="concurrent committers (commit-storm)")
    p.add_argument(
        "--storage",
        default=None,
        help="what the target stores commits in, for the report (commit-storm, consumer-commit)",
    )
    p.add_argument(
        "--fencing",
        default=None,
        help="the target's group.consumer.offset.commit.fencing, for the report (consumer-commit)",
    )
    p.add_argument(
        "--join-rate", type=float, default=None, help="members admitted per second in the ramp (consumer-*)"
    )
    p.add_argument(
        "--settle-timeout",
        type=float,
        default=None,
        help="seconds to wait for every group to settle (consumer-*)",
    )
    p.add_argument("--json", default=None, help="write the full result here")
    p.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    p.add_argument("--uvloop", action=argparse.BooleanOptionalAction, default=True)
    return p


_ARG_TO_PARAM = {
    "members": "members",
    "group_size": "group_size",
    "interval": "interval_s",
    "duration": "duration_s",
    "connections": "connections",
    "lanes": "lanes",
    "session_timeout_ms": "session_timeout_ms",
    "partitions": "partitions",
    "static": "static",
    "downtime": "downtime_s",
    "committers": "committers",
    "storage": "storage",
    "fencing": "fencing",
    "join_rate": "join_rate",
    "settle_timeout": "settle_timeout_s",
}


def scenario_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Only the options the user gave and the scenario accepts; the scenario's defaults do the rest."""
    import inspect

    fn = SCENARIOS[args.scenario]
    accepted = set(inspect.signature(fn).parameters)
    out = {}
    for arg, param in _ARG_TO_PARAM.items():
        value = getattr(args, arg)
        if value is not None:
            if param not in accepted:
                raise SystemExit(f"--{arg.replace('_', '-')} does not apply to {args.scenario}")
            out[param] = value
    return out


def raise_fd_limit() -> None:
    """Every scenario holds one connection per member by default: lift the soft descriptor limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    raise_fd_limit()
    target = scenarios.Target(args.bootstrap, args.label, args.server_pid, args.upstream_pid)
    coro = SCENARIOS[args.scenario](target, **scenario_kwargs(args))
    if args.uvloop:
        import uvloop

        result = uvloop.run(coro)
    else:
        result = asyncio.run(coro)
    print(report.summary(result))
    print(report.api_table(result))
    if result.get("failures"):
        print("failures:", result["failures"], file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
