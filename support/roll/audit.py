"""The counts of a rolling classic<->consumer migration, from what the members and the producer saw.

Pure: no processes, no clocks. The driver (support/roll/driver.py) collects what happened as the
values below, with wall-clock seconds (``time.time()`` in Python, ``System.currentTimeMillis()`` in
the Java peers: one clock on one machine), and :func:`audit` turns them into a :class:`RollReport`.

What counts:
- a record is identified by its sequence number (the producer writes each once, idempotently);
  delivered twice: processed more than once, by two members or by one member twice; such a
  duplicate is "after a refused commit" when a member that processed it before had a commit covering
  it refused (at-least-once doing its job: the next owner starts from the last committed offset),
  and unexplained otherwise (every commit acknowledged, and still processed again: two owners, or
  committed offsets lost);
  never delivered: acknowledged by the broker, processed by nobody by the end of the drain;
- a partition is owned by a member from the rebalance callback that handed it over until the one
  that took it back (revoked or lost) or the member's end; ownerless seconds are counted between
  the moment the group first settled and the end of the roll; two owners at once is double ownership.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Delivery:
    """One record processed by one member."""

    member: str
    partition: int
    offset: int
    sequence: int
    at: float


@dataclass(frozen=True, slots=True)
class OwnershipChange:
    """A rebalance callback: ``partitions`` handed to (``gained``) or taken from a member."""

    member: str
    at: float
    partitions: frozenset[int]
    gained: bool


@dataclass(frozen=True, slots=True)
class CommitRefusal:
    """An offset commit the coordinator refused, with the client's name for the error and what it
    would have committed: (partition, next offset) pairs."""

    member: str
    at: float
    error: str
    offsets: tuple[tuple[int, int], ...] = ()

    def covers(self, partition: int, offset: int) -> bool:
        return any(p == partition and offset < next_offset for p, next_offset in self.offsets)


@dataclass(frozen=True, slots=True)
class MemberLife:
    """When a member's process (or consumer) started and ended (None: still running at the audit)."""

    member: str
    started: float
    ended: float | None


@dataclass(frozen=True, slots=True)
class StepTiming:
    """One step of the roll: a member replaced (``label``, e.g. "upgrade c1"), from the moment the old
    one was asked to stop until every partition had exactly one owner and every member had some."""

    label: str
    started: float
    settled: float | None  # None: it did not settle within the driver's limit

    @property
    def seconds(self) -> float | None:
        return None if self.settled is None else self.settled - self.started


@dataclass(frozen=True, slots=True)
class Interval:
    member: str
    start: float
    end: float


@dataclass
class RollReport:
    """The counts of one roll; ``summary()`` is the one-line form the benchmark prints."""

    produced: int
    delivered: int
    duplicated_records: int  # records processed more than once
    duplicate_deliveries: int  # the deliveries beyond the first
    duplicated_across_members: int  # of duplicated_records: processed by two different members
    duplicated_unexplained: int  # of duplicated_records: no refused commit covered an earlier delivery
    never_delivered: int
    refused_commits: Counter[str]
    double_ownership_episodes: int
    double_ownership_seconds: float
    ownerless_seconds: dict[int, float]
    steps: list[StepTiming]
    notes: list[str] = field(default_factory=list)

    @property
    def ownerless_max(self) -> float:
        return max(self.ownerless_seconds.values(), default=0.0)

    @property
    def ownerless_total(self) -> float:
        return sum(self.ownerless_seconds.values())

    @property
    def all_steps_settled(self) -> bool:
        return all(step.settled is not None for step in self.steps)

    def summary(self) -> str:
        refused = ",".join(f"{name}x{count}" for name, count in sorted(self.refused_commits.items())) or "0"
        steps = " ".join(f"{s.label}={_seconds(s.seconds)}" for s in self.steps)
        return (
            f"produced={self.produced} delivered={self.delivered} dup_records={self.duplicated_records} "
            f"(across members {self.duplicated_across_members}, unexplained {self.duplicated_unexplained}, "
            f"extra deliveries {self.duplicate_deliveries}) "
            f"lost={self.never_delivered} refused_commits={refused} "
            f"double_owner={self.double_ownership_episodes} ({self.double_ownership_seconds:.2f} s) "
            f"ownerless max={self.ownerless_max:.2f} s total={self.ownerless_total:.2f} s | steps: {steps}"
        )


def _seconds(value: float | None) -> str:
    return "unsettled" if value is None else f"{value:.2f}s"


def ownership_intervals(
    changes: Iterable[OwnershipChange], lives: Iterable[MemberLife], until: float
) -> dict[int, list[Interval]]:
    """Per partition, the intervals each member owned it. A member's ownership ends at its last
    callback, or at its end if it never gave the partition back (closed, killed), or at ``until``."""
    end_of = {life.member: life.ended if life.ended is not None else until for life in lives}
    held: dict[tuple[str, int], float] = {}
    out: dict[int, list[Interval]] = {}
    for change in sorted(changes, key=lambda c: c.at):
        for partition in change.partitions:
            key = (change.member, partition)
            if change.gained:
                held.setdefault(key, change.at)
            elif key in held:
                out.setdefault(partition, []).append(Interval(change.member, held.pop(key), change.at))
    for (member, partition), start in held.items():
        out.setdefault(partition, []).append(Interval(member, start, max(start, end_of.get(member, until))))
    return out


def _owner_counts(intervals: Sequence[Interval], start: float, end: float) -> list[tuple[float, float, int]]:
    """(from, to, owners) pieces covering [start, end]."""
    edges: list[tuple[float, int]] = []
    for interval in intervals:
        lo, hi = max(interval.start, start), min(interval.end, end)
        if hi > lo:
            edges += [(lo, 1), (hi, -1)]
    edges.sort()
    pieces: list[tuple[float, float, int]] = []
    owners, at = 0, start
    for when, delta in edges:
        if when > at:
            pieces.append((at, when, owners))
            at = when
        owners += delta
    if end > at:
        pieces.append((at, end, owners))
    return pieces


def _unexplained(deliveries: list[Delivery], refusals_of: dict[str, list[CommitRefusal]]) -> bool:
    """A record processed again although no earlier processing of it had its commit refused."""
    ordered = sorted(deliveries, key=lambda d: d.at)
    for i in range(1, len(ordered)):
        excused = any(
            refusal.covers(earlier.partition, earlier.offset)
            for earlier in ordered[:i]
            for refusal in refusals_of.get(earlier.member, [])
            if refusal.at >= earlier.at
        )
        if not excused:
            return True
    return False


def audit(
    *,
    partitions: int,
    produced: Iterable[int],
    deliveries: Iterable[Delivery],
    changes: Iterable[OwnershipChange],
    lives: Iterable[MemberLife],
    refusals: Iterable[CommitRefusal],
    steps: Sequence[StepTiming],
    window: tuple[float, float],
) -> RollReport:
    """The counts of one roll. ``window`` is (first settled, end of the roll): where ownerless time and
    double ownership are measured (before it the group was forming; after it, draining and closing)."""
    acked = set(produced)
    refusal_list = list(refusals)
    refusals_of: dict[str, list[CommitRefusal]] = {}
    for refusal in refusal_list:
        refusals_of.setdefault(refusal.member, []).append(refusal)
    by_sequence: dict[int, list[Delivery]] = {}
    for delivery in deliveries:
        by_sequence.setdefault(delivery.sequence, []).append(delivery)
    duplicated = {seq: ds for seq, ds in by_sequence.items() if len(ds) > 1}
    start, end = window
    intervals = ownership_intervals(changes, lives, end)
    ownerless: dict[int, float] = {}
    episodes, overlap = 0, 0.0
    for partition in range(partitions):
        pieces = _owner_counts(intervals.get(partition, []), start, end)
        ownerless[partition] = sum(hi - lo for lo, hi, owners in pieces if owners == 0)
        doubled = [(lo, hi) for lo, hi, owners in pieces if owners > 1]
        overlap += sum(hi - lo for lo, hi in doubled)
        episodes += sum(1 for i, piece in enumerate(doubled) if i == 0 or doubled[i - 1][1] != piece[0])
    return RollReport(
        produced=len(acked),
        delivered=len(by_sequence),
        duplicated_records=len(duplicated),
        duplicate_deliveries=sum(len(ds) - 1 for ds in duplicated.values()),
        duplicated_across_members=sum(1 for ds in duplicated.values() if len({d.member for d in ds}) > 1),
        duplicated_unexplained=sum(1 for ds in duplicated.values() if _unexplained(ds, refusals_of)),
        never_delivered=len(acked - by_sequence.keys()),
        refused_commits=Counter(refusal.error for refusal in refusal_list),
        double_ownership_episodes=episodes,
        double_ownership_seconds=overlap,
        ownerless_seconds=ownerless,
        steps=list(steps),
    )
