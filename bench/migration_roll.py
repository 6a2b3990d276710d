"""Rolling classic <-> KIP-848 migration of a live group, with a producer running: what each step
costs in duplicates, lost records, refused commits and ownerless seconds (support/roll/).

    python -m bench.migration_roll --coordinator kafka|kcoord [--upstream tansu|kafka]
        [--client java|confluent] [--variant range|cooperative|static] [--kill-mid-roll]
        [--members 3] [--partitions 6] [--rate 200] [--heartbeat-ms 5000] [--runs 1]
        [--kcoord-python PATH]

``--coordinator kafka``: one Apache Kafka 4.0 node is the coordinator (the reference figures);
``kcoord``: kcoord in front of ``--upstream`` (tansu, or a Kafka node), its groups on the cluster,
``--kcoord-python`` picking the build (e.g. another worktree's ``.venv/bin/python``).
``--client`` and ``--variant`` take comma-separated lists: every combination runs, each on a fresh
upstream. ``--heartbeat-ms`` is the consumer groups' heartbeat interval on both coordinators
(Kafka's default 5000). Prints one line per run (support.roll.audit.RollReport.summary) and notes.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.broker import BrokerProcess, TansuBroker
from support.kafka_broker import KafkaBroker
from support.roll.audit import RollReport
from support.roll.coordinators import KafkaCoordinator, KcoordCoordinator, RollCoordinator, kafka_overrides
from support.roll.driver import VARIANTS, RollPlan, run_roll


@contextmanager
def coordinator_for(args: argparse.Namespace, tmp: Path) -> Iterator[RollCoordinator]:
    upstream_kind = "kafka" if args.coordinator == "kafka" else args.upstream
    broker: BrokerProcess
    if upstream_kind == "kafka":
        broker = KafkaBroker(log_dir=tmp / "kafka", overrides=kafka_overrides(args.heartbeat_ms))
    else:
        broker = TansuBroker(log_dir=tmp / "tansu")
    broker.start()
    coordinator: RollCoordinator | None = None
    try:
        if args.coordinator == "kafka":
            assert isinstance(broker, KafkaBroker)
            coordinator = KafkaCoordinator(broker)
        else:
            coordinator = KcoordCoordinator(broker.bootstrap, args.heartbeat_ms, python=args.kcoord_python)
        yield coordinator
    finally:
        if coordinator is not None:
            coordinator.stop()
        broker.stop()


def one_run(args: argparse.Namespace, client: str, variant: str) -> RollReport:
    plan = RollPlan(
        client=client,  # type: ignore[arg-type]
        variant=variant,  # type: ignore[arg-type]
        members=args.members,
        partitions=args.partitions,
        rate=args.rate,
        kill_mid_roll=args.kill_mid_roll,
        step_timeout=args.step_timeout,
    )
    with (
        tempfile.TemporaryDirectory(prefix="roll-") as scratch,
        coordinator_for(args, Path(scratch)) as coord,
    ):
        return run_roll(coord, plan, Path(scratch) / "peers")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--coordinator", choices=["kafka", "kcoord"], required=True)
    parser.add_argument("--upstream", choices=["tansu", "kafka"], default="tansu")
    parser.add_argument("--client", default="java", help="java, confluent, or both comma-separated")
    parser.add_argument("--variant", default="range", help=f"any of {','.join(VARIANTS)}, comma-separated")
    parser.add_argument("--kill-mid-roll", action="store_true")
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--heartbeat-ms", type=int, default=5000)
    parser.add_argument("--step-timeout", type=float, default=30.0)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--kcoord-python", default=sys.executable)
    args = parser.parse_args(argv)
    clients = args.client.split(",")
    variants = args.variant.split(",")
    for client, variant, run in itertools.product(clients, variants, range(args.runs)):
        where = args.coordinator if args.coordinator == "kafka" else f"kcoord/{args.upstream}"
        kill = " kill-9" if args.kill_mid_roll else ""
        report = one_run(args, client, variant)
        print(f"[{where} {client} {variant}{kill} run {run + 1}] {report.summary()}", flush=True)
        for note in report.notes:
            print(f"    note: {note}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
