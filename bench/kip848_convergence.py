"""KIP-848 convergence with stock clients, kcoord and Apache Kafka 4.0 as the coordinator side by side.

Three scenarios, each on a fresh topic and group, run once per target per round:

- **burst**: ``--members`` (50) confluent-kafka consumers (``group.protocol=consumer``) created and
  subscribed at once to a topic of ``--partitions`` (100); the figure is the time from their creation
  until every one of them has partitions (each consumer's own ``assignment()``).
- **stable3**: three consumers created at once on a topic of 6 partitions; the time until
  ``describe_consumer_groups`` says the group is Stable with three members, each owning partitions.
- **rejoin**: in that Stable group one member is restarted: it closes (leaves the group) and a new
  consumer joins at once; the time from the new one's creation until it has partitions (those the
  leaver released are free, so a coordinator can give them in its first answer).

Targets (``--targets``): ``kafka`` is Kafka 4.0 (../shared/kafka, support.kafka_broker) as the
coordinator, with its defaults except the test settings of support.kafka_broker;
``kcoord-tansu`` is kcoord (``--storage kafka``) in front of tansu; ``kcoord-kafka`` is kcoord in
front of that same Kafka broker. ``--kcoord-arg`` passes an argument to ``kcoord serve`` (e.g.
``--kcoord-arg=--group-consumer-assignment-batch-min-members=0``). Every target uses its default
heartbeat interval (5 s) and session timeout; the clients their defaults.

Run: ``.venv/bin/python -m bench.kip848_convergence [--rounds 3] [--targets kafka,kcoord-tansu]``.
Prints one line per scenario and target with each round's seconds and the median.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from support.broker import TansuBroker
from support.kafka_broker import KafkaBroker
from support.kcoord_process import KcoordProcess
from support.workload import create_topic

POLL_S = 0.05
TIMEOUT_S = 90.0


class Member(threading.Thread):
    """One consumer of the consumer protocol, polling; records its partitions after every poll."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.created = time.monotonic()
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
        })  # fmt: skip
        self.topic = topic
        self.partitions: frozenset[int] = frozenset()
        self.first_assigned: float | None = None
        self.stop_event = threading.Event()

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        while not self.stop_event.is_set():
            self.consumer.poll(POLL_S)
            self.partitions = frozenset(tp.partition for tp in self.consumer.assignment())
            if self.partitions and self.first_assigned is None:
                self.first_assigned = time.monotonic()
        self.consumer.close()  # leaves the group (epoch -1)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT_S) -> float:
    """Polls ``condition`` every 10 ms; the monotonic time it first held."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout} s: {what}")
        time.sleep(0.01)
    return time.monotonic()


def group_is_stable(admin: AdminClient, group: str, members: int) -> bool:
    described = admin.describe_consumer_groups([group], request_timeout=5)[group].result(timeout=10)
    return str(described.state).endswith("STABLE") and len(described.members) == members


@contextmanager
def members(bootstrap: str, group: str, topic: str, count: int) -> Iterator[list[Member]]:
    started = [Member(bootstrap, group, topic) for _ in range(count)]
    for member in started:
        member.start()
    try:
        yield started
    finally:
        for member in started:
            member.stop_event.set()
        for member in started:
            member.join(30)


def burst(bootstrap: str, count: int, partitions: int) -> float:
    topic, group = f"conv-burst-{uuid.uuid4().hex[:8]}", f"conv-burst-g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions)
    with members(bootstrap, group, topic, count) as started:
        start = min(m.created for m in started)
        done = wait_until(lambda: all(m.partitions for m in started), f"{count} members assigned")
        return done - start


def stable_and_rejoin(bootstrap: str) -> tuple[float, float]:
    topic, group = f"conv-three-{uuid.uuid4().hex[:8]}", f"conv-three-g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 6)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    with members(bootstrap, group, topic, 3) as started:
        start = min(m.created for m in started)
        stable = wait_until(
            lambda: all(m.partitions for m in started) and group_is_stable(admin, group, 3),
            "3 members Stable",
        )
        started[0].stop()  # a restart: it leaves, and a new consumer joins at once
        with members(bootstrap, group, topic, 1) as (newcomer,):
            wait_until(lambda: newcomer.first_assigned is not None, "the rejoining member assigned")
            assert newcomer.first_assigned is not None
            return stable - start, newcomer.first_assigned - newcomer.created


def run_target(name: str, bootstrap: str, args: argparse.Namespace) -> dict[str, float]:
    figures = {"burst": burst(bootstrap, args.members, args.partitions)}
    figures["stable3"], figures["rejoin"] = stable_and_rejoin(bootstrap)
    print(f"  {name}: " + ", ".join(f"{k} {v:.2f} s" for k, v in figures.items()), flush=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.kip848_convergence", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--targets", default="kafka,kcoord-tansu", help="kafka, kcoord-tansu, kcoord-kafka")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--members", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--kcoord-arg", action="append", default=[], help="an extra `kcoord serve` argument")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    targets = args.targets.split(",")
    results: dict[str, dict[str, list[float]]] = {t: {} for t in targets}
    with ExitStack() as stack:
        bootstraps: dict[str, str] = {}
        kafka: KafkaBroker | None = None
        if "kafka" in targets or "kcoord-kafka" in targets:
            kafka = stack.enter_context(KafkaBroker())
            bootstraps["kafka"] = kafka.bootstrap
        if "kcoord-tansu" in targets:
            tansu = stack.enter_context(TansuBroker())
            bootstraps["kcoord-tansu"] = stack.enter_context(
                kcoord_on(tansu.bootstrap, args.kcoord_arg)
            ).bootstrap
        if "kcoord-kafka" in targets:
            assert kafka is not None
            bootstraps["kcoord-kafka"] = stack.enter_context(
                kcoord_on(kafka.bootstrap, args.kcoord_arg)
            ).bootstrap
        for round_no in range(1, args.rounds + 1):
            print(f"round {round_no}", flush=True)
            for target in targets:
                for scenario, seconds in run_target(target, bootstraps[target], args).items():
                    results[target].setdefault(scenario, []).append(seconds)
    print(f"\n{'scenario':<9} {'target':<13} median s   rounds")
    for scenario in ("burst", "stable3", "rejoin"):
        for target in targets:
            runs = results[target][scenario]
            listed = ", ".join(f"{s:.2f}" for s in runs)
            print(f"{scenario:<9} {target:<13} {statistics.median(runs):8.2f}   {listed}")
    print(
        f"\ncommand: python -m bench.kip848_convergence {' '.join(argv if argv is not None else sys.argv[1:])}"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def kcoord_on(upstream: str, extra: list[str]) -> KcoordProcess:
    topic = f"__kcoord_conv_{uuid.uuid4().hex[:8]}"
    return KcoordProcess("--storage", "kafka", "--internal-topic", topic, *extra, bootstrap=upstream)


if __name__ == "__main__":
    sys.exit(main())
