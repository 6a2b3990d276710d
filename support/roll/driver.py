"""A rolling upgrade from classic to KIP-848 consumer groups and back, with a producer running.

One roll: a topic, a producer writing sequence-numbered records, ``members`` classic consumers of
one group (the variant: ``range``, ``cooperative`` (cooperative-sticky) or ``static``: range with
``group.instance.id``). Once the group settled, each member in turn is stopped and started again
with ``group.protocol=consumer`` (upgrade), the roll waiting for the group to settle after each; then
each in turn back to classic (downgrade). With ``kill_mid_roll`` the coordinator is killed with
SIGKILL and restarted right after the middle upgrade's new member started. Then the producer stops,
the members drain what is left, and :func:`support.roll.audit.audit` counts.

Settled: every partition has exactly one owner and every member owns some. A step that does not
settle within ``step_timeout`` s ends the roll there (a coordinator that cannot serve the mixed
group fails fast rather than after every remaining step's timeout); the report says so.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from support.roll.audit import RollReport, StepTiming, audit
from support.roll.coordinators import RollCoordinator
from support.roll.members import ClientKind, GroupProtocol, MemberSpec, RollMember, start_member
from support.roll.producer import SequenceProducer
from support.workload import create_topic, unique

Variant = Literal["range", "cooperative", "static"]
VARIANTS: tuple[Variant, ...] = ("range", "cooperative", "static")


@dataclass(frozen=True)
class RollPlan:
    client: ClientKind
    variant: Variant
    members: int = 3
    partitions: int = 6
    rate: float = 200.0  # records per second
    step_timeout: float = 30.0
    dwell: float = 1.0  # seconds of traffic after each settled step, before the next
    drain_timeout: float = 30.0
    # The drain ends early once nothing new came for this long: longer than a classic session (10 s),
    # so a static member's partitions, held until its session expires, reach another member first.
    drain_quiet: float = 15.0
    kill_mid_roll: bool = False


class RollAborted(Exception):
    """A step did not settle, or a member failed: the roll stops and reports what it has."""


class Roll:
    """The state of one roll in progress: the live members and everything that ever ran."""

    def __init__(self, coordinator: RollCoordinator, plan: RollPlan, log_dir: Path) -> None:
        self.coordinator = coordinator
        self.plan = plan
        self.log_dir = log_dir
        self.topic = unique("roll")
        self.group = unique("roll-group")
        self.live: list[RollMember] = []
        self.every: list[RollMember] = []
        self.steps: list[StepTiming] = []
        self.notes: list[str] = []
        self.first_settled: float | None = None  # where ownerless time starts being counted
        self._incarnations = 0

    def spec(self, slot: int, protocol: GroupProtocol) -> MemberSpec:
        self._incarnations += 1
        plan = self.plan
        return MemberSpec(
            name=f"c{slot}-{protocol}-{self._incarnations}",
            bootstrap=self.coordinator.bootstrap,
            group=self.group,
            topic=self.topic,
            protocol=protocol,
            assignor="cooperative-sticky" if plan.variant == "cooperative" else "range",
            instance_id=f"c{slot}" if plan.variant == "static" else None,
        )

    def start(self, slot: int, protocol: GroupProtocol) -> RollMember:
        member = start_member(self.plan.client, self.spec(slot, protocol), self.log_dir)
        self.every.append(member)
        return member

    def settled(self) -> bool:
        owners: dict[int, int] = {}
        for member in self.live:
            if (failure := member.failure()) is not None:
                raise RollAborted(failure)
            owned = member.owned()
            if not owned and self.plan.partitions >= len(self.live):
                return False
            for partition in owned:
                owners[partition] = owners.get(partition, 0) + 1
        return len(owners) == self.plan.partitions and all(count == 1 for count in owners.values())

    def wait_settled(self, label: str, started: float) -> None:
        deadline = time.monotonic() + self.plan.step_timeout
        while time.monotonic() < deadline:
            if self.settled():
                self.steps.append(StepTiming(label, started, time.time()))
                time.sleep(self.plan.dwell)
                return
            time.sleep(0.02)
        self.steps.append(StepTiming(label, started, None))
        owned = {m.spec.name: sorted(m.owned()) for m in self.live}
        raise RollAborted(f"{label}: not settled within {self.plan.step_timeout:.0f} s; owned {owned}")

    def replace(self, slot: int, protocol: GroupProtocol, label: str, kill: bool) -> None:
        started = time.time()
        self.live[slot].stop()
        self.live[slot] = self.start(slot, protocol)
        if kill:
            self.coordinator.kill_and_restart()
            label += " +coordinator kill -9"
            self.notes.append(f"coordinator killed (SIGKILL) and restarted during {label}")
        self.wait_settled(label, started)

    def run(self) -> None:
        """The roll itself."""
        for slot in range(self.plan.members):
            self.live.append(self.start(slot, "classic"))
        began = time.time()
        self.wait_settled("classic group formed", began)
        self.first_settled = self.steps[-1].settled
        middle = self.plan.members // 2
        for slot in range(self.plan.members):
            kill = self.plan.kill_mid_roll and slot == middle
            self.replace(slot, "consumer", f"upgrade c{slot}", kill)
        for slot in range(self.plan.members):
            self.replace(slot, "classic", f"downgrade c{slot}", False)

    def delivered(self) -> set[int]:
        return {d.sequence for m in self.every for d in m.deliveries()}

    def drain(self, acked: set[int]) -> None:
        """Until every acknowledged record was processed, or nothing new came for a while."""
        deadline = time.monotonic() + self.plan.drain_timeout
        seen, quiet_since = -1, time.monotonic()
        while time.monotonic() < deadline:
            delivered = self.delivered()
            if acked <= delivered:
                return
            if len(delivered) != seen:
                seen, quiet_since = len(delivered), time.monotonic()
            elif time.monotonic() - quiet_since > self.plan.drain_quiet:
                return
            time.sleep(0.2)


@contextmanager
def _stopping(members: list[RollMember]) -> Iterator[None]:
    try:
        yield
    finally:
        for member in members:
            member.stop()


def run_roll(coordinator: RollCoordinator, plan: RollPlan, log_dir: Path) -> RollReport:
    """One roll against ``coordinator`` (see the module docstring); always returns a report."""
    if plan.kill_mid_roll and not coordinator.restartable:
        raise ValueError(f"{coordinator.name} cannot be killed and restarted in this harness")
    roll = Roll(coordinator, plan, log_dir)
    create_topic(coordinator.upstream, roll.topic, plan.partitions)
    producer = SequenceProducer(coordinator.upstream, roll.topic, plan.partitions, plan.rate).start()
    with _stopping(roll.live):
        try:
            roll.run()
        except RollAborted as exc:
            roll.notes.append(f"roll abandoned: {exc}")
        finally:
            roll_end = time.time()
            acked = producer.stop()
        roll.drain(acked)
    changes = [c for m in roll.every for c in m.changes()]
    report = audit(
        partitions=plan.partitions,
        produced=acked,
        deliveries=[d for m in roll.every for d in m.deliveries()],
        changes=changes,
        lives=[m.life() for m in roll.every],
        refusals=[r for m in roll.every for r in m.refusals()],
        steps=roll.steps,
        window=(roll.first_settled or roll_end, roll_end),
    )
    report.notes += roll.notes + [f"producer: {e}" for e in producer.failed[:5]]
    report.notes += [f for m in roll.every if (f := m.failure()) is not None]
    report.notes += [f"{m.spec.name}: {problem}" for m in roll.every for problem in m.problems()]
    return report
