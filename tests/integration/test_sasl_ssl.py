"""SASL_SSL end to end through kcoord, every stock client, and a storm of failed logins.

One Apache Kafka 4.0 for the module with SASL_PLAINTEXT and SASL_SSL listeners (PLAIN and SCRAM
users, certificates from a CA made here with openssl). kcoord listens on SASL_SSL in front of
Kafka's SASL_SSL listener and logs in to Kafka as its own user (SCRAM-SHA-512) over TLS: its relay,
its storage and its metadata all speak TLS + SASL upstream.

- Every stock client consumes in a classic static group (``group.instance.id``) through kcoord
  over SASL_SSL: the Java consumer (kafka-clients 4.3, PLAIN), confluent-kafka (SCRAM-SHA-512),
  kafka-python (SCRAM-SHA-512) and aiokafka (PLAIN); Java and confluent-kafka also in a KIP-848
  group (``group.protocol=consumer``); and a transactional consume-transform-produce loop runs with
  the Java client (KIP-848 group, SCRAM-SHA-512) and confluent-kafka (classic group), each output
  record read back exactly once with ``read_committed``. This is also the Java client over TLS.
- Failed logins: 200 wrong passwords in ~15 s, half on the SASL_SSL kcoord, half on a
  SASL_PLAINTEXT one (a new connection each), while a logged-in probe commits and fetches offsets:
  every attempt answered SASL_AUTHENTICATION_FAILED and closed, kcoord alive, its RSS bounded, the
  probe served throughout, the failures counted by mechanism and logged once per peer host.
  ``KCOORD_AUTH_STORM_LOGINS`` raises the count (the figures: ``bench/auth_storm.py``).

Kafka-only: tansu has no SASL users to check credentials against.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.auth_storm import (
    CommitProbe,
    Endpoint,
    LoginStorm,
    kcoord_counter,
    metrics_text,
    rss_sampler,
    sasl_kcoord,
)
from support.certs import OpensslUnavailable, Pki, make_pki
from support.kafka_broker import KafkaBroker, SaslUsers
from support.kcoord_process import KcoordProcess
from support.workload import unique
from tests.support.fixtures import UPSTREAMS, running_kafka

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        "kafka" not in UPSTREAMS, reason="SASL is checked by Apache Kafka (tansu has no users)"
    ),
]

USERS = {"alice": "alice-secret", "bob": "bob-secret", "kcoord": "kcoord-secret"}
RECORDS = 12
PARTITIONS = 2
STORM_LOGINS = int(os.environ.get("KCOORD_AUTH_STORM_LOGINS", "200"))
STORM_SECONDS = 15.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    try:
        return make_pki(tmp_path_factory.mktemp("sasl-ssl-pki"))
    except OpensslUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def kafka_sasl_ssl(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    with running_kafka(
        KafkaBroker(log_dir=tmp_path_factory.mktemp("kafka-sasl-ssl"), tls=pki, sasl=SaslUsers(USERS))
    ) as broker:
        yield broker


@pytest.fixture(scope="module")
def kcoord_sasl_ssl(kafka_sasl_ssl: KafkaBroker, pki: Pki) -> Iterator[KcoordProcess]:
    proc = sasl_kcoord(kafka_sasl_ssl, pki, "SASL_SSL", USERS["kcoord"])
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def kcoord_sasl_plaintext(kafka_sasl_ssl: KafkaBroker, pki: Pki) -> Iterator[KcoordProcess]:
    proc = sasl_kcoord(kafka_sasl_ssl, pki, "SASL_PLAINTEXT", USERS["kcoord"])
    try:
        yield proc
    finally:
        proc.stop()


def librdkafka(
    proc: KcoordProcess, pki: Pki, mechanism: str = "SCRAM-SHA-512", user: str = "alice"
) -> dict[str, str]:
    return {
        "bootstrap.servers": proc.bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki.ca),
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def java_config(folder: Path, pki: Pki, mechanism: str, user: str) -> Path:
    """The Java clients' settings for kcoord's SASL_SSL listener (--command-config of the peers)."""
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    path = folder / f"java-{mechanism}-{user}.properties"
    path.write_text(
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={mechanism}\n"
        f"sasl.jaas.config=org.apache.kafka.common.security.{module} required "
        f'username="{user}" password="{USERS[user]}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pki.ca}\n"
    )
    return path


def committed_total(proc: KcoordProcess, pki: Pki, group: str, topic: str) -> int:
    """The group's committed offsets summed over the topic's partitions (OffsetFetch through kcoord)."""
    reader = Consumer({**librdkafka(proc, pki), "group.id": group})
    try:
        committed = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=15)
    finally:
        reader.close()
    return sum(max(tp.offset, 0) for tp in committed)


def produce(proc: KcoordProcess, pki: Pki, topic: str, count: int) -> None:
    producer = Producer(librdkafka(proc, pki))
    for i in range(count):
        producer.produce(topic, key=str(i), value=f"record {i}")
    assert producer.flush(30) == 0


def confluent_consume(proc: KcoordProcess, pki: Pki, topic: str, group: str, **extra: str) -> int:
    consumer = Consumer({**librdkafka(proc, pki), "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, **extra})  # fmt: skip
    consumer.subscribe([topic])
    seen, deadline = 0, time.monotonic() + 30
    while seen < RECORDS and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            seen += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    return seen


def kafka_python_consume(proc: KcoordProcess, pki: Pki, topic: str, group: str) -> int:
    from kafka import KafkaConsumer

    reader = KafkaConsumer(topic, bootstrap_servers=proc.bootstrap, security_protocol="SASL_SSL",
                           ssl_cafile=str(pki.ca), sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob",
                           sasl_plain_password=USERS["bob"], group_id=group, group_instance_id="kafka-python-1",
                           auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
    try:
        # The topic's metadata before the first poll joins: kafka-python waits for it only for a
        # pattern subscription. In one CI run (s46) this consumer, the group's leader, logged "No
        # partition metadata for topic", assigned itself nothing and read 0 of 12 records in 30 s.
        # Why it did not rejoin once the metadata came (kafka-python compares the metadata it
        # assigned with against each update) was not established; with the metadata fetched
        # first the assignor never meets the topic without it.
        reader.partitions_for_topic(topic)
        got, deadline = 0, time.monotonic() + 30
        while got < RECORDS and time.monotonic() < deadline:
            got += sum(len(batch) for batch in reader.poll(timeout_ms=500).values())
        reader.commit()
    finally:
        reader.close()
    return got


def aiokafka_consume(proc: KcoordProcess, pki: Pki, topic: str, group: str) -> int:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.helpers import create_ssl_context

    async def consume() -> int:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=proc.bootstrap, security_protocol="SASL_SSL",
                                    ssl_context=create_ssl_context(cafile=str(pki.ca)), sasl_mechanism="PLAIN",
                                    sasl_plain_username="alice", sasl_plain_password=USERS["alice"],
                                    group_id=group, group_instance_id="aiokafka-1", auto_offset_reset="earliest",
                                    enable_auto_commit=False)  # fmt: skip
        await consumer.start()
        try:
            got, deadline = 0, time.monotonic() + 30
            while got < RECORDS and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                got += sum(len(batch) for batch in batches.values())
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    return asyncio.run(consume())


def confluent_transform(proc: KcoordProcess, pki: Pki, source: str, output: str, group: str) -> None:
    """Consume-transform-produce in transactions: each input record once into ``output``, the
    input offsets committed with the transaction (classic static group)."""
    client = librdkafka(proc, pki)
    consumer = Consumer({**client, "group.id": group, "group.instance.id": "ctp-1", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})  # fmt: skip
    producer = Producer({**client, "transactional.id": unique("sasl-ssl-txn")})
    producer.init_transactions(30)
    consumer.subscribe([source])
    done, deadline = 0, time.monotonic() + 40
    try:
        while done < RECORDS and time.monotonic() < deadline:
            messages = [msg for msg in consumer.consume(RECORDS, 1.0) if not msg.error()]
            if not messages:
                continue
            producer.begin_transaction()
            for message in messages:
                producer.produce(output, key=message.key(), value=b"confluent|" + (message.value() or b""))
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
            )
            producer.commit_transaction(30)
            done += len(messages)
    finally:
        consumer.close()
    assert done == RECORDS


def read_committed(proc: KcoordProcess, pki: Pki, topic: str, expected: int) -> list[bytes]:
    reader = Consumer({**librdkafka(proc, pki), "group.id": unique("sasl-ssl-verify"), "auto.offset.reset": "earliest",
                       "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
    reader.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < expected and time.monotonic() < deadline:
        message = reader.poll(0.5)
        if message is not None and not message.error():
            values.append(message.value() or b"")
    time.sleep(0.5)  # nothing more (a duplicate) within half a second
    while (message := reader.poll(0.2)) is not None:
        if not message.error():
            values.append(message.value() or b"")
    reader.close()
    return values


# -- every stock client over SASL_SSL ----------------------------------------------------------------------
def test_every_stock_client_consumes_and_transforms_over_sasl_ssl(
    kcoord_sasl_ssl: KcoordProcess, pki: Pki, java_peer, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    proc = kcoord_sasl_ssl
    failures_before = kcoord_counter(metrics_text(proc), "kcoord_sasl_authentication_failures_total")
    topic, java_output, confluent_output = (
        unique("sasl-ssl"),
        unique("sasl-ssl-java-out"),
        unique("sasl-ssl-cf-out"),
    )
    admin = AdminClient(librdkafka(proc, pki))  # kept: the futures fail once the client is collected
    for name in (topic, java_output, confluent_output):
        admin.create_topics([NewTopic(name, num_partitions=PARTITIONS)])[name].result(30)
    produce(proc, pki, topic, RECORDS)

    # The JVMs start first and take a few seconds: the Python clients run meanwhile.
    groups = {name: unique(f"sasl-ssl-{name}") for name in
              ("java-static", "java-ctp", "confluent-static", "confluent-848", "kafka-python", "aiokafka", "confluent-ctp")}  # fmt: skip
    java_plain = java_config(tmp_path, pki, "PLAIN", "alice")
    java_scram = java_config(tmp_path, pki, "SCRAM-SHA-512", "bob")
    static = java_peer("ConsumerPeer", ["--bootstrap", proc.bootstrap, "--group", groups["java-static"], "--topic", topic,
                                        "--instance-id", "java-1", "--commit", "--max-seconds", "60",
                                        "--command-config", str(java_plain)], name="sasl-ssl-java-static")  # fmt: skip
    java_peer("CtpPeer", ["--bootstrap", proc.bootstrap, "--group", groups["java-ctp"], "--input", topic,
                                "--output", java_output, "--group-protocol", "consumer", "--max-seconds", "60",
                                "--command-config", str(java_scram)], name="sasl-ssl-java-ctp")  # fmt: skip

    assert (
        confluent_consume(
            proc, pki, topic, groups["confluent-static"], **{"group.instance.id": "confluent-1"}
        )
        == RECORDS
    )
    assert (
        confluent_consume(proc, pki, topic, groups["confluent-848"], **{"group.protocol": "consumer"})
        == RECORDS
    )
    assert kafka_python_consume(proc, pki, topic, groups["kafka-python"]) == RECORDS
    assert aiokafka_consume(proc, pki, topic, groups["aiokafka"]) == RECORDS
    confluent_transform(proc, pki, topic, confluent_output, groups["confluent-ctp"])

    static.wait_for("records", lambda e: e["total"] >= RECORDS, timeout=60)
    static.wait_for("committed", timeout=30)
    deadline = time.monotonic() + 60
    while committed_total(proc, pki, groups["java-ctp"], topic) < RECORDS and time.monotonic() < deadline:
        time.sleep(0.5)

    for name, group in groups.items():
        assert committed_total(proc, pki, group, topic) == RECORDS, name
    for output, prefix in ((java_output, b""), (confluent_output, b"confluent|")):
        values = read_committed(proc, pki, output, RECORDS)
        assert len(values) == RECORDS and len(set(values)) == RECORDS, (output, values)
        assert all(v.startswith(prefix) for v in values)

    text = metrics_text(proc)
    for mechanism in ("PLAIN", "SCRAM-SHA-512"):
        assert kcoord_counter(text, "kcoord_sasl_authentications_total", mechanism=mechanism) > 0, mechanism
    assert kcoord_counter(text, "kcoord_sasl_authentication_failures_total") == failures_before
    # No handshake refused by TLS (a librdkafka client closing mid-handshake counts as "aborted").
    assert kcoord_counter(text, "kcoord_tls_handshake_failures_total", reason="handshake") == 0
    assert proc.log_lines("Traceback") == []


# -- a storm of failed logins --------------------------------------------------------------------------------
def test_a_storm_of_failed_logins_is_refused_counted_and_logged_once_per_host(
    kcoord_sasl_ssl: KcoordProcess, kcoord_sasl_plaintext: KcoordProcess, pki: Pki
) -> None:
    """Wrong passwords at ~800 a minute, half on each listener, a new connection each, from a
    loopback address of their own per listener (one peer host each), while a logged-in probe on
    each kcoord commits and fetches an offset every 20 ms."""
    topic = unique("auth-storm")
    admin = AdminClient(librdkafka(kcoord_sasl_ssl, pki))
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(30)
    # (kcoord, its endpoint for the honest probe, the attackers' endpoint, mechanism, user)
    sides = [
        (kcoord_sasl_ssl, "SCRAM-SHA-512", "alice", "127.0.0.2", str(pki.ca)),
        (kcoord_sasl_plaintext, "PLAIN", "bob", "127.0.0.3", None),
    ]
    per_side = STORM_LOGINS // 2
    probes, storms, samplers, before = [], [], [], []
    for proc, mechanism, user, _attacker_host, ca in sides:
        assert proc.process is not None
        probe = CommitProbe(
            Endpoint(proc.bootstrap, ca), mechanism, user, USERS[user], unique("probe"), topic
        )
        probes.append(probe.start())
        samplers.append(rss_sampler(proc.process.pid))
        before.append(kcoord_counter(metrics_text(proc), "kcoord_sasl_authentication_failures_total",
                                     mechanism=mechanism))  # fmt: skip
    time.sleep(2)
    idle = [probe.window() for probe in probes]
    for proc, mechanism, user, attacker_host, ca in sides:
        storm = LoginStorm(Endpoint(proc.bootstrap, ca, attacker_host), mechanism, user, "not-" + USERS[user],
                           rate=per_side / STORM_SECONDS, count=per_side)  # fmt: skip
        storms.append(storm.start())
    try:
        finished = [storm.wait(STORM_SECONDS + 60) for storm in storms]
    finally:
        for storm in storms:
            storm.stop()
    during = [probe.window() for probe in probes]
    time.sleep(1)
    for probe in probes:
        probe.close()
    after = [probe.window() for probe in probes]
    for _, stop in samplers:
        stop.set()

    for (proc, mechanism, user, attacker_host, _), storm, done, idle_w, storm_w, after_w, (
        rss,
        _,
    ), was in zip(sides, storms, finished, idle, during, after, samplers, before, strict=True):
        side = proc.extra_args[1]
        print(f"{side}: {storm.totals()} in {storm.seconds:.1f} s; RSS {rss[0]:.0f} -> max {max(rss):.0f} -> "
              f"{rss[-1]:.0f} MiB; probe commit p50/p99 idle {idle_w.commit.summary()}, storm {storm_w.commit.summary()}; "
              f"fetch idle {idle_w.fetch.summary()}, storm {storm_w.fetch.summary()}")  # fmt: skip
        assert done, f"{side}: the failed logins did not finish: {storm.totals()}"
        # every failed login was answered SASL_AUTHENTICATION_FAILED, then closed by kcoord
        assert storm.totals() == {
            "attempts": per_side,
            "refused": per_side,
            "closed": per_side,
            "other": 0,
        }, side
        assert proc.alive and proc.log_lines("Traceback") == []
        text = metrics_text(proc)
        failures = kcoord_counter(text, "kcoord_sasl_authentication_failures_total", mechanism=mechanism)
        assert failures - was == per_side, side
        # one line for the attackers' host in this minute, naming the peer, mechanism and principal tried
        [line] = proc.log_lines(f"failed SASL login from {attacker_host}:")
        assert f"({mechanism} as User:{user})" in line and USERS[user] not in line
        assert proc.log_lines(f"closing connection from {attacker_host}:") == []  # not one line per attempt
        # the probe was served throughout: every commit read back, latency within reason
        for window in (idle_w, storm_w, after_w):
            assert window.errors == [] and window.commit.failures == 0, (side, window.errors)
        assert len(storm_w.commit.seconds) >= STORM_SECONDS * 10, side  # at least every 100 ms
        assert storm_w.commit.quantile(0.99) < 1.0 and storm_w.fetch.quantile(0.99) < 1.0, side
        # memory: the refused connections leave nothing behind
        assert max(rss) - rss[0] < 20, f"{side}: RSS {rss[0]:.0f} -> {max(rss):.0f} MiB"
