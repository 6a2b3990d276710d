"""pytest fixtures for tests with real processes; tests/conftest.py does
``from tests.support.fixtures import *``.

- ``tansu``: one TansuBroker per test session (memory storage, free loopback port).
- ``kafka``: one Apache Kafka 4.0 KRaft node per test session (support.kafka_broker); skips
  with the reason where Java or a Kafka distribution cannot be had. Kafka's defaults, except that
  a group's own KIP-848 heartbeat interval may be set as low as ``GROUP_HEARTBEAT_FLOOR_MS``. It also has an SSL listener
  (``ssl_bootstrap``, certificates of ``kafka.tls`` made with openssl) where openssl is there.
- ``upstream``: the same test once per upstream broker, ``[tansu]`` and ``[kafka]``: the suites that
  define kcoord run against both, with the same assertions. ``KCOORD_TEST_UPSTREAMS=tansu`` (or
  ``kafka``) narrows a local run to one; the default is both, and CI runs both.
  Brokers are shared by the whole session, so tests must use unique topic and group names
  (support.workload.unique).
- ``running_kafka(broker)``: a module's own Kafka (SASL, ACLs, sessions), started for a ``with`` block
  and stopped after it; the test skips with the reason where Kafka cannot run.
- ``java_peers``: the compiled peer classes directory; skips the test when java/javac are missing.
- ``java_peer``: a factory that starts a JavaPeer with its stderr under the test's tmp_path and
  stops every peer it started when the test ends, pass or fail.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from support.broker import TansuBroker
from support.certs import OpensslUnavailable, make_pki
from support.java import SKIP_REASON, JavaPeer, compile_peers, java_available
from support.kafka_broker import KafkaBroker, KafkaUnavailable

__all__ = [
    "GROUP_HEARTBEAT_FLOOR_MS",
    "java_peer",
    "java_peers",
    "kafka",
    "running_kafka",
    "tansu",
    "upstream",
    "Upstream",
]

Upstream = TansuBroker | KafkaBroker
# The session Kafka's group.consumer.min.heartbeat.interval.ms (Kafka's default is 5000).
GROUP_HEARTBEAT_FLOOR_MS = 500
UPSTREAMS = [
    u.strip() for u in os.environ.get("KCOORD_TEST_UPSTREAMS", "tansu,kafka").split(",") if u.strip()
]


@pytest.fixture(scope="session")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    broker = TansuBroker(log_dir=tmp_path_factory.mktemp("tansu"))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    try:
        tls = make_pki(tmp_path_factory.mktemp("kafka-pki"))
    except OpensslUnavailable:
        tls = None  # no SSL listener: the TLS tests skip, saying why
    try:
        # Kafka's defaults, but for the floor of a group's own KIP-848 heartbeat interval (5 s by
        # default, as is the interval itself): a test may set its Kafka-coordinated groups' interval
        # lower (consumer.heartbeat.interval.ms, a group config), e.g. test_analytics_kafka_offsets.
        broker = KafkaBroker(
            log_dir=tmp_path_factory.mktemp("kafka"),
            tls=tls,
            overrides={"group.consumer.min.heartbeat.interval.ms": str(GROUP_HEARTBEAT_FLOOR_MS)},
        )
        broker.start()
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield broker
    finally:
        broker.stop()


@contextlib.contextmanager
def running_kafka(broker: KafkaBroker) -> Iterator[KafkaBroker]:
    """``broker`` started (the test skips, saying why, where Java or Kafka cannot be had) and
    stopped when the block ends."""
    try:
        broker.start()
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session", params=UPSTREAMS)
def upstream(request: pytest.FixtureRequest) -> Upstream:
    if request.param not in ("tansu", "kafka"):
        raise ValueError(f"KCOORD_TEST_UPSTREAMS names {request.param!r}; known: tansu, kafka")
    broker: Upstream = request.getfixturevalue(request.param)
    return broker


@pytest.fixture(scope="session")
def java_peers() -> Path:
    if not java_available():
        pytest.skip(SKIP_REASON)
    return compile_peers()


PeerFactory = Callable[..., JavaPeer]


@pytest.fixture
def java_peer(java_peers: Path, tmp_path: Path) -> Iterator[PeerFactory]:
    started: list[JavaPeer] = []

    def start(
        main_class: str, args: Iterable[str] = (), *, name: str | None = None, **kwargs: object
    ) -> JavaPeer:
        peer = JavaPeer(main_class, args, log_dir=tmp_path, name=name, **kwargs)  # type: ignore[arg-type]
        started.append(peer)
        return peer

    yield start
    for peer in reversed(started):
        peer.stop()
