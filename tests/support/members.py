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


class ConsumerProtocolMember(threading.Thread):
    """A confluent-kafka consumer of the consumer protocol (KIP-848), polling until told to stop and
    committing each record it reads; ``assignment`` is what it owns after its last poll."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        from confluent_kafka import Consumer

        super().__init__(daemon=True)
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
        })  # fmt: skip
        self.topic = topic
        self.values: list[bytes] = []
        self.assignment: set[int] = set()
        self.errors: list[str] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        while not self.stop_event.is_set():
            message = self.consumer.poll(0.2)
            self.assignment = {tp.partition for tp in self.consumer.assignment()}
            if message is None:
                continue
            if message.error():
                self.errors.append(str(message.error()))
                continue
            self.values.append(message.value())
            self.consumer.commit(message=message, asynchronous=False)
        self.consumer.close()  # leaves the group (epoch -1)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)
