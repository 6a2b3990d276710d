"""One callback per loop iteration writes the answers of every connection that has some.

Answers that waited for the log come out of a shard's flush many at a time, each for another
connection when every client has its own (measured with 1,000 committers, one connection each). A
``call_soon`` per connection was a handle allocated, queued and run for every answer; here the
first connection with output in an iteration schedules the one callback, the others only join
its list, and each connection is still written with one ``transport.write`` of everything it has,
in request order (the connection keeps its own output in order; this only decides *when*).
A shard whose append was acknowledged writes the answers it released at once (``write_now``):
they need not wait for the next iteration, which under relayed traffic is a long one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

log = logging.getLogger("kcoord.connection")


class Writer(Protocol):
    def write_out(self) -> None: ...


class WriteCoalescer:
    __slots__ = ("_pending", "_scheduled")

    def __init__(self) -> None:
        self._pending: list[Writer] = []
        self._scheduled = False

    def write_soon(self, writer: Writer) -> None:
        """Write ``writer``'s output later in this loop iteration (the caller asks once per
        iteration: its own flag says whether it is already in the list)."""
        self._pending.append(writer)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._write_all)

    def write_now(self) -> None:
        """Write every connection's output now (a shard's append released many answers: they go out
        in this iteration). The callback already scheduled then finds nothing left to write."""
        if self._pending:
            self._write_all()

    def _write_all(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, []
        for writer in pending:
            try:
                writer.write_out()
            except Exception:  # one connection's failure must not cost the others their answers
                log.exception("writing a connection's answers failed")
