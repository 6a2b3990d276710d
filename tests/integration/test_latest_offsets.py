"""ListOffsets LATEST through kcoord is the log end on tansu as on Kafka, so lag and
``auto.offset.reset=latest`` read the same on both.

tansu answers LATEST with the last batch's base offset + 1 (docs/tansu.md): with a last batch of 5
records that is 4 short. kcoord raises it to the Fetch high watermark for such an upstream (on by
itself for the embedded broker; the session's tansu is told with
``upstream.latest.offset.from.fetch=true``). The same test runs on Kafka, where nothing needs
correcting, and must give the same numbers.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kcoord.coordinator.tools.groups import GroupsAdmin
from support.broker import TansuBroker
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, unique
from tests.support.fixtures import Upstream

pytestmark = pytest.mark.integration

BATCHES = (10, 5)  # records per produced batch: the last batch holds more than one record
RECORDS = sum(BATCHES)


def produce_batches(bootstrap: str, topic: str, batches: tuple[int, ...], first: int = 0) -> None:
    """Each batch as one RecordBatch: sent together, then flushed."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=500, batch_size=1 << 20)
    try:
        n = first
        for size in batches:
            for _ in range(size):
                producer.send(topic, value=b"%d" % n, partition=0)
                n += 1
            producer.flush()
    finally:
        producer.close()


def consume(bootstrap: str, topic: str, group: str, reset: str, want: int, timeout: float) -> list[bytes]:
    """Up to ``want`` values read in ``group`` from ``topic`` within ``timeout``; commits them."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset=reset,
        enable_auto_commit=False,
        session_timeout_ms=6000,
    )
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(values) < want and time.monotonic() < deadline:
            for records in consumer.poll(200).values():
                values += [r.value for r in records]
        consumer.commit()
        return values
    finally:
        consumer.close()


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


@contextmanager
def kcoord_in_front_of(upstream: Upstream | None) -> Iterator[KcoordProcess]:
    """kcoord on ``upstream`` (None: the embedded broker, corrected by default)."""
    if upstream is None:
        with KcoordProcess("--shards", "2") as kcoord:
            yield kcoord
        return
    extra = ["--upstream-latest-offset-from-fetch", "true"] if isinstance(upstream, TansuBroker) else []
    own_topic = ["--internal-topic", unique("__kcoord_latest")]  # the session's broker is shared
    with KcoordProcess("--shards", "2", *own_topic, *extra, bootstrap=upstream.bootstrap) as kcoord:
        yield kcoord


def check_latest_lag_and_reset(kcoord: KcoordProcess) -> dict[str, object]:
    topic, group, fresh = unique("latest-topic"), unique("latest-group"), unique("latest-fresh")
    create_topic(kcoord.bootstrap, topic, 1)
    produce_batches(kcoord.bootstrap, topic, BATCHES)
    assert end_offset(kcoord.bootstrap, topic) == RECORDS  # tansu alone says 11
    assert len(consume(kcoord.bootstrap, topic, group, "earliest", RECORDS, 30)) == RECORDS
    host, port = kcoord.bootstrap.rsplit(":", 1)
    with GroupsAdmin([(host, int(port))]) as admin:
        [offsets] = admin.describe(group).offsets
    assert (offsets.committed, offsets.log_end, offsets.lag) == (RECORDS, RECORDS, 0)
    # A new group reading from "latest" starts at the end: it must not re-read the last batch.
    consumer = KafkaConsumer(
        bootstrap_servers=kcoord.bootstrap,
        group_id=fresh,
        auto_offset_reset="latest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(200)
        position = consumer.position(TopicPartition(topic, 0))
        produce_batches(kcoord.bootstrap, topic, (1,), first=RECORDS)
        read: list[bytes] = []
        deadline = time.monotonic() + 15
        while not read and time.monotonic() < deadline:
            for records in consumer.poll(200).values():
                read += [r.value for r in records]
    finally:
        consumer.close()
    assert position == RECORDS
    assert read == [b"%d" % RECORDS]  # only the record produced after it joined
    return {"end": RECORDS, "lag": offsets.lag, "latest_position": position, "read": read}


def test_latest_offset_lag_and_reset_match_kafka(upstream: Upstream) -> None:
    with kcoord_in_front_of(upstream) as kcoord:
        figures = check_latest_lag_and_reset(kcoord)
    print(f"\n{type(upstream).__name__}: {figures}")


def test_latest_offset_is_corrected_on_the_embedded_broker_by_default() -> None:
    with kcoord_in_front_of(None) as kcoord:
        figures = check_latest_lag_and_reset(kcoord)
    print(f"\nembedded: {figures}")
