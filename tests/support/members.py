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


class PollingMember(threading.Thread):
    """A confluent-kafka consumer polling until told to stop and committing each record it reads;
    ``assignment`` is what it owns after its last poll. ``protocol`` is its ``group.protocol``
    (a classic one uses range with a 10 s session); ``tolerate_commit_errors``: a commit refused
    during a rebalance only means the record may come again."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        protocol: str = "consumer",
        tolerate_commit_errors: bool = False,
    ) -> None:
        from confluent_kafka import Consumer

        super().__init__(daemon=True)
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
        }  # fmt: skip
        if protocol == "classic":
            config.update({"partition.assignment.strategy": "range", "session.timeout.ms": 10_000,
                           "heartbeat.interval.ms": 500})  # fmt: skip
        self.consumer = Consumer(config)
        self.topic = topic
        self.tolerate_commit_errors = tolerate_commit_errors
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
            try:
                self.consumer.commit(message=message, asynchronous=False)
            except Exception:
                if not self.tolerate_commit_errors:
                    raise
        self.consumer.close()  # leaves the group (a consumer-protocol member: epoch -1)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)
