"""Time for the coordinator, injected so group state machines stay pure and tests stay fast."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...


# What the group state machines take: a clock's ``now_ms``, so they hold a function, not a clock.
NowMs = Callable[[], int]


class SystemClock:
    """Wall-clock milliseconds: Kafka's timestamps (commit and state timestamps) are epoch millis."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock tests move by hand; ``advance`` never goes backwards."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("time does not go backwards")
        self._now += ms
        return self._now
