"""Costly requests are dispatched one per event-loop iteration, across all connections, in turn.

Decoding and routing a DescribeGroups request naming 20,000 group ids is ~0.5-1 ms of the loop.
When many connections have such a request read at once (64 clients starting together, or reading
resuming on many connections when memory frees up), dispatching all of them in one loop iteration
made that iteration tens of milliseconds long for every other client. A connection whose next
request is costly (connection.py, RESERVE_ABOVE) takes the iteration's turn, or stops reading
and waits in line; the next iteration gives the turn to the first in line.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable


class DispatchTurns:
    """One costly dispatch per loop iteration; the others wait in arrival order."""

    __slots__ = ("_taken", "_waiting", "_scheduled")

    def __init__(self) -> None:
        self._taken = False
        self._waiting: deque[Callable[[], bool]] = deque()
        self._scheduled = False

    def __len__(self) -> int:
        return len(self._waiting)

    def take(self, on_turn: Callable[[], bool]) -> bool:
        """True: dispatch now. False: ``on_turn()`` is called in a later iteration, when it is
        this caller's turn; it returns False if the caller no longer wants it (closed)."""
        if not self._taken and not self._waiting:
            self._taken = True
            self._schedule()
            return True
        self._waiting.append(on_turn)
        self._schedule()
        return False

    def wait(self, on_turn: Callable[[], bool]) -> None:
        """``on_turn()`` is called in a later iteration, when it is this caller's turn (as :meth:`take`
        when the turn is not free), never now: for callers that must not do their work where they are."""
        self._waiting.append(on_turn)
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._next_iteration)

    def _next_iteration(self) -> None:
        self._scheduled = False
        self._taken = False
        waiting = self._waiting
        while waiting:
            self._taken = True  # the waiter dispatches inside on_turn, with the turn taken
            if waiting.popleft()():
                break
            self._taken = False
        if self._taken or waiting:
            self._schedule()
