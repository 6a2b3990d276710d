"""SASL through kcoord, with real processes: Apache Kafka 4.0 checks every credential.

One Kafka for the module, with a SASL_PLAINTEXT listener (PLAIN users in its JAAS config, the same
users for SCRAM-SHA-256/512 added at format time) and StandardAuthorizer (a resource with no ACL
stays open, so one ACL limits one topic). kcoord fronts that listener on a SASL_PLAINTEXT listener
of its own and logs in to Kafka as ``kcoord`` (SCRAM-SHA-512, the password from the environment):

- confluent-kafka and kafka-python consume in classic groups through kcoord with PLAIN,
  SCRAM-SHA-256 and SCRAM-SHA-512;
- a relayed request runs as the client's principal: only alice may write the ACL'd topic, so her
  produce through kcoord succeeds and bob's gets TOPIC_AUTHORIZATION_FAILED;
- on the wire: a wrong password gets SASL_AUTHENTICATION_FAILED and the connection closes; a
  request before authentication, GSSAPI, garbage tokens, an oversized frame and an auth bytes
  field that lies about its length each close the connection with one log line, no traceback;
  re-authentication on the same connection works and may not change the principal.

Kafka-only: tansu has no SASL users to check credentials against.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kcoord.protocol import frames
from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode
from support.certs import OpensslUnavailable, make_pki
from support.kafka_broker import KafkaBroker, SaslUsers
from support.kcoord_process import KcoordProcess
from support.workload import unique
from tests.support.fixtures import UPSTREAMS, running_kafka
from tests.support.group_round_trip import produce_and_consume_in_two_groups

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        "kafka" not in UPSTREAMS, reason="SASL is checked by Apache Kafka (tansu has no users)"
    ),
]

USERS = {"alice": "alice-secret", "bob": "bob-secret", "kcoord": "kcoord-secret"}
ACL_TOPIC = "sasl-only-alice-writes"
# Sessions last this long (KIP-368): re-authentication is allowed only with a lifetime. kcoord's
# own connections re-authenticating is test_upstream_reauth.py's subject, with short sessions.
REAUTH_MS = 600_000


@pytest.fixture(scope="module")
def sasl_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    with running_kafka(
        KafkaBroker(
            log_dir=tmp_path_factory.mktemp("kafka-sasl"),
            sasl=SaslUsers(USERS, authorizer=True, reauth_ms=REAUTH_MS),
        )
    ) as broker:
        # As ANONYMOUS on the PLAINTEXT listener (a super user): the topic, and alice's write ACL on it.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(ACL_TOPIC, num_partitions=1)])[ACL_TOPIC].result(30)
        acl = AclBinding(ResourceType.TOPIC, ACL_TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)  # fmt: skip
        for future in admin.create_acls([acl]).values():
            future.result(30)
        yield broker


@pytest.fixture(scope="module")
def kcoord_sasl(sasl_kafka: KafkaBroker) -> Iterator[KcoordProcess]:
    args = [
        "--listener-security-protocol", "SASL_PLAINTEXT",
        "--upstream-security-protocol", "SASL_PLAINTEXT",
        "--upstream-sasl-mechanism", "SCRAM-SHA-512",
        "--upstream-sasl-username", "kcoord",
        # Kafka's DescribeConfigs hides its authorizer's settings: kcoord is told this one.
        "--allow-everyone-if-no-acl-found", "true",
        "--shards", "2",
        "--group-initial-rebalance-delay-ms", "0",
        "--internal-topic", unique("__kcoord_sasl"),
        "--log-level", "DEBUG",
    ]  # fmt: skip
    os.environ["KCOORD_UPSTREAM_SASL_PASSWORD"] = USERS["kcoord"]  # a secret from the environment
    try:
        with KcoordProcess(*args, bootstrap=sasl_kafka.sasl_bootstrap) as proc:
            yield proc
    finally:
        del os.environ["KCOORD_UPSTREAM_SASL_PASSWORD"]


def sasl_client(
    proc: KcoordProcess, mechanism: str, user: str, password: str | None = None
) -> dict[str, str]:
    return {
        "bootstrap.servers": proc.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": USERS[user] if password is None else password,
    }


# -- clients in groups ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_clients_consume_in_groups_over_sasl(kcoord_sasl: KcoordProcess, mechanism: str) -> None:
    kafka_python = {
        "bootstrap_servers": kcoord_sasl.bootstrap, "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism, "sasl_plain_username": "bob", "sasl_plain_password": USERS["bob"],
    }  # fmt: skip
    produce_and_consume_in_two_groups(
        sasl_client(kcoord_sasl, mechanism, "alice"), kafka_python, name="sasl", records=20
    )
    # kcoord named each client's principal from its own tokens, once Kafka said the login succeeded.
    assert kcoord_sasl.wait_for_log(f"authenticated as User:alice ({mechanism})")
    assert kcoord_sasl.wait_for_log(f"authenticated as User:bob ({mechanism})")
    assert kcoord_sasl.log_lines("Traceback") == []


def test_relayed_requests_run_as_the_clients_principal(kcoord_sasl: KcoordProcess) -> None:
    outcomes: dict[str, KafkaError | None] = {}
    for user in ("alice", "bob"):
        producer = Producer({**sasl_client(kcoord_sasl, "SCRAM-SHA-256", user), "message.timeout.ms": 15000})

        def delivered(err: KafkaError | None, _msg: object, user: str = user) -> None:
            outcomes[user] = err

        producer.produce(ACL_TOPIC, value=f"from {user}", on_delivery=delivered)
        producer.flush(20)
    assert outcomes["alice"] is None
    bob = outcomes["bob"]
    assert bob is not None and bob.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, bob


def test_kcoords_own_password_is_never_logged(kcoord_sasl: KcoordProcess) -> None:
    text = kcoord_sasl.log_path.read_text(errors="replace")
    assert "upstream.sasl.password=(hidden)" in text
    assert "upstream.sasl.username=kcoord" in text
    assert USERS["kcoord"] not in text


# -- on the wire -------------------------------------------------------------------------------------------
class Wire:
    """A raw client socket: frames out, frames in, and whether kcoord closed it."""

    def __init__(self, address: str, source: str | None = None) -> None:
        host, port = address.split(":")
        # ``source``: a loopback alias to connect from, a peer host of its own (kcoord logs failed
        # logins once per peer host a minute)
        self.sock = socket.create_connection(
            (host, int(port)), timeout=10, source_address=(source, 0) if source else None
        )
        self.port = self.sock.getsockname()[1]
        self.correlation_id = 0

    def send(self, api_key: int, version: int, request: object) -> bytes:
        self.correlation_id += 1
        frame = frames.encode_request(api_key, version, self.correlation_id, "sasl-test", request)  # type: ignore[arg-type]
        self.sock.sendall(frame)
        return self.receive()

    def receive(self) -> bytes:
        size = struct.unpack(">i", self._exactly(4))[0]
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by kcoord")
            data += chunk
        return data

    def handshake(self, mechanism: str, version: int = 1) -> object:
        raw = self.send(17, version, sm.SaslHandshakeRequest(mechanism=mechanism))
        return sm.decode_response(sm.SaslHandshakeResponse, version, raw)[1]

    def authenticate(self, token: bytes, version: int = 1) -> object:
        raw = self.send(36, version, sm.SaslAuthenticateRequest(auth_bytes=token))
        return sm.decode_response(sm.SaslAuthenticateResponse, version, raw)[1]

    def closed_by_server(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            while self.sock.recv(4096):
                pass
        except TimeoutError:
            return False
        except ConnectionError:
            return True
        return True

    def close(self) -> None:
        self.sock.close()


def closing_lines(proc: KcoordProcess, wire: Wire) -> list[str]:
    return proc.wait_for_log(f"closing connection from 127.0.0.1:{wire.port}:")


def test_wrong_password_gets_58_and_the_connection_closes(kcoord_sasl: KcoordProcess) -> None:
    wire = Wire(kcoord_sasl.bootstrap, source="127.0.0.4")
    handshake = wire.handshake("PLAIN")
    assert handshake.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    assert "PLAIN" in handshake.mechanisms and "SCRAM-SHA-512" in handshake.mechanisms  # type: ignore[attr-defined]
    answer = wire.authenticate(b"\0alice\0not-her-password")
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # type: ignore[attr-defined]
    assert wire.closed_by_server()
    # One WARNING naming the peer, the mechanism and the principal tried (never the password); the
    # connection's own closing line is DEBUG (this kcoord logs DEBUG).
    [failed] = kcoord_sasl.wait_for_log(f"failed SASL login from 127.0.0.4:{wire.port} (PLAIN as User:alice)")
    assert "level=WARNING" in failed and "not-her-password" not in failed
    [line] = kcoord_sasl.wait_for_log(f"closing connection from 127.0.0.4:{wire.port}:")
    assert "level=DEBUG" in line and "SASL authentication failed (PLAIN)" in line
    assert "not-her-password" not in line


def test_a_request_before_authentication_closes_the_connection(kcoord_sasl: KcoordProcess) -> None:
    from kcoord.protocol import messages as m

    wire = Wire(kcoord_sasl.bootstrap)
    versions = m.ApiVersionsResponse.decode(wire.send(18, 0, m.ApiVersionsRequest())[4:], 0)  # allowed first
    assert {17, 36} <= {a.api_key for a in versions.api_keys}
    wire.sock.sendall(frames.encode_request(3, 1, 9, "sasl-test", m.MetadataRequest(topics=[])))
    assert wire.closed_by_server()
    [line] = closing_lines(kcoord_sasl, wire)
    assert "api 3 before SASL authentication" in line


def test_gssapi_is_refused_with_the_enabled_mechanisms(kcoord_sasl: KcoordProcess) -> None:
    wire = Wire(kcoord_sasl.bootstrap)
    handshake = wire.handshake("GSSAPI")
    assert handshake.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM  # type: ignore[attr-defined]
    assert set(handshake.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}  # type: ignore[attr-defined]
    assert wire.closed_by_server()
    assert "GSSAPI" in closing_lines(kcoord_sasl, wire)[0]


@pytest.mark.parametrize(
    ("mechanism", "token"),
    [
        ("PLAIN", b"no separators at all"),
        ("SCRAM-SHA-256", b"\xff\xfe"),
        ("OAUTHBEARER", b"n,,\x01auth=Bearer x\x01\x01"),
    ],
)
def test_garbage_tokens_get_58_and_close(kcoord_sasl: KcoordProcess, mechanism: str, token: bytes) -> None:
    wire = Wire(kcoord_sasl.bootstrap)
    assert wire.handshake(mechanism).error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    assert wire.authenticate(token).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # type: ignore[attr-defined]
    assert wire.closed_by_server()
    assert len(closing_lines(kcoord_sasl, wire)) == 1


def test_oversized_and_lying_frames_close_the_connection(kcoord_sasl: KcoordProcess) -> None:
    wire = Wire(kcoord_sasl.bootstrap)
    assert wire.handshake("PLAIN").error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    wire.sock.sendall(struct.pack(">i", 600 * 1024) + b"\0" * 1024)  # above Kafka's 512 KiB before login
    assert wire.closed_by_server()
    assert "oversized frame" in closing_lines(kcoord_sasl, wire)[0]

    liar = Wire(kcoord_sasl.bootstrap)
    assert liar.handshake("PLAIN").error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    header = struct.pack(">hhih", 36, 1, 5, 4) + b"liar"
    liar.sock.sendall(frames.frame(header + struct.pack(">i", 1000) + b"\0alice\0x"))  # says 1000, has 8
    assert liar.closed_by_server()
    assert "malformed request" in closing_lines(kcoord_sasl, liar)[0]
    assert kcoord_sasl.alive and kcoord_sasl.log_lines("Traceback") == []


def test_reauthentication_keeps_the_connection_and_its_principal(kcoord_sasl: KcoordProcess) -> None:
    from kcoord.protocol import messages as m

    wire = Wire(kcoord_sasl.bootstrap)
    for attempt in range(2):  # log in, then again on the same connection (KIP-368)
        if attempt:
            time.sleep(1.1)  # Kafka refuses a re-authentication within a second of the last one
        assert wire.handshake("PLAIN").error_code == ErrorCode.NONE  # type: ignore[attr-defined]
        answer = wire.authenticate(b"\0alice\0" + USERS["alice"].encode())
        assert answer.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
        assert 0 < answer.session_lifetime_ms <= REAUTH_MS  # type: ignore[attr-defined]  # relayed as Kafka said
        raw = wire.send(3, 1, m.MetadataRequest(topics=[]))
        assert m.MetadataResponse.decode(raw[4:], 1).brokers
    # Another user on the same connection: Kafka refuses a change of principal, and so does kcoord.
    time.sleep(1.1)
    assert wire.handshake("PLAIN").error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    answer = wire.authenticate(b"\0bob\0" + USERS["bob"].encode())
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # type: ignore[attr-defined]
    assert wire.closed_by_server()


def test_sasl_ssl_listener(sasl_kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> None:
    """SASL_SSL on kcoord's listener (its TLS, then the login relayed to Kafka's SASL_PLAINTEXT)."""
    try:
        pki = make_pki(tmp_path_factory.mktemp("sasl-pki"))
    except OpensslUnavailable as exc:
        pytest.skip(str(exc))
    args = [
        "--listener-security-protocol", "SASL_SSL",
        "--ssl-keystore-location", str(pki.server),
        "--upstream-security-protocol", "SASL_PLAINTEXT",
        "--upstream-sasl-mechanism", "PLAIN",
        "--upstream-sasl-username", "kcoord",
        "--allow-everyone-if-no-acl-found", "true",  # as the module's kcoord (Kafka hides it)
        "--shards", "1",
        "--internal-topic", unique("__kcoord_sasl_ssl"),
        "--log-level", "DEBUG",
    ]  # fmt: skip
    password = tmp_path_factory.mktemp("secret") / "password"
    password.write_text(USERS["kcoord"] + "\n")
    from_environment = os.environ.pop("KCOORD_UPSTREAM_SASL_PASSWORD", None)  # the module's kcoord's
    try:
        proc = KcoordProcess(
            *args, "--upstream-sasl-password-file", str(password), bootstrap=sasl_kafka.sasl_bootstrap
        )
        proc.start()
    finally:
        if from_environment is not None:
            os.environ["KCOORD_UPSTREAM_SASL_PASSWORD"] = from_environment
    try:
        client = {**sasl_client(proc, "SCRAM-SHA-256", "alice"), "security.protocol": "SASL_SSL",
                  "ssl.ca.location": str(pki.ca)}  # fmt: skip
        topic = unique("sasl-ssl")
        producer = Producer(client)
        producer.produce(topic, value=b"over SASL_SSL")
        assert producer.flush(30) == 0
        consumer = Consumer({**client, "group.id": unique("sasl-ssl"), "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        deadline, got = time.monotonic() + 30, None
        while got is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got = message.value()
        consumer.close()
        assert got == b"over SASL_SSL"
        assert proc.wait_for_log("authenticated as User:alice (SCRAM-SHA-256)")
        assert USERS["kcoord"] not in proc.log_path.read_text()
    finally:
        proc.stop()
