"""Topics and records for group tests: create a topic through kcoord, produce numbered records."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            described = admin.describe_topics([topic])
            if described and len(described[0].get("partitions", [])) == partitions:
                return
            time.sleep(0.2)
        raise AssertionError(f"topic {topic} did not appear with {partitions} partitions")
    finally:
        admin.close()


def produce_numbered(bootstrap: str, topic: str, count: int, partitions: int) -> set[bytes]:
    """Produce ``count`` distinct values round-robin over partitions; return the set of values."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    values = {b"r%07d" % i for i in range(count)}
    for i, v in enumerate(sorted(values)):
        producer.send(topic, value=v, partition=i % partitions)
    producer.flush(60)
    producer.close()
    return values


def wait_until(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.1) -> None:
    """Poll ``predicate`` until it is truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)
