"""Stock Python clients use kcoord as their group coordinator, unmodified, in front of tansu and of
Apache Kafka in turn.

Three consumers share a six-partition topic; one leaves part-way; every record is consumed exactly
once because each consumer commits synchronously after processing a batch and before polling again
(Kafka accepts commits from the current generation while a rebalance is being prepared).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer

from support.kcoord_process import KcoordProcess
from support.workload import create_topic, produce_numbered, unique, wait_until
from tests.support.fixtures import Upstream

pytestmark = pytest.mark.integration

RECORDS = 3000
PARTITIONS = 6


@pytest.fixture(scope="module")
def kcoord(upstream: Upstream) -> Iterator[KcoordProcess]:
    # A 0.5 s initial rebalance delay instead of Kafka's 3 s (waited twice when members keep arriving):
    # the three members start together and join well within it; a late one would only add a rebalance,
    # which these tests make anyway when a member leaves.
    # An internal topic of its own: the upstream is shared by the whole session.
    args = (
        "--shards",
        "8",
        "--group-initial-rebalance-delay-ms",
        "500",
        "--internal-topic",
        unique("__kcoord_py"),
    )
    with KcoordProcess(*args, bootstrap=upstream.bootstrap) as proc:
        yield proc


class KafkaPythonMember(threading.Thread):
    def __init__(
        self, bootstrap: str, group: str, topic: str, sink: list[bytes], lock: threading.Lock
    ) -> None:
        super().__init__(daemon=True)
        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=10000,
            heartbeat_interval_ms=1000,
            max_poll_records=50,
        )
        self.sink = sink
        self.lock = lock
        self.stop_flag = threading.Event()
        self.consumed = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop_flag.is_set():
                batch = self.consumer.poll(timeout_ms=200)
                values = [r.value for recs in batch.values() for r in recs]
                if values:
                    self.consumer.commit()  # synchronous: processed records are committed before the next poll
                    with self.lock:
                        self.sink.extend(values)
                    self.consumed += len(values)
            self.consumer.close()  # LeaveGroup
        except BaseException as exc:  # surfaced by the test
            self.error = exc


def test_kafka_python_group_shares_and_rebalances(kcoord: KcoordProcess) -> None:
    topic, group = unique("kp-topic"), unique("kp-group")
    create_topic(kcoord.bootstrap, topic, PARTITIONS)
    expected = produce_numbered(kcoord.bootstrap, topic, RECORDS, PARTITIONS)
    sink: list[bytes] = []
    lock = threading.Lock()
    members = [KafkaPythonMember(kcoord.bootstrap, group, topic, sink, lock) for _ in range(3)]
    for mbr in members:
        mbr.start()
    wait_until(lambda: len(sink) >= RECORDS // 4, 60, "a quarter of the records")
    members[0].stop_flag.set()  # one member leaves; its partitions move to the others
    members[0].join(30)
    wait_until(lambda: len(sink) >= RECORDS, 90, "all records")
    for mbr in members[1:]:
        mbr.stop_flag.set()
        mbr.join(30)
    for mbr in members:
        assert mbr.error is None, mbr.error
    counts = Counter(sink)
    assert set(counts) == expected
    assert max(counts.values()) == 1, [v for v, c in counts.items() if c > 1][:5]
    assert sum(1 for mbr in members if mbr.consumed) >= 2  # the work really was shared


def test_aiokafka_group_shares_and_rebalances(kcoord: KcoordProcess) -> None:
    from aiokafka import AIOKafkaConsumer

    topic, group = unique("aio-topic"), unique("aio-group")
    create_topic(kcoord.bootstrap, topic, PARTITIONS)
    expected = produce_numbered(kcoord.bootstrap, topic, RECORDS, PARTITIONS)

    async def scenario() -> tuple[list[bytes], list[int]]:
        sink: list[bytes] = []
        consumed = [0, 0, 0]
        stop = [asyncio.Event() for _ in range(3)]

        async def member(i: int) -> None:
            consumer = AIOKafkaConsumer(
                topic,
                bootstrap_servers=kcoord.bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=10000,
                heartbeat_interval_ms=1000,
                max_poll_records=50,
            )
            await consumer.start()
            try:
                while not stop[i].is_set():
                    batch = await consumer.getmany(timeout_ms=200)
                    values = [r.value for recs in batch.values() for r in recs]
                    if values:
                        await consumer.commit()
                        sink.extend(values)
                        consumed[i] += len(values)
            finally:
                await consumer.stop()

        tasks = [asyncio.create_task(member(i)) for i in range(3)]
        deadline = time.monotonic() + 60
        while len(sink) < RECORDS // 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        stop[0].set()
        await tasks[0]
        deadline = time.monotonic() + 90
        while len(sink) < RECORDS and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        stop[1].set()
        stop[2].set()
        await asyncio.gather(*tasks)
        return sink, consumed

    sink, consumed = asyncio.run(scenario())
    counts = Counter(sink)
    assert set(counts) == expected
    assert max(counts.values()) == 1
    assert sum(1 for c in consumed if c) >= 2


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_confluent_kafka_group(kcoord: KcoordProcess, strategy: str) -> None:
    from confluent_kafka import Consumer

    topic, group = unique(f"ck-{strategy}"), unique("ck-group")
    create_topic(kcoord.bootstrap, topic, PARTITIONS)
    expected = produce_numbered(kcoord.bootstrap, topic, RECORDS, PARTITIONS)
    sink: list[bytes] = []
    lock = threading.Lock()
    stop = [threading.Event() for _ in range(3)]
    errors: list[BaseException] = []
    consumed = [0, 0, 0]

    def member(i: int) -> None:
        try:
            c = Consumer(
                {
                    "bootstrap.servers": kcoord.bootstrap,
                    "group.id": group,
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "partition.assignment.strategy": strategy,
                    "session.timeout.ms": 10000,
                    "heartbeat.interval.ms": 1000,
                }
            )
            c.subscribe([topic])
            while not stop[i].is_set():
                msgs = c.consume(num_messages=50, timeout=0.2)
                values = [msg.value() for msg in msgs if msg.error() is None]
                if values:
                    c.commit(asynchronous=False)
                    with lock:
                        sink.extend(values)
                    consumed[i] += len(values)
            c.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    wait_until(lambda: len(sink) >= RECORDS // 4, 60, "a quarter of the records")
    stop[0].set()
    threads[0].join(30)
    wait_until(lambda: len(sink) >= RECORDS, 90, "all records")
    for s in stop:
        s.set()
    for t in threads:
        t.join(30)
    assert not errors, errors
    counts = Counter(sink)
    assert set(counts) == expected
    assert max(counts.values()) == 1
    assert sum(1 for c in consumed if c) >= 2
