"""``kcoord serve`` configuration: one table of options, three sources, one precedence rule.

Every option has one dotted *name* — Kafka's own name where Kafka has the setting
(``group.min.session.timeout.ms``), otherwise a kcoord name in the same style (``max.inflight``).
The other spellings derive from it mechanically, so nobody has to look them up:

- TOML file (``--config FILE``): the name as a key. TOML reads unquoted dotted keys as nested
  tables; they are flattened back, so ``group.max.size = 100``, ``"group.max.size" = 100`` and a
  ``[group]`` table with ``max.size = 100`` are the same setting. Unknown keys are errors.
- flag: ``--`` + the name with dots as dashes (``--group-min-session-timeout-ms 6000``).
- environment: ``KCOORD_`` + the name upper-cased with dots as underscores
  (``KCOORD_GROUP_MIN_SESSION_TIMEOUT_MS=6000``).

Precedence: flag > environment > file > default. Values are checked after merging, so a bad
value stops startup with :class:`ConfigError` naming the setting and where the value came from.
"""

from __future__ import annotations

import argparse
import difflib
import ipaddress
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from kcoord.coordinator.core.consumer.commit_fencing import OffsetCommitFencing
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.migration import MigrationPolicy

from .settings import (
    INT32_MAX,
    SASL_CLIENT_MECHANISMS,
    SASL_OWN_MECHANISMS,
    SECURITY_PROTOCOLS,
    Settings,
    parse_host_port,
    read_password_file,
)

INT64_MAX = 2**63 - 1
ENV_PREFIX = "KCOORD_"
CONFIG_ENV = "KCOORD_CONFIG"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("kv", "json")
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class ConfigError(Exception):
    """A setting kcoord cannot start with; the message names the setting and its source."""


# -- value parsers: accept a flag/env string or a TOML-native value, raise ValueError -------------------
Parser = Callable[[Any], Any]


def _integer(lo: int, hi: int = INT32_MAX) -> Parser:
    def parse(raw: Any) -> int:
        if isinstance(raw, bool):
            raise ValueError(f"expected an integer, got {raw!r}")
        if isinstance(raw, int):
            value = raw
        elif isinstance(raw, str):
            try:
                value = int(raw.strip())
            except ValueError:
                raise ValueError(f"expected an integer, got {raw!r}") from None
        else:
            raise ValueError(f"expected an integer, got {raw!r}")
        if not lo <= value <= hi:
            raise ValueError(f"{value} is out of range [{lo}, {hi}]")
        return value

    return parse


def _boolean(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false", "1", "0", "yes", "no", "on", "off"):
        return raw.strip().lower() in ("true", "1", "yes", "on")
    raise ValueError(f"expected true or false, got {raw!r}")


def _optional_integer(lo: int, hi: int = INT32_MAX) -> Parser:
    inner = _integer(lo, hi)

    def parse(raw: Any) -> int | None:
        if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "auto")):
            return None
        value: int = inner(raw)
        return value

    return parse


def _integer_or_off(lo: int, hi: int = INT32_MAX) -> Parser:
    """An integer in [lo, hi], or -1 for "no limit" (Kafka's convention)."""
    inner = _integer(-1, hi)

    def parse(raw: Any) -> int:
        value: int = inner(raw)
        if value != -1 and value < lo:
            raise ValueError(f"{value} is out of range [{lo}, {hi}] (or -1 for none)")
        return value

    return parse


def _optional_boolean(raw: Any) -> bool | None:
    """true or false, or empty / "auto" for "not set here" (then the upstream's value)."""
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "auto")):
        return None
    return _boolean(raw)


def _optional_text(raw: Any) -> str | None:
    """A string, or empty for "not set here" (then the upstream's value)."""
    value = _text(raw) if raw is not None else ""
    return value or None


def _text(raw: Any) -> str:
    if not isinstance(raw, str):
        raise ValueError(f"expected a string, got {raw!r}")
    return raw.strip()


def _nonempty_text(raw: Any) -> str:
    value = _text(raw)
    if not value:
        raise ValueError("expected a non-empty value")
    return value


def _choice(*choices: str, upper: bool = False) -> Parser:
    def parse(raw: Any) -> str:
        value = _text(raw)
        value = value.upper() if upper else value.lower()
        if value not in choices:
            raise ValueError(f"{raw!r} is not one of {', '.join(choices)}")
        return value

    return parse


def _host_port(raw: Any) -> tuple[str, int]:
    text = _text(raw)
    if not text:
        raise ValueError("expected HOST:PORT, got an empty value")
    try:
        host, port = parse_host_port(text)
    except ValueError:
        raise ValueError(f"expected HOST:PORT, got {raw!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is out of range [0, 65535]")
    return host, port


def _auto_boolean(raw: Any) -> bool | None:
    """true, false, or auto (None: kcoord decides)."""
    if isinstance(raw, str) and raw.strip().lower() == "auto":
        return None
    return _boolean(raw)


def _listen_address(raw: Any) -> tuple[str, int]:
    """A listener's HOST:PORT, the port required: ``--listen notaport`` is a mistake, not host
    "notaport" on 9092 (which failed only after the embedded broker had started, naming no setting)."""
    text = _text(raw).strip()
    if text and ":" not in (text.rpartition("]")[2] if text.startswith("[") else text):
        raise ValueError(f"expected HOST:PORT, got {raw!r} (no port)")
    return _host_port(raw)


def _optional_host_port(raw: Any) -> tuple[str, int] | None:
    return None if isinstance(raw, str) and not raw.strip() else _host_port(raw)


def _items(raw: Any) -> list[Any]:
    """A list from a comma-separated string (flag, env) or a TOML array."""
    if isinstance(raw, list):
        return raw
    return [x for x in _text(raw).split(",") if x.strip()]


def _assignor_list(raw: Any) -> list[str]:
    """``group.consumer.assignors``: server assignor names kcoord has, at least one, no repeats."""
    from kcoord.coordinator.core.consumer.assignors import SERVER_ASSIGNORS

    names = [_text(x).lower() for x in _items(raw)]
    if not names:
        raise ValueError("expected at least one assignor")
    for name in names:
        if name not in SERVER_ASSIGNORS:
            raise ValueError(f"{name!r} is not one of {', '.join(SERVER_ASSIGNORS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"{raw!r} names an assignor twice")
    return names


def _sasl_mechanism_list(raw: Any) -> list[str]:
    """``sasl.enabled.mechanisms``: mechanisms kcoord can name a client's principal for, at least one."""
    names = [_text(x).upper() for x in _items(raw)]
    if not names:
        raise ValueError("expected at least one mechanism")
    for name in names:
        if name not in SASL_CLIENT_MECHANISMS:
            raise ValueError(
                f"{name!r}: kcoord names a client's principal only for {', '.join(SASL_CLIENT_MECHANISMS)}"
            )
    return list(dict.fromkeys(names))


def _host_port_list(raw: Any) -> list[tuple[str, int]]:
    return [_host_port(x) for x in _items(raw)]


def _port_list(raw: Any) -> list[int]:
    port = _integer(0, 65535)
    return [port(x) for x in _items(raw)]


def _ip_limits(raw: Any) -> dict[str, int]:
    """Kafka's ``max.connections.per.ip.overrides``: ``ADDRESS:N,...`` (IP addresses here)."""
    count = _integer(0)
    limits: dict[str, int] = {}
    for item in _items(raw):
        text = _text(item)
        host, sep, n = text.rpartition(":")
        if not sep:
            raise ValueError(f"expected ADDRESS:N, got {item!r}")
        try:
            address = ipaddress.ip_address(host.strip("[]")).compressed
        except ValueError:
            raise ValueError(f"{host!r} is not an IP address") from None
        limits[address] = count(n)
    return limits


def _optional_host(raw: Any) -> str | None:
    return _text(raw) or None


def _topic_name(raw: Any) -> str:
    value = _text(raw)
    if not _TOPIC_NAME.match(value) or value in (".", ".."):
        raise ValueError(f"{raw!r} is not a valid Kafka topic name")
    return value


def _optional_topic_name(raw: Any) -> str:
    return "" if _text(raw) == "" else _topic_name(raw)


def _pem_file(raw: Any) -> str:
    """A PEM file kcoord can read, or empty (none)."""
    path = _text(raw)
    if path and not os.access(path, os.R_OK):
        raise ValueError(f"{path!r} is not a readable file")
    return path


def _secret(raw: Any) -> str:
    if not isinstance(raw, str):
        raise ValueError("expected a string")
    return raw


def _endpoint_identification(raw: Any) -> str:
    """Kafka's ssl.endpoint.identification.algorithm: ``https`` (check the name) or empty (do not)."""
    value = _text(raw).lower()
    if value not in ("https", ""):
        raise ValueError(f"{raw!r} is not https or empty")
    return value


# -- the option table -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Option:
    name: str  # dotted: the TOML key; the flag and the environment variable derive from it
    field: str  # "settings.<attr>" or "group.<attr>" (GroupConfig)
    parse: Parser
    help: str
    metavar: str = "VALUE"
    to_field: Callable[[Any], Any] | None = None  # unit conversion (minutes → ms)
    from_field: Callable[[Any], Any] | None = None  # the inverse, for the default shown in --help
    unset: str = "empty"  # how --help shows a default of None
    secret: bool = False  # a password: never shown in the startup log

    @property
    def flag(self) -> str:
        return "--" + self.name.replace(".", "-").replace("_", "-")

    @property
    def env(self) -> str:
        return ENV_PREFIX + re.sub(r"[.-]", "_", self.name).upper()

    @property
    def dest(self) -> str:
        return re.sub(r"[.-]", "_", self.name)

    def default(self) -> Any:
        target, attr = self.field.split(".")
        value = getattr(Settings() if target == "settings" else GroupConfig(), attr)
        return self.from_field(value) if self.from_field else value


_MS = "MS"
OPTIONS: tuple[Option, ...] = (
    # server
    Option("listen", "settings.listen", _listen_address, "bootstrap and coordinator listener", "HOST:PORT"),
    Option(
        "bootstrap.server",
        "settings.bootstrap_servers",
        _host_port_list,
        "upstream cluster; empty starts the embedded tansu broker (memory only)",
        "HOST:PORT[,...]",
    ),
    Option(
        "advertised.host",
        "settings.advertised_host",
        _optional_host,
        "host clients are told to connect to (empty: the listen host)",
        "HOST",
        unset="listen host",
    ),
    Option(
        "broker.ports",
        "settings.broker_ports",
        _port_list,
        "kcoord ports for the upstream brokers in node id order (empty: listen port + 1, + 2, ...)",
        "P1,P2,...",
    ),
    Option(
        "workers",
        "settings.workers",
        _integer(1, 1024),
        "worker processes on this host under one supervisor, each a cluster node serving a share of the "
        "shards; all accept on the listen port (SO_REUSEPORT) and on a port of their own (worker.ports)",
        "N",
    ),
    Option(
        "worker.ports",
        "settings.worker_ports",
        _port_list,
        "each worker's own coordinator port, which FindCoordinator names (empty: listen port + 100, "
        "+ 101, ...; with broker.ports.auto a taken one is replaced by a port the OS picks)",
        "P1,P2,...",
    ),
    Option(
        "upstream.latest.offset.from.fetch",
        "settings.upstream_latest_offset_from_fetch",
        _auto_boolean,
        "raise ListOffsets LATEST answers to the Fetch high watermark, for an upstream that answers "
        "LATEST short of the log end (tansu); auto: on for the embedded broker only",
        "{auto,true,false}",
        unset="auto",
    ),
    Option(
        "broker.ports.auto",
        "settings.broker_ports_auto",
        _boolean,
        "when a derived broker port (listen port + N) is taken, serve that broker on a port the OS "
        "picks instead of failing (clients behind published ports or a firewall cannot reach it)",
        "{true,false}",
    ),
    Option(
        "coordinator.node.id",
        "settings.coordinator_node_id",
        _integer(0),
        "node id kcoord's coordinator gets in Metadata; must differ from every broker's",
        "ID",
    ),
    Option(
        "shards",
        "settings.shards",
        _integer(1, 100_000),
        "coordinator shards = internal topic partitions; keep it fixed for a cluster",
        "N",
    ),
    Option(
        "storage",
        "settings.storage",
        _choice("kafka", "memory"),
        "kafka: the internal compacted topic on the upstream cluster; memory: lost on exit",
        "{kafka,memory}",
    ),
    Option(
        "internal.topic",
        "settings.internal_topic",
        _topic_name,
        "compacted topic holding group state (storage=kafka)",
        "TOPIC",
    ),
    Option(
        "replication.factor",
        "settings.replication_factor",
        _optional_integer(1, 32767),
        "replication factor when kcoord creates the internal topic (auto: min(3, brokers))",
        "N",
        unset="auto",
    ),
    Option(
        "append.max.in.flight",
        "settings.append_max_in_flight",
        _integer(1, 5),
        "appends each shard keeps in flight to its partition at once (storage=kafka), so a commit does not "
        "wait for the previous append's round trip; at most 5, as Kafka's idempotent producer",
        "N",
    ),
    Option(
        "ownership.check.interval.ms",
        "settings.ownership_check_interval_ms",
        _integer(10),
        "how often each shard checks that it still owns its partition and that the topic still holds "
        "what it loaded; a shard that lost either stops serving within about this time",
        _MS,
    ),
    Option(
        "ownership.refresh.interval.ms",
        "settings.ownership_refresh_interval_ms",
        _integer(1000),
        "how often each shard re-takes ownership of its partition (keeps its transactional id from "
        "expiring; must stay well below the cluster's transactional.id.expiration.ms)",
        _MS,
    ),
    Option(
        "cluster.enabled",
        "settings.cluster_enabled",
        _boolean,
        "run as one node of a kcoord cluster: the nodes share the shards through a group on the upstream "
        "cluster; each needs its own coordinator.node.id and advertised.host/listen port "
        "(needs storage=kafka and bootstrap.server)",
        "{true,false}",
    ),
    Option(
        "cluster.session.timeout.ms",
        "settings.cluster_session_timeout_ms",
        _integer(1000),
        "cluster mode: a node not heard of for this long loses its shards to the others",
        _MS,
    ),
    Option(
        "cluster.heartbeat.interval.ms",
        "settings.cluster_heartbeat_interval_ms",
        _integer(100),
        "cluster mode: how often a node heartbeats the cluster's group",
        _MS,
    ),
    Option(
        "cluster.static.membership",
        "settings.cluster_static_membership",
        _boolean,
        "cluster mode: join the cluster's group as a static member (group.instance.id per node id, so a "
        "node restarted within the session timeout keeps its shards); tansu 0.6 needs false",
        "{true,false}",
    ),
    Option(
        "events.topic",
        "settings.events_topic",
        _optional_topic_name,
        "time-retained topic kcoord appends its group events to, for `kcoord analytics` (empty: off)",
        "TOPIC",
    ),
    Option(
        "events.partitions",
        "settings.events_partitions",
        _integer(1, 10_000),
        "partitions of the event topic when kcoord creates it",
        "N",
    ),
    Option(
        "events.retention.ms",
        "settings.events_retention_ms",
        _integer(60_000),
        "retention.ms of the event topic when kcoord creates it",
        _MS,
    ),
    Option(
        "events.queue.max",
        "settings.events_queue_max",
        _integer(1),
        "events waiting for the event topic beyond which new ones are dropped (kcoord_events_dropped_total)",
        "N",
    ),
    Option(
        "max.frame.size",
        "settings.max_frame_size",
        _integer(1024),
        "largest request accepted, bytes; larger ones close the connection",
        "BYTES",
    ),
    Option(
        "max.inflight",
        "settings.max_inflight",
        _integer(1),
        "requests in flight per connection before reading pauses",
        "N",
    ),
    Option(
        "connections.max.idle.ms",
        "settings.connections_max_idle_ms",
        _integer_or_off(1),
        "close connections with no request or response for this long (-1: never)",
        _MS,
    ),
    Option(
        "request.receive.timeout.ms",
        "settings.request_receive_timeout_ms",
        _integer_or_off(1),
        "close a connection whose request frame has not fully arrived this long after its first byte "
        "(-1: never)",
        _MS,
    ),
    Option(
        "max.connections",
        "settings.max_connections",
        _integer(0),
        "client connections kcoord accepts in all; more are closed at once",
        "N",
    ),
    Option(
        "max.connections.per.ip",
        "settings.max_connections_per_ip",
        _integer(0),
        "client connections kcoord accepts from one IP address; more are closed at once",
        "N",
    ),
    Option(
        "max.connections.per.ip.overrides",
        "settings.max_connections_per_ip_overrides",
        _ip_limits,
        "per-address exceptions to max.connections.per.ip",
        "IP:N[,...]",
    ),
    Option(
        "queued.max.request.bytes",
        "settings.queued_max_request_bytes",
        _integer_or_off(1, INT64_MAX),
        "memory for large requests being received and requests in flight, all connections (at least "
        "max.frame.size; -1: unbounded); beyond it reading pauses",
        "BYTES",
    ),
    Option(
        "connection.inflight.max.bytes",
        "settings.connection_inflight_max_bytes",
        _integer(1, INT64_MAX),
        "estimated memory of one connection's requests in flight at which reading from it pauses",
        "BYTES",
    ),
    Option(
        "connection.output.pause.bytes",
        "settings.connection_output_pause_bytes",
        _integer(1, INT64_MAX),
        "unsent responses of one connection at which reading from it pauses until they drain",
        "BYTES",
    ),
    Option(
        "connection.output.max.bytes",
        "settings.connection_output_max_bytes",
        _integer(1, INT64_MAX),
        "unsent responses of one connection at which it is closed",
        "BYTES",
    ),
    Option(
        "queued.max.response.bytes",
        "settings.queued_max_response_bytes",
        _integer_or_off(1, INT64_MAX),
        "unsent responses of all connections at which reading pauses on the connections holding some "
        "(-1: unbounded)",
        "BYTES",
    ),
    # TLS
    Option(
        "listener.security.protocol",
        "settings.listener_security_protocol",
        _choice(*SECURITY_PROTOCOLS, upper=True),
        "security protocol of every kcoord listener (the bootstrap/coordinator port and each broker's); "
        "SASL_*: clients log in with the upstream's credentials, checked by the upstream",
        "{PLAINTEXT,SSL,SASL_PLAINTEXT,SASL_SSL}",
    ),
    Option(
        "ssl.keystore.location",
        "settings.ssl_keystore_location",
        _pem_file,
        "PEM file with the listeners' private key and certificate chain (Kafka's PEM keystore; "
        "needed with listener.security.protocol=SSL)",
        "FILE",
    ),
    Option(
        "ssl.key.password",
        "settings.ssl_key_password",
        _secret,
        "password of the listeners' private key if it is encrypted",
        "PASSWORD",
        secret=True,
    ),
    Option(
        "ssl.truststore.location",
        "settings.ssl_truststore_location",
        _pem_file,
        "PEM file with the CA certificates client certificates are checked against "
        "(needed with ssl.client.auth requested or required)",
        "FILE",
    ),
    Option(
        "ssl.client.auth",
        "settings.ssl_client_auth",
        _choice("none", "requested", "required"),
        "whether TLS clients must present a certificate (its subject becomes the connection's principal)",
        "{none,requested,required}",
    ),
    Option(
        "ssl.handshake.timeout.ms",
        "settings.ssl_handshake_timeout_ms",
        _integer(1),
        "a client's TLS handshake not done within this closes its connection (kcoord name)",
        _MS,
    ),
    Option(
        "upstream.security.protocol",
        "settings.upstream_security_protocol",
        _choice(*SECURITY_PROTOCOLS, upper=True),
        "security protocol of kcoord's connections to the upstream cluster (relay, storage, metadata, "
        "cluster membership); the bootstrap.server addresses must be the cluster's listener of that protocol",
        "{PLAINTEXT,SSL,SASL_PLAINTEXT,SASL_SSL}",
    ),
    Option(
        "upstream.ssl.truststore.location",
        "settings.upstream_ssl_truststore_location",
        _pem_file,
        "PEM file with the CA certificates the upstream brokers' certificates are checked against "
        "(empty: the system's CAs)",
        "FILE",
    ),
    Option(
        "upstream.ssl.keystore.location",
        "settings.upstream_ssl_keystore_location",
        _pem_file,
        "PEM file with the private key and certificate chain kcoord presents to the upstream "
        "(empty: none; for brokers with ssl.client.auth=required)",
        "FILE",
    ),
    Option(
        "upstream.ssl.key.password",
        "settings.upstream_ssl_key_password",
        _secret,
        "password of that private key if it is encrypted",
        "PASSWORD",
        secret=True,
    ),
    Option(
        "upstream.ssl.endpoint.identification.algorithm",
        "settings.upstream_ssl_endpoint_identification_algorithm",
        _endpoint_identification,
        "https: a broker's certificate must name the host kcoord connects to; empty: not checked",
        "{https,}",
    ),
    # SASL
    Option(
        "sasl.enabled.mechanisms",
        "settings.sasl_enabled_mechanisms",
        _sasl_mechanism_list,
        "the SASL mechanisms clients may log in with on SASL_* listeners (the upstream must offer them too)",
        "NAME[,NAME]",
        to_field=tuple,
        from_field=list,
    ),
    Option(
        "sasl.oauthbearer.sub.claim.name",
        "settings.sasl_oauthbearer_sub_claim_name",
        _nonempty_text,
        "the claim of an OAUTHBEARER client's token that names its principal (set it as the upstream does)",
        "CLAIM",
    ),
    Option(
        "upstream.sasl.mechanism",
        "settings.upstream_sasl_mechanism",
        _choice(*SASL_OWN_MECHANISMS, upper=True),
        "the mechanism kcoord logs in to a SASL_* upstream with",
        "{" + ",".join(SASL_OWN_MECHANISMS) + "}",
    ),
    Option(
        "upstream.sasl.username",
        "settings.upstream_sasl_username",
        _text,
        "kcoord's own user on a SASL_* upstream (its principal there: User:NAME)",
        "NAME",
    ),
    Option(
        "upstream.sasl.password",
        "settings.upstream_sasl_password",
        _secret,
        "that user's password (prefer the environment variable or upstream.sasl.password.file)",
        "PASSWORD",
        secret=True,
    ),
    Option(
        "upstream.sasl.password.file",
        "settings.upstream_sasl_password_file",
        _pem_file,
        "a file holding that password (one line; a trailing newline is dropped)",
        "FILE",
    ),
    Option(
        "listener.relay.principal",
        "settings.listener_relay_principal",
        _choice("client", "kcoord"),
        "on a SASL upstream behind listeners that are not SASL_*, where nobody logs in: client "
        "refuses to start (relayed requests must run as each client's principal); kcoord lets them "
        "run as kcoord's own principal",
        "{client,kcoord}",
    ),
    # authorization of kcoord's own group APIs
    Option(
        "authorizer.mode",
        "settings.authorizer_mode",
        _choice("upstream", "none"),
        "upstream: kcoord's group APIs are authorized by the upstream's ACLs, as Kafka's "
        "StandardAuthorizer would; none: everything is allowed",
        "{upstream,none}",
    ),
    Option(
        "authorizer.acl.refresh.ms",
        "settings.authorizer_acl_refresh_ms",
        _integer(100, 3_600_000),
        "how often kcoord reads the upstream's ACLs (DescribeAcls): a changed ACL applies within this",
        "MS",
    ),
    Option(
        "super.users",
        "settings.super_users",
        _optional_text,
        "Kafka's super.users (User:a;User:b) for kcoord's group APIs; empty: the upstream broker's",
        "PRINCIPALS",
        unset="the upstream's",
    ),
    Option(
        "allow.everyone.if.no.acl.found",
        "settings.allow_everyone_if_no_acl_found",
        _optional_boolean,
        "Kafka's allow.everyone.if.no.acl.found for kcoord's group APIs; empty: the upstream broker's",
        "{true,false,}",
        unset="the upstream's",
    ),
    # observability
    Option(
        "metrics",
        "settings.metrics",
        _optional_host_port,
        "serve Prometheus /metrics, /healthz (liveness) and /readyz (readiness) on HOST:PORT (empty: off)",
        "HOST:PORT",
        unset="off",
    ),
    Option(
        "readiness.upstream.timeout.ms",
        "settings.readiness_upstream_timeout_ms",
        _integer(100),
        "/readyz answers 503 when the upstream has not answered kcoord's probe for this long",
        _MS,
    ),
    Option("log.level", "settings.log_level", _choice(*LOG_LEVELS, upper=True), "log level", "LEVEL"),
    Option(
        "log.format",
        "settings.log_format",
        _choice(*LOG_FORMATS),
        "kv: one key=value line per event; json: one JSON object per line",
        "{kv,json}",
    ),
    # group coordinator, Kafka's names
    Option(
        "group.min.session.timeout.ms",
        "group.min_session_timeout_ms",
        _integer(0),
        "smallest session timeout a member may ask for",
        _MS,
    ),
    Option(
        "group.max.session.timeout.ms",
        "group.max_session_timeout_ms",
        _integer(1),
        "largest session timeout a member may ask for",
        _MS,
    ),
    Option(
        "group.initial.rebalance.delay.ms",
        "group.initial_rebalance_delay_ms",
        _integer(0),
        "how long the first rebalance of an Empty group waits for more members",
        _MS,
    ),
    Option("group.max.size", "group.max_size", _integer(1), "most members a classic group may have", "N"),
    Option(
        "group.new.member.join.timeout.ms",
        "group.new_member_join_timeout_ms",
        _integer(1),
        "how long a new member's JoinGroup may wait before it is removed (kcoord name; Kafka hard-codes 5 min)",
        _MS,
    ),
    Option(
        "offsets.retention.minutes",
        "group.offsets_retention_ms",
        _integer(1),
        "committed offsets of an Empty group expire after this",
        "MINUTES",
        to_field=lambda minutes: minutes * 60_000,
        from_field=lambda ms: ms // 60_000,
    ),
    Option(
        "offsets.retention.check.interval.ms",
        "group.offsets_retention_check_interval_ms",
        _integer(1),
        "how often expired offsets are removed",
        _MS,
    ),
    Option(
        "offset.metadata.max.bytes",
        "group.offset_metadata_max_bytes",
        _integer(0),
        "largest metadata string of a committed offset",
        "BYTES",
    ),
    Option(
        "group.consumer.offset.commit.fencing",
        "group.consumer_offset_commit_fencing",
        _choice(*(mode.value for mode in OffsetCommitFencing)),
        "which commits at an older member epoch a consumer group (KIP-848) accepts: strict (none), "
        "revocation-epoch (if the member lost no partitions since), assignment-epoch (per partition, "
        "if the member got it by then; Kafka 4.3's KIP-1251)",
        "{strict,revocation-epoch,assignment-epoch}",
    ),
    Option(
        "group.consumer.session.timeout.ms",
        "group.consumer_session_timeout_ms",
        _integer(1),
        "a consumer group (KIP-848) member is removed after this long without a heartbeat",
        _MS,
    ),
    Option(
        "group.consumer.heartbeat.interval.ms",
        "group.consumer_heartbeat_interval_ms",
        _integer(1),
        "how often a consumer group (KIP-848) member heartbeats",
        _MS,
    ),
    Option(
        "group.consumer.assignment.interval.ms",
        "group.consumer_assignment_interval_ms",
        _integer(0),
        "a consumer group's (KIP-848) target assignment is computed at most once per interval "
        "(KIP-1263; 0: on every group epoch bump)",
        _MS,
    ),
    Option(
        "group.consumer.assignment.batch.min.members",
        "group.consumer_assignment_batch_min_members",
        _integer(0),
        "a consumer group (KIP-848) with fewer members computes its target assignment on every group "
        "epoch bump, whatever group.consumer.assignment.interval.ms (0: always batch)",
        "N",
    ),
    Option(
        "group.consumer.max.size",
        "group.consumer_max_size",
        _integer(1),
        "most members a consumer group (KIP-848) may have",
        "N",
    ),
    Option(
        "group.consumer.migration.policy",
        "group.consumer_migration_policy",
        _choice(*(policy.value for policy in MigrationPolicy)),
        "online conversion of a group in use between the classic protocol and the consumer protocol "
        "(KIP-848): upgrade (a consumer-protocol member joins a classic group), downgrade (the last "
        "consumer-protocol member leaves), both (bidirectional) or neither (disabled)",
        "{bidirectional,upgrade,downgrade,disabled}",
    ),
    Option(
        "group.consumer.assignors",
        "group.consumer_assignors",
        _assignor_list,
        "the server assignors a consumer group (KIP-848) member may name; the first is the default",
        "NAME[,NAME]",
        to_field=tuple,
        from_field=list,
    ),
)
BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}


def _sections(*starts: tuple[str, str]) -> tuple[tuple[str, tuple[Option, ...]], ...]:
    """``--help`` sections: each title with the options from its first option's name to the next
    section's (named, not counted, so adding an option cannot shift another into a wrong section)."""
    names = [o.name for o in OPTIONS]
    bounds = [names.index(first) for _, first in starts] + [len(OPTIONS)]
    return tuple((title, OPTIONS[bounds[i] : bounds[i + 1]]) for i, (title, _) in enumerate(starts))


SECTIONS = _sections(
    ("server", "listen"),
    ("TLS", "listener.security.protocol"),
    ("SASL", "sasl.enabled.mechanisms"),
    ("authorization", "authorizer.mode"),
    ("observability", "metrics"),
    ("group coordinator (Kafka's names and defaults)", "group.min.session.timeout.ms"),
)


def _show(value: Any, unset: str = "empty") -> str:
    if value is None:
        return unset
    if isinstance(value, tuple) and len(value) == 2:
        return f"{value[0]}:{value[1]}"
    if isinstance(value, list):
        return ",".join(_show(v) for v in value) or "empty"
    if isinstance(value, dict):
        return ",".join(f"{k}:{v}" for k, v in value.items()) or "empty"
    return str(value)


# -- argparse -------------------------------------------------------------------------------------------
EPILOG = """\
Every setting has a dotted name (Kafka's where Kafka has the setting). The same setting is:
  flag         --group-min-session-timeout-ms 6000      (dots become dashes)
  environment  KCOORD_GROUP_MIN_SESSION_TIMEOUT_MS=6000  (upper case, dots become underscores)
  TOML file    group.min.session.timeout.ms = 6000       (--config FILE or KCOORD_CONFIG)
Precedence: flag > environment > file > default. An invalid value, an unknown key in the file or
group.min.session.timeout.ms > group.max.session.timeout.ms stops startup with exit code 2."""


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--config`` and one flag per option; flags default to None so unset ones are visible."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help=f"TOML file with settings by their dotted names [env {CONFIG_ENV}]",
    )
    for title, options in SECTIONS:
        group = parser.add_argument_group(title)
        for opt in options:
            group.add_argument(
                opt.flag,
                dest=opt.dest,
                metavar=opt.metavar,
                default=None,
                help=f"{opt.help} [default: {_show(opt.default(), opt.unset)}; env {opt.env}; key {opt.name}]",
            )


# -- resolution -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Resolved:
    settings: Settings
    sources: dict[str, str]  # option name → where its value came from (default, file, env, flag)
    warnings: list[str]


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def read_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The settings of a TOML file as ``{dotted name: value}``; unknown keys are errors."""
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    flat = _flatten(table)
    for key in flat:
        if key not in BY_NAME:
            close = difflib.get_close_matches(key, list(BY_NAME), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"unknown setting {key!r} in config file {path}{hint}")
    return flat


def resolve(
    args: argparse.Namespace | None = None,
    environ: Mapping[str, str] | None = None,
) -> Resolved:
    """Merge defaults, the TOML file, the environment and the flags into checked :class:`Settings`."""
    environ = os.environ if environ is None else environ
    raw: dict[str, tuple[Any, str]] = {}
    config_path = getattr(args, "config", None) or environ.get(CONFIG_ENV)
    if config_path:
        for name, value in read_file(config_path).items():
            raw[name] = (value, f"config file {config_path}")
    for opt in OPTIONS:
        if opt.env in environ:
            raw[opt.name] = (environ[opt.env], f"environment {opt.env}")
        flag_value = getattr(args, opt.dest, None) if args is not None else None
        if flag_value is not None:
            raw[opt.name] = (flag_value, f"flag {opt.flag}")
    known_env = {o.env for o in OPTIONS} | {CONFIG_ENV}
    warnings = [
        f"ignoring unknown environment variable {k}"
        for k in sorted(environ)
        if k.startswith(ENV_PREFIX) and k not in known_env
    ]

    server: dict[str, Any] = {}
    group: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for opt in OPTIONS:
        if opt.name not in raw:
            sources[opt.name] = "default"
            continue
        value, source = raw[opt.name]
        try:
            parsed = opt.parse(value)
        except ValueError as exc:
            raise ConfigError(f"invalid value for {opt.name} ({source}): {exc}") from None
        if opt.to_field is not None:
            parsed = opt.to_field(parsed)
        target, attr = opt.field.split(".")
        (server if target == "settings" else group)[attr] = parsed
        sources[opt.name] = source

    group_config = replace(GroupConfig(), **group)
    if group_config.min_session_timeout_ms > group_config.max_session_timeout_ms:
        lo, hi = BY_NAME["group.min.session.timeout.ms"], BY_NAME["group.max.session.timeout.ms"]
        raise ConfigError(
            f"invalid value for {lo.name} ({sources[lo.name]}): {group_config.min_session_timeout_ms} is greater "
            f"than {hi.name} = {group_config.max_session_timeout_ms} ({sources[hi.name]})"
        )
    settings = Settings(**server, group=group_config)
    if settings.connection_output_pause_bytes > settings.connection_output_max_bytes:
        pause, cap = BY_NAME["connection.output.pause.bytes"], BY_NAME["connection.output.max.bytes"]
        raise ConfigError(
            f"invalid value for {pause.name} ({sources[pause.name]}): {settings.connection_output_pause_bytes} is "
            f"greater than {cap.name} = {settings.connection_output_max_bytes} ({sources[cap.name]})"
        )
    if settings.cluster_enabled and (settings.storage != "kafka" or not settings.bootstrap_servers):
        raise ConfigError(
            f"invalid value for cluster.enabled ({sources['cluster.enabled']}): a kcoord cluster keeps its state "
            "on an upstream cluster: it needs storage=kafka and bootstrap.server"
        )
    if (
        settings.cluster_enabled
        and settings.cluster_heartbeat_interval_ms * 2 > settings.cluster_session_timeout_ms
    ):
        raise ConfigError(
            f"invalid value for cluster.heartbeat.interval.ms ({sources['cluster.heartbeat.interval.ms']}): "
            f"{settings.cluster_heartbeat_interval_ms} is more than half of cluster.session.timeout.ms "
            f"= {settings.cluster_session_timeout_ms}"
        )
    _check_workers(settings, sources)
    _check_tls(settings, sources)
    _check_sasl(settings, sources)
    if settings.metrics is not None and settings.metrics == settings.listen and settings.listen[1] != 0:
        raise ConfigError(f"invalid value for metrics ({sources['metrics']}): it is the listen address")
    return Resolved(settings, sources, warnings)


def _check_workers(settings: Settings, sources: Mapping[str, str]) -> None:
    """Workers are cluster nodes: their state must be on the upstream, where the others can load it."""
    if settings.workers == 1:
        return
    if settings.storage != "kafka":
        raise ConfigError(
            f"invalid value for workers ({sources['workers']}): workers share the shards through the "
            "upstream cluster: they need storage=kafka"
        )
    if settings.worker_ports and len(settings.worker_ports) != settings.workers:
        raise ConfigError(
            f"invalid value for worker.ports ({sources['worker.ports']}): {len(settings.worker_ports)} ports "
            f"for {settings.workers} workers"
        )
    if settings.cluster_heartbeat_interval_ms * 2 > settings.cluster_session_timeout_ms:
        raise ConfigError(
            f"invalid value for cluster.heartbeat.interval.ms ({sources['cluster.heartbeat.interval.ms']}): "
            f"{settings.cluster_heartbeat_interval_ms} is more than half of cluster.session.timeout.ms "
            f"= {settings.cluster_session_timeout_ms}"
        )


def _check_tls(settings: Settings, sources: Mapping[str, str]) -> None:
    """The TLS settings that only work together."""

    def refuse(name: str, why: str) -> None:
        raise ConfigError(f"invalid value for {name} ({sources[name]}): {why}")

    if settings.listener_security_protocol in ("SSL", "SASL_SSL") and not settings.ssl_keystore_location:
        refuse(
            "listener.security.protocol",
            f"{settings.listener_security_protocol} needs ssl.keystore.location "
            "(the listeners' key and certificate)",
        )
    if settings.ssl_client_auth != "none" and not settings.ssl_truststore_location:
        refuse(
            "ssl.client.auth",
            "client certificates need ssl.truststore.location (the CAs to check them against)",
        )
    if settings.upstream_security_protocol != "PLAINTEXT" and not settings.bootstrap_servers:
        refuse(
            "upstream.security.protocol",
            f"{settings.upstream_security_protocol} needs bootstrap.server (the embedded broker speaks plaintext)",
        )


def _check_sasl(settings: Settings, sources: Mapping[str, str]) -> None:
    """The SASL settings that only work together."""

    def refuse(name: str, why: str) -> None:
        raise ConfigError(f"invalid value for {name} ({sources[name]}): {why}")

    upstream_sasl = settings.upstream_security_protocol.startswith("SASL_")
    if settings.listener_security_protocol.startswith("SASL_") and not upstream_sasl:
        refuse(
            "listener.security.protocol",
            "SASL listeners need a SASL upstream (upstream.security.protocol=SASL_PLAINTEXT or SASL_SSL): "
            "the upstream checks the clients' credentials",
        )
    if not upstream_sasl:
        return
    if (
        not settings.listener_security_protocol.startswith("SASL_")
        and settings.listener_relay_principal != "kcoord"
    ):
        refuse(
            "listener.security.protocol",
            f"the upstream is {settings.upstream_security_protocol} but clients do not log in on "
            f"{settings.listener_security_protocol} listeners, so every client's Produce, Fetch, "
            "CreateTopics and DeleteTopics would reach the cluster as kcoord's own principal: use "
            "SASL_PLAINTEXT or SASL_SSL listeners (each client's requests run as its own principal), "
            "or set listener.relay.principal=kcoord to accept that",
        )
    if not settings.upstream_sasl_username:
        refuse("upstream.sasl.username", "a SASL upstream needs kcoord's own user name")
    if settings.upstream_sasl_password and settings.upstream_sasl_password_file:
        refuse("upstream.sasl.password.file", "set upstream.sasl.password or this file, not both")
    if settings.upstream_sasl_password_file:
        try:
            read_password_file(settings.upstream_sasl_password_file)
        except (OSError, ValueError) as exc:
            refuse("upstream.sasl.password.file", str(exc))
    elif not settings.upstream_sasl_password:
        refuse(
            "upstream.sasl.password",
            "a SASL upstream needs kcoord's password (or upstream.sasl.password.file)",
        )


def describe(resolved: Resolved) -> str:
    """The non-default settings and their sources, for the startup log."""
    parts = []
    for opt in OPTIONS:
        source = resolved.sources[opt.name]
        if source == "default":
            continue
        target, attr = opt.field.split(".")
        value = getattr(resolved.settings if target == "settings" else resolved.settings.group, attr)
        if opt.from_field is not None:
            value = opt.from_field(value)
        if opt.secret:
            value = "(hidden)"
        parts.append(f"{opt.name}={_show(value)} ({source})")
    return "; ".join(parts) or "all defaults"


def settings_fields() -> set[str]:
    """Names of Settings and GroupConfig fields an option sets (the table must cover them all)."""
    return {o.field for o in OPTIONS}


# Settings fields the supervisor of --workers sets in each worker's settings: no option sets them.
SUPERVISOR_FIELDS = frozenset({"group", "shared_listen", "listen_port_derived"})


def all_fields() -> set[str]:
    return {f"settings.{f.name}" for f in fields(Settings) if f.name not in SUPERVISOR_FIELDS} | {
        f"group.{f.name}" for f in fields(GroupConfig)
    }
