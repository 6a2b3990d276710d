"""A group member for tests: a confluent-kafka (librdkafka) consumer polled on its own thread."""

from __future__ import annotations

import threading
from typing import Any


class CommittingMember:
    """Subscribes to one topic and commits synchronously after every record it consumes.

    Every librdkafka call stays on the member's own thread (``assigned`` and ``member_id`` are read
    there and published as plain attributes); ``close()`` stops the thread, which closes the consumer
    (a LeaveGroup, or the KIP-848 leave heartbeat).
    """

    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str, conf: dict[str, Any]) -> None:
        import confluent_kafka  # a test extra: modules using this skip with importorskip first

        self.consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
            "enable.auto.commit": False, "auto.offset.reset": "earliest", **conf,
        })  # fmt: skip
        self.consumed = 0
        self.member_id = ""
        self.assigned: set[int] = set()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self.consumer.subscribe([topic])
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self.consumer.poll(0.1)
            self.assigned = {tp.partition for tp in self.consumer.assignment()}
            self.member_id = str(self.consumer.memberid())
            if message is None:
                continue
            if message.error():
                self.errors.append(str(message.error()))
                continue
            self.consumed += 1
            self.consumer.commit(message=message, asynchronous=False)
        self.consumer.close()

    def close(self) -> None:
        self._stop.set()
        self.thread.join(30)
