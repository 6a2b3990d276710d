"""A pure keyed timer queue: the coordinator's only notion of "later".

Invariants:
- At most one live timer per key: :meth:`TimerQueue.schedule` with a key that is already
  scheduled replaces it (Kafka's ``CoordinatorTimer.schedule`` semantics), so a member's
  session deadline is pushed back by rescheduling the same key, never by stacking timers.
- :meth:`TimerQueue.pop_due` hands out due timers in deadline order; ties keep scheduling order
  (the order of each key's latest ``schedule``), so a run is deterministic for a given sequence
  of calls.
- Nothing here reads a clock: the caller passes ``now``.

Why the heap is lazy: every heartbeat and every offset commit pushes a member's session deadline
back. Pushing a heap entry each time filled the heap with stale entries that ``next_deadline``
then had to pop, after every request. Instead each key has at most one *armed* heap entry, at or
before its live deadline. Moving a deadline later only updates the live entry (a dict store);
when the armed entry reaches the head of the heap it is re-armed at the live deadline, so a
member heartbeating every 3 s with a 10 s session costs one heap push per 10 s, not one per
heartbeat. Moving a deadline earlier arms a new entry at once. Cancelled or replaced entries are
skipped when they surface. :meth:`TimerQueue.next_deadline` is therefore a wake-up time at or
before the earliest live deadline, not always that deadline itself.
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
        # key -> (deadline, seq) of the heap entry that stands for it; always <= its live deadline.
        self._armed: dict[Hashable, tuple[int, int]] = {}
        self._seq = itertools.count()

    def schedule(self, key: Hashable, deadline_ms: int, payload: Any = None) -> None:
        """Arm ``key`` to fire at ``deadline_ms``, replacing any timer with the same key."""
        seq = next(self._seq)
        self._live[key] = (deadline_ms, seq, payload)
        armed = self._armed.get(key)
        if armed is None or deadline_ms < armed[0]:
            self._armed[key] = (deadline_ms, seq)
            heapq.heappush(self._heap, (deadline_ms, seq, key))

    def push_back(self, key: Hashable, deadline_ms: int) -> bool:
        """Move a live timer's deadline, keeping its payload; False (nothing done) if not armed.

        The same as scheduling ``key`` again with its own payload, for callers that would otherwise
        build an identical payload on every call (a session re-armed by each heartbeat).
        """
        live_timers = self._live
        live = live_timers.get(key)
        if live is None:
            return False
        # schedule()'s body, inlined: every heartbeat and commit comes here, and a deadline moved
        # later (the common case) is a dict store and no heap push.
        seq = next(self._seq)
        live_timers[key] = (deadline_ms, seq, live[2])
        armed = self._armed.get(key)
        if armed is None or deadline_ms < armed[0]:
            self._armed[key] = (deadline_ms, seq)
            heapq.heappush(self._heap, (deadline_ms, seq, key))
        return True

    def cancel(self, key: Hashable) -> bool:
        """Disarm ``key``; returns whether it was armed."""
        return self._live.pop(key, None) is not None

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._live

    def deadline(self, key: Hashable) -> int | None:
        entry = self._live.get(key)
        return None if entry is None else entry[0]

    def next_deadline(self) -> int | None:
        """When to poll next: at or before the earliest live deadline (None: nothing scheduled).

        It may be earlier than that deadline (an armed entry whose timer was pushed back since);
        polling then fires nothing and re-arms the entry. Not settling here keeps the per-request
        cost of asking constant: eagerly re-arming every pushed-back head made a heap operation
        per heartbeat again.
        """
        self._drop_dead_head()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> list[DueTimer]:
        """Remove and return every timer with ``deadline <= now_ms``, earliest first."""
        due: list[DueTimer] = []
        while True:
            timer = self.pop_next_due(now_ms)
            if timer is None:
                return due
            due.append(timer)

    def pop_next_due(self, now_ms: int) -> DueTimer | None:
        """Remove and return the earliest due timer, or None. Lets a caller fire timers one at a
        time, so a timer scheduled (or cancelled) by an earlier callback is honoured."""
        heap = self._heap
        live_timers = self._live
        armed = self._armed
        while True:
            self._drop_dead_head()
            if not heap or heap[0][0] > now_ms:
                return None
            deadline, seq, key = heap[0]
            live = live_timers[key]
            if live[0] != deadline or live[1] != seq:
                # Rescheduled since this entry was armed (later, or the same deadline but newer):
                # re-arm at the live deadline and sequence, where an eager push would have put it.
                armed[key] = (live[0], live[1])
                heapq.heapreplace(heap, (live[0], live[1], key))
                continue
            heapq.heappop(heap)
            del armed[key]
            del live_timers[key]
            return DueTimer(key, deadline, live[2])

    def __len__(self) -> int:
        return len(self._live)

    def keys(self) -> list[Hashable]:
        return list(self._live)

    def _drop_dead_head(self) -> None:
        """Pop head entries that stand for nothing: superseded by an earlier armed entry of the
        same key, or whose key was cancelled (or fired). The head left, if any, is a live key's
        armed entry (possibly before its live deadline)."""
        heap = self._heap
        armed = self._armed
        while heap:
            deadline, seq, key = heap[0]
            if armed.get(key) != (deadline, seq):
                heapq.heappop(heap)
            elif key not in self._live:
                heapq.heappop(heap)
                del armed[key]
            else:
                return
