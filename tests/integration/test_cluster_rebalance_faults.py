"""One owner per shard when a fault meets a rebalance of the kcoord cluster's group.

Three kcoord nodes; node 2 reaches the upstream through a proxy the test controls. Each run
restarts node 3 (a graceful stop, which starts a rebalance, then a new process, which starts
another) and 0.5-1.5 s after the new process joined (while node 2 rejoins) cuts node 2 from the upstream, stalls its upstream traffic, or
SIGSTOPs it, for longer than the cluster's session timeout, then heals it. Meanwhile:

- a committer per shard (one group on each) commits an ever larger offset to whichever node
  FindCoordinator names, and records every acknowledged one;
- a reader per node pipelines OffsetFetch requests for every group to that node, without waiting
  for answers, so requests queue on node 2's sockets while it is stopped or cut off.

The property: no OffsetFetch answered NONE reveals an offset older than one acknowledged before
the request was sent (whichever node acknowledged it); and every shard is served again (a commit
acknowledged) within the documented bound, no shard left behind after the fault heals.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from kcoord.client import Connection, KafkaClientError, connect
from kcoord.coordinator.runtime.router import shard_for_group
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from support.kafka_broker import KafkaBroker
from support.kcoord_cluster import BASE_NODE_ID, KcoordCluster
from support.workload import create_topic, unique
from tests.support.fault_upstream import FaultUpstream
from tests.support.fixtures import Upstream
from tests.support.wire import offset_commit_request

pytestmark = pytest.mark.integration

SHARDS = 12
CLUSTER_SESSION_MS = 6000  # Apache Kafka's group.min.session.timeout.ms
SESSION_S = CLUSTER_SESSION_MS / 1000
# Long enough for the upstream to expire the faulty node; KCOORD_FAULT_SECONDS sets another length
# (the 30-40 s pauses and cuts the fault was first seen with).
FAULT_S = float(os.environ.get("KCOORD_FAULT_SECONDS", SESSION_S + 3))
# A shard of the faulty node is served again once the upstream expired it (one session timeout
# after its last heartbeat, or after the rebalance it was caught in timed out: a second one),
# the survivors rebalanced and the new owner loaded the shard; slack for a loaded machine.
SERVED_AGAIN_BOUND_S = 2 * SESSION_S + 12
FAULTY = BASE_NODE_ID + 1  # "node 2"
RESTARTED = BASE_NODE_ID + 2  # "node 3"

# (fault, seconds after node 3's restart began, the upstream it runs on by default): a handful of
# timings across 0.5-1.5 s, each fault kind on each upstream; the default run shares them between the
# upstreams (about 25 s each), KCOORD_TEST_EVERY_CASE=1 runs all six on both.
TIMINGS = [
    ("cut", 0.5, "kafka"),
    ("sigstop", 0.7, "kafka"),
    ("stall", 0.9, "tansu"),
    ("cut", 1.1, "tansu"),
    ("sigstop", 1.3, "tansu"),
    ("stall", 1.5, "kafka"),
]
# A campaign, run by hand for the figures: KCOORD_FAULT_TIMINGS=N runs every fault kind at N timings
# spread evenly over 0.5-1.5 s, on every upstream of the run.
if CAMPAIGN := int(os.environ.get("KCOORD_FAULT_TIMINGS", "0")):
    TIMINGS = [
        (kind, round(0.5 + i / max(1, CAMPAIGN - 1), 2), "")
        for i in range(CAMPAIGN)
        for kind in ("cut", "stall", "sigstop")
    ]


@dataclass
class Findings:
    stale: list[str] = field(default_factory=list)  # answers older than an acknowledged offset
    acks: dict[str, list[float]] = field(default_factory=dict)  # group -> monotonic time of each ack
    fetches_checked: int = 0


class Workload:
    """Committers and readers on an event loop in a thread of their own."""

    def __init__(self, addresses: dict[int, tuple[str, int]], groups: list[str], topic: str) -> None:
        self.addresses = addresses
        self.groups = groups
        self.topic = topic
        self.acked: dict[str, int] = dict.fromkeys(groups, -1)  # -1: no commit acknowledged yet
        self.findings = Findings(acks={g: [] for g in groups})
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="workload", daemon=True)
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._thread.start()

        async def spawn() -> None:
            self._tasks = [asyncio.ensure_future(self._commit(g)) for g in self.groups]
            self._tasks += [asyncio.ensure_future(self._read(n)) for n in self.addresses]

        asyncio.run_coroutine_threadsafe(spawn(), self._loop).result(5)

    def stop(self) -> Findings:
        async def cancel() -> None:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(cancel(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        return self.findings

    async def _coordinator(self, group: str, ask: int) -> tuple[str, int] | None:
        nodes = list(self.addresses)
        address = self.addresses[nodes[ask % len(nodes)]]
        conn = await connect(address, timeout=2.0, request_timeout=2.0)
        try:
            resp = await conn.request(m.FindCoordinatorRequest(key=group, key_type=0), 3, timeout=2.0)
        finally:
            conn.close()
        return (resp.host, resp.port) if resp.error_code == ErrorCode.NONE else None

    async def _commit(self, group: str) -> None:
        offset = 0
        asks = 0
        conn: Connection | None = None
        while True:
            try:
                if conn is None or conn.closed:
                    asks += 1
                    address = await self._coordinator(group, asks)
                    if address is None:
                        await asyncio.sleep(0.1)
                        continue
                    conn = await connect(address, timeout=2.0, request_timeout=3.0)
                offset += 1
                resp = await conn.request(offset_commit_request(group, self.topic, offset), 8, timeout=3.0)
                error = resp.topics[0].partitions[0].error_code
                if error == ErrorCode.NONE:
                    self.acked[group] = max(self.acked[group], offset)
                    self.findings.acks[group].append(time.monotonic())
                    await asyncio.sleep(0.05)
                else:  # the coordinator moved (or is loading): ask again
                    conn.close()
                    conn = None
                    await asyncio.sleep(0.1)
            except (KafkaClientError, OSError, TimeoutError):
                if conn is not None:
                    conn.close()
                conn = None
                await asyncio.sleep(0.1)

    async def _read(self, node: int) -> None:
        conn: Connection | None = None
        while True:
            try:
                if conn is None or conn.closed:
                    conn = await connect(self.addresses[node], timeout=2.0, request_timeout=120.0)
                for group in self.groups:
                    asyncio.ensure_future(self._fetch(conn, node, group))
                await asyncio.sleep(0.2)
            except (KafkaClientError, OSError, TimeoutError):
                if conn is not None:
                    conn.close()
                conn = None
                await asyncio.sleep(0.2)

    async def _fetch(self, conn: Connection, node: int, group: str) -> None:
        expected = self.acked[group]  # acknowledged before this request was sent
        R = m.OffsetFetchRequest
        request = R(
            group_id=group, topics=[R.OffsetFetchRequestTopic(name=self.topic, partition_indexes=[0])]
        )
        try:
            resp = await conn.request(request, 7, timeout=120.0)
        except (KafkaClientError, OSError, TimeoutError):
            return
        if resp.error_code != ErrorCode.NONE:
            return
        part = resp.topics[0].partitions[0]
        if part.error_code != ErrorCode.NONE:
            return
        self.findings.fetches_checked += 1
        if part.committed_offset < expected:
            self.findings.stale.append(
                f"node {node} answered {group} (shard {shard_for_group(group, SHARDS)}) with offset "
                f"{part.committed_offset}, but {expected} was acknowledged before the request was sent"
            )


def groups_per_shard() -> list[str]:
    """One fresh group id on each shard."""
    found: dict[int, str] = {}
    while len(found) < SHARDS:
        name = unique("owner")
        found.setdefault(shard_for_group(name, SHARDS), name)
    return [found[s] for s in range(SHARDS)]


@pytest.fixture(scope="module")
def faulty_cluster(upstream: Upstream) -> Iterator[tuple[KcoordCluster, FaultUpstream]]:
    host, port = upstream.bootstrap.rsplit(":", 1)
    with FaultUpstream(target=(host, int(port))) as proxy:
        nodes = KcoordCluster(
            upstream.bootstrap,
            size=3,
            shards=SHARDS,
            session_timeout_ms=CLUSTER_SESSION_MS,
            upstreams={FAULTY: proxy.address},
            # kcoord's default on Kafka; tansu 0.6 needs dynamic members (docs/tansu.md).
            static_membership=isinstance(upstream, KafkaBroker),
        ).start()
        try:
            yield nodes, proxy
        finally:
            nodes.stop()


def start_fault(kind: str, cluster: KcoordCluster, proxy: FaultUpstream) -> None:
    if kind == "cut":
        proxy.cut()
    elif kind == "stall":
        proxy.pause()
    else:
        process = cluster.nodes[FAULTY].process
        assert process is not None
        os.kill(process.pid, signal.SIGSTOP)


def end_fault(kind: str, cluster: KcoordCluster, proxy: FaultUpstream) -> None:
    if kind == "cut":
        proxy.reconnect()
    elif kind == "stall":
        proxy.resume()
    else:
        process = cluster.nodes[FAULTY].process
        assert process is not None
        os.kill(process.pid, signal.SIGCONT)


def longest_gap(acks: list[float], since: float, until: float) -> float:
    """The longest time in [since, until] without an acknowledged commit."""
    times = [since, *(t for t in acks if since < t < until), until]
    return max(b - a for a, b in zip(times, times[1:], strict=False))


@pytest.mark.parametrize(
    ("fault", "delay"),
    [pytest.param(f, d, marks=[pytest.mark.only_on(u)] if u else [], id=f"{f}-{d}s") for f, d, u in TIMINGS],
)
def test_no_stale_answer_and_no_stuck_shard_when_a_fault_meets_a_rebalance(
    faulty_cluster: tuple[KcoordCluster, FaultUpstream], fault: str, delay: float
) -> None:
    cluster, proxy = faulty_cluster
    cluster.wait_for_members(set(cluster.nodes), timeout=60)
    overlaps_before = set(cluster.overlapping_owners())
    topic = unique("owner-topic")
    create_topic(cluster.bootstrap, topic, 1)
    groups = groups_per_shard()
    addresses = {n: ("127.0.0.1", p.port) for n, p in cluster.nodes.items()}
    workload = Workload(addresses, groups, topic)
    workload.start()
    faulted = False
    try:
        time.sleep(2.0)  # every group has commits before the fault
        old = cluster.nodes[RESTARTED]
        assert old.stop() == 0, old.log_tail()
        cluster.dead.append(old)
        new = cluster._process(RESTARTED, port=old.port)
        cluster.nodes[RESTARTED] = new
        new.start()  # returns as the new process sends its JoinGroup: the others rebalance next
        time.sleep(delay)
        start_fault(fault, cluster, proxy)
        faulted = True
        fault_at = time.monotonic()
        time.sleep(max(0.0, fault_at + FAULT_S - time.monotonic()))
        end_fault(fault, cluster, proxy)
        faulted = False
        healed_at = time.monotonic()
        cluster.wait_for_members(set(cluster.nodes), timeout=90)
        # Every shard serves again after the cluster settled: a few acknowledged commits each.
        settle_deadline = time.monotonic() + 30
        while time.monotonic() < settle_deadline:
            settled_at = time.monotonic() - 2
            if all(any(t > settled_at for t in workload.findings.acks[g]) for g in groups):
                break
            time.sleep(0.2)
        time.sleep(1.0)
        ended_at = time.monotonic()
    finally:
        if faulted:
            with contextlib.suppress(Exception):
                end_fault(fault, cluster, proxy)
        findings = workload.stop()
    gaps = {g: longest_gap(findings.acks[g], fault_at - 2.0, ended_at) for g in groups}
    worst = max(gaps.values())
    print(
        f"{fault} {delay}s after the restart: {findings.fetches_checked} fetches checked, "
        f"{len(findings.stale)} stale, longest time without a commit {worst:.1f} s "
        f"(bound {SERVED_AGAIN_BOUND_S:.0f} s), healed after {healed_at - fault_at:.1f} s"
    )
    assert not findings.stale, "\n".join(findings.stale[:20])
    stuck = [g for g in groups if not any(t > ended_at - 5 for t in findings.acks[g])]
    assert not stuck, (
        f"shards not served after the fault healed: {[shard_for_group(g, SHARDS) for g in stuck]}"
    )
    slow = {
        shard_for_group(g, SHARDS): round(gap, 1) for g, gap in gaps.items() if gap > SERVED_AGAIN_BOUND_S
    }
    assert not slow, f"shards not served again within {SERVED_AGAIN_BOUND_S} s: {slow}"
    if fault != "sigstop":  # a stopped node cannot log its release until SIGCONT, when it comes late
        assert not set(cluster.overlapping_owners()) - overlaps_before
