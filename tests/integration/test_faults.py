"""Fault injection with real processes: kill -9 at random moments and an upstream that stalls.

Committers write increasing offsets through kcoord as fast as it answers and remember the last
offset kcoord acknowledged for each group. Whatever happens to kcoord or its upstream, an
acknowledged offset must be the one a restarted kcoord serves (or a later one). The random
moments come from a seed printed with each run (``KCOORD_FAULT_SEED`` repeats one). Each test runs
against tansu and against Apache Kafka (the ``upstream`` fixture).

The hostile-client faults (a client that never reads, slowloris) are in test_connection_limits.py.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid

import pytest

from kcoord.protocol.errors import ErrorCode
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, unique
from tests.support.fault_upstream import FaultUpstream
from tests.support.fixtures import Upstream
from tests.support.wire import WireClient, fetch_offset, offset_commit_request

pytestmark = pytest.mark.integration

TOPIC = "faults-data"
GROUPS = 6


@pytest.fixture(scope="module")
def data_topic(upstream: Upstream) -> str:
    create_topic(upstream.bootstrap, TOPIC, 1)
    return TOPIC


def fetch(address: str, group: str) -> tuple[int, int]:
    return fetch_offset(address, group, TOPIC)


class Committer(threading.Thread):
    """Commits 1, 2, 3, ... for one group, reconnecting after any failure; ``acked`` is the last
    offset kcoord answered with error NONE."""

    def __init__(self, address: str, group: str) -> None:
        super().__init__(daemon=True)
        self.address, self.group = address, group
        self.acked = 0
        self.errors = 0
        self.next = 1
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                with WireClient(self.address, timeout=5.0) as client:
                    while not self._stop_event.is_set():
                        response = client.request(8, 8, offset_commit_request(self.group, TOPIC, self.next))
                        if response.topics[0].partitions[0].error_code == ErrorCode.NONE:
                            self.acked = self.next
                        else:
                            self.errors += 1
                            time.sleep(0.05)
                        self.next += 1
            except Exception:  # kcoord killed, connection closed, timeout: reconnect and go on
                self.errors += 1
                time.sleep(0.05)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(10)


def _durable(address: str, committers: list[Committer]) -> None:
    for c in committers:
        deadline = time.monotonic() + 20
        while True:
            error, offset = fetch(address, c.group)
            if error == ErrorCode.NONE or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # still loading
        assert error == ErrorCode.NONE, (c.group, error)
        assert offset >= c.acked, f"{c.group}: acknowledged {c.acked}, served {offset} after the fault"


def _seed() -> int:
    seed = int(os.environ.get("KCOORD_FAULT_SEED") or random.randrange(1 << 30))
    print(f"fault seed {seed} (KCOORD_FAULT_SEED={seed} repeats it)")
    return seed


def test_kill9_at_random_moments_loses_no_acknowledged_commit(upstream: Upstream, data_topic: str) -> None:
    rng = random.Random(_seed())
    offsets_topic = f"__kcoord_faults_{uuid.uuid4().hex[:8]}"
    args = ("--shards", "3", "--storage", "kafka", "--internal-topic", offsets_topic)
    kcoord = KcoordProcess(*args, bootstrap=upstream.bootstrap).start()
    committers = [Committer(kcoord.bootstrap, unique(f"kill9-{i}")) for i in range(GROUPS)]
    for c in committers:
        c.start()
    try:
        for _ in range(3):
            time.sleep(rng.uniform(0.3, 1.5))
            kcoord.kill()
            stopped = [c.acked for c in committers]
            kcoord = KcoordProcess(*args, bootstrap=upstream.bootstrap, port=kcoord.port).start()
            for c, acked in zip(committers, stopped, strict=True):
                error, offset = fetch(kcoord.bootstrap, c.group)
                assert error == ErrorCode.NONE and offset >= acked, (c.group, acked, error, offset)
        assert all(c.acked > 0 for c in committers)
    finally:
        for c in committers:
            c.stop()
        kcoord.kill()
    restarted = KcoordProcess(*args, bootstrap=upstream.bootstrap).start()
    try:
        _durable(restarted.bootstrap, committers)
    finally:
        restarted.kill()


def test_an_upstream_stall_loses_no_acknowledged_commit(upstream: Upstream, data_topic: str) -> None:
    """The upstream stops answering (a partition, a stuck broker) for a few seconds, at a random
    moment, twice. Commits wait or fail meanwhile; every one acknowledged is durable."""
    rng = random.Random(_seed())
    offsets_topic = f"__kcoord_faults_{uuid.uuid4().hex[:8]}"
    host, port = upstream.bootstrap.rsplit(":", 1)
    with FaultUpstream(target=(host, int(port))) as proxy:
        kcoord = KcoordProcess(
            "--shards", "3", "--storage", "kafka", "--internal-topic", offsets_topic, bootstrap=proxy.address
        ).start()
        committers = [Committer(kcoord.bootstrap, unique(f"stall-{i}")) for i in range(GROUPS)]
        for c in committers:
            c.start()
        try:
            for _ in range(2):
                time.sleep(rng.uniform(0.3, 1.0))
                proxy.pause()
                time.sleep(0.3)  # answers already on their way when the stall began still arrive
                during = [c.acked for c in committers]
                time.sleep(rng.uniform(2.0, 4.0))
                # Nothing can be acknowledged while the upstream cannot acknowledge it.
                assert [c.acked for c in committers] == during
                proxy.resume()
            time.sleep(1.0)
            assert all(c.acked > 0 for c in committers)
            progressed = [c.acked for c in committers]
            time.sleep(1.0)
            assert all(c.acked > p for c, p in zip(committers, progressed, strict=True)), "commits resume"
        finally:
            for c in committers:
                c.stop()
            kcoord.kill()
    restarted = KcoordProcess(
        "--shards", "3", "--storage", "kafka", "--internal-topic", offsets_topic, bootstrap=upstream.bootstrap
    ).start()
    try:
        _durable(restarted.bootstrap, committers)
    finally:
        restarted.kill()
