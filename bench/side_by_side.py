"""kcoord beside Apache Kafka 4.0, every headline row in one run: one process, ``--workers 2``, and Kafka.

    .venv/bin/python -m bench.side_by_side --rounds 2                      # every row (about 45 min a round)
    .venv/bin/python -m bench.side_by_side --rows commits-1000,relay-10k --rounds 3
    .venv/bin/python -m bench.side_by_side --scale 0.1 --rounds 1            # every row at a tenth of its size

One Kafka 4.0 broker (support/kafka_broker.py, ``../shared/kafka`` or ``KAFKA_HOME``) is both a target
(its own group coordinator, ``__consumer_offsets``) and the upstream of the two kcoord targets
(``--storage kafka``, each on an internal topic of its own, so a commit is answered once it is durable
on Kafka): ``kcoord`` (one process) and ``kcoord-workers-2`` (``kcoord serve --workers 2``). Nothing is
pinned: the workers need both cores, and Kafka's coordinator uses every core of its broker.

Rows (``--rows``, comma-separated; default all):

- group rows, the load generator (``python -m bench.loadgen``, one connection per member or committer
  unless the machine's descriptor limit forces shared ones, which the row then says): durable commits
  at 100 and 1,000 connections, 10k and 50k classic members heartbeating, 5k and 20k KIP-848 members
  (groups of 50, the server's heartbeat interval), the 1,000-member join storm;
- relay rows: librdkafka and the Java client (kafka-clients 4.3) produce, then consume, 1M x 100 B and
  100k x 10 KB, direct to Kafka and through each kcoord (a fresh one-partition topic per target).

Within a round every row runs against every target back to back, in an order reversed every other
round, so the ratios of one row share the machine's load. Reported per row and target: the row's
headline figures, the target's CPU (kcoord: supervisor and workers; Kafka: its JVM) and, for kcoord,
its upstream's CPU in the same window (Kafka's own figures include its log writes, so "with upstream"
is the like-for-like cost), the load average, and each kcoord figure's ratio to Kafka's, phrased so
that > 1 means kcoord is better. ``--json`` keeps every raw result.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.workers_commits import run_loadgen, start_kcoord
from support.kafka_broker import KafkaBroker
from support.loadgen import procstat, report
from support.loadgen.plan import connection_budget, shape
from support.throughput_clients import RUNS, create_one_partition_topic
from support.workload import unique


@dataclass
class Target:
    label: str
    bootstrap: str
    pids: list[int]  # charged to the target
    upstream_pids: list[int]  # its upstream broker's, reported apart (kcoord only)


@dataclass
class GroupRow:
    name: str
    title: str
    scenario: str
    args: list[str]


@dataclass
class RelayRow:
    name: str
    title: str
    records: int
    size: int


def scaled(n: int, scale: float, least: int = 10) -> int:
    return max(least, round(n * scale))


def rows(scale: float) -> list[GroupRow | RelayRow]:
    budget = connection_budget()

    def members(n: int) -> tuple[int, list[str], str]:
        n = scaled(n, scale)
        conns, note = shape(n, 32, budget)
        return n, conns, note

    out: list[GroupRow | RelayRow] = []
    for c in (100, 1_000):
        n = scaled(c, scale)
        out.append(GroupRow(f"commits-{c}", f"durable commits, {n:,} connections", "commit-storm",
                            ["--committers", str(n), "--duration", "15"]))  # fmt: skip
    for size, interval, lanes in ((10_000, "3", "5000"), (50_000, "1.5", "10000")):
        n, conns, note = members(size)
        out.append(GroupRow(f"classic-{size // 1000}k", f"classic steady, {n:,} members, heartbeat {interval} s{note}",
                            "steady", ["--members", str(n), "--interval", interval, "--duration", "15",
                                       "--lanes", lanes, *conns]))  # fmt: skip
    for size in (5_000, 20_000):
        n, conns, note = members(size)
        out.append(GroupRow(f"kip848-{size // 1000}k", f"KIP-848 steady, {n:,} members in groups of 50{note}",
                            "consumer-steady", ["--members", str(n), "--group-size", "50", "--duration", "15",
                                                "--join-rate", "2000", "--settle-timeout", "300", *conns]))  # fmt: skip
    n = scaled(1_000, scale)
    out.append(GroupRow("join-storm-1000", f"join storm, {n:,} members", "join-storm", ["--members", str(n)]))
    out.append(RelayRow("relay-100b", f"produce, consume {scaled(1_000_000, scale):,} x 100 B",
                        scaled(1_000_000, scale), 100))  # fmt: skip
    out.append(RelayRow("relay-10k", f"produce, consume {scaled(100_000, scale):,} x 10 KB",
                        scaled(100_000, scale), 10_240))  # fmt: skip
    return out


def cpu_seconds(pids: list[int]) -> float:
    return sum(procstat.cpu_seconds(p) for p in pids)


def run_group_row(row: GroupRow, target: Target, timeout: float) -> dict[str, Any]:
    args = ["--scenario", row.scenario, *row.args]
    if row.scenario == "commit-storm":
        # what the committed offsets are durable in, for the report; kcoord's are on its upstream Kafka
        args += ["--storage", "kafka"]
    return run_loadgen(target.label, target.bootstrap, target.pids, target.upstream_pids, args, timeout)


def run_relay_row(row: RelayRow, target: Target, client: str, kafka: str) -> dict[str, Any]:
    produce, consume = RUNS[client]
    topic = unique(f"side-{row.name}")
    create_one_partition_topic(kafka, topic)
    load = os.getloadavg()[0]
    pids = target.pids + target.upstream_pids
    c0 = cpu_seconds(pids)
    produce_s = produce(target.bootstrap, topic, row.records, row.size)
    c1 = cpu_seconds(pids)
    consume_s = consume(target.bootstrap, topic, row.records)
    c2 = cpu_seconds(pids)
    return {
        "produce_per_s": row.records / produce_s,
        "consume_per_s": row.records / consume_s,
        "cpu_cores_produce": (c1 - c0) / produce_s,  # the target and (kcoord) its upstream
        "cpu_cores_consume": (c2 - c1) / consume_s,
        "load_average": (round(load, 2), round(os.getloadavg()[0], 2)),
    }


# (label, path in the result, higher is better) per kind of row
GROUP_FIGURES: dict[str, list[tuple[str, str, bool]]] = {
    "commit-storm": [("commits/s", "commits_per_s", True), ("p99 ms", "commit.p99_ms", False)],
    "steady": [("heartbeats/s", "heartbeats_per_s", True), ("p99 ms", "heartbeat.p99_ms", False)],
    "consumer-steady": [("heartbeats/s", "heartbeats_per_s", True), ("p99 ms", "heartbeat.p99_ms", False)],
    "join-storm": [("total s", "total_s", False), ("after last join s", "after_last_join_s", False)],
}
RATES = {"commit-storm": "commits_per_s", "steady": "heartbeats_per_s", "consumer-steady": "heartbeats_per_s"}


def per_op_cpu(result: dict[str, Any], scenario: str) -> dict[str, float]:
    """µs of CPU per commit or heartbeat: the target's, and with its upstream's."""
    rate = result.get(RATES.get(scenario, ""))
    cpu = result.get("server_cores")
    if not isinstance(rate, int | float) or not rate or not isinstance(cpu, int | float):
        return {}
    out = {"µs CPU/op": cpu / rate * 1e6}
    upstream = result.get("upstream_cores")
    out["µs CPU/op with upstream"] = (
        (cpu + (upstream if isinstance(upstream, int | float) else 0.0)) / rate * 1e6
    )
    return out


def figures(row: GroupRow | RelayRow, result: dict[str, Any], client: str = "") -> dict[str, float]:
    if "error" in result:
        return {}
    if isinstance(row, RelayRow):
        return {
            f"{client} produce rec/s": result["produce_per_s"],
            f"{client} consume rec/s": result["consume_per_s"],
        }
    out = {}
    for label, path, _ in GROUP_FIGURES[row.scenario]:
        value = report.lookup(result, path)
        if isinstance(value, int | float):
            out[label] = float(value)
    out.update(per_op_cpu(result, row.scenario))
    return out


def higher_is_better(label: str) -> bool:
    return label.endswith("/s")


def markdown(
    table: dict[str, dict[str, dict[str, list[float]]]], titles: dict[str, str], labels: list[str]
) -> str:
    """One line per row and figure: the median over rounds per target, and each kcoord's ratio to Kafka."""
    kafka, *kcoords = labels
    head = f"| row | figure | {kafka} | " + " | ".join(f"{k} | ratio" for k in kcoords) + " |"
    lines = [head, "|" + "---|" * (3 + 2 * len(kcoords))]
    for name, per_figure in table.items():
        for figure, per_target in per_figure.items():
            base = per_target.get(kafka)
            cells = [titles[name], figure, _fmt(base)]
            for k in kcoords:
                mine = per_target.get(k)
                cells += [_fmt(mine), _ratio(mine, base, higher_is_better(figure))]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _median(values: list[float] | None) -> float | None:
    return statistics.median(values) if values else None


def _number(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def _fmt(values: list[float] | None) -> str:
    """The median, and every round's figure when there are several."""
    m = _median(values)
    if m is None or values is None:
        return "—"
    runs = f" ({', '.join(_number(v) for v in values)})" if len(values) > 1 else ""
    return _number(m) + runs


def _ratio(mine: list[float] | None, base: list[float] | None, higher: bool) -> str:
    a, b = _median(mine), _median(base)
    return report.ratio(a, b, higher) if a is not None and b is not None else "n/a"


def interpreters(given: list[str] | None) -> list[tuple[str, str]]:
    """(target name suffix, python) per ``--kcoord-python``: none given, this interpreter, unnamed.
    The interpreter's build counts: under Debian's python3.11 (PGO and LTO, what the container image
    runs) kcoord spent 11-14% less CPU per request in process and 23% less per relayed request than
    under a CPython built without them (pyenv's default, this machine's ``.venv``): bench/RESULTS.md,
    "The interpreter's build"."""
    if not given:
        return [("", sys.executable)]
    out = []
    for i, item in enumerate(given):
        # the first "=", as bench.relay_floor's --kcoord NAME=PYTHON: the path may hold one
        label, sep, path = item.partition("=")
        if not sep:
            label, path = (str(i + 1) if len(given) > 1 else ""), item
        out.append((f"@{label}" if label else "", path))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rows", default="", help="comma-separated row names (default: every row)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every row's size (a quick run: 0.1)")
    ap.add_argument("--clients", default="librdkafka,java", help="relay rows' clients")
    ap.add_argument("--timeout", type=float, default=900.0, help="per load generator run, seconds")
    ap.add_argument(
        "--kcoord-python",
        action="append",
        metavar="[LABEL=]PATH",
        help="the interpreter kcoord runs under (a venv's python with kcoord installed; default this one); "
        "given twice or more, each is a pair of targets, its label appended to their names",
    )
    ap.add_argument("--json", help="write every raw result here")
    args = ap.parse_args(argv)
    plan = rows(args.scale)
    if args.rows:
        wanted = set(args.rows.split(","))
        unknown = wanted - {r.name for r in plan}
        if unknown:
            raise SystemExit(f"unknown rows {sorted(unknown)}; rows: {', '.join(r.name for r in plan)}")
        plan = [r for r in plan if r.name in wanted]
    clients = [c for c in args.clients.split(",") if c]
    raw: list[dict[str, Any]] = []
    table: dict[str, dict[str, dict[str, list[float]]]] = {}
    started = time.monotonic()
    load_before = os.getloadavg()
    with KafkaBroker(Path(tempfile.mkdtemp(prefix="bench-side-")) / "kafka") as broker:
        kafka_pids = [broker.process.pid] if broker.process is not None else []
        # The broker here runs with group.initial.rebalance.delay.ms=0 (support/kafka_broker.py): so do the kcoords.
        same = ["--group-initial-rebalance-delay-ms", "0"]
        targets = [Target("kafka-4.0", broker.bootstrap, kafka_pids, [])]
        started_kcoords = []
        try:
            for suffix, python in interpreters(args.kcoord_python):
                for name, workers in ((f"kcoord{suffix}", 1), (f"kcoord-workers-2{suffix}", 2)):
                    child, at, pids = start_kcoord(name, broker.bootstrap, workers, same, python)
                    started_kcoords.append(child)
                    targets.append(Target(name, at, pids, kafka_pids))
            for round_ in range(args.rounds):
                order = targets if round_ % 2 == 0 else targets[::-1]
                for row in plan:
                    for client in clients if isinstance(row, RelayRow) else [""]:
                        for target in order:
                            run: Callable[[], dict[str, Any]] = (
                                (lambda: run_relay_row(row, target, client, broker.bootstrap))  # noqa: B023
                                if isinstance(row, RelayRow)
                                else (lambda: run_group_row(row, target, args.timeout))  # noqa: B023
                            )
                            try:
                                result = run()
                            except Exception as exc:  # one failed run must not cost every other figure
                                result = {"error": repr(exc)}
                            got = figures(row, result, client)
                            raw.append({"round": round_ + 1, "row": row.name, "client": client,
                                        "target": target.label, "result": result})  # fmt: skip
                            for figure, value in got.items():
                                table.setdefault(row.name, {}).setdefault(figure, {}).setdefault(
                                    target.label, []
                                ).append(value)
                            shown = ", ".join(f"{k} {v:,.1f}" for k, v in got.items()) or result.get(
                                "error", ""
                            )
                            print(f"round {round_ + 1} {row.name} {client} {target.label}: {shown} "
                                  f"(load {result.get('load_average')})", flush=True)  # fmt: skip
        finally:
            for child in started_kcoords:
                child.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1, default=str))
    titles = {r.name: r.title for r in plan}
    print()
    print(f"rounds {args.rounds}, scale {args.scale}, {(time.monotonic() - started) / 60:.1f} min; load average "
          f"before {' '.join(f'{x:.2f}' for x in load_before)}, after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    print(markdown(table, titles, [t.label for t in targets]))


if __name__ == "__main__":
    main()
