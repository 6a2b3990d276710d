"""Server-side assignors: how long one target assignment takes for a large group.

    python -m bench.assignor [--members 1000] [--partitions 10000] [--repeat 7] [--assignors uniform,range]

For each shape — the partitions on 1 topic or spread over 100 topics, members subscribing alike
(homogeneous) or not (heterogeneous) — it times three computations:

- full: every member new, nothing assigned yet;
- join: the group settled (each member holds what ``full`` gave it), plus one new member;
- leave: the group settled, minus one member.

The target: "the uniform assignor on 1,000 members x 10,000 partitions recomputes after one
member joins in < 50 ms".

Heterogeneous shapes: with 1 topic, every member subscribes to it (9,000 partitions of the 10,000)
and every other member also to a side topic (the other 1,000); with 100 topics, member i subscribes
to the 30 topics starting at 10 * (i % 10), so each topic has 300 subscribers and neighbouring
cohorts overlap (the hard case for Kafka's heterogeneous balancer).

Member ids are random 32-hex strings and topic ids ``uuid.UUID``s, as the coordinator will have
them. Each figure is the median (and minimum) wall time of ``--repeat`` runs in this one process,
with the garbage collector run before each; building the GroupSpec is not timed (the caller keeps
its members). "moved" counts partitions whose owner changed from the settled assignment.
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kcoord.coordinator.core.consumer.assignors import (
    SERVER_ASSIGNORS,
    GroupAssignment,
    GroupSpec,
    MemberSubscriptionAndAssignment,
    PartitionAssignor,
    TopicsMetadata,
)

Members = dict[str, MemberSubscriptionAndAssignment[uuid.UUID]]


@dataclass(frozen=True)
class Shape:
    name: str
    counts: dict[uuid.UUID, int]
    subscription: Callable[[int], frozenset[uuid.UUID]]  # member number -> its topics


def shapes(partitions: int, rng: random.Random) -> list[Shape]:
    def topic_ids(n: int) -> list[uuid.UUID]:
        return [uuid.UUID(int=rng.getrandbits(128)) for _ in range(n)]

    [single] = topic_ids(1)
    hundred = topic_ids(100)
    main, side = topic_ids(2)
    all_hundred = frozenset(hundred)
    main_share = partitions * 9 // 10
    return [
        Shape("1 topic, homogeneous", {single: partitions}, lambda i: frozenset({single})),
        Shape("100 topics, homogeneous", dict.fromkeys(hundred, partitions // 100), lambda i: all_hundred),
        Shape(
            "1 topic (+1 side topic), heterogeneous",
            {main: main_share, side: partitions - main_share},
            lambda i: frozenset({main, side}) if i % 2 == 0 else frozenset({main}),
        ),
        Shape(
            "100 topics, heterogeneous",
            dict.fromkeys(hundred, partitions // 100),
            lambda i: frozenset(hundred[(10 * (i % 10) + k) % 100] for k in range(30)),
        ),
    ]


def timed(
    assignor: PartitionAssignor, group: GroupSpec[uuid.UUID], topics: TopicsMetadata[uuid.UUID], repeat: int
) -> tuple[list[float], GroupAssignment[uuid.UUID]]:
    times = []
    result = None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = assignor.assign(group, topics)
        times.append(time.perf_counter() - start)
    assert result is not None
    return times, result


def moved(before: Members, after: GroupAssignment[uuid.UUID]) -> int:
    owner = {(t, p): m for m, spec in before.items() for t, ps in spec.assignment.items() for p in ps}
    return sum(
        1 for m, a in after.members.items() for t, ps in a.items() for p in ps if owner.get((t, p)) != m
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--assignors", default="uniform,range")
    args = parser.parse_args()
    rng = random.Random(12)
    member_ids = [f"{rng.getrandbits(128):032x}" for _ in range(args.members + 1)]
    print(f"{args.members} members x {args.partitions} partitions; median (min) of {args.repeat} runs; "
          f"Python {platform.python_version()} on {platform.machine()}")  # fmt: skip
    print(f"{'assignor':8s} {'shape':40s} {'step':6s} {'median ms':>10s} {'min ms':>8s} {'moved':>7s}")
    for name in args.assignors.split(","):
        assignor = SERVER_ASSIGNORS[name]
        for shape in shapes(args.partitions, rng):
            topics = TopicsMetadata(shape.counts)
            fresh: Members = {
                member_ids[i]: MemberSubscriptionAndAssignment(shape.subscription(i))
                for i in range(args.members)
            }
            times, full = timed(assignor, GroupSpec.of(fresh), topics, args.repeat)
            report(name, shape.name, "full", times, moved(fresh, full))
            settled: Members = {
                m: MemberSubscriptionAndAssignment(spec.subscribed_topic_ids, full.members[m])
                for m, spec in fresh.items()
            }
            joiner = member_ids[args.members]
            joined = {**settled, joiner: MemberSubscriptionAndAssignment(shape.subscription(0))}
            times, after = timed(assignor, GroupSpec.of(joined), topics, args.repeat)
            report(name, shape.name, "join", times, moved(joined, after))
            leaver = member_ids[args.members // 2]
            left = {m: spec for m, spec in settled.items() if m != leaver}
            times, after = timed(assignor, GroupSpec.of(left), topics, args.repeat)
            report(name, shape.name, "leave", times, moved(left, after))


def report(assignor: str, shape: str, step: str, times: list[float], moved_partitions: int) -> None:
    median, best = statistics.median(times) * 1e3, min(times) * 1e3
    print(f"{assignor:8s} {shape:40s} {step:6s} {median:10.1f} {best:8.1f} {moved_partitions:7d}", flush=True)


if __name__ == "__main__":
    main()
