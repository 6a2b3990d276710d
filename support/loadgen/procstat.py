"""CPU time of a process from /proc/PID/stat (all its threads), for the server's cost per request.

Why /proc and not psutil: one more dependency for two numbers. utime and stime (fields 14 and 15)
are in clock ticks and already include every thread of the process, which matters for tansu.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds the process has used so far."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    # the command name (field 2) may hold spaces: split after its closing parenthesis
    fields = data[data.rindex(b")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / _TICK


def child_pids(pid: int) -> list[int]:
    """The process's direct children (/proc/PID/task/PID/children; [] once it is gone)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def runqueue_wait_seconds(pid: int) -> float:
    """Seconds the process's threads were runnable but waiting for a CPU (/proc/PID/task/*/schedstat, field 2).

    Why: on a shared machine a server pinned to one core can be starved by others' work; its
    latency then grows while its own CPU use stays low. A large wait during a window says so.
    """
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent busy (not idle/iowait) since boot, from /proc/stat."""
    with open("/proc/stat", "rb") as f:
        fields = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / _TICK


@dataclass
class Usage:
    """CPU of the server processes, of this generator and of the whole machine over one window.

    ``other_cores`` is what neither used: on a shared machine, someone else's work that may have
    taken CPU from the server under test. Reports carry it so a reader can judge a figure.
    ``upstream_pids``: processes doing work on the server's behalf (kcoord's upstream broker, which
    stores its commits), reported apart as ``upstream_cores``: a coordinator that keeps its state on
    another process is compared with one that stores its own (Kafka's) by their sum.
    """

    server_pids: list[int]
    upstream_pids: list[int] = field(default_factory=list)
    upstream_cpu_s: float = 0.0
    server_cpu_s: float = 0.0
    self_cpu_s: float = 0.0
    machine_cpu_s: float = 0.0
    wall_s: float = 0.0
    server_wait_s: float = 0.0

    def start(self) -> Usage:
        self._s0 = sum(cpu_seconds(p) for p in self.server_pids)
        self._u0 = sum(cpu_seconds(p) for p in self.upstream_pids)
        self._q0 = sum(runqueue_wait_seconds(p) for p in self.server_pids)
        self._l0 = time.process_time()
        self._m0 = machine_busy_seconds()
        self._w0 = time.perf_counter()
        return self

    def stop(self) -> Usage:
        self.server_cpu_s = sum(cpu_seconds(p) for p in self.server_pids) - self._s0
        self.upstream_cpu_s = sum(cpu_seconds(p) for p in self.upstream_pids) - self._u0
        self.server_wait_s = sum(runqueue_wait_seconds(p) for p in self.server_pids) - self._q0
        self.self_cpu_s = time.process_time() - self._l0
        self.machine_cpu_s = machine_busy_seconds() - self._m0
        self.wall_s = time.perf_counter() - self._w0
        return self

    def report(self) -> dict[str, float | None]:
        w = self.wall_s or 1e-9
        server = self.server_cpu_s / w if self.server_pids else None
        other = (self.machine_cpu_s - self.server_cpu_s - self.upstream_cpu_s - self.self_cpu_s) / w
        upstream = round(self.upstream_cpu_s / w, 3) if self.upstream_pids else None
        return {
            "server_cpu_s": round(self.server_cpu_s, 3),
            "server_cores": round(server, 3) if server is not None else None,
            "loadgen_cores": round(self.self_cpu_s / w, 3),
            "other_cores": round(max(0.0, other), 3),
            # fraction of the window the server was runnable but not running (starved by other work)
            "server_runqueue_wait": round(self.server_wait_s / w, 3) if self.server_pids else None,
            "upstream_cores": upstream,
        }
