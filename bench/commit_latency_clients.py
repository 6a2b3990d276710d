"""The client processes of bench/commit_latency_under_relay.py: one per process, so that no client's
Python (and its GIL) times another's requests.

    python -m bench.commit_latency_clients consumer --bootstrap HOST:PORT --topic T --group G
    python -m bench.commit_latency_clients producer --bootstrap HOST:PORT --topic T --rate 2000 --bytes 256

Each runs until its stdin closes (the runner's way of saying stop), then prints one JSON object on
stdout and exits.

- **consumer**: a confluent-kafka (librdkafka) consumer of the KIP-848 protocol
  (``group.protocol=consumer``, no auto commit) that consumes a batch and commits it synchronously
  (``commit(asynchronous=False)``: the positions of its assigned partitions) after every batch
  that had records. Each commit is reported as ``[start, ms, error]``: its start on the
  system-wide monotonic clock (``time.monotonic()``, the same in every process on Linux, so the
  runner can put it into a phase), its wall time in milliseconds, and the error's name (a
  ``KafkaException``, or a partition's error in the answer) or null. On stop it closes, which
  leaves the group.
- **producer**: a confluent-kafka producer (``acks=all``, ``linger.ms=5``, librdkafka's defaults
  otherwise) sending ``--rate`` records a second of ``--bytes`` random bytes, numbered
  keys (spread over the partitions by the key hash), paced every 10 ms. Reports records delivered and failed, and librdkafka's own
  delivery latency per record (``Message.latency()``: from produce() to the broker's ack) as
  p50/p99/max.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from typing import Any


def _stop_on_stdin_eof() -> threading.Event:
    stop = threading.Event()

    def watch() -> None:
        sys.stdin.read()  # returns at EOF: the runner closed our stdin
        stop.set()

    threading.Thread(target=watch, name="stdin-eof", daemon=True).start()
    return stop


def _percentile(ordered: list[float], q: float) -> float | None:
    """Nearest rank: the smallest value with at least ``q`` of the values at or below it."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def run_consumer(args: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka import Consumer, KafkaException

    stop = _stop_on_stdin_eof()
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "group.protocol": "consumer",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "client.id": args.client_id,
    })  # fmt: skip
    consumer.subscribe([args.topic])
    commits: list[tuple[float, float, str | None]] = []
    consumed = 0
    while not stop.is_set():
        batch = consumer.consume(args.max_batch, args.poll_s)
        records = sum(1 for msg in batch if msg.error() is None)
        if not records:
            continue
        consumed += records
        start = time.monotonic()
        error: str | None = None
        try:
            answered = consumer.commit(asynchronous=False)
            failed = [tp.error for tp in answered or [] if tp.error is not None]
            if failed:
                error = failed[0].name()
        except KafkaException as exc:
            error = exc.args[0].name() if exc.args else repr(exc)
        commits.append((round(start, 6), round((time.monotonic() - start) * 1000, 3), error))
    closing = time.monotonic()
    consumer.close()  # leaves the group (member epoch -1)
    return {"commits": commits, "consumed": consumed, "close_s": round(time.monotonic() - closing, 3)}


def run_producer(args: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka import KafkaError, Message, Producer

    stop = _stop_on_stdin_eof()
    producer = Producer({
        "bootstrap.servers": args.bootstrap, "acks": "all", "linger.ms": 5, "client.id": args.client_id,
    })  # fmt: skip
    value = os.urandom(args.bytes)
    latencies: list[float] = []
    failed: dict[str, int] = {}

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failed[err.name()] = failed.get(err.name(), 0) + 1
            return
        latency = msg.latency()
        if latency is not None:
            latencies.append(latency * 1000)

    sent, started = 0, time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - started) * args.rate)
        while sent < due:
            try:
                producer.produce(args.topic, value, key=b"%d" % sent, on_delivery=delivered)
            except BufferError:
                break  # the local queue is full: the upstream is behind; catch up next tick
            sent += 1
        producer.poll(0.01)
    unflushed = producer.flush(30)
    latencies.sort()
    return {
        "sent": sent,
        "delivered": len(latencies),
        "failed": failed,
        "unflushed": unflushed,
        "delivery_ms": {
            "p50": _percentile(latencies, 0.50),
            "p99": _percentile(latencies, 0.99),
            "max": latencies[-1] if latencies else None,
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.commit_latency_clients", description=__doc__)
    ap.add_argument("role", choices=("consumer", "producer"))
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", help="consumer: the group to join")
    ap.add_argument("--client-id", default="relaylat")
    ap.add_argument("--max-batch", type=int, default=500, help="consumer: records per consume() at most")
    ap.add_argument("--poll-s", type=float, default=0.1, help="consumer: consume() timeout")
    ap.add_argument("--rate", type=float, default=2000.0, help="producer: records a second")
    ap.add_argument("--bytes", type=int, default=256, help="producer: record value size")
    args = ap.parse_args(argv)
    if args.role == "consumer" and not args.group:
        ap.error("consumer needs --group")
    report = run_consumer(args) if args.role == "consumer" else run_producer(args)
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
