"""Large requests decoded and large answers encoded on the event loop, a little per loop iteration.

A DescribeGroups request naming 20,000 groups is ~1.6 ms of decoding and its answer ~18 ms of
pure-Python encoding. All of it at once makes every other client wait that long; on a thread it was
worse under load: the loop waited for the GIL at each of its I/O callbacks, up to the 5 ms switch
interval each time, and an honest member's heartbeat p99 went from 5 ms idle to 30-50 ms with 8-64
clients pipelining such requests (bench/RESULTS.md, hostile clients). Here the work waits in one
queue, in the order it was submitted, and one callback per loop iteration steps the first for at
most STEP_SECONDS (protocol/request_steps.py, protocol/array_steps.py), whatever the number of
connections asking: a loop iteration carries at most one step of such work, as the router carries
one step of splitting (runtime/router.py, GROUPS_PER_STEP).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger("kcoord.connection")

# Stepped work per loop iteration, in all: ~250 small DescribeGroups entries encoded, or ~6,000
# group ids decoded. The clock is read after every step of the work (its ``entries_per_step``), so
# an iteration runs over by at most one step.
STEP_SECONDS = 0.00015


class SteppedWork(Protocol):
    """Work done in steps: ``step()`` does ~``entries_per_step`` entries (raising what fails)."""

    @property
    def done(self) -> bool: ...

    def step(self, count: int) -> None: ...


@dataclass(slots=True)
class _Work:
    work: SteppedWork
    entries_per_step: int
    abandoned: Callable[[], bool]  # the client left: stop
    finished: Callable[[Exception | None], None]  # done (None), or why it could not be


class LoopSteps:
    """The queue of stepped work; :meth:`submit` one, its ``finished`` is called when it is done."""

    __slots__ = ("_queue", "_scheduled")

    def __init__(self) -> None:
        self._queue: deque[_Work] = deque()
        self._scheduled = False

    def __len__(self) -> int:
        return len(self._queue)

    def submit(
        self,
        work: SteppedWork,
        entries_per_step: int,
        abandoned: Callable[[], bool],
        finished: Callable[[Exception | None], None],
    ) -> None:
        """Step ``work`` after the work before it; ``finished(None)`` once it is done or
        ``abandoned()``, ``finished(error)`` if a step raised."""
        self._queue.append(_Work(work, entries_per_step, abandoned, finished))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._step)

    def close(self) -> None:
        """Drop what is queued (the server stops): nobody will read those answers."""
        self._queue.clear()

    def _step(self) -> None:
        self._scheduled = False
        queue = self._queue
        deadline = time.perf_counter() + STEP_SECONDS
        while queue:
            item = queue[0]
            work = item.work
            error: Exception | None = None
            try:
                if not item.abandoned():
                    while not work.done:  # some of it in every step, however late the step
                        work.step(item.entries_per_step)
                        if time.perf_counter() >= deadline:
                            break
                    if not work.done:
                        break
            except Exception as exc:  # one piece of work's failure must not stop the others
                error = exc
            queue.popleft()
            try:
                item.finished(error)
            except Exception:
                log.exception("handing over stepped work failed")
            if time.perf_counter() >= deadline:
                break
        if queue:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._step)
