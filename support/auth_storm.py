"""Failed SASL logins against a running kcoord, and a probe committing offsets meanwhile.

Shared by tests/integration/test_sasl_ssl.py and ``bench/auth_storm.py``:
- :class:`LoginStorm`: wrong passwords at a steady rate, a new connection each (TLS first on a
  SASL_SSL listener): SaslHandshake v1, then SaslAuthenticate with the wrong password (PLAIN: one
  token; SCRAM: the client-first message, then a client-final message with a proof from the wrong
  password). Each attempt records the final answer's error code and whether kcoord then closed the
  connection. The attempts run in a child process (a few threads, since Kafka answers a failed
  login only after ``connection.failed.authentication.delay.ms``), so the probe's timings in this
  process do not wait on their work for the GIL.
- :func:`sasl_kcoord`: kcoord on a SASL listener in front of a Kafka's SASL_SSL listener, logging in
  as its own user over TLS, with its metrics served;
- :class:`CommitProbe`: an honest client logged in on a connection of its own, committing an offset
  and fetching it back every ``interval`` seconds, each round trip timed (OffsetCommit and
  OffsetFetch: kcoord answers both itself, after the log's ack for the commit).
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field

from kcoord.client.sasl import ScramClient, plain_token
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from support.certs import Pki
from support.hostile_clients import Latencies, read_frame
from support.kafka_broker import KafkaBroker
from support.kcoord_process import KcoordProcess
from support.ports import free_port_block
from support.workload import unique

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
COMMIT_VERSION = FETCH_VERSION = 7


def sasl_kcoord(kafka: KafkaBroker, pki: Pki, listener: str, password: str, *extra: str) -> KcoordProcess:
    """kcoord on a ``listener`` (SASL_SSL or SASL_PLAINTEXT) listener in front of ``kafka``'s SASL_SSL
    one, logged in there as ``kcoord`` (SCRAM-SHA-512, ``password``); ``metrics_url`` is its /metrics."""
    metrics_port = free_port_block()
    args = [
        "--listener-security-protocol", listener,
        "--upstream-security-protocol", "SASL_SSL",
        "--upstream-ssl-truststore-location", str(pki.ca),
        "--upstream-sasl-mechanism", "SCRAM-SHA-512",
        "--upstream-sasl-username", "kcoord",
        "--shards", "2",
        "--group-initial-rebalance-delay-ms", "0",
        "--internal-topic", unique("__kcoord_sasl_ssl"),
        "--metrics", f"127.0.0.1:{metrics_port}",
        *extra,
    ]  # fmt: skip
    if listener == "SASL_SSL":
        args += ["--ssl-keystore-location", str(pki.server)]
    os.environ["KCOORD_UPSTREAM_SASL_PASSWORD"] = password  # kept out of the process list
    try:
        proc = KcoordProcess(*args, bootstrap=kafka.sasl_ssl_bootstrap).start()
    finally:
        del os.environ["KCOORD_UPSTREAM_SASL_PASSWORD"]
    proc.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"  # type: ignore[attr-defined]
    return proc


def metrics_text(proc: KcoordProcess) -> str:
    """kcoord's /metrics (a process from :func:`sasl_kcoord`)."""
    import urllib.request

    with urllib.request.urlopen(proc.metrics_url, timeout=10) as answer:  # type: ignore[attr-defined]
        return str(answer.read().decode())


@dataclass(frozen=True)
class Endpoint:
    """Where and how to reach a kcoord listener: ``ca`` (a PEM file) means TLS first (SASL_SSL);
    ``source`` is the local address to connect from (a loopback alias: one peer host of its own)."""

    address: str
    ca: str | None = None
    source: str | None = None

    def connect(self, timeout: float = 10.0) -> socket.socket:
        host, port = self.address.rsplit(":", 1)
        source = (self.source, 0) if self.source else None
        sock = socket.create_connection((host, int(port)), timeout=timeout, source_address=source)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ca is None:
            return sock
        context = ssl.create_default_context(cafile=self.ca)
        return context.wrap_socket(sock, server_hostname=host)


class SaslWire:
    """One client connection speaking the SASL requests (and any other) with Kafka's framing."""

    def __init__(self, endpoint: Endpoint, timeout: float = 10.0) -> None:
        self.sock = endpoint.connect(timeout)
        self._correlation = 0

    def request(self, api_key: int, version: int, request: m.Message) -> bytes:
        self._correlation += 1
        self.sock.sendall(frames.encode_request(api_key, version, self._correlation, "auth-storm", request))
        return read_frame(self.sock)

    def authenticate_step(self, token: bytes) -> sm.SaslAuthenticateResponse:
        raw = self.request(SASL_AUTHENTICATE, 1, sm.SaslAuthenticateRequest(auth_bytes=token))
        return sm.decode_response(sm.SaslAuthenticateResponse, 1, raw)[1]

    def login(self, mechanism: str, user: str, password: str) -> int:
        """Log in; the error code of the step that ended the exchange (NONE: logged in)."""
        raw = self.request(SASL_HANDSHAKE, 1, sm.SaslHandshakeRequest(mechanism=mechanism))
        handshake = sm.decode_response(sm.SaslHandshakeResponse, 1, raw)[1]
        if handshake.error_code != ErrorCode.NONE:
            return int(handshake.error_code)
        if mechanism == "PLAIN":
            return int(self.authenticate_step(plain_token(user, password)).error_code)
        scram = ScramClient(mechanism, user, password)
        first = self.authenticate_step(scram.client_first())
        if first.error_code != ErrorCode.NONE:
            return int(first.error_code)
        return int(self.authenticate_step(scram.client_final(bytes(first.auth_bytes or b""))).error_code)

    def closed_by_server(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            while self.sock.recv(4096):
                pass
        except TimeoutError:
            return False
        except (ConnectionError, ssl.SSLError):
            return True
        return True

    def close(self) -> None:
        self.sock.close()


class LoginStorm:
    """``rate`` failed logins a second (wrong ``password`` for ``user``) until ``count`` were tried.

    ``attempts``, ``refused`` (answered SASL_AUTHENTICATION_FAILED), ``closed`` (kcoord closed the
    connection after the answer) and ``other`` (any other outcome: another error code, no answer,
    a connection that stayed open) are counted in shared memory as the child goes.
    """

    def __init__(self, endpoint: Endpoint, mechanism: str, user: str, password: str, *, rate: float,
                 count: int, threads: int = 8) -> None:  # fmt: skip
        ctx = multiprocessing.get_context("fork")
        self.attempts = ctx.Value("i", 0)
        self.refused = ctx.Value("i", 0)
        self.closed = ctx.Value("i", 0)
        self.other = ctx.Value("i", 0)
        self._process = ctx.Process(
            target=self._run, args=(endpoint, mechanism, user, password, rate, count, threads), daemon=True
        )
        self.seconds = 0.0
        self._started = 0.0

    def start(self) -> LoginStorm:
        self._started = time.monotonic()
        self._process.start()
        return self

    def wait(self, timeout: float) -> bool:
        """Whether every attempt finished within ``timeout`` seconds."""
        self._process.join(timeout)
        self.seconds = time.monotonic() - self._started
        return not self._process.is_alive()

    def stop(self) -> None:
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)

    def _run(self, endpoint: Endpoint, mechanism: str, user: str, password: str, rate: float, count: int,
             threads: int) -> None:  # fmt: skip
        next_slot = [0]
        lock = threading.Lock()
        start = time.monotonic()

        def worker() -> None:
            while True:
                with lock:
                    slot = next_slot[0]
                    if slot >= count:
                        return
                    next_slot[0] += 1
                delay = start + slot / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                self._attempt(endpoint, mechanism, user, password)

        workers = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()

    def _attempt(self, endpoint: Endpoint, mechanism: str, user: str, password: str) -> None:
        with self.attempts.get_lock():
            self.attempts.value += 1
        try:
            wire = SaslWire(endpoint)
        except OSError:
            self._count(self.other)
            return
        try:
            code = wire.login(mechanism, user, password)
            if code == ErrorCode.SASL_AUTHENTICATION_FAILED:
                self._count(self.refused)
            else:
                self._count(self.other)
            if wire.closed_by_server():
                self._count(self.closed)
        except (OSError, ConnectionError, ValueError):
            self._count(self.other)
        finally:
            wire.close()

    @staticmethod
    def _count(value: object) -> None:
        with value.get_lock():  # type: ignore[attr-defined]
            value.value += 1  # type: ignore[attr-defined]

    def totals(self) -> dict[str, int]:
        return {
            "attempts": int(self.attempts.value),
            "refused": int(self.refused.value),
            "closed": int(self.closed.value),
            "other": int(self.other.value),
        }


@dataclass
class ProbeWindow:
    commit: Latencies = field(default_factory=Latencies)
    fetch: Latencies = field(default_factory=Latencies)
    errors: list[str] = field(
        default_factory=list
    )  # an answer that was not NONE, or the offset not read back


class CommitProbe:
    """An honest client on its own logged-in connection: OffsetCommit then OffsetFetch of one
    partition of ``topic`` in group ``group``, every ``interval`` seconds, each round trip timed.

    :meth:`window` closes the current set of timings (idle, during the storm, ...) and starts another.
    """

    def __init__(self, endpoint: Endpoint, mechanism: str, user: str, password: str, group: str, topic: str,
                 interval: float = 0.02) -> None:  # fmt: skip
        self.group, self.topic, self.interval = group, topic, interval
        self.wire = SaslWire(endpoint)
        code = self.wire.login(mechanism, user, password)
        if code != ErrorCode.NONE:
            raise AssertionError(f"the probe's login failed with error {code}")
        self.current = ProbeWindow()
        self.offset = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="commit-probe", daemon=True)

    def start(self) -> CommitProbe:
        self._thread.start()
        return self

    def window(self) -> ProbeWindow:
        done, self.current = self.current, ProbeWindow()
        return done

    def _commit(self, offset: int) -> None:
        partition = m.OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset
        )
        topic = m.OffsetCommitRequest.OffsetCommitRequestTopic(name=self.topic, partitions=[partition])
        request = m.OffsetCommitRequest(group_id=self.group, topics=[topic])
        started = time.perf_counter()
        raw = self.wire.request(ApiKey.OFFSET_COMMIT, COMMIT_VERSION, request)
        elapsed = time.perf_counter() - started
        _, answer = frames.decode_response(ApiKey.OFFSET_COMMIT, COMMIT_VERSION, raw)
        code = answer.topics[0].partitions[0].error_code  # type: ignore[attr-defined]
        if code != ErrorCode.NONE:
            self.current.errors.append(f"OffsetCommit error {code}")
        self.current.commit.seconds.append(elapsed)

    def _fetch(self, expected: int) -> None:
        topic = m.OffsetFetchRequest.OffsetFetchRequestTopic(name=self.topic, partition_indexes=[0])
        request = m.OffsetFetchRequest(group_id=self.group, topics=[topic])
        started = time.perf_counter()
        raw = self.wire.request(ApiKey.OFFSET_FETCH, FETCH_VERSION, request)
        elapsed = time.perf_counter() - started
        _, answer = frames.decode_response(ApiKey.OFFSET_FETCH, FETCH_VERSION, raw)
        partition = answer.topics[0].partitions[0]  # type: ignore[attr-defined]
        if answer.error_code or partition.error_code or partition.committed_offset != expected:  # type: ignore[attr-defined]
            self.current.errors.append(
                f"OffsetFetch error {answer.error_code}/{partition.error_code}, "  # type: ignore[attr-defined]
                f"offset {partition.committed_offset} (committed {expected})"
            )
        self.current.fetch.seconds.append(elapsed)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.offset += 1
            try:
                self._commit(self.offset)
                self._fetch(self.offset)
            except (OSError, ConnectionError) as exc:
                self.current.errors.append(f"connection lost: {exc!r}")
                self.current.commit.failures += 1
                return
            self._stop.wait(self.interval)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(15)
        self.wire.close()


def kcoord_counter(metrics_text: str, name: str, **labels: str) -> float:
    """A counter in a Prometheus exposition, summed over the samples with ``labels`` (0 if none)."""
    from prometheus_client.parser import text_string_to_metric_families

    return sum(
        float(sample.value)
        for family in text_string_to_metric_families(metrics_text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def rss_sampler(pid: int, interval: float = 0.2) -> tuple[list[float], threading.Event]:
    """Sample ``pid``'s RSS (MiB) every ``interval`` s on a thread until the returned event is set."""
    from support.hostile_clients import rss_mib

    samples: list[float] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                samples.append(rss_mib(pid))
            except (OSError, AssertionError):
                return
            stop.wait(interval)

    threading.Thread(target=run, name="rss-sampler", daemon=True).start()
    return samples, stop
