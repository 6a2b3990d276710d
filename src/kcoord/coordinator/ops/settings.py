"""Server settings: where kcoord listens, which cluster it fronts, and its limits."""

from __future__ import annotations

from dataclasses import dataclass, field

from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.protocol.frames import DEFAULT_MAX_FRAME_SIZE

INT32_MAX = 2**31 - 1  # Kafka's "unlimited" for max.connections and max.connections.per.ip
# Worker i's own coordinator port, when worker.ports does not name it: listen port + 100 + i, above
# the derived broker ports (listen port + 1, + 2, ...) of any upstream of fewer than 100 brokers.
WORKER_PORT_OFFSET = 100


def parse_host_port(text: str, default_port: int = 9092) -> tuple[str, int]:
    text = text.strip()
    if text.startswith("["):  # [ipv6]:port
        host, _, port = text[1:].partition("]:")
        return host, int(port or default_port)
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    return host, int(port)


# The SASL mechanisms whose exchange tells kcoord who the client is (kcoord.coordinator.net.sasl_tokens):
# others (GSSAPI, custom ones) are refused, never admitted without a principal.
SASL_CLIENT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# The ones kcoord logs in to the upstream with itself (kcoord.client.sasl).
SASL_OWN_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def read_password_file(path: str) -> str:
    """A password from a file of one line (the trailing newline dropped); ValueError if empty."""
    with open(path, encoding="utf-8") as f:
        password = f.read().rstrip("\r\n")
    if not password:
        raise ValueError(f"{path!r} holds no password")
    return password


@dataclass
class Settings:
    listen: tuple[str, int] = ("127.0.0.1", 9092)
    advertised_host: str | None = None  # defaults to the listen host
    bootstrap_servers: list[tuple[str, int]] = field(default_factory=list)  # empty: embedded broker
    broker_ports: list[int] = field(
        default_factory=list
    )  # explicit ports for upstream brokers, in node id order
    # ListOffsets LATEST raised to the Fetch high watermark (tansu answers it short of the log end):
    # None decides by the upstream (on for the embedded broker), True/False force it.
    upstream_latest_offset_from_fetch: bool | None = None
    # A derived broker port (listen + N) that is taken: False fails (start-up stops, a broker met
    # later is left out of Metadata); True serves it on a port the OS picks, with a warning.
    broker_ports_auto: bool = False
    coordinator_node_id: int = 1_000_000
    # Worker processes on this host (kcoord.coordinator.workers): more than one runs a supervisor and
    # that many cluster nodes sharing the listen port; each worker's own coordinator port is the
    # next of worker_ports, else the listen port + WORKER_PORT_OFFSET + its index.
    workers: int = 1
    worker_ports: list[int] = field(default_factory=list)
    # Set by the supervisor in each worker's settings, never by an option: the port every worker
    # accepts on (SO_REUSEPORT; the broker ports derive from it and are shared the same way), and
    # whether this worker's own listen port was derived (broker.ports.auto may then replace it).
    shared_listen: tuple[str, int] | None = None
    listen_port_derived: bool = False
    shards: int = 50
    storage: str = "kafka"  # "kafka" (durable, the internal topic) or "memory" (tests, throwaway runs)
    internal_topic: str = "__kcoord_offsets"  # the compacted topic holding group state (--storage kafka)
    replication_factor: int | None = (
        None  # of the internal topic when kcoord creates it; None: min(3, brokers)
    )
    # Appends each shard keeps in flight at once (coordinator/runtime/shard.py); Kafka's broker
    # deduplicates a retried batch among a producer's last 5 per partition, hence at most 5.
    append_max_in_flight: int = 5
    # How often each owned shard reads its partition's tail for another owner's writes and checks
    # that the topic still holds what it loaded (the bound on serving after losing ownership).
    ownership_check_interval_ms: int = 1000
    # How often each shard re-takes ownership (epoch bump) so its transactional id never expires
    # (Kafka's transactional.id.expiration.ms is 7 days).
    ownership_refresh_interval_ms: int = 3_600_000
    # Cluster mode: several kcoord nodes share the shards, owned through a classic group
    # on the upstream cluster (coordinator/runtime/membership.py); each node needs its own
    # coordinator_node_id and advertised address. Off: one node serves every shard, as always.
    cluster_enabled: bool = False
    cluster_session_timeout_ms: int = 10_000  # a dead node's shards move after this long
    cluster_heartbeat_interval_ms: int = 1_000
    cluster_static_membership: bool = True  # group.instance.id per node; tansu 0.6 needs false
    # The event topic (docs/events.md): group history, time-retained; "" turns it off.
    events_topic: str = "__kcoord_events"
    events_partitions: int = 6  # when kcoord creates it
    events_retention_ms: int = 7 * 24 * 3600 * 1000
    events_queue_max: int = 100_000  # events waiting beyond this are dropped (and counted)
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    max_inflight: int = 1000  # per connection; reading pauses beyond it
    # Connection limits. Kafka's names and defaults where Kafka has the setting.
    connections_max_idle_ms: int = 600_000  # close connections idle this long; -1: never
    request_receive_timeout_ms: int = (
        30_000  # close a connection whose frame takes longer to arrive; -1: never
    )
    max_connections: int = INT32_MAX
    max_connections_per_ip: int = INT32_MAX
    max_connections_per_ip_overrides: dict[str, int] = field(default_factory=dict)  # IP address -> limit
    # Large partial frames and requests in flight, all connections; -1: unbounded.
    queued_max_request_bytes: int = 256 * 1024 * 1024
    connection_inflight_max_bytes: int = 4 * 1024 * 1024  # requests in flight of one connection, estimated
    connection_output_pause_bytes: int = 1024 * 1024  # unsent output at which reading a connection pauses
    connection_output_max_bytes: int = 128 * 1024 * 1024  # unsent output at which a connection is closed
    queued_max_response_bytes: int = (
        512 * 1024 * 1024
    )  # unsent output of all connections before reading pauses
    # TLS on every kcoord listener (the coordinator's and each broker's): PLAINTEXT, SSL, SASL_PLAINTEXT
    # or SASL_SSL, and the
    # listener's PEM files, Kafka's names (docs/configuration.md "TLS").
    listener_security_protocol: str = "PLAINTEXT"
    ssl_keystore_location: str = ""  # PEM: the listener's private key and certificate chain
    ssl_key_password: str = ""  # of that key, if it is encrypted
    ssl_truststore_location: str = ""  # PEM: the CAs client certificates are checked against
    ssl_client_auth: str = "none"  # none, requested or required
    ssl_handshake_timeout_ms: int = 10_000  # a TLS handshake not done by then closes the connection
    # TLS from kcoord to the upstream cluster (the relay, storage, metadata, cluster membership).
    upstream_security_protocol: str = "PLAINTEXT"
    upstream_ssl_truststore_location: str = ""  # PEM CAs; empty: the system's
    upstream_ssl_keystore_location: str = ""  # PEM key + certificate chain kcoord presents; empty: none
    upstream_ssl_key_password: str = ""
    upstream_ssl_endpoint_identification_algorithm: str = "https"  # "": the broker's name is not checked
    # SASL (docs/configuration.md "SASL"): on SASL_* listeners a client logs in through kcoord to
    # the upstream, which checks its credentials; kcoord names its principal for these mechanisms.
    sasl_enabled_mechanisms: tuple[str, ...] = SASL_CLIENT_MECHANISMS
    sasl_oauthbearer_sub_claim_name: str = "sub"  # the JWT claim that names an OAUTHBEARER client
    # kcoord's own SASL identity on a SASL_* upstream (its storage, metadata and membership connections).
    upstream_sasl_mechanism: str = "PLAIN"
    upstream_sasl_username: str = ""
    upstream_sasl_password: str = ""  # or read from upstream_sasl_password_file
    upstream_sasl_password_file: str = ""
    # Whom the relayed requests of clients that do not log in (listeners not SASL_*) run as on a
    # SASL upstream: "client" refuses that set-up; "kcoord" accepts kcoord's own principal for them.
    listener_relay_principal: str = "client"
    # Authorization of kcoord's own group APIs (docs/configuration.md "Authorization"): the
    # upstream's ACLs, refreshed with DescribeAcls; "none" authorizes everything.
    authorizer_mode: str = "upstream"
    authorizer_acl_refresh_ms: int = 2000
    super_users: str | None = None  # Kafka's super.users; None: the upstream broker's
    allow_everyone_if_no_acl_found: bool | None = None  # None: the upstream broker's
    metrics: tuple[str, int] | None = None  # HOST:PORT of /metrics, /healthz and /readyz
    # /readyz is 503 once the upstream has not answered kcoord's probe (every second) for this long.
    readiness_upstream_timeout_ms: int = 5_000
    log_level: str = "INFO"
    log_format: str = "kv"  # "kv" (key=value) or "json": one line per log event
    group: GroupConfig = field(default_factory=GroupConfig)

    @property
    def advertised(self) -> str:
        host = self.advertised_host or self.listen[0]
        return "127.0.0.1" if host in ("0.0.0.0", "") else host
