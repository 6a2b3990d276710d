"""A pure keyed timer queue: the coordinator's only notion of "later".

Invariants:
- At most one live timer per key: :meth:`TimerQueue.schedule` with a key that is already
  scheduled replaces it (Kafka's ``CoordinatorTimer.schedule`` semantics), so a member's
  session deadline is pushed back by rescheduling the same key, never by stacking timers.
- :meth:`TimerQueue.pop_due` hands out due timers in deadline order; ties keep scheduling order,
  so a run is deterministic for a given sequence of calls.
- Nothing here reads a clock: the caller passes ``now``. Cancelled or replaced entries stay in
  the heap and are skipped lazily (cheap cancel, which session heartbeats do constantly).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class DueTimer:
    key: Hashable
    deadline_ms: int
    payload: Any


class TimerQueue:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._live: dict[Hashable, tuple[int, int, Any]] = {}  # key -> (deadline, seq, payload)
        self._seq = itertools.count()

    def schedule(self, key: Hashable, deadline_ms: int, payload: Any = None) -> None:
        """Arm ``key`` to fire at ``deadline_ms``, replacing any timer with the same key."""
        seq = next(self._seq)
        self._live[key] = (deadline_ms, seq, payload)
        heapq.heappush(self._heap, (deadline_ms, seq, key))

    def cancel(self, key: Hashable) -> bool:
        """Disarm ``key``; returns whether it was armed."""
        return self._live.pop(key, None) is not None

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._live

    def deadline(self, key: Hashable) -> int | None:
        entry = self._live.get(key)
        return None if entry is None else entry[0]

    def next_deadline(self) -> int | None:
        self._drop_stale_head()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> list[DueTimer]:
        """Remove and return every timer with ``deadline <= now_ms``, earliest first."""
        due: list[DueTimer] = []
        while True:
            self._drop_stale_head()
            if not self._heap or self._heap[0][0] > now_ms:
                return due
            deadline, _seq, key = heapq.heappop(self._heap)
            _, _, payload = self._live.pop(key)
            due.append(DueTimer(key, deadline, payload))

    def pop_next_due(self, now_ms: int) -> DueTimer | None:
        """Remove and return the earliest due timer, or None. Lets a caller fire timers one at a
        time, so a timer scheduled (or cancelled) by an earlier callback is honoured."""
        self._drop_stale_head()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        deadline, _seq, key = heapq.heappop(self._heap)
        _, _, payload = self._live.pop(key)
        return DueTimer(key, deadline, payload)

    def __len__(self) -> int:
        return len(self._live)

    def keys(self) -> list[Hashable]:
        return list(self._live)

    def _drop_stale_head(self) -> None:
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            live = self._live.get(key)
            if live is not None and live[0] == deadline and live[1] == seq:
                return
            heapq.heappop(heap)
