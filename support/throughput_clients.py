"""The clients the relay benchmarks drive: produce N records, consume them back, timed.

``librdkafka`` (confluent-kafka, in this process) and ``java`` (kafka-clients 4.3,
support/peers/java/ThroughputPeer.java, one JVM per produce and per consume; it times itself, so JVM
start is outside the window). bench/relay.py and bench/relay_consume.py run them direct to a broker
and through kcoord; which clients a run asks for, and the Java peer's report, are read here.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from typing import Any


def create_one_partition_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result(30)


def librdkafka_produce(bootstrap: str, topic: str, count: int, size: int) -> float:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "enable.idempotence": False,
        }
    )
    value = os.urandom(size)
    failures = [0]

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failures[0] += 1

    start = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(300)
    elapsed = time.perf_counter() - start
    if failures[0]:
        raise RuntimeError(f"{failures[0]} records failed to produce via {bootstrap}")
    return elapsed


def librdkafka_consume(bootstrap: str, topic: str, count: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"relay-bench-{time.time_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    start = time.perf_counter()
    deadline = start + 600
    while got < count and time.perf_counter() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    if got < count:
        raise RuntimeError(f"consumed {got} of {count} records via {bootstrap}")
    return elapsed


CLIENTS = ("librdkafka", "java")
# The peers' defaults (support/java.py) suit short tests: C1 only and a 256 MB heap. A
# throughput run wants the full JIT and room for the producer's 512 MB buffer (the last flag wins).
JAVA_JVM_ARGS = ("-XX:TieredStopAtLevel=4", "-Xmx1536m")
JAVA_TIMEOUT_S = 900.0


def java_unavailable() -> str | None:
    """Why the Java client cannot run here (None: it can): no JDK, or no kafka-clients jars."""
    from support import java

    if not java.java_available():
        return java.SKIP_REASON
    try:
        java.classpath("clients")
    except FileNotFoundError as e:
        return str(e)
    return None


def select_clients(spec: str | None, java_reason: str | None) -> tuple[list[str], list[str]]:
    """The clients to measure and a note per client skipped. ``spec``: comma-separated names from
    CLIENTS, or None for all of them; java is left out (with ``java_reason``) when it cannot run."""
    names = list(CLIENTS) if spec is None else [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in CLIENTS]
    if unknown or not names:
        raise ValueError(f"--clients: unknown {unknown or names}; choose from {','.join(CLIENTS)}")
    clients, notes = [], []
    for name in dict.fromkeys(names):  # first mention wins, duplicates dropped
        if name == "java" and java_reason is not None:
            notes.append(f"java client skipped: {java_reason}")
        else:
            clients.append(name)
    return clients, notes


def peer_event(stdout: str, event: str) -> dict[str, Any]:
    """The last ``{"event": event, ...}`` line a Java peer printed (one JSON object per line)."""
    found = None
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            candidate = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(candidate, dict) and candidate.get("event") == event:
            found = candidate
    if found is None:
        raise ValueError(f"no {event!r} event in the peer's output: {stdout[-500:]!r}")
    return found


def _java_run(mode: str, bootstrap: str, topic: str, count: int, *extra: str) -> dict[str, Any]:
    from support.java import java_command

    cmd = java_command(
        "ThroughputPeer",
        [mode, "--bootstrap", bootstrap, "--topic", topic, "--count", str(count), *extra],
        jvm_args=JAVA_JVM_ARGS,
    )
    result = subprocess.run(
        cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=JAVA_TIMEOUT_S
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"ThroughputPeer {mode} via {bootstrap} exited {result.returncode}:\n"
            f"{result.stdout[-1000:]}\n{result.stderr[-3000:]}"
        )
    return peer_event(result.stdout, "produced" if mode == "produce" else "consumed")


def java_produce(bootstrap: str, topic: str, count: int, size: int) -> float:
    return float(_java_run("produce", bootstrap, topic, count, "--size", str(size))["seconds"])


def java_consume(bootstrap: str, topic: str, count: int) -> float:
    return float(_java_run("consume", bootstrap, topic, count, "--timeout-s", "600")["seconds"])


# client -> (produce(bootstrap, topic, count, size), consume(bootstrap, topic, count)): seconds each
RUNS: dict[str, tuple[Callable[[str, str, int, int], float], Callable[[str, str, int], float]]] = {
    "librdkafka": (librdkafka_produce, librdkafka_consume),
    "java": (java_produce, java_consume),
}
