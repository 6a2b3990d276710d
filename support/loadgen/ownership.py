"""Which partitions have an owner, over time — the cost a rebalance puts on consumers.

Why: KIP-345's promise is that a static member's restart needs no rebalance, so nobody else stops
consuming. We measure it as (a) wall time during which at least one partition had no owner and
(b) partition-seconds without an owner. Under the eager protocol every member revokes everything
when it rejoins, so a dynamic bounce shows up in both; a static bounce only leaves the restarted
member's own partitions idle while it is down.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

TopicPartition = tuple[str, int]


class OwnershipTracker:
    """Counts owners per partition and integrates the unowned time between start() and stop()."""

    def __init__(
        self, partitions: Iterable[TopicPartition], clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.clock = clock
        self.owners: dict[TopicPartition, int] = {tp: 0 for tp in partitions}
        self.unowned: set[TopicPartition] = set(self.owners)
        self.measuring = False
        self.any_unowned_s = 0.0  # wall time with >= 1 unowned partition
        self.partition_s = 0.0  # integral of the number of unowned partitions
        self.double_owned_events = 0  # an assignment given while another member still held it
        self._last = 0.0

    def _advance(self, now: float) -> None:
        if self.measuring:
            dt = now - self._last
            if self.unowned:
                self.any_unowned_s += dt
                self.partition_s += dt * len(self.unowned)
        self._last = now

    def acquire(self, partitions: Iterable[TopicPartition]) -> None:
        self._advance(self.clock())
        for tp in partitions:
            n = self.owners.get(tp, 0)
            if n:
                self.double_owned_events += 1
            self.owners[tp] = n + 1
            self.unowned.discard(tp)

    def release(self, partitions: Iterable[TopicPartition]) -> None:
        self._advance(self.clock())
        for tp in partitions:
            n = self.owners.get(tp, 0) - 1
            self.owners[tp] = max(n, 0)
            if n <= 0:
                self.unowned.add(tp)

    @property
    def all_owned(self) -> bool:
        return not self.unowned

    def start(self) -> None:
        self.any_unowned_s = self.partition_s = 0.0
        self._last = self.clock()
        self.measuring = True

    def stop(self) -> None:
        self._advance(self.clock())
        self.measuring = False
