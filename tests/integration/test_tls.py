"""TLS through kcoord, with real processes: clients on ``security.protocol=SSL``, kcoord on SSL to Kafka.

- End to end (Apache Kafka 4.0 with an SSL listener, the session's ``kafka``): confluent-kafka and
  kafka-python produce and consume in groups through kcoord's TLS listeners (mutual TLS,
  ``ssl.client.auth=required``) while kcoord's relay, storage and metadata talk TLS to Kafka's SSL
  listener, presenting a client certificate and checking Kafka's name.
- The listener on its own (embedded tansu upstream, no JVM): the principal from a client
  certificate, a client without a certificate refused, a client that does not trust kcoord's CA,
  plaintext on a TLS port, TLS on a plaintext port and half-open handshakes: each closed with one
  log line and no traceback.

Certificates are made per module with the ``openssl`` command (support/certs.py).
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from support.certs import OpensslUnavailable, Pki, make_pki
from support.kafka_broker import KafkaBroker
from support.kcoord_process import KcoordProcess
from support.ports import free_port_block
from support.workload import unique
from tests.support.group_round_trip import produce_and_consume_in_two_groups

pytestmark = pytest.mark.integration

ALICE = "/O=acme/OU=eng/CN=alice"  # openssl's order: the RFC 2253 form reads it backwards
ALICE_PRINCIPAL = "User:CN=alice,OU=eng,O=acme"
HANDSHAKE_TIMEOUT_MS = 1000


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    try:
        return make_pki(tmp_path_factory.mktemp("pki"), {"alice": ALICE})
    except OpensslUnavailable as exc:
        pytest.skip(str(exc))


def tls_listener_args(pki: Pki, client_auth: str = "required") -> list[str]:
    return [
        "--listener-security-protocol", "SSL",
        "--ssl-keystore-location", str(pki.server),
        "--ssl-truststore-location", str(pki.ca),
        "--ssl-client-auth", client_auth,
        "--ssl-handshake-timeout-ms", str(HANDSHAKE_TIMEOUT_MS),
    ]  # fmt: skip


def client_ssl(pki: Pki, with_certificate: bool = True) -> dict[str, str]:
    """librdkafka's settings for a TLS client of kcoord (alice's certificate, or none)."""
    config = {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
    if with_certificate:
        config |= {
            "ssl.certificate.location": str(pki.cert("alice")),
            "ssl.key.location": str(pki.key("alice")),
        }
    return config


def api_versions_frame() -> bytes:
    client_id = b"tls-test"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def closed_by_server(sock: socket.socket | ssl.SSLSocket, timeout: float) -> bool:
    """Whether the other side closes (or resets) the connection within ``timeout`` seconds."""
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except (ConnectionError, ssl.SSLError):
        return True
    return True


def lines_about(proc: KcoordProcess, client_port: int, timeout: float = 5.0) -> list[str]:
    """The log lines about the connection from ``client_port``, once there is one."""
    return proc.wait_for_log(f"closing connection from 127.0.0.1:{client_port}:", timeout)


# -- end to end: clients on TLS, kcoord on TLS to Kafka --------------------------------------------------
@pytest.fixture(scope="module")
def kafka_tls(kafka: KafkaBroker) -> KafkaBroker:
    if kafka.tls is None:
        pytest.skip("the session's Kafka has no SSL listener (no openssl to make its certificates)")
    return kafka


@pytest.fixture(scope="module")
def kcoord_over_tls(kafka_tls: KafkaBroker, pki: Pki) -> Iterator[KcoordProcess]:
    upstream = kafka_tls.tls
    assert upstream is not None
    args = [
        *tls_listener_args(pki),
        "--upstream-security-protocol", "SSL",
        "--upstream-ssl-truststore-location", str(upstream.ca),
        # Kafka requests a client certificate: kcoord shows one (its own server certificate's key pair).
        "--upstream-ssl-keystore-location", str(upstream.server),
        "--shards", "2",
        "--group-initial-rebalance-delay-ms", "0",
        "--internal-topic", unique("__kcoord_tls"),
    ]  # fmt: skip
    with KcoordProcess(*args, bootstrap=kafka_tls.ssl_bootstrap) as proc:
        yield proc


def test_groups_over_tls_through_kcoord_to_kafka_over_tls(
    kafka_tls: KafkaBroker, kcoord_over_tls: KcoordProcess, pki: Pki
) -> None:
    # Every broker kcoord relays to is Kafka's SSL listener (the one it bootstrapped from).
    assert kcoord_over_tls.wait_for_log(f"({kafka_tls.ssl_bootstrap}) is served on")
    kafka_python = {
        "bootstrap_servers": kcoord_over_tls.bootstrap,
        "security_protocol": "SSL",
        "ssl_cafile": str(pki.ca),
        "ssl_certfile": str(pki.cert("alice")),
        "ssl_keyfile": str(pki.key("alice")),
    }
    produce_and_consume_in_two_groups(
        {"bootstrap.servers": kcoord_over_tls.bootstrap, **client_ssl(pki)},
        kafka_python,
        name="tls",
        records=40,
        timeout=40,
    )
    assert kcoord_over_tls.log_lines("Traceback") == []


# -- the TLS listener on its own (embedded upstream) -------------------------------------------------------
@pytest.fixture(scope="module")
def mtls_kcoord(pki: Pki) -> Iterator[KcoordProcess]:
    metrics_port = free_port_block()
    args = [*tls_listener_args(pki), "--storage", "memory", "--shards", "2", "--log-level", "DEBUG",
            "--metrics", f"127.0.0.1:{metrics_port}"]  # fmt: skip
    with KcoordProcess(*args) as proc:
        proc.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"  # type: ignore[attr-defined]
        yield proc


def handshake_failures(proc: KcoordProcess, reason: str) -> float:
    """kcoord_tls_handshake_failures_total{reason} from kcoord's /metrics."""
    with urllib.request.urlopen(proc.metrics_url, timeout=10) as answer:  # type: ignore[attr-defined]
        text = answer.read().decode()
    wanted = f'kcoord_tls_handshake_failures_total{{reason="{reason}"}} '
    return next(float(line[len(wanted) :]) for line in text.splitlines() if line.startswith(wanted))


def counted(proc: KcoordProcess, reason: str, expected: float, timeout: float = 5.0) -> float:
    """The failures of ``reason`` once they reach ``expected`` (or what they are at the ``timeout``)."""
    deadline = time.monotonic() + timeout
    while (now := handshake_failures(proc, reason)) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return now


def test_client_certificate_subject_is_the_principal(mtls_kcoord: KcoordProcess, pki: Pki) -> None:
    admin = AdminClient({"bootstrap.servers": mtls_kcoord.bootstrap, **client_ssl(pki)})
    assert admin.list_topics(timeout=10).brokers  # served over TLS
    assert mtls_kcoord.wait_for_log(f"principal {ALICE_PRINCIPAL}")


def test_client_without_certificate_is_refused_when_required(mtls_kcoord: KcoordProcess, pki: Pki) -> None:
    context = ssl.create_default_context(cafile=str(pki.ca))
    with socket.create_connection(("127.0.0.1", mtls_kcoord.port), 5) as raw:
        client_port = raw.getsockname()[1]  # wrap_socket takes the socket over
        try:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                # TLS 1.3: the client finishes its side first and learns of the refusal on reading.
                tls.sendall(api_versions_frame())
                assert closed_by_server(tls, 5)
        except (ssl.SSLError, ConnectionError):
            pass  # refused during the handshake itself (TLS 1.2)
        lines = lines_about(mtls_kcoord, client_port)
    assert len(lines) == 1 and "TLS handshake failed" in lines[0]
    # librdkafka without a certificate cannot get Metadata either.
    admin = AdminClient(
        {"bootstrap.servers": mtls_kcoord.bootstrap, **client_ssl(pki, with_certificate=False)}
    )
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    assert mtls_kcoord.log_lines("Traceback") == []


def test_client_not_trusting_kcoord_is_closed_with_one_line(
    mtls_kcoord: KcoordProcess, pki: Pki, tmp_path: Path
) -> None:
    refused_before = handshake_failures(mtls_kcoord, "handshake")
    stranger = make_pki(tmp_path / "other", ca_name="another CA")
    context = ssl.create_default_context(cafile=str(stranger.ca))
    context.load_cert_chain(str(pki.clients["alice"]))
    with socket.create_connection(("127.0.0.1", mtls_kcoord.port), 5) as raw:
        client_port = raw.getsockname()[1]  # wrap_socket takes the socket over
        with pytest.raises(ssl.SSLCertVerificationError):
            context.wrap_socket(raw, server_hostname="127.0.0.1")
        lines = lines_about(mtls_kcoord, client_port)
    assert len(lines) == 1 and "TLS handshake failed" in lines[0]
    assert counted(mtls_kcoord, "handshake", refused_before + 1) == refused_before + 1
    assert mtls_kcoord.log_lines("Traceback") == []


def test_plaintext_on_a_tls_listener_is_closed_with_one_line(mtls_kcoord: KcoordProcess) -> None:
    before = handshake_failures(mtls_kcoord, "plaintext")
    with socket.create_connection(("127.0.0.1", mtls_kcoord.port), 5) as raw:
        client_port = raw.getsockname()[1]  # wrap_socket takes the socket over
        raw.sendall(api_versions_frame())
        assert closed_by_server(raw, 5)
        lines = lines_about(mtls_kcoord, client_port)
    assert len(lines) == 1 and "plaintext on a TLS listener" in lines[0]
    assert counted(mtls_kcoord, "plaintext", before + 1) == before + 1


def test_half_open_handshakes_are_closed_after_the_timeout(mtls_kcoord: KcoordProcess) -> None:
    before = handshake_failures(mtls_kcoord, "timeout")
    silent = socket.create_connection(("127.0.0.1", mtls_kcoord.port), 5)  # says nothing at all
    started = socket.create_connection(("127.0.0.1", mtls_kcoord.port), 5)  # begins a record, stops
    started.sendall(b"\x16\x03\x01")
    began = time.monotonic()
    with silent, started:
        assert closed_by_server(silent, 5)
        assert closed_by_server(started, 5)
    assert time.monotonic() - began < 4 * HANDSHAKE_TIMEOUT_MS / 1000
    assert mtls_kcoord.wait_for_log("no TLS handshake within")
    assert counted(mtls_kcoord, "timeout", before + 2) == before + 2
    assert mtls_kcoord.log_lines("Traceback") == []


def test_tls_on_a_plaintext_listener_is_named(pki: Pki) -> None:
    with KcoordProcess("--storage", "memory", "--shards", "1") as proc:
        context = ssl.create_default_context(cafile=str(pki.ca))
        with (
            socket.create_connection(("127.0.0.1", proc.port), 5) as raw,
            pytest.raises((ssl.SSLError, ConnectionError)),
        ):
            context.wrap_socket(raw, server_hostname="127.0.0.1")
        lines = proc.wait_for_log("TLS handshake on a plaintext listener")
        assert len(lines) == 1 and "oversized frame" not in lines[0]
