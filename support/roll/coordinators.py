"""The coordinator a roll runs against: Apache Kafka 4.0 itself, or kcoord in front of a cluster.

Either way the members' ``bootstrap`` is the coordinator's address and the producer writes to the
``upstream`` cluster directly. kcoord keeps its groups on the cluster (``--storage kafka``), so it can
be killed with SIGKILL and started again on the same port in the middle of a roll; a single Kafka
node cannot (its restart here formats a fresh log), so its ``restartable`` is False.
"""

from __future__ import annotations

import sys
from typing import Protocol

from support.kafka_broker import KafkaBroker
from support.kcoord_process import KcoordProcess
from support.workload import unique

# KIP-848 timing shared by both coordinators in a roll, so their figures compare. Kafka 4.0's
# defaults are 5 s heartbeats and 45 s sessions; kcoord's are the same.
KAFKA_DEFAULT_HEARTBEAT_MS = 5000


class RollCoordinator(Protocol):
    name: str

    @property
    def bootstrap(self) -> str: ...
    @property
    def upstream(self) -> str: ...
    @property
    def restartable(self) -> bool: ...
    def kill_and_restart(self) -> None: ...
    def stop(self) -> None: ...


def kafka_overrides(heartbeat_ms: int) -> dict[str, str]:
    """server.properties for a Kafka node whose consumer groups heartbeat every ``heartbeat_ms``
    (Kafka's lower bound is 5 s by default, so it moves with it)."""
    return {
        "group.consumer.heartbeat.interval.ms": str(heartbeat_ms),
        "group.consumer.min.heartbeat.interval.ms": str(min(heartbeat_ms, KAFKA_DEFAULT_HEARTBEAT_MS)),
    }


class KafkaCoordinator:
    """A Kafka node (started by the caller) as the coordinator: the reference."""

    name = "kafka"

    def __init__(self, broker: KafkaBroker) -> None:
        self.broker = broker

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def upstream(self) -> str:
        return self.broker.bootstrap

    @property
    def restartable(self) -> bool:
        return False

    def kill_and_restart(self) -> None:
        raise NotImplementedError("a single Kafka node cannot be restarted with its log here")

    def stop(self) -> None:
        """The broker belongs to whoever started it."""


class KcoordCoordinator:
    """``kcoord serve`` in front of ``upstream``, its groups on the cluster; ``python`` picks the build
    (another worktree's venv interpreter runs that tree)."""

    name = "kcoord"

    def __init__(self, upstream: str, heartbeat_ms: int, python: str = sys.executable) -> None:
        self._upstream = upstream
        self.args = ("--shards", "4", "--storage", "kafka", "--internal-topic", unique("__kcoord_roll"),
                     "--group-initial-rebalance-delay-ms", "0",
                     "--group-consumer-heartbeat-interval-ms", str(heartbeat_ms))  # fmt: skip
        self.python = python
        self.process = KcoordProcess(*self.args, bootstrap=upstream, python=python).start()
        self.restarts = 0

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap

    @property
    def upstream(self) -> str:
        return self._upstream

    @property
    def restartable(self) -> bool:
        return True

    def kill_and_restart(self) -> None:
        """SIGKILL (nothing flushed), then the same command on the same port: clients reconnect."""
        self.process.kill()
        port = self.process.port
        self.process = KcoordProcess(
            *self.args, bootstrap=self._upstream, port=port, python=self.python
        ).start()
        self.restarts += 1

    def stop(self) -> None:
        try:
            self.process.stop()
        finally:
            self.process.kill()
