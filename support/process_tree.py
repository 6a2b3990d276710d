"""A process tree's memory and CPU as a benchmark samples it, from /proc: every process under a
pid, its proportional set size (PSS) and CPU-seconds, without the spawned copies that are not
memory of their own (:func:`without_spawned_copies`)."""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Callable
from pathlib import Path

# kcmp(2): whether two processes share one address space (KCMP_VM), asked of the kernel itself.
_KCMP_SYSCALL = {"x86_64": 312, "aarch64": 272}.get(platform.machine())
_KCMP_VM = 1
_libc = ctypes.CDLL(None, use_errno=True)


def shares_address_space(pid: int, other: int) -> bool | None:
    """True when ``pid`` and ``other`` share one address space (a vfork child that has not yet
    exec'd: its pages are its parent's), False when not, None when the kernel cannot tell (no
    kcmp here, or a process gone)."""
    if _KCMP_SYSCALL is None:
        return None
    answer = _libc.syscall(_KCMP_SYSCALL, pid, other, _KCMP_VM, 0, 0)
    return None if answer < 0 else answer == 0


def _pss(pid: str, rss: int) -> int | None:
    """The process's proportional set size (pages shared by forked processes, such as Spark's
    Python workers, split between them), else ``rss`` (a kernel without smaps_rollup); None when
    the process is gone.

    A process that went between the listing and this read has no memory to count: not the
    resident size the listing read (s46: a JVM's posix_spawn child, listed before it exec'd and
    gone by the time it was asked, counted at the JVM's 2,110 MiB: a 4,481 MiB peak)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return rss if Path(f"/proc/{pid}").exists() else None


def _processes() -> dict[int, tuple[int, str, int, float]]:
    """Every process: pid → (parent pid, name, resident bytes, user + system CPU-seconds)."""
    page, tick = os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_CLK_TCK")
    found: dict[int, tuple[int, str, int, float]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            text = Path(f"/proc/{d}/stat").read_text()
            name = text[text.index("(") + 1 : text.rindex(")")]
            stat = text.rsplit(")", 1)[1].split()
            found[int(d)] = (
                int(stat[1]),
                name,
                int(stat[21]) * page,
                (int(stat[11]) + int(stat[12])) / tick,
            )
        except (OSError, IndexError, ValueError):
            continue
    return found


def tree(pid: int, pss: bool = True) -> dict[int, tuple[int, str, int, float]]:
    """``pid`` and all its descendants (as :func:`_processes`, with PSS for the resident bytes;
    ``pss=False``: the resident bytes as the listing read them, for a sample of CPU alone).

    PSS is not free: the kernel walks the process's page tables for it (``smaps_rollup``), ~30 ms
    of CPU for a 2 GiB JVM, holding its memory map's lock meanwhile."""
    procs = _processes()
    children: dict[int, list[int]] = {}
    for p, (parent, _, _, _) in procs.items():
        children.setdefault(parent, []).append(p)
    out, stack = {}, [pid]
    while stack:
        p = stack.pop()
        if p in procs:
            parent, name, rss, cpu = procs[p]
            # Asked before the memory is read: a child that exec's in between has its own pages
            # by then. (A sample once counted such a child at the JVM's 2.6 GiB: s45's first 10M run.)
            if p == pid or not shares_address_space(p, parent):
                mem = _pss(str(p), rss) if pss else rss
                if mem is not None:
                    out[p] = (parent, name, mem, cpu)
        stack.extend(children.get(p, []))
    return without_spawned_copies(out, _exe)


def _exe(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def without_spawned_copies(
    procs: dict[int, tuple[int, str, int, float]], exe: Callable[[int], str | None]
) -> dict[int, tuple[int, str, int, float]]:
    """``procs`` (a process tree, as :func:`tree`) without the children that share their parent's
    address space, which are not more memory.

    The JVM starts Spark's Python workers by posix_spawn (a vfork), and until the child execs,
    /proc shows it with all of the JVM's pages under the forking Java thread's name: a sample
    counted the JVM twice (s40's 10M run: "java" and "Thread-3", 2,642 MiB each; s39's 5.5 GiB
    peaks were twice its 2.7 GiB JVM). Such a child has exactly its parent's PSS, or, read a moment
    apart from it (s42: "Executor task l" 2,243 MiB against the JVM's 2,232), still the JVM's
    executable: a JVM never forks a
    JVM of its own, so a java child of java has not exec'd yet. (A Python worker forked by Spark's
    Python daemon is a process of its own, its shared pages split by PSS: it stays.)"""
    out = dict(procs)
    for p, (parent, _, mem, _) in procs.items():
        if parent not in procs or mem <= 0:
            continue
        if procs[parent][2] == mem:
            del out[p]
            continue
        mine = exe(p)
        if mine is not None and Path(mine).name == "java" and exe(parent) == mine:
            del out[p]
    return out
