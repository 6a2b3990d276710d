"""The roll's producer: sequence-numbered records at a steady rate, on a thread, straight to the
upstream cluster (the coordinator under test is not on the write path, so its restart does not stall
the data). Idempotent, ``acks=all``: every sequence number the broker acknowledged is in the log once.
"""

from __future__ import annotations

import threading
import time
from typing import Any


class SequenceProducer:
    """Writes record ``n`` (key and value the decimal ``n``) to partition ``n % partitions``."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float) -> None:
        import confluent_kafka

        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.acked: set[int] = set()
        self.failed: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
        })  # fmt: skip
        self._thread = threading.Thread(target=self._run, name="roll-producer", daemon=True)

    def start(self) -> SequenceProducer:
        self._thread.start()
        return self

    def _delivered(self, error: Any, message: Any) -> None:
        with self._lock:
            if error is None:
                self.acked.add(int(message.key()))
            else:
                self.failed.append(str(error))

    def _run(self) -> None:
        began, sequence = time.monotonic(), 0
        while not self._stop.is_set():
            due = int((time.monotonic() - began) * self.rate)
            while sequence < due:
                text = str(sequence).encode()
                self._producer.produce(
                    self.topic, value=text, key=text, partition=sequence % self.partitions,
                    on_delivery=self._delivered,
                )  # fmt: skip
                sequence += 1
            self._producer.poll(0.02)
        self._producer.flush(30)

    def stop(self) -> set[int]:
        """Stop writing, wait for every acknowledgement, return the acknowledged sequence numbers."""
        self._stop.set()
        self._thread.join(40)
        with self._lock:
            return set(self.acked)
