"""kcoord with a CPU trace of its event loop's iterations: ``python -m support.loop_trace serve ...``.

What another client's request waits for, at worst, is the event loop iteration it arrives in. This
times each iteration in the loop thread's CPU time (``time.thread_time``: page faults included, the
time the process was not scheduled excluded), so the figure does not depend on how busy a shared
machine is, as a wall-clock p99 does. A ``call_soon`` callback reschedules itself: the CPU between
two of its runs is one iteration's (uvloop runs the callbacks ready when an iteration begins, then
polls). Parts of an iteration are timed too: ``read`` (``data_received``; inside it ``feed``, the
frames cut out, and ``run``, their dispatch), ``steps`` (stepped decoding and encoding), ``turns``
(the costly dispatches' and large reads' turns), ``write`` (the write coalescer); ``other`` is the
rest (uvloop's own reads and writes, and tasks: the router's steps, the shards).

Iterations over 0.2 ms of CPU go to the file ``$KCOORD_LOOP_TRACE`` once a second (benchmarks kill
kcoord), one JSON array each: perf_counter at its end (CLOCK_MONOTONIC, comparable with the
benchmark's), CPU ms, wall ms, minor page faults, and {part: [CPU ms, longest call ms, calls]}.
The trace's cost: the loop never sleeps in epoll (a callback is always ready), so kcoord keeps a core
busy, and ~1 us per timed call; a traced run's wall-clock latencies are not the untraced ones.
For benchmarks only (bench/hostile_clients.py ``--loop-trace``); nothing in kcoord imports it.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

MIN_MS = 0.2  # iterations shorter than this are counted, not written
_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)

TOP_PARTS = ("read", "steps", "turns", "write", "continue")


def install(path: str) -> None:
    """Time the loop's iterations and their parts from the first Router made (on the running loop)."""
    from kcoord.coordinator.net import connection, dispatch_turns, loop_steps, writes
    from kcoord.coordinator.runtime import router
    from kcoord.protocol import frames

    clock = time.thread_time
    parts: dict[str, list[float]] = {}

    def timed(cls: type, name: str, part: str) -> None:
        inner = getattr(cls, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            began = clock()
            try:
                return inner(*args, **kwargs)
            finally:
                spent = clock() - began
                got = parts.get(part)
                if got is None:
                    parts[part] = [spent, spent, 1]
                else:
                    got[0] += spent
                    got[1] = max(got[1], spent)
                    got[2] += 1

        setattr(cls, name, wrapper)

    timed(connection.ClientConnection, "data_received", "read")
    timed(connection.ClientConnection, "_continue", "continue")
    timed(frames.FrameDecoder, "feed", "feed")
    timed(connection.ClientConnection, "_run", "run")
    timed(loop_steps.LoopSteps, "_step", "steps")
    timed(dispatch_turns.DispatchTurns, "_next_iteration", "turns")
    timed(writes.WriteCoalescer, "_write_all", "write")

    records: list[list[Any]] = []
    last: list[float] = []
    flushed = [0.0]

    def faults() -> int:
        return resource.getrusage(_RUSAGE_THREAD).ru_minflt

    def iteration() -> None:
        cpu, wall = clock(), time.perf_counter()
        if last:
            spent = (cpu - last[0]) * 1000
            if spent > MIN_MS:
                records.append([
                    round(wall, 5), round(spent, 3), round((wall - last[1]) * 1000, 3), faults() - int(last[2]),
                    {k: [round(v[0] * 1000, 3), round(v[1] * 1000, 3), int(v[2])] for k, v in parts.items()},
                ])  # fmt: skip
        parts.clear()
        if wall - flushed[0] > 1.0:
            flushed[0] = wall
            if records:
                with open(path, "a") as out:
                    out.writelines(json.dumps(r) + "\n" for r in records)
                records.clear()
        last[:] = [clock(), time.perf_counter(), float(faults())]
        asyncio.get_running_loop().call_soon(iteration)

    made = router.Router.__init__

    def router_init(self: router.Router, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        if not last:
            asyncio.get_running_loop().call_soon(iteration)

    router.Router.__init__ = router_init  # type: ignore[method-assign]


def summarize(path: str, start: float, end: float) -> dict[str, Any]:
    """The iterations of ``path`` between perf_counter ``start`` and ``end``: how many took over 0.5,
    1 and 2 ms of CPU, the longest (in all and in the first second), and the CPU of those over
    0.5 ms by part."""
    rows = []
    try:
        with open(path) as f:
            rows = [r for r in map(json.loads, f) if start <= r[0] - r[2] / 1000 and r[0] <= end]
    except FileNotFoundError:
        pass
    by_part: dict[str, float] = {}
    for r in rows:
        if r[1] > 0.5:
            named = 0.0
            for part, (cpu, _, _) in r[4].items():
                by_part[part] = by_part.get(part, 0.0) + cpu
                if part in TOP_PARTS:
                    named += cpu
            by_part["other"] = by_part.get("other", 0.0) + r[1] - named
    return {
        "over_0_5_ms": sum(1 for r in rows if r[1] > 0.5),
        "over_1_ms": sum(1 for r in rows if r[1] > 1),
        "over_2_ms": sum(1 for r in rows if r[1] > 2),
        "longest_ms": max((r[1] for r in rows), default=0.0),
        "longest_first_second_ms": max((r[1] for r in rows if r[0] < start + 1), default=0.0),
        "cpu_ms_over_0_5_by_part": {k: round(v, 1) for k, v in sorted(by_part.items())},
    }


def main() -> int:
    path = os.environ.get("KCOORD_LOOP_TRACE")
    if path:
        install(path)
    from kcoord.coordinator.cli import main as kcoord_main

    run: Callable[[list[str] | None], int] = kcoord_main
    return run(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
