"""One round trip through kcoord for the security suites: produce, then consume in two groups.

The TLS and SASL suites each check that stock clients work end to end over their security
protocol: records produced through kcoord are consumed whole by a confluent-kafka (librdkafka) group
and by a kafka-python group, both committing, and each group's committed offsets read back through
kcoord add up to what was produced. Only the clients' security settings differ between suites.
"""

from __future__ import annotations

import time
from typing import Any

from support.workload import unique


def produce_and_consume_in_two_groups(
    confluent: dict[str, str],
    kafka_python: dict[str, Any],
    *,
    name: str,
    records: int,
    timeout: float = 30.0,
) -> None:
    """Create a two-partition topic, produce ``records`` and consume them in two groups.

    ``confluent``: librdkafka settings (``bootstrap.servers`` and security); ``kafka_python``:
    ``KafkaConsumer`` keyword arguments (``bootstrap_servers`` and security). Asserts every record
    was consumed by both groups and both committed all of them.
    """
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    topic = unique(name)
    admin = AdminClient(confluent)  # kept: the futures fail once the client is collected
    admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(30)
    producer = Producer(confluent)
    for i in range(records):
        producer.produce(topic, key=str(i), value=f"record {i}")
    assert producer.flush(30) == 0

    consumer = Consumer({**confluent, "group.id": unique(f"{name}-confluent"), "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([topic])
    seen, deadline = 0, time.monotonic() + timeout
    while seen < records and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            seen += 1
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition(topic, p) for p in range(2)], timeout=10)
    consumer.close()
    assert seen == records
    assert sum(tp.offset for tp in committed) == records

    reader = KafkaConsumer(topic, group_id=unique(f"{name}-kafka-python"), auto_offset_reset="earliest",
                           enable_auto_commit=False, **kafka_python)  # fmt: skip
    try:
        got, deadline = 0, time.monotonic() + timeout
        while got < records and time.monotonic() < deadline:
            got += sum(len(batch) for batch in reader.poll(timeout_ms=500).values())
        reader.commit()
        offsets = [reader.committed(KafkaTopicPartition(topic, p)) for p in range(2)]
    finally:
        reader.close()
    assert got == records
    assert sum(o or 0 for o in offsets) == records
