"""A process tree's memory as the benchmarks sample it (support/process_tree.py): a JVM's
posix_spawn child that has not exec'd yet shares the JVM's address space and must not count as
more memory; real child processes do."""

from __future__ import annotations

import time

import pytest

from support.process_tree import without_spawned_copies

MIB = 1 << 20
DRIVER, JVM, SPAWNED, WORKER_DAEMON, WORKER = 10, 11, 12, 13, 14
EXES = {
    DRIVER: "/usr/bin/python3.11",
    JVM: "/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
    SPAWNED: "/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
    WORKER_DAEMON: "/usr/bin/python3.11",
    WORKER: "/usr/bin/python3.11",
}


def tree(spawned_pss: int) -> dict[int, tuple[int, str, int, float]]:
    return {
        DRIVER: (1, "python3", 600 * MIB, 10.0),
        JVM: (DRIVER, "java", 2_243 * MIB, 300.0),
        SPAWNED: (JVM, "Executor task l", spawned_pss, 0.0),
        WORKER_DAEMON: (JVM, "python3", 40 * MIB, 1.0),
        # a fork of the daemon: the same executable, a process of its own (its own PSS)
        WORKER: (WORKER_DAEMON, "python3", 35 * MIB, 5.0),
    }


def test_a_spawned_child_read_with_the_jvms_exact_pss_is_dropped() -> None:
    kept = without_spawned_copies(tree(2_243 * MIB), EXES.get)
    assert sorted(kept) == [DRIVER, JVM, WORKER_DAEMON, WORKER]


def test_a_spawned_child_read_a_moment_later_is_dropped_by_its_executable() -> None:
    # s42: "Executor task l" 2,243 MiB while the JVM's PSS, read a moment apart, differed by a few MiB
    kept = without_spawned_copies(tree(2_247 * MIB), EXES.get)
    assert sorted(kept) == [DRIVER, JVM, WORKER_DAEMON, WORKER]


def test_a_child_that_execd_or_cannot_be_read_stays() -> None:
    exes = {**EXES, SPAWNED: "/usr/bin/python3.11"}  # exec'd: Spark's Python worker daemon
    assert SPAWNED in without_spawned_copies(tree(30 * MIB), exes.get)
    gone = {p: e for p, e in EXES.items() if p != SPAWNED}  # exited between the two reads
    assert SPAWNED in without_spawned_copies(tree(30 * MIB), gone.get)
    assert (
        sum(m for _, _, m, _ in without_spawned_copies(tree(30 * MIB), exes.get).values())
        == (600 + 2_243 + 30 + 40 + 35) * MIB
    )


def test_the_kernel_tells_a_shared_address_space_from_a_process_of_its_own() -> None:
    """kcmp(2): a thread shares its process's address space (as a vfork child does until it
    exec's); a forked child has its own."""
    import os
    import threading

    from support.process_tree import shares_address_space

    me = os.getpid()
    if shares_address_space(me, me) is None:
        pytest.skip("this kernel has no kcmp(2): the sampler falls back on without_spawned_copies")
    thread_id: list[int] = []
    ready, done = threading.Event(), threading.Event()

    def hold() -> None:
        thread_id.append(threading.get_native_id())
        ready.set()
        done.wait()

    t = threading.Thread(target=hold)
    t.start()
    ready.wait()
    try:
        assert shares_address_space(thread_id[0], me) is True
    finally:
        done.set()
        t.join()
    child = os.fork()
    if child == 0:
        time.sleep(5)  # killed long before
        os._exit(0)
    try:
        assert shares_address_space(child, me) is False
    finally:
        os.kill(child, 9)
        os.waitpid(child, 0)


def test_a_process_gone_before_its_memory_is_read_counts_nothing() -> None:
    """Not the resident size listed before it went (s46: a posix_spawn child listed at the JVM's
    2,110 MiB, gone when its PSS was read, made a 4,481 MiB peak of a 2.1 GiB run)."""
    import os

    from support.process_tree import _pss

    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)  # reaped: its /proc entry is gone
    assert _pss(str(child), 2_110 * MIB) is None
    assert _pss(str(os.getpid()), 1) not in (None, 1)  # a live process: its own PSS, read now
