"""Exactly-once through kcoord with librdkafka (confluent-kafka's transactional API): a
consume-transform-produce loop whose input offsets are committed inside its producer's transaction
(``send_offsets_to_transaction``), against kcoord in front of tansu and of Apache Kafka in turn.

Aborted transactions carry *poisoned* offsets (the true position + ``POISON``): an offset that high
can only become visible if kcoord let an aborted transaction's commit through, so every check of the
committed offsets also checks that none is poisoned.

tansu 0.6 hands aborted records to read_committed consumers (docs/tansu.md: ``aborted_transactions``
is never filled), so there the "each output record exactly once" check is made only for runs in which
no transaction aborted; runs with aborts check offsets and that no input record is lost. Kafka filters
aborted records, so on Kafka every run's committed output holds each input record exactly once.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from support.kcoord_process import KcoordProcess
from support.workload import create_topic, produce_numbered, unique
from tests.support.fixtures import Upstream

pytestmark = pytest.mark.integration

PARTITIONS = 4
POISON = 1_000_000


class Kcoord:
    """One kcoord on the upstream that tests kill and restart on the same port and internal topic."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.topic = unique("__kcoord_eos")
        self.proc = self._new().start()
        self.bootstrap = self.proc.bootstrap

    def _new(self, port: int | None = None) -> KcoordProcess:
        # No initial rebalance delay: every group here has one member, whose first join the
        # default 3 s only holds back.
        return KcoordProcess("--shards", "3", "--storage", "kafka", "--internal-topic", self.topic,
                             "--group-initial-rebalance-delay-ms", "0",
                             bootstrap=self.upstream.bootstrap, port=port)  # fmt: skip

    def restart(self, kill: bool = False) -> None:
        if kill:
            self.proc.kill()
        else:
            self.proc.stop()
        self.proc = self._new(self.proc.port).start()


@pytest.fixture
def kcoord(upstream: Upstream) -> Iterator[Kcoord]:
    k = Kcoord(upstream)
    yield k
    k.proc.stop()


class TransformLoop(threading.Thread):
    """Consume ``source``, produce each value to ``sink`` with the input offsets in the same
    transaction. Every ``abort_every``-th transaction sends poisoned offsets and aborts, then the
    consumer rewinds to the committed offsets. A fatal producer error (fenced, a coordinator
    restart in the middle of a transaction) gets a new producer, as Kafka Streams does."""

    def __init__(self, bootstrap: str, group: str, source: str, sink: str, *, abort_every: int = 0,
                 transactional_id: str | None = None, batch: int = 500) -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.source, self.sink = bootstrap, group, source, sink
        self.abort_every = abort_every
        self.transactional_id = transactional_id or unique("ctp-tx")
        self.batch = batch
        self.committed_txns = 0
        self.aborted_txns = 0
        self.producers_made = 0
        self.failures: list[str] = []
        self.stop_event = threading.Event()
        # A test may hold the loop between a transaction's offsets and its end (pause_requested):
        # the loop sets ``paused``, waits for ``resume``, ends that transaction and stops.
        self.pause_requested = threading.Event()
        self.paused = threading.Event()
        self.resume = threading.Event()
        self.paused_offsets: list[TopicPartition] = []
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "isolation.level": "read_committed",
        })  # fmt: skip
        self.producer = self._new_producer()

    def _new_producer(self) -> Producer:
        self.producers_made += 1
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.transactional_id,
                             "transaction.timeout.ms": 20_000})  # fmt: skip
        producer.init_transactions(60)
        return producer

    def _rewind(self) -> None:
        assignment = self.consumer.assignment()
        if not assignment:
            return
        for tp in self.consumer.committed(assignment, 30):
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))

    def run(self) -> None:
        self.consumer.subscribe([self.source])
        number = 0
        while not self.stop_event.is_set():
            messages = [msg for msg in self.consumer.consume(self.batch, 0.5) if not msg.error()]
            if not messages:
                continue
            number += 1
            abort = self.abort_every > 0 and number % self.abort_every == 0
            try:
                self.producer.begin_transaction()
                for msg in messages:
                    self.producer.produce(self.sink, msg.value(), partition=msg.partition())
                positions = self.consumer.position(self.consumer.assignment())
                if abort:
                    positions = [
                        TopicPartition(tp.topic, tp.partition, tp.offset + POISON) for tp in positions
                    ]
                self.producer.send_offsets_to_transaction(
                    positions, self.consumer.consumer_group_metadata(), 60
                )
                pausing = self.pause_requested.is_set() and not self.paused.is_set()
                if pausing:
                    self.paused_offsets = positions
                    self.paused.set()
                    self.resume.wait(120)
                if abort:
                    self.producer.abort_transaction(60)
                    self.aborted_txns += 1
                    self._rewind()
                else:
                    self.producer.commit_transaction(60)
                    self.committed_txns += 1
                if pausing:
                    break  # the test checks what the paused transaction left, then starts a new loop
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                self.failures.append(f"{error.name()}: {error.str()}")
                if error.txn_requires_abort():
                    try:
                        self.producer.abort_transaction(60)
                    except KafkaException as again:
                        self.failures.append(f"abort: {again}")
                        self.producer = self._new_producer()
                else:  # fatal (fenced) or retriable: start over with a new producer
                    self.producer = self._new_producer()
                self._rewind()
        self.consumer.close()

    def stop(self) -> None:
        self.stop_event.set()
        self.resume.set()
        self.join(60)
        assert not self.is_alive(), "the transform loop did not stop"


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets, pending transactional ones left out: read_uncommitted, so
    librdkafka's OffsetFetch does not ask RequireStable (which waits while a transaction that
    committed offsets of these partitions is open: UNSTABLE_OFFSET_COMMIT, as Kafka answers)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_uncommitted"})  # fmt: skip
    try:
        parts = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 30)
        return {tp.partition: tp.offset for tp in parts}
    finally:
        consumer.close()


def end_offsets(count: int) -> dict[int, int]:
    """The source's end offsets after ``produce_numbered(count)`` (round robin, one record per
    offset). Not asked of the broker: tansu 0.6's ListOffsets(latest) answers the last batch's base
    offset + 1 (docs/tansu.md)."""
    return {p: count // PARTITIONS + (p < count % PARTITIONS) for p in range(PARTITIONS)}


def read_committed_output(bootstrap: str, topic: str, expected: int, timeout: float = 60.0) -> Counter[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("eos-read"), "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})  # fmt: skip
    consumer.subscribe([topic])
    seen: Counter[bytes] = Counter()
    deadline = time.monotonic() + timeout
    idle_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            messages = consumer.consume(1000, 0.5)
            for msg in messages:
                if not msg.error():
                    seen[msg.value()] += 1
            if messages:
                idle_since = time.monotonic()
            elif sum(seen.values()) >= expected and time.monotonic() - idle_since > 2.0:
                break
    finally:
        consumer.close()
    return seen


def assert_committed_output(
    upstream: Upstream, seen: Counter[bytes], inputs: set[bytes], aborted: bool
) -> None:
    """Each input exactly once in the read_committed output; after aborts on tansu only "at least
    once", because tansu hands aborted records to read_committed consumers (docs/tansu.md)."""
    if aborted and upstream.kind == "tansu":
        assert inputs <= set(seen), "an input record is missing from the committed output"
        return
    assert set(seen) == inputs, "the committed output holds other records than the input's"
    duplicated = {value: n for value, n in seen.items() if n > 1}
    assert not duplicated, (
        f"{len(duplicated)} input records more than once, e.g. {list(duplicated.items())[:5]}"
    )


def wait_until_done(
    loop: TransformLoop, bootstrap: str, group: str, source: str, count: int, timeout: float
) -> dict[int, int]:
    """Poll the committed offsets until they reach the source's end; no sample may be poisoned."""
    ends = end_offsets(count)
    deadline = time.monotonic() + timeout
    while True:
        offsets = committed(bootstrap, group, source)
        assert all(o < POISON for o in offsets.values()), (
            f"an aborted transaction's offsets are visible: {offsets}"
        )
        if offsets == ends:
            return offsets
        if time.monotonic() > deadline:
            raise AssertionError(
                f"committed {offsets}, input ends at {ends}; loop failures: {loop.failures[-5:]}"
            )
        time.sleep(0.3)


def test_confluent_transform_loop_outputs_each_record_exactly_once(kcoord: Kcoord) -> None:
    bs = kcoord.bootstrap
    source, sink, group = unique("eos-in"), unique("eos-out"), unique("eos-g")
    create_topic(bs, source, PARTITIONS)
    create_topic(bs, sink, PARTITIONS)
    inputs = produce_numbered(bs, source, 10_000, PARTITIONS)
    loop = TransformLoop(bs, group, source, sink)
    loop.start()
    try:
        offsets = wait_until_done(loop, bs, group, source, 10_000, timeout=90)
    finally:
        loop.stop()
    assert sum(offsets.values()) == 10_000
    assert loop.aborted_txns == 0 and loop.committed_txns >= 20, (loop.committed_txns, loop.failures)
    seen = read_committed_output(bs, sink, 10_000)
    assert set(seen) == inputs and set(seen.values()) == {1}, (
        "each input exactly once in the committed output"
    )


def test_confluent_aborted_transactions_never_commit_their_offsets(kcoord: Kcoord) -> None:
    """Every other transaction sends poisoned offsets and aborts: no committed offset is ever
    poisoned, the committed ones reach the end, and a restarted kcoord loads the same."""
    bs = kcoord.bootstrap
    source, sink, group = unique("eos-in"), unique("eos-out"), unique("eos-g")
    create_topic(bs, source, PARTITIONS)
    create_topic(bs, sink, PARTITIONS)
    inputs = produce_numbered(bs, source, 4_000, PARTITIONS)
    loop = TransformLoop(bs, group, source, sink, abort_every=2, batch=200)
    loop.start()
    try:
        offsets = wait_until_done(loop, bs, group, source, len(inputs), timeout=90)
    finally:
        loop.stop()
    assert loop.aborted_txns >= 5 and loop.committed_txns >= 5, (
        loop.aborted_txns,
        loop.committed_txns,
        loop.failures,
    )
    kcoord.restart()
    assert committed(bs, group, source) == offsets
    assert_committed_output(
        kcoord.upstream, read_committed_output(bs, sink, len(inputs)), inputs, aborted=True
    )


def test_confluent_zombie_producer_is_fenced_and_its_offsets_never_appear(kcoord: Kcoord) -> None:
    bs = kcoord.bootstrap
    source, sink, group = unique("eos-in"), unique("eos-out"), unique("eos-g")
    create_topic(bs, source, PARTITIONS)
    create_topic(bs, sink, PARTITIONS)
    txn_id = unique("zombie-tx")
    metadata_consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        group_metadata = metadata_consumer.consumer_group_metadata()
        zombie = Producer(
            {"bootstrap.servers": bs, "transactional.id": txn_id, "transaction.timeout.ms": 20_000}
        )
        zombie.init_transactions(60)
        zombie.begin_transaction()
        zombie.produce(sink, b"zombie", partition=0)
        zombie.send_offsets_to_transaction([TopicPartition(source, 0, POISON)], group_metadata, 60)
        # A new instance with the same transactional id: its InitProducerId bumps the epoch and
        # aborts the zombie's transaction, whose offsets were added to kcoord's partition.
        successor = Producer(
            {"bootstrap.servers": bs, "transactional.id": txn_id, "transaction.timeout.ms": 20_000}
        )
        successor.init_transactions(60)
        with pytest.raises(KafkaException):
            zombie.send_offsets_to_transaction([TopicPartition(source, 1, POISON)], group_metadata, 30)
            zombie.commit_transaction(30)
        successor.begin_transaction()
        successor.produce(sink, b"successor", partition=0)
        successor.send_offsets_to_transaction([TopicPartition(source, 0, 7)], group_metadata, 60)
        successor.commit_transaction(60)
    finally:
        metadata_consumer.close()
    deadline = time.monotonic() + 20
    while (offsets := committed(bs, group, source)).get(0) != 7:
        assert time.monotonic() < deadline, f"the successor's commit is not visible: {offsets}"
        time.sleep(0.2)
    assert all(o < POISON for o in offsets.values()), offsets


def test_confluent_transform_loop_survives_kill_9_of_kcoord(kcoord: Kcoord) -> None:
    """kill -9 kcoord in the middle of a transaction, after its offsets were committed into it and
    before its end, then restart kcoord on the same ports: the transaction, open in the log at the
    load, still ends by its marker (a commit shows its offsets, an abort never does), no committed
    offset is lost, and the loop reaches the end with no input record lost.

    After that transaction the test starts a new loop (a new producer): librdkafka 2.16 re-bootstraps when every
    broker is down (all of them are kcoord's ports), decommissions the group coordinator it cached,
    and then ``send_offsets_to_transaction`` waits for that broker for ever (confluentinc/librdkafka
    #5511, with confluentinc/librdkafka#5456: the call's timeout is not applied). A kcoord cluster keeps
    brokers up through one node's death."""
    bs = kcoord.bootstrap
    source, sink, group = unique("eos-in"), unique("eos-out"), unique("eos-g")
    create_topic(bs, source, PARTITIONS)
    create_topic(bs, sink, PARTITIONS)
    inputs = produce_numbered(bs, source, 6_000, PARTITIONS)
    for abort_every in (1_000_000, 1):  # the paused transaction commits, then one that aborts
        loop = TransformLoop(bs, group, source, sink, abort_every=abort_every, batch=100)
        loop.start()
        try:
            deadline = time.monotonic() + 30
            while loop.committed_txns + loop.aborted_txns < 3 and abort_every > 1:
                assert time.monotonic() < deadline, loop.failures
                time.sleep(0.05)
            loop.pause_requested.set()
            assert loop.paused.wait(30), loop.failures
            before = committed(bs, group, source)
            kcoord.restart(kill=True)
            assert committed(bs, group, source) == before, "a committed offset was lost, or an open one shown"
            loop.resume.set()
            loop.join(90)
            assert not loop.is_alive() and loop.failures == [], (loop.failures, kcoord.proc.log_tail(80))
        finally:
            loop.stop()
        if abort_every == 1:
            time.sleep(1.0)  # what a marker could show, kcoord has followed by now
            assert loop.aborted_txns == 1 and committed(bs, group, source) == before
        else:
            assert loop.committed_txns >= 4
            expected = {**before, **{tp.partition: tp.offset for tp in loop.paused_offsets if tp.offset >= 0}}
            deadline = time.monotonic() + 20
            while (after := committed(bs, group, source)) != expected:
                assert time.monotonic() < deadline, (
                    f"the paused transaction's offsets are not visible: {after} != {expected}"
                )
                time.sleep(0.2)
        # The loop's producer saw every broker down (all are kcoord's ports); librdkafka then waits
        # for ever on the group coordinator it decommissioned (the docstring): the next loop has a
        # new producer.
    loop = TransformLoop(bs, group, source, sink)
    loop.start()
    try:
        offsets = wait_until_done(loop, bs, group, source, len(inputs), timeout=90)
    finally:
        loop.stop()
    kcoord.restart()
    assert committed(bs, group, source) == offsets  # as loaded from the log once more
    # the abort_every=1 loop aborted its transactions (and the kill may abort one)
    assert_committed_output(
        kcoord.upstream, read_committed_output(bs, sink, len(inputs)), inputs, aborted=True
    )
