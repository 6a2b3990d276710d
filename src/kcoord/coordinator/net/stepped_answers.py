"""Large group answers, encoded on the event loop a little per loop iteration, one answer at a time.

A DescribeGroups answer naming 20,000 groups is ~18 ms of pure-Python encoding. All of it at once
makes every other client wait that long; on a thread it was worse under load: the loop waited for
the GIL at each of its I/O callbacks, up to the 5 ms switch interval each time, and an honest
member's heartbeat p99 went from 5 ms idle to 30-50 ms with 8-64 clients pipelining such requests
(bench/RESULTS.md, hostile clients). Here the answers wait in one queue, in the order they were
ready, and one callback per loop iteration encodes entries of the first for at most
STEP_SECONDS (protocol/array_steps.py), whatever the number of connections asking: a loop
iteration carries at most one step of encoding, as the router carries one step of splitting
(runtime/router.py, GROUPS_PER_STEP).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from kcoord.protocol.array_steps import SteppedResponse

log = logging.getLogger("kcoord.connection")

# Encoding per loop iteration, in all: ~500 small DescribeGroups entries. The clock is read every
# ENTRIES_PER_CHECK entries, so an iteration runs over by at most that many entries' encoding.
STEP_SECONDS = 0.0005
ENTRIES_PER_CHECK = 100


@dataclass(slots=True)
class _Answer:
    encoding: SteppedResponse
    abandoned: Callable[[], bool]  # the client left: stop encoding
    done: Callable[[bytes | None, Exception | None], None]  # the frame, or why there is none


class SteppedAnswers:
    """The queue of large answers being encoded; :meth:`submit` one, its ``done`` gets the frame."""

    __slots__ = ("_queue", "_scheduled")

    def __init__(self) -> None:
        self._queue: deque[_Answer] = deque()
        self._scheduled = False

    def __len__(self) -> int:
        return len(self._queue)

    def submit(
        self,
        encoding: SteppedResponse,
        abandoned: Callable[[], bool],
        done: Callable[[bytes | None, Exception | None], None],
    ) -> None:
        """Encode ``encoding`` after the answers before it; ``done(frame, None)`` when it is, or
        ``done(None, error)`` if it cannot be, or ``done(b"", None)`` once ``abandoned()``."""
        self._queue.append(_Answer(encoding, abandoned, done))
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
            answer = queue[0]
            encoding = answer.encoding
            frame: bytes | None = None
            error: Exception | None = None
            try:
                if answer.abandoned():
                    frame = b""
                else:
                    while not encoding.done:  # some of it in every step, however late the step
                        encoding.step(ENTRIES_PER_CHECK)
                        if time.perf_counter() >= deadline:
                            break
                    if not encoding.done:
                        break
                    frame = encoding.frame()
            except Exception as exc:  # one answer's failure must not stop the others
                error = exc
            queue.popleft()
            try:
                answer.done(frame, error)
            except Exception:
                log.exception("handing over an encoded answer failed")
            if time.perf_counter() >= deadline:
                break
        if queue:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._step)
