"""kcoord against real Apache Kafka in Docker (testcontainers), and kcoord's own image.

Needs a reachable Docker engine and the images scripts/build_images.sh builds (no registry is
reachable here: apache/kafka:4.0.0 and python:3.11-slim are local stand-ins); without them every
test here skips and says which is missing. scripts/test.sh runs scripts/docker_engine.sh and
scripts/build_images.sh first. With Docker:

- ``test_consumer_group_round_trip_against_apache_kafka``: Apache Kafka (the official
  ``apache/kafka`` image, KRaft, single node) in a container, kcoord as a local process in front
  of it with durable storage on Kafka; a stock consumer group consumes and commits through kcoord,
  and a fresh consumer of the same group resumes from the committed offsets.
- ``test_kcoord_image_serves_a_group_next_to_kafka``: builds ./Dockerfile, runs it on a Docker
  network next to Kafka, and runs the same round trip through the container.
"""

from __future__ import annotations

import os
import re
import time
import urllib.request
from collections.abc import Iterator
from textwrap import dedent

import pytest

from support import REPO
from support.kcoord_process import KcoordProcess
from support.ports import free_port_block
from support.workload import create_topic, produce_numbered, unique
from tests.support.containers import require_images

pytestmark = pytest.mark.integration

# Read by testcontainers when it is imported (in the tests below). Ryuk, its reaper container, is an
# image from Docker Hub, which is not reachable here: the tests stop their containers themselves.
# docker_host: reach mapped ports through the engine's host address, not a gateway guess.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")

KAFKA_IMAGE = "apache/kafka:4.0.0"


@pytest.fixture(scope="module")
def docker_engine() -> None:
    # The image test builds ./Dockerfile, whose base is python:3.11-slim: both must be local.
    require_images(KAFKA_IMAGE, "python:3.11-slim")


def _apache_kafka_container(network: object | None = None, alias: str = "kafka") -> object:
    """testcontainers' KafkaContainer, taught the official apache/kafka image's layout.

    KafkaContainer targets Confluent's image (/etc/confluent/docker); apache/kafka boots from
    /etc/kafka/docker/run and is configured by KAFKA_* variables. The container waits for a start
    script that exports the advertised listeners once the mapped port is known, like upstream does.
    """
    from testcontainers.community.kafka import KafkaContainer

    class ApacheKafkaContainer(KafkaContainer):
        def configure(self) -> None:
            self.wait_for = re.compile(r".*Kafka Server started.*")
            self.with_env("CLUSTER_ID", self.cluster_id)
            self.with_env("KAFKA_NODE_ID", "1")
            self.with_env("KAFKA_BROKER_ID", "1")
            self.with_env("KAFKA_PROCESS_ROLES", "broker,controller")
            self.with_env("KAFKA_LISTENERS", f"{self.listeners},CONTROLLER://0.0.0.0:9094")
            self.with_env(
                "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", f"{self.security_protocol_map},CONTROLLER:PLAINTEXT"
            )
            self.with_env("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER")
            self.with_env("KAFKA_CONTROLLER_QUORUM_VOTERS", "1@localhost:9094")
            # Single node: kcoord's storage uses transactions, whose state log defaults to RF 3.
            self.with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
            self.with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
            self.with_env("KAFKA_MIN_INSYNC_REPLICAS", "1")

        def tc_start(self) -> None:
            host = self.get_container_host_ip()
            port = self.get_exposed_port(self.port)
            broker_host = alias if network is not None else "localhost"
            script = dedent(f"""
                export KAFKA_ADVERTISED_LISTENERS={self.listener_name}://{host}:{port},BROKER://{broker_host}:9092
                exec /etc/kafka/docker/run
            """).strip()
            self.create_file(script.encode(), KafkaContainer.TC_START_SCRIPT)

    container = ApacheKafkaContainer(KAFKA_IMAGE)
    if network is not None:
        container.with_network(network).with_network_aliases(alias)
    return container


@pytest.fixture(scope="module")
def kafka(docker_engine: None) -> Iterator[object]:
    container = _apache_kafka_container()
    container.start(timeout=120)
    try:
        yield container
    finally:
        container.stop()


def consume_all(bootstrap: str, topic: str, group: str, expected: int, timeout: float = 90) -> int:
    """Consume with commits until ``expected`` records arrived; returns how many did."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=10000,
        heartbeat_interval_ms=1000,
    )
    try:
        consumed = 0
        deadline = time.monotonic() + timeout
        while consumed < expected and time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=500)
            consumed += sum(len(records) for records in batch.values())
            if batch:
                consumer.commit()
        return consumed
    finally:
        consumer.close()


def round_trip(bootstrap: str) -> None:
    topic, group = unique("tc-topic"), unique("tc-group")
    create_topic(bootstrap, topic, 3)
    produce_numbered(bootstrap, topic, 300, 3)
    assert consume_all(bootstrap, topic, group, 300) == 300
    produce_numbered(bootstrap, topic, 30, 3)
    # A new member of the same group starts from the committed offsets: only the 30 new records.
    assert consume_all(bootstrap, topic, group, 30) == 30


def test_consumer_group_round_trip_against_apache_kafka(kafka: object) -> None:
    bootstrap = kafka.get_bootstrap_server()  # type: ignore[attr-defined]
    with KcoordProcess("--shards", "4", bootstrap=bootstrap, port=None) as kcoord:
        round_trip(kcoord.bootstrap)


def test_kcoord_image_serves_a_group_next_to_kafka(docker_engine: None) -> None:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.image import DockerImage
    from testcontainers.core.network import Network

    # Port per broker: clients are told kcoord's listen port, so the host port must equal it.
    # Three free ports below the ephemeral range (a port picked by binding port 0 is in that range,
    # where any outgoing connection can take it before the container publishes it).
    port = free_port_block(3)
    metrics_port = port + 2
    with Network() as network, DockerImage(path=str(REPO), tag="kcoord:test") as image:
        kafka = _apache_kafka_container(network, alias="kafka")
        kafka.start(timeout=120)  # type: ignore[attr-defined]
        kcoord = (
            DockerContainer(str(image))
            .with_network(network)
            .with_command(
                [
                    "serve",
                    "--listen",
                    f"0.0.0.0:{port}",
                    "--broker-ports",
                    str(port + 1),
                    "--bootstrap-server",
                    "kafka:9092",
                    "--advertised-host",
                    "127.0.0.1",
                    "--metrics",
                    f"0.0.0.0:{metrics_port}",
                    "--shards",
                    "4",
                ]
            )
            .with_bind_ports(port, port)
            .with_bind_ports(port + 1, port + 1)
            .with_bind_ports(metrics_port, metrics_port)
        )
        try:
            kcoord.start()
            deadline = time.monotonic() + 90
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=2) as resp:
                        if resp.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    out, err = kcoord.get_logs()
                    raise AssertionError(f"kcoord container not healthy:\n{err.decode()[-3000:]}")
                time.sleep(0.5)
            round_trip(f"127.0.0.1:{port}")
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as resp:
                assert 'kcoord_requests_total{api="join_group"' in resp.read().decode()
        finally:
            kcoord.stop()
            kafka.stop()  # type: ignore[attr-defined]
