"""Start and stop Apache Kafka 4.0 as a process: the reference upstream behind kcoord in tests.

Kafka is the truth where tansu differs (docs/tansu.md), so the suites that define kcoord run
against both. One KRaft node (broker and controller in one JVM) per test session, on free loopback
ports, with its data in a temporary folder.

Where the distribution comes from, in this order (never silently tansu instead):
1. ``$KAFKA_HOME``;
2. ``../shared/kafka`` beside the repository (these machines carry a runnable 4.0.0 there);
3. the official release ``kafka_2.13-4.0.0.tgz`` from Apache's archive, checked against the SHA-512
   Apache publishes beside it, unpacked once into ``~/.cache/kcoord/``.

The broker is "up" after the log says ``Kafka Server started`` and a Metadata round trip
advertises our own address, the same readiness rule as support.broker.TansuBroker.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from support import REPO
from support.broker import BrokerProcess, BrokerStartError
from support.certs import Pki
from support.ports import free_port_block

KAFKA_VERSION = "4.0.0"
SCALA_VERSION = "2.13"
RELEASE = f"kafka_{SCALA_VERSION}-{KAFKA_VERSION}"
RELEASE_URL = f"https://archive.apache.org/dist/kafka/{KAFKA_VERSION}/{RELEASE}.tgz"
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kcoord"
# Start-up takes ~10 s on a quiet machine and 25 s or more under load (../shared/kafka/README.md).
START_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class SaslUsers:
    """An extra ``SASL_PLAINTEXT`` listener (and ``SASL_SSL`` when the broker has ``tls``) and who
    may log in on them: ``users`` (name -> password) for PLAIN (the listeners' JAAS config) and
    SCRAM-SHA-256/512 (added at format time),
    OAUTHBEARER with Kafka's unsecured JWT validator (tests only), and with ``authorizer`` Kafka's
    StandardAuthorizer (resources with no ACL stay open to everyone, so one ACL on a topic limits
    only that topic; the PLAINTEXT and controller listeners' ANONYMOUS is a super user)."""

    users: dict[str, str] = field(default_factory=dict)
    authorizer: bool = False
    mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
    reauth_ms: int = 0  # the listener's connections.max.reauth.ms (KIP-368; 0: off)


_SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


class KafkaUnavailable(RuntimeError):
    """No Kafka distribution or no Java: the message says which, and a test skips with it."""


def _is_distribution(path: Path) -> bool:
    return (path / "bin" / "kafka-server-start.sh").is_file() and (path / "libs").is_dir()


def _sha512_of(path: Path) -> str:
    digest = hashlib.sha512()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _published_sha512(url: str) -> str:
    """Apache's ``.sha512`` file: ``NAME: HEX HEX ...`` (gpg --print-md layout) or ``HEX  NAME``."""
    with urllib.request.urlopen(url + ".sha512", timeout=60) as answer:
        text = answer.read().decode()
    text = text.split(":", 1)[1] if ":" in text else text.split()[0]
    return "".join(text.split()).lower()


def _download_release() -> Path:
    """The official release, unpacked under CACHE_DIR after its SHA-512 matched Apache's."""
    home = CACHE_DIR / RELEASE
    if _is_distribution(home):
        return home
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    tgz = CACHE_DIR / f"{RELEASE}.tgz"
    try:
        expected = _published_sha512(RELEASE_URL)
        if not tgz.exists() or _sha512_of(tgz) != expected:
            with urllib.request.urlopen(RELEASE_URL, timeout=600) as answer, open(tgz, "wb") as out:
                shutil.copyfileobj(answer, out)
    except OSError as exc:
        raise KafkaUnavailable(f"no Kafka distribution: $KAFKA_HOME unset, none beside the repository, "
                               f"and {RELEASE_URL} could not be fetched ({exc})") from exc  # fmt: skip
    actual = _sha512_of(tgz)
    if actual != expected:
        tgz.unlink()
        raise KafkaUnavailable(
            f"{tgz.name}: SHA-512 {actual[:16]}... is not the published {expected[:16]}..."
        )
    with tempfile.TemporaryDirectory(dir=CACHE_DIR) as scratch, tarfile.open(tgz) as archive:
        archive.extractall(scratch, filter="data")
        shutil.move(str(Path(scratch) / RELEASE), home)
    return home


def kafka_home() -> Path:
    """The Kafka distribution to run (see the module docstring for the order)."""
    configured = os.environ.get("KAFKA_HOME")
    if configured:
        if not _is_distribution(Path(configured)):
            raise KafkaUnavailable(
                f"KAFKA_HOME={configured} is not a Kafka distribution (no bin/kafka-server-start.sh)"
            )
        return Path(configured)
    beside = REPO.parent / "shared" / "kafka"
    if _is_distribution(beside):
        return beside
    return _download_release()


def require_java() -> None:
    if shutil.which("java") is None:
        raise KafkaUnavailable("Apache Kafka needs Java (java not on PATH)")


class KafkaBroker(BrokerProcess):
    """One Apache Kafka KRaft node on loopback (the life cycle is BrokerProcess's).

    ``bootstrap`` is "127.0.0.1:PORT"; ``log_path`` holds the server's stdout+stderr and is kept after
    stop(). ``tool(name, *args)`` runs one of Kafka's own command-line tools against this broker.
    ``overrides`` are extra server.properties settings (e.g. for SASL or ACL tests).
    ``tls``: certificates for an extra ``SSL`` listener (PEM keystore and truststore, client
    certificates requested), on ``ssl_bootstrap``; the PLAINTEXT listener stays as it is.
    """

    kind = "kafka"
    stop_timeout_s = 20.0  # a controlled shutdown
    poll_interval_s = 0.2

    def __init__(
        self,
        log_dir: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        overrides: dict[str, str] | None = None,
        *,
        node_id: int = 1,
        cluster_id: str | None = None,
        controller: str | None = None,
        tls: Pki | None = None,
        sasl: SaslUsers | None = None,
    ) -> None:
        super().__init__(host, log_dir, "kafka.log")
        self.tls = tls
        self.ssl_port = 0
        self.sasl = sasl
        self.sasl_port = 0
        self.sasl_ssl_port = 0
        self.home = kafka_home()
        self.node_id = node_id
        self.cluster_id = cluster_id or _kraft_cluster_id()
        self.controller = controller  # "host:port" of the KRaft controller: this node is a broker only
        self.controller_port = 0
        self.overrides = dict(overrides or {})
        self.data_dir = self.log_dir / "data"

    def _properties(self) -> dict[str, str]:
        listen = f"PLAINTEXT://{self.host}:{self.port}"
        controller = self.controller or f"{self.host}:{self.controller_port}"
        props = {
            "process.roles": "broker" if self.controller else "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.bootstrap.servers": controller,
            "listeners": listen
            if self.controller
            else f"{listen},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": listen,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            # Fewer internal partitions than the default 50: created on first use, each one costs
            # start-up time on a 2-core machine and nothing here needs more.
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "5",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.coordinator.rebalance.protocols": "classic,consumer",
            # Kafka's own groups (kcoord's cluster membership, Kafka-coordinated reference groups)
            # need not wait 3 s for more members in tests.
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
        }
        if self.tls is not None:
            ssl = f"SSL://{self.host}:{self.ssl_port}"
            props["listeners"] += "," + ssl
            props["advertised.listeners"] += "," + ssl
            props["listener.security.protocol.map"] += ",SSL:SSL"
            props.update({
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.tls.server),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.tls.ca),
                "ssl.client.auth": "requested",
            })  # fmt: skip
        if self.sasl is not None:
            props.update(self._sasl_properties(self.sasl))
        props.update(self.overrides)
        return props

    def _sasl_properties(self, sasl: SaslUsers) -> dict[str, str]:
        # SASL_PLAINTEXT always; SASL_SSL too when the broker has certificates (``tls``).
        sasl_listeners = {"SASL_PLAINTEXT": self.sasl_port}
        if self.tls is not None:
            sasl_listeners["SASL_SSL"] = self.sasl_ssl_port
        added = ",".join(f"{name}://{self.host}:{port}" for name, port in sasl_listeners.items())
        plain_users = " ".join(f'user_{name}="{password}"' for name, password in sasl.users.items())
        props = {
            "listeners": self._properties_base_listeners() + "," + added,
            "advertised.listeners": self._advertised_base() + "," + added,
            "listener.security.protocol.map": self._protocol_map_base()
            + "".join(f",{name}:{name}" for name in sasl_listeners),
            "sasl.enabled.mechanisms": ",".join(sasl.mechanisms),
        }
        for name in sasl_listeners:
            prefix = f"listener.name.{name.lower()}."
            props.update({
                prefix + "connections.max.reauth.ms": str(sasl.reauth_ms),
                prefix + "plain.sasl.jaas.config": (
                    f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"
                ),
                prefix + "scram-sha-256.sasl.jaas.config": _SCRAM_JAAS,
                prefix + "scram-sha-512.sasl.jaas.config": _SCRAM_JAAS,
                prefix + "oauthbearer.sasl.jaas.config": (
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
                ),
            })  # fmt: skip
        if sasl.authorizer:
            props.update({
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "allow.everyone.if.no.acl.found": "true",
                "super.users": "User:ANONYMOUS",
            })  # fmt: skip
        return props

    def _properties_base_listeners(self) -> str:
        listen = f"PLAINTEXT://{self.host}:{self.port}"
        listeners = listen if self.controller else f"{listen},CONTROLLER://{self.host}:{self.controller_port}"
        if self.tls is not None:
            listeners += f",SSL://{self.host}:{self.ssl_port}"
        return listeners

    def _advertised_base(self) -> str:
        listen = f"PLAINTEXT://{self.host}:{self.port}"
        return listen + (f",SSL://{self.host}:{self.ssl_port}" if self.tls is not None else "")

    def _protocol_map_base(self) -> str:
        return "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT" + (",SSL:SSL" if self.tls is not None else "")

    @property
    def sasl_bootstrap(self) -> str:
        """ "127.0.0.1:PORT" of the SASL_PLAINTEXT listener (``sasl`` given)."""
        assert self.sasl is not None, "this broker has no SASL listener"
        return f"{self.host}:{self.sasl_port}"

    @property
    def sasl_ssl_bootstrap(self) -> str:
        """ "127.0.0.1:PORT" of the SASL_SSL listener (``sasl`` and ``tls`` given)."""
        assert self.sasl is not None and self.tls is not None, "this broker has no SASL_SSL listener"
        return f"{self.host}:{self.sasl_ssl_port}"

    @property
    def ssl_bootstrap(self) -> str:
        """ "127.0.0.1:PORT" of the SSL listener (``tls`` given)."""
        assert self.tls is not None, "this broker has no SSL listener"
        return f"{self.host}:{self.ssl_port}"

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "KAFKA_HEAP_OPTS": "-Xmx768M -Xms256M",
            "LOG_DIR": str(self.log_dir / "logs"),
            # The stock kafka-run-class.sh would otherwise open a remote JMX port on all interfaces.
            "KAFKA_JMX_OPTS": "-Dcom.sun.management.jmxremote.local.only=true",
        }

    def start(self, timeout: float = START_TIMEOUT_S) -> Self:
        """Format a fresh log dir and start (see BrokerProcess.start)."""
        require_java()
        return super().start(timeout)

    def stop(self) -> int | None:
        """Stop (see BrokerProcess.stop), then remove the data: every start formats a fresh data dir
        (_prepare), so nothing reads it afterwards, and a relay benchmark's broker left GBs in /tmp per
        run. The log file stays."""
        code = super().stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)
        return code

    def _pick_ports(self) -> None:
        self.port = free_port_block(5, self.host)
        self.controller_port = self.port + 1
        self.ssl_port = self.port + 2
        self.sasl_port = self.port + 3
        self.sasl_ssl_port = self.port + 4

    def _prepare(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self._format()

    def _command(self) -> list[str]:
        return [str(self.home / "bin" / "kafka-server-start.sh"), str(self.log_dir / "server.properties")]

    def _log_says_started(self) -> bool:
        return "Kafka Server started" in self._log_text()

    def _write_config(self) -> Path:
        config = self.log_dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self._properties().items()))
        return config

    def _format(self) -> None:
        config = self._write_config()
        # A broker-only node joins the quorum its controller formed: no voters of its own to name.
        quorum = ["--no-initial-controllers"] if self.controller else ["--standalone"]
        # One argument with "=": a base64url id starts with "-" one time in 64, and argparse would
        # read "-t -xyz..." as a missing value followed by an unknown option.
        args = [str(self.home / "bin" / "kafka-storage.sh"), "format", *quorum, f"--cluster-id={self.cluster_id}",
                "-c", str(config), "--feature", "transaction.version=2", "--feature", "group.version=1"]  # fmt: skip
        for name, password in self.sasl.users.items() if self.sasl is not None else ():
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                args += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
        done = subprocess.run(args, env=self._env(), capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise BrokerStartError(
                f"kafka-storage.sh format failed ({done.returncode}):\n{done.stdout}{done.stderr}"
            )

    def tool(
        self, name: str, *args: str, timeout: float = 120.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run ``bin/NAME`` (e.g. ``kafka-consumer-groups.sh``) with ARGS; stdout and stderr captured."""
        env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256M", "LOG_DIR": str(self.log_dir / "logs")}
        done = subprocess.run([str(self.home / "bin" / name), *args], env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)  # fmt: skip
        if check and done.returncode != 0:
            raise AssertionError(
                f"{name} {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
            )
        return done

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"KafkaBroker(node {self.node_id}, {self.bootstrap}, {state}, home={self.home}, log={self.log_path})"


class KafkaCluster:
    """``size`` Kafka brokers of one cluster: node 1 is broker and KRaft controller, nodes 2..size
    brokers only, each on its own loopback host of ``hosts`` (so an address in a client's bytes
    says which broker it names). For the tests that need a partition's leader to move (KIP-951);
    everything else shares the single-node ``kafka`` fixture."""

    kind = "kafka"

    def __init__(self, size: int = 2, log_dir: str | os.PathLike[str] | None = None,
                 hosts: tuple[str, ...] = ("127.0.0.2", "127.0.0.3", "127.0.0.4")) -> None:  # fmt: skip
        if size > len(hosts):
            raise ValueError(f"{size} brokers need {size} hosts, got {hosts}")
        base = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="kcoord-kafka-cluster-"))
        cluster_id = _kraft_cluster_id()
        self.brokers = [KafkaBroker(base / "node-1", hosts[0], node_id=1, cluster_id=cluster_id)]
        self.brokers += [
            KafkaBroker(base / f"node-{i + 1}", hosts[i], node_id=i + 1, cluster_id=cluster_id)
            for i in range(1, size)
        ]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self) -> KafkaCluster:
        first = self.brokers[0].start()
        for broker in self.brokers[1:]:
            broker.controller = f"{first.host}:{first.controller_port}"
            broker.start()
        return self

    def tool(
        self, name: str, *args: str, timeout: float = 120.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self.brokers[0].tool(name, *args, timeout=timeout, check=check)

    def stop(self) -> None:
        for broker in reversed(self.brokers):
            broker.stop()

    def __enter__(self) -> KafkaCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _kraft_cluster_id() -> str:
    """What ``kafka-storage.sh random-uuid`` prints: a random UUID, URL-safe base64, no padding."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
