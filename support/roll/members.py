"""The consumers of a roll: the stock Java consumer (a ConsumerPeer process) and confluent-kafka
(librdkafka, on a thread of this process), behind one interface.

Each member subscribes to the roll's topic, processes every poll's records (notes them) and then
commits exactly those records synchronously, the at-least-once loop of a real service; it reports
its rebalance callbacks, its refused commits and its fatal errors as support.roll.audit values.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from support.java import JavaPeer
from support.roll.audit import CommitRefusal, Delivery, MemberLife, OwnershipChange

GroupProtocol = Literal["classic", "consumer"]
ClientKind = Literal["java", "confluent"]


@dataclass(frozen=True)
class MemberSpec:
    """Who a member is and how it joins. ``assignor`` is the classic client-side assignor
    (``range`` or ``cooperative-sticky``); a consumer-protocol member leaves it to the coordinator."""

    name: str
    bootstrap: str
    group: str
    topic: str
    protocol: GroupProtocol
    assignor: str = "range"
    instance_id: str | None = None
    classic_session_ms: int = 10_000
    classic_heartbeat_ms: int = 1_000


class RollMember(Protocol):
    spec: MemberSpec

    def owned(self) -> frozenset[int]: ...
    def alive(self) -> bool: ...
    def failure(self) -> str | None: ...
    def problems(self) -> list[str]: ...
    def stop(self) -> None: ...
    def deliveries(self) -> list[Delivery]: ...
    def changes(self) -> list[OwnershipChange]: ...
    def refusals(self) -> list[CommitRefusal]: ...
    def life(self) -> MemberLife: ...


def _partition_of(name: str) -> int:
    """``topic-3`` (the Java peer's TopicPartition) -> 3."""
    return int(name.rsplit("-", 1)[1])


class JavaMember:
    """kafka-clients 4.3 ``KafkaConsumer`` in a ConsumerPeer process (``--commit-processed``)."""

    def __init__(self, spec: MemberSpec, log_dir: Path) -> None:
        self.spec = spec
        args = ["--bootstrap", spec.bootstrap, "--group", spec.group, "--topic", spec.topic,
                "--client-id", spec.name, "--group-protocol", spec.protocol, "--commit-processed",
                "--poll-ms", "100", "--max-poll-records", "200"]  # fmt: skip
        if spec.protocol == "classic":
            args += ["--assignor", spec.assignor, "--session-timeout-ms", str(spec.classic_session_ms),
                     "--heartbeat-interval-ms", str(spec.classic_heartbeat_ms)]  # fmt: skip
        if spec.instance_id is not None:
            args += ["--instance-id", spec.instance_id]
        self._started = time.time()
        self._ended: float | None = None
        self.peer = JavaPeer("ConsumerPeer", args, log_dir=log_dir, name=f"roll-{spec.name}-{spec.protocol}")

    def _events(self) -> list[dict[str, Any]]:
        return list(self.peer.events)  # the reader thread appends; a copy is a consistent prefix

    def changes(self) -> list[OwnershipChange]:
        out = []
        for event in self._events():
            kind = event.get("event")
            if kind in ("assigned", "revoked", "lost"):
                parts = frozenset(_partition_of(p) for p in event["partitions"])
                out.append(OwnershipChange(self.spec.name, event["ts"] / 1000, parts, kind == "assigned"))
        return out

    def owned(self) -> frozenset[int]:
        held: set[int] = set()
        for change in self.changes():
            if change.gained:
                held |= change.partitions
            else:
                held -= change.partitions
        return frozenset(held) if self.alive() else frozenset()

    def deliveries(self) -> list[Delivery]:
        out = []
        for event in self._events():
            if event.get("event") != "delivered":
                continue
            for name, keys in event["keys"].items():
                first = event["ranges"][name][0]
                partition = _partition_of(name)
                out += [
                    Delivery(self.spec.name, partition, first + i, key, event["ts"] / 1000)
                    for i, key in enumerate(keys)
                    if key is not None
                ]
        return out

    def refusals(self) -> list[CommitRefusal]:
        return [
            CommitRefusal(
                self.spec.name,
                e["ts"] / 1000,
                str(e.get("error")),
                tuple((_partition_of(name), offset) for name, offset in e.get("offsets", {}).items()),
            )
            for e in self._events()
            if e.get("event") == "commit_failed"
        ]

    def failure(self) -> str | None:
        for event in self._events():
            if event.get("event") in ("error", "fenced"):
                return f"{self.spec.name}: {event.get('error')}: {event.get('message')}"
        if not self.alive() and self._ended is None:
            return (
                f"{self.spec.name}: exited with {self.peer.process.returncode}\n{self.peer.stderr_tail(10)}"
            )
        return None

    def problems(self) -> list[str]:
        """Errors the peer reported that did not end it (the distinct ones)."""
        seen = {
            f"{e.get('error')}: {e.get('message')}" for e in self._events() if e.get("event") == "close_error"
        }
        return sorted(seen)

    def alive(self) -> bool:
        return self._ended is None and self.peer.process.poll() is None

    def stop(self) -> None:
        self.peer.stop(timeout=20)
        closed = self.peer.latest("closed")
        self._ended = closed["ts"] / 1000 if closed else time.time()

    def life(self) -> MemberLife:
        return MemberLife(self.spec.name, self._started, self._ended)


class ConfluentMember:
    """A confluent-kafka ``Consumer`` polled on its own thread: every librdkafka call stays there."""

    def __init__(self, spec: MemberSpec) -> None:
        import confluent_kafka

        self.spec = spec
        self._kafka = confluent_kafka
        conf: dict[str, Any] = {
            "bootstrap.servers": spec.bootstrap, "group.id": spec.group, "client.id": spec.name,
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "group.protocol": spec.protocol,
        }  # fmt: skip
        if spec.protocol == "classic":
            conf |= {
                "partition.assignment.strategy": spec.assignor,
                "session.timeout.ms": spec.classic_session_ms,
                "heartbeat.interval.ms": spec.classic_heartbeat_ms,
            }
        if spec.instance_id is not None:
            conf["group.instance.id"] = spec.instance_id
        conf["error_cb"] = self._error  # group errors (a heartbeat refused) come this way, not from consume
        self._lock = threading.Lock()
        self._deliveries: list[Delivery] = []
        self._changes: list[OwnershipChange] = []
        self._refusals: list[CommitRefusal] = []
        self._owned: set[int] = set()
        self._failure: str | None = None
        self._problems: dict[str, None] = {}  # distinct non-fatal errors, in the order seen
        self._started = time.time()
        self._ended: float | None = None
        self._stop = threading.Event()
        self.consumer = confluent_kafka.Consumer(conf)
        self.consumer.subscribe(
            [spec.topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost
        )
        self._thread = threading.Thread(target=self._run, name=f"roll-{spec.name}", daemon=True)
        self._thread.start()

    def _change(self, partitions: list[Any], gained: bool) -> None:
        parts = frozenset(tp.partition for tp in partitions)
        with self._lock:
            self._changes.append(OwnershipChange(self.spec.name, time.time(), parts, gained))
            if gained:
                self._owned |= parts
            else:
                self._owned -= parts

    def _is_fatal(self, error: Any) -> bool:
        """A ConsumerGroupHeartbeat refused for good, say: librdkafka hands it over as code _FATAL
        (whose own ``fatal()`` is False), and the consumer is of no more use."""
        return bool(error.fatal()) or error.code() == self._kafka.KafkaError._FATAL

    def _error(self, error: Any) -> None:
        if self._is_fatal(error):
            self._failure = f"{self.spec.name}: {error}"
            self._stop.set()
        else:
            self._problems.setdefault(str(error))

    def _assigned(self, _consumer: Any, partitions: list[Any]) -> None:
        self._change(partitions, True)

    def _revoked(self, _consumer: Any, partitions: list[Any]) -> None:
        self._change(partitions, False)

    def _lost(self, _consumer: Any, partitions: list[Any]) -> None:
        self._change(partitions, False)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._poll_once()
        except Exception as exc:  # a fatal client error ends this member; the driver reports it
            self._failure = self._failure or f"{self.spec.name}: {exc!r}"
        finally:
            with contextlib.suppress(Exception):
                self.consumer.close()
            with self._lock:
                self._ended = time.time()
                self._owned.clear()

    def _poll_once(self) -> None:
        messages = self.consumer.consume(200, 0.1)
        now = time.time()
        last: dict[int, int] = {}
        batch = []
        for message in messages:
            error = message.error()
            if error is not None:
                if self._is_fatal(error):
                    raise self._kafka.KafkaException(error)
                self._problems.setdefault(str(error))
                continue
            key, partition, offset = message.key(), message.partition(), message.offset()
            if partition is None or offset is None:  # only error events lack them
                continue
            if key is not None:
                batch.append(Delivery(self.spec.name, partition, offset, int(key), now))
            last[partition] = offset
        if not last:
            return
        with self._lock:
            self._deliveries += batch
        offsets = [self._kafka.TopicPartition(self.spec.topic, p, o + 1) for p, o in last.items()]
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except self._kafka.KafkaException as exc:
            error = exc.args[0]
            name = error.name() if hasattr(error, "name") else str(error)
            with self._lock:
                refused = tuple((p, o + 1) for p, o in last.items())
                self._refusals.append(CommitRefusal(self.spec.name, time.time(), name, refused))

    def owned(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._owned)

    def alive(self) -> bool:
        return self._thread.is_alive()

    def failure(self) -> str | None:
        return self._failure

    def problems(self) -> list[str]:
        return list(self._problems)[:5]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def deliveries(self) -> list[Delivery]:
        with self._lock:
            return list(self._deliveries)

    def changes(self) -> list[OwnershipChange]:
        with self._lock:
            return list(self._changes)

    def refusals(self) -> list[CommitRefusal]:
        with self._lock:
            return list(self._refusals)

    def life(self) -> MemberLife:
        return MemberLife(self.spec.name, self._started, self._ended)


def start_member(kind: ClientKind, spec: MemberSpec, log_dir: Path) -> RollMember:
    return JavaMember(spec, log_dir) if kind == "java" else ConfluentMember(spec)
