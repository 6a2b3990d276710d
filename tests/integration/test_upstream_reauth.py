"""kcoord's own upstream connections re-authenticate (KIP-368), with real processes.

Apache Kafka 4.0 with ``connections.max.reauth.ms`` on its SASL_PLAINTEXT listener closes a
connection whose session ran out at its next request other than SaslHandshake. kcoord logs in
there as ``kcoord`` (SCRAM-SHA-256) for its storage, metadata and event topic, and for the relayed
requests of clients on its plaintext listener. A client commits offsets through kcoord (each
acknowledged only once stored upstream) and asks for relayed Metadata, non-stop for several
session lifetimes: every commit is acknowledged, kcoord's log shows its connections logging in
again and none closed by the broker, and after a restart kcoord reads the last commit back.

Default: sessions of 3 s for 10 s. ``KCOORD_TEST_REAUTH_FULL=1``: 10 s sessions for 30 s, and the
figures (commit latency, re-authentication time, requests held) printed for bench/RESULTS.md;
``KCOORD_TEST_REAUTH_MS=0`` runs the same without sessions (the control for those figures).

Kafka-only: tansu has no SASL.
"""

from __future__ import annotations

import os
import re
import statistics
import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kcoord.client import BlockingConnection
from kcoord.protocol import messages as m
from support.kafka_broker import KafkaBroker, SaslUsers
from support.kcoord_process import KcoordProcess
from support.workload import unique
from tests.support.fixtures import UPSTREAMS, running_kafka

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        "kafka" not in UPSTREAMS, reason="KIP-368 sessions are Apache Kafka's (tansu has no SASL)"
    ),
]

FULL = os.environ.get("KCOORD_TEST_REAUTH_FULL") == "1"
REAUTH_MS = int(os.environ.get("KCOORD_TEST_REAUTH_MS", "10000" if FULL else "3000"))
RUN_S = 30.0 if FULL else 10.0
PASSWORD = "kcoord-secret"
_REAUTHENTICATED = re.compile(
    r"msg=\"(\S+ \(\S+\)): re-authenticated as User:kcoord in ([\d.]+) ms \((\d+) requests held"
)


@pytest.fixture(scope="module")
def kafka_sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    with running_kafka(
        KafkaBroker(
            log_dir=tmp_path_factory.mktemp("kafka-reauth"),
            sasl=SaslUsers({"kcoord": PASSWORD}, reauth_ms=REAUTH_MS),
        )
    ) as broker:
        yield broker


def kcoord(broker: KafkaBroker, topic: str, port: int | None = None) -> KcoordProcess:
    args = [
        "--upstream-security-protocol", "SASL_PLAINTEXT",
        "--upstream-sasl-mechanism", "SCRAM-SHA-256",
        "--upstream-sasl-username", "kcoord",
        # The test's client commits on a plaintext listener: its relayed Metadata runs as kcoord.
        "--listener-relay-principal", "kcoord",
        "--shards", "2",
        "--internal-topic", topic,
        "--log-level", "DEBUG",
    ]  # fmt: skip
    return KcoordProcess(*args, bootstrap=broker.sasl_bootstrap, port=port)


def commit(group: str, topic: str, offset: int) -> m.OffsetCommitRequest:
    C = m.OffsetCommitRequest
    return C(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        C.OffsetCommitRequestTopic(name=topic, partitions=[
            C.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])])  # fmt: skip


def committed(client: BlockingConnection, group: str, topic: str) -> int:
    F = m.OffsetFetchRequest
    answer = client.request(
        F(group_id=group, topics=[F.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]), 7
    )
    return int(answer.topics[0].partitions[0].committed_offset)


def test_kcoords_connections_outlive_their_sessions(kafka_sessions: KafkaBroker) -> None:
    os.environ["KCOORD_UPSTREAM_SASL_PASSWORD"] = PASSWORD
    topic, group, internal = unique("reauth"), unique("reauth-group"), unique("__kcoord_reauth")
    admin = AdminClient({"bootstrap.servers": kafka_sessions.bootstrap})  # the PLAINTEXT listener
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(30)
    proc = kcoord(kafka_sessions, internal).start()
    latencies: list[float] = []
    try:
        with BlockingConnection(("127.0.0.1", proc.port)) as client:
            offset, deadline = 0, time.monotonic() + RUN_S
            while time.monotonic() < deadline:
                offset += 1
                began = time.perf_counter()
                answer = client.request(commit(group, topic, offset), 8)
                latencies.append(time.perf_counter() - began)
                assert answer.topics[0].partitions[0].error_code == 0, (offset, answer)
                if offset % 10 == 0:  # relayed on this client's upstream connection, logged in as kcoord
                    assert client.request(m.MetadataRequest(topics=None), 9).brokers
                time.sleep(0.01)
        assert proc.stop() == 0, proc.log_tail()
        log = proc.log_path.read_text(errors="replace")
    finally:
        proc.kill()
        del os.environ["KCOORD_UPSTREAM_SASL_PASSWORD"]
    reauths = [(name, float(ms), int(held)) for name, ms, held in _REAUTHENTICATED.findall(log)]
    closed = [line for line in log.splitlines() if "closed the connection" in line]
    assert closed == [], closed[:5]  # no connection of kcoord's closed by the broker
    assert "re-authentication failed" not in log
    if REAUTH_MS:
        # The storage's connection to the broker (client id kcoord-storage) was busy throughout: it
        # logged in again at least once per session.
        per_connection: dict[str, int] = {}
        for name, _, _ in reauths:
            per_connection[name] = per_connection.get(name, 0) + 1
        storage = [n for n in per_connection if n.endswith("(kcoord-storage)")]
        assert storage and per_connection[storage[0]] >= int(RUN_S * 1000 / REAUTH_MS) - 1, per_connection
    report(offset, latencies, reauths)

    os.environ["KCOORD_UPSTREAM_SASL_PASSWORD"] = PASSWORD
    try:
        with kcoord(kafka_sessions, internal, port=proc.port) as again, BlockingConnection(("127.0.0.1", again.port)) as client:  # fmt: skip
            assert committed(client, group, topic) == offset  # the last acknowledged commit, read back
    finally:
        del os.environ["KCOORD_UPSTREAM_SASL_PASSWORD"]


def report(commits: int, latencies: list[float], reauths: list[tuple[str, float, int]]) -> None:
    """The figures for bench/RESULTS.md (printed; shown with pytest -s)."""
    ordered = sorted(latencies)
    p99 = ordered[int(len(ordered) * 0.99) - 1]
    print(
        f"\nreauth.ms={REAUTH_MS} run={RUN_S:.0f}s commits={commits} "
        f"commit ms p50={statistics.median(ordered) * 1000:.2f} p99={p99 * 1000:.2f} max={ordered[-1] * 1000:.2f}"
    )
    if reauths:
        took = sorted(ms for _, ms, _ in reauths)
        held = [h for _, _, h in reauths]
        print(
            f"re-authentications={len(reauths)} on {len({n for n, _, _ in reauths})} connections; "
            f"ms p50={statistics.median(took):.2f} max={took[-1]:.2f}; requests held max={max(held)} "
            f"total={sum(held)}"
        )
