"""Wiring: storage, shards, router, the cluster view and the listeners, with start and graceful stop.

The App also keeps the limits that span connections: ``max.connections`` and
``max.connections.per.ip`` (a connection beyond them is closed at once, with a log line at most
every few seconds per limit), the total of unsent output (``queued.max.response.bytes``: past it,
reading pauses on every connection holding some, until the total is down to half or that
connection's output is all sent), the budget of
large partial frames (``queued.max.request.bytes``), and one periodic sweep for the idle and
receive timeouts (no timer per connection or per request).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any

from kcoord.client import PLAINTEXT, ClientTls, SaslCredentials, UpstreamSecurity, client_context
from kcoord.coordinator.core.clock import Clock, SystemClock
from kcoord.coordinator.ops.gc_pauses import GcPauseWatch
from kcoord.coordinator.ops.memory_trim import HeapTrimmer
from kcoord.coordinator.ops.metrics import Metrics
from kcoord.coordinator.ops.observability import MetricsServer, ShardEventObserver
from kcoord.coordinator.ops.settings import Settings, read_password_file
from kcoord.coordinator.ops.upstream_health import UpstreamHealth
from kcoord.coordinator.runtime.membership import ClusterMembership, group_id_for
from kcoord.coordinator.runtime.router import Router, shard_for_group
from kcoord.coordinator.runtime.shard import ShardRuntime
from kcoord.coordinator.runtime.transactions import TransactionOffsets
from kcoord.protocol.frames import FrameBudget
from kcoord.storage.base import Storage
from kcoord.storage.kafka import KafkaStorage
from kcoord.storage.memory import MemoryStorage
from kcoord.storage.ownership import transactional_id_prefix

from .acl_source import AclSource, Authorization
from .connection import ClientConnection
from .denials import DenialLog
from .dispatch_turns import DispatchTurns
from .embedded import EmbeddedBroker
from .failed_logins import FailedLogins
from .gateway import Broker, ClusterView
from .loop_steps import LoopSteps
from .relay.guard import ProtectedTopics
from .sasl import log_unlogged_failures
from .tls import TlsAcceptor, server_context
from .upstream_probe import UpstreamProbe
from .writes import WriteCoalescer

log = logging.getLogger("kcoord.server")

ACL_FIRST_LOAD_WAIT = 10.0  # seconds start-up waits for the upstream's ACLs before serving
REFUSAL_LOG_INTERVAL = 10.0  # seconds between log lines about refused connections, per limit
STOP_WAIT_UPSTREAM_LOST = 0.3  # seconds each shutdown step may wait for an upstream known to be gone
SWEEP_SLICE = 500  # connections the sweep looks at per turn of the loop (~0.5 ms of it)
LISTEN_BACKLOG = 100  # asyncio's create_server default, for the TLS listeners' own sockets


class ListenError(OSError):
    """A listener cannot bind: the message names the setting behind the address. An OSError, so a
    broker met while serving is left out of an answer (relay/addresses.py) rather than failing it."""


def upstream_security(s: Settings, warn: bool = True) -> UpstreamSecurity:
    """The upstream's TLS context and kcoord's login there, from ``upstream.*`` (bad files and
    unreadable passwords stop start-up here). ``warn``: log what the set-up means for relayed
    requests (the supervisor of --workers relays nothing: its workers say it)."""
    context = None
    if s.upstream_security_protocol in ("SSL", "SASL_SSL"):
        context = client_context(
            ClientTls(
                truststore=s.upstream_ssl_truststore_location,
                keystore=s.upstream_ssl_keystore_location,
                key_password=s.upstream_ssl_key_password,
                endpoint_identification=s.upstream_ssl_endpoint_identification_algorithm,
            )
        )
    if not s.upstream_security_protocol.startswith("SASL_"):
        return UpstreamSecurity(ssl=context)
    password = s.upstream_sasl_password
    if s.upstream_sasl_password_file:
        password = read_password_file(s.upstream_sasl_password_file)
    login = SaslCredentials(s.upstream_sasl_mechanism, s.upstream_sasl_username, password)
    if warn and not s.listener_security_protocol.startswith("SASL_"):
        # Nobody logs in on kcoord's listeners, so their relayed requests have no principal of
        # their own to run as upstream: they run as kcoord's (listener.relay.principal=kcoord,
        # the configuration refuses this otherwise), which an operator must keep in mind.
        log.warning(
            "listeners are %s and the upstream is %s: relayed requests of every client run as "
            "kcoord's principal %s (listener.relay.principal=kcoord; SASL listeners give each "
            "client its own)",
            s.listener_security_protocol,
            s.upstream_security_protocol,
            login.principal,
        )
    return UpstreamSecurity(ssl=context, sasl=login)


class Listener:
    """A listening socket: the coordinator listener (node_id None) or one upstream broker's port.

    Plaintext listeners are asyncio servers; TLS ones accept through a :class:`TlsAcceptor`, which
    completes the handshake before the connection exists (tls.py)."""

    def __init__(self, app: App, node_id: int | None) -> None:
        self.app = app
        self.node_id = node_id
        self.server: asyncio.base_events.Server | None = None
        self.acceptor: TlsAcceptor | None = None
        self.port = 0
        # Clients log in (SASL_PLAINTEXT, SASL_SSL) before anything but ApiVersions (sasl.py).
        self.sasl = app.settings.listener_security_protocol.startswith("SASL_")

    @property
    def is_coordinator(self) -> bool:
        return self.node_id is None

    async def start(self, host: str, port: int, serve: bool = True, shared: bool = False) -> int:
        """Bind and listen; ``shared``: SO_REUSEPORT, so every worker of this host accepts on the
        port and the kernel spreads the connections among them (workers/)."""
        context = self.app.listener_ssl
        if context is not None:
            return self._start_tls(host, port, context, serve, shared)
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            lambda: ClientConnection(self),
            host,
            port,
            reuse_address=True,
            reuse_port=shared or None,
            start_serving=serve,
        )
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    def _start_tls(self, host: str, port: int, context: ssl.SSLContext, serve: bool, shared: bool) -> int:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if shared:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        timeout = self.app.settings.ssl_handshake_timeout_ms / 1000
        self.acceptor = TlsAcceptor(
            sock, context, timeout, lambda: ClientConnection(self), self.app.metrics.tls_handshake_failed
        )
        self.port = sock.getsockname()[1]
        if serve:
            self.acceptor.start()
        return self.port

    async def serve(self) -> None:
        if self.server is not None:
            await self.server.start_serving()
        if self.acceptor is not None:
            self.acceptor.start()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        if self.acceptor is not None:
            self.acceptor.close()


class App:
    def __init__(
        self,
        settings: Settings,
        storage: Storage | None = None,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.metrics = metrics or Metrics()
        self.gc_pauses = GcPauseWatch(self.metrics.registry)
        self.observer = ShardEventObserver(self.metrics)
        self.metrics_server: MetricsServer | None = None
        self.storage = storage
        self.event_writer: Any = None  # the event topic's writer (EventTopicWriter), when on
        self.embedded: EmbeddedBroker | None = None
        self._embedded_watch: asyncio.Task[None] | None = None
        # Readiness: has the upstream answered lately (upstream_probe.py asks every second)?
        self.upstream_health = UpstreamHealth(settings.readiness_upstream_timeout_ms / 1000)
        self.upstream_probe: UpstreamProbe | None = None
        self.listening = False  # the coordinator listener accepts (the end of start())
        self.shards: list[ShardRuntime] = []
        self.router = Router(self.shards)
        self.transactions: TransactionOffsets = None  # type: ignore[assignment]  # set with the shards
        self.membership: ClusterMembership | None = None  # cluster mode: this node in the cluster's group
        self.fatal: str | None = None  # why this node stopped serving for good (cluster mode)
        self.fatal_event = asyncio.Event()
        self.cluster: ClusterView = None  # type: ignore[assignment]  # set in start()
        # What no client may write, delete or alter through kcoord (relay/guard.py, group_guard.py).
        self.protected_topics = ProtectedTopics(
            frozenset(n for n in (settings.internal_topic, settings.events_topic) if n),
            transactional_id_prefix=transactional_id_prefix(settings.internal_topic),
        )
        self.cluster_group = group_id_for(settings.internal_topic)
        # Authorization of kcoord's own group APIs (group_authz.py), from the upstream's ACLs:
        # start() turns it on (closed until they are read) before any client is served.
        self.authorization = Authorization(allow_all=True)
        self.acl_source: AclSource | None = None
        self.denial_log = DenialLog(self.metrics)
        self.listeners: list[Listener] = []
        self.connections: set[ClientConnection] = set()
        self._per_ip: dict[str, int] = {}
        self._refusals: dict[str, list[float]] = {}  # limit -> [last logged (monotonic), refused since]
        # Large partial frames (queued.max.request.bytes; never below one frame of max.frame.size).
        queued = settings.queued_max_request_bytes
        self.frame_budget = FrameBudget(max(queued, settings.max_frame_size)) if queued > 0 else None
        # Unsent output of all connections, and who holds some (queued.max.response.bytes).
        self.output_bytes = 0
        self._output_holders: set[ClientConnection] = set()
        self._output_over = False
        self._output_paused: set[ClientConnection] = set()
        self.writes = WriteCoalescer()
        self.heap_trimmer = HeapTrimmer()  # memory freed by connections goes back to the OS (sweep)
        # Large group answers, encoded a step per loop iteration (dispatch.py, STEP_ANSWERS_ABOVE).
        self.loop_steps = LoopSteps()
        self.dispatch_turns = DispatchTurns()  # costly requests: one dispatched per loop iteration
        self.read_turns = DispatchTurns()  # large reads: one connection's processed per iteration
        # Failed SASL logins: logged once per peer host a minute, the rest counted (sasl.py).
        self.failed_logins = FailedLogins()
        self._sweeper: asyncio.Task[None] | None = None
        self._broker_port_index = 0
        self.stopped = asyncio.Event()
        # TLS contexts (tls.py, kcoord.client.tls), made in start(): bad files stop start-up there.
        self.listener_ssl: ssl.SSLContext | None = None
        # TLS to the upstream and kcoord's own SASL login there (upstream.*), for its own connections.
        self.upstream = PLAINTEXT

    # -- lifecycle ----------------------------------------------------------------------------------
    async def start(self) -> None:
        s = self.settings
        self._make_tls_contexts()
        self.upstream = upstream_security(self.settings)
        if s.cluster_enabled:
            self.router.owned = frozenset()  # nothing until the cluster's group assigns shards
            self.router.node_id = s.coordinator_node_id
        self.metrics.watch_shards(self.router.owned_shards, lambda: len(self.serving_shards()))
        budget = self.frame_budget
        self.metrics.watch_buffers(
            lambda: self.output_bytes,
            lambda: budget.partial_frames if budget is not None else 0,
            lambda: budget.inflight if budget is not None else 0,
        )
        self._sweeper = asyncio.ensure_future(self._sweep_forever())
        self.gc_pauses.install()
        if s.metrics is not None:
            # First, so /healthz answers 503 while storage opens and shards load.
            self.metrics_server = MetricsServer(self)
            await self.metrics_server.start(*s.metrics)
        # Bind now (the port goes into the cluster view) but accept only once the upstream's API
        # versions are known: an early client would otherwise be told the cluster has no Metadata API.
        # Before the embedded broker starts, so a listen address that cannot work stops start-up first.
        coordinator = Listener(self, None)
        port = await self._bind_coordinator(coordinator)
        self.listeners.append(coordinator)
        shared: Listener | None = None
        if s.shared_listen is not None:
            # A worker: clients bootstrap to the one port every worker accepts on; the group APIs
            # then go to the worker FindCoordinator names, at its own port (the one above).
            shared = Listener(self, None)
            try:
                await shared.start(*s.shared_listen, serve=False, shared=True)
            except OSError as exc:
                raise ListenError(
                    f"cannot listen on {s.shared_listen[0]}:{s.shared_listen[1]} (listen, shared by the "
                    f"workers): {exc}"
                ) from None
            self.listeners.append(shared)
        bootstrap = list(s.bootstrap_servers)
        if not bootstrap:
            self.embedded = EmbeddedBroker()
            await self.embedded.start()
            bootstrap = [self.embedded.address]
            self._embedded_watch = asyncio.ensure_future(self._watch_embedded(self.embedded))
        self.upstream_probe = UpstreamProbe(self.upstream_health, lambda: bootstrap, self.upstream)
        await self.upstream_probe.probe_once()  # answered before serving: ready with the first shards
        self.upstream_probe.start()
        self.cluster = ClusterView(
            bootstrap,
            s.advertised,
            port,
            s.coordinator_node_id,
            self._open_broker_listener,
            security=self.upstream,
        )
        latest_from_fetch = s.upstream_latest_offset_from_fetch
        self.cluster.latest_offset_from_fetch = (
            self.embedded is not None if latest_from_fetch is None else latest_from_fetch
        )
        # Topic ids by name, live: requests naming topics by id are checked against them.
        self.protected_topics = dataclasses.replace(self.protected_topics, ids=self.cluster.topics.ids)
        if s.cluster_enabled:
            self.cluster.group_owner = self._group_owner
            self.cluster.coordinator_nodes = self._coordinator_nodes
        if self.storage is None:
            self.storage = self._make_storage(bootstrap)
        await self.storage.open(s.shards)
        await self._start_event_topic(bootstrap)
        self._make_shards()
        await self.cluster.discover()
        # The protected topics' ids, before any client can name them by id (DeleteTopics v6).
        await self.cluster.topics.lookup(sorted(self.protected_topics.names))
        await self._start_acl_source()
        await coordinator.serve()  # while shards load, group requests get COORDINATOR_LOAD_IN_PROGRESS
        if shared is not None:
            await shared.serve()
        if s.cluster_enabled:
            self._join_cluster(bootstrap, port)
        else:
            await asyncio.gather(*(shard.first_load() for shard in self.shards))
        self.listening = True
        if not s.cluster_enabled and not all(shard.loaded for shard in self.shards):
            waiting = [shard.index for shard in self.shards if not shard.loaded]
            log.error("shards %s are not loaded; they retry in the background (see /readyz)", waiting)
        log.info(
            "kcoord serving on %s:%d (advertised %s), %d shards, upstream %s",
            s.listen[0],
            port,
            s.advertised,
            s.shards,
            ",".join(f"{h}:{p}" for h, p in bootstrap),
        )

    async def _bind_coordinator(self, coordinator: Listener) -> int:
        """Bind the coordinator listener (not accepting yet); a worker whose derived port is taken
        gets one the OS picks under broker.ports.auto, as a derived broker port does."""
        s = self.settings
        try:
            return await coordinator.start(s.listen[0], s.listen[1], serve=False)
        except OSError as exc:
            if not (s.listen_port_derived and s.broker_ports_auto):
                raise ListenError(f"cannot listen on {s.listen[0]}:{s.listen[1]} (listen): {exc}") from None
            port = await coordinator.start(s.listen[0], 0, serve=False)
            log.warning(
                "worker port %d is taken (%s): serving this worker on %d instead", s.listen[1], exc, port
            )
            return port

    async def _start_acl_source(self) -> None:
        """Read the upstream's ACLs before serving (for a bounded time: until they are read, the
        group APIs answer COORDINATOR_NOT_AVAILABLE, and the source keeps trying)."""
        s = self.settings
        if s.authorizer_mode == "none":
            return
        self.acl_source = AclSource(
            self.authorization,
            self.cluster,
            s.authorizer_acl_refresh_ms / 1000,
            super_users=s.super_users,
            allow_everyone_if_no_acl_found=s.allow_everyone_if_no_acl_found,
        )
        self.authorization.allow_all = False  # closed until the upstream's ACLs are read
        self.acl_source.start()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.acl_source.first_load.wait(), ACL_FIRST_LOAD_WAIT)

    def _make_tls_contexts(self) -> None:
        s = self.settings
        if s.listener_security_protocol in ("SSL", "SASL_SSL"):
            self.listener_ssl = server_context(s)

    # -- cluster mode -------------------------------------------------------------------------------
    def _join_cluster(self, bootstrap: list[tuple[str, int]], port: int) -> None:
        s = self.settings
        self.membership = ClusterMembership(
            bootstrap,
            node_id=s.coordinator_node_id,
            advertised=(s.advertised, port),
            internal_topic=s.internal_topic,
            num_shards=s.shards,
            session_timeout_ms=s.cluster_session_timeout_ms,
            heartbeat_interval_ms=s.cluster_heartbeat_interval_ms,
            static_membership=s.cluster_static_membership,
            apply=self.router.apply_ownership,
            on_fatal=self._cluster_fatal,
            security=self.upstream,
        )
        self.router.follow_membership(
            self.membership.lease, self.membership.lease_lapsed, self.membership.shard_fenced
        )
        self.router.peer_security = self._peer_security()
        self.membership.start()
        log.info(
            "cluster: node %d (%s:%d) joining group %s on the upstream",
            s.coordinator_node_id,
            s.advertised,
            port,
            self.membership.group_id,
        )

    def _peer_security(self) -> UpstreamSecurity:
        """How this node reaches the other nodes' coordinator listeners (forwarded AddOffsetsToTxn).

        Every node of a cluster has the same listener.security.protocol. As Kafka's brokers do on
        their inter-broker listener, a node checks a peer's certificate against its own
        ssl.truststore.location (and the peer's name), shows its own certificate as its client
        certificate, and on a SASL listener logs in as kcoord's upstream user: the peer relays that
        login to the upstream like any client's.
        """
        s = self.settings
        context = None
        if s.listener_security_protocol in ("SSL", "SASL_SSL"):
            context = client_context(
                ClientTls(
                    truststore=s.ssl_truststore_location,
                    keystore=s.ssl_keystore_location,
                    key_password=s.ssl_key_password,
                )
            )
        login = self.upstream.sasl if s.listener_security_protocol.startswith("SASL_") else None
        return UpstreamSecurity(ssl=context, sasl=login)

    def _cluster_fatal(self, why: str) -> None:
        self.fatal = why
        self.fatal_event.set()

    async def _watch_embedded(self, broker: EmbeddedBroker) -> None:
        """The embedded broker is kcoord's whole upstream and holds its data in memory: when it
        exits, whatever kcoord serves from then on is lost or refused. kcoord stops at once, with a
        non-zero exit and one line saying why (cli.py), rather than restarting it empty behind
        clients that believe their commits are stored."""
        how = await broker.wait_exit()
        if self.fatal is None:
            self._cluster_fatal(f"the embedded broker {how}; its log: {broker.log_path}")

    @property
    def waiting_for_shards(self) -> bool:
        """Cluster mode, before the cluster's group first assigned this node its shards."""
        return self.settings.cluster_enabled and self.router.ownership is None

    def serving_shards(self) -> frozenset[int]:
        """The shards this node answers for (/healthz, metrics): every configured shard outside
        cluster mode (also before they exist, while storage opens: not loaded yet, so 503)."""
        if self.router.owned is None:
            return frozenset(range(self.settings.shards))
        return self.router.owned

    def _group_owner(self, group_id: str) -> tuple[int, str, int] | None:
        """(node id, host, port) of the node serving ``group_id``'s shard; None while none does."""
        ownership = self.router.ownership
        if ownership is None:
            return None
        node = ownership.owners[shard_for_group(group_id, self.settings.shards)]
        if node == self.settings.coordinator_node_id:
            return node, self.cluster.advertised_host, self.cluster.coordinator_port
        address = ownership.nodes.get(node)
        return None if address is None else (node, address[0], address[1])

    def _coordinator_nodes(self) -> dict[int, tuple[str, int]]:
        """Every live kcoord node's coordinator address (this one's included), for Metadata."""
        ownership = self.router.ownership
        nodes = dict(ownership.nodes) if ownership is not None else {}
        nodes[self.settings.coordinator_node_id] = (
            self.cluster.advertised_host,
            self.cluster.coordinator_port,
        )
        return nodes

    async def _start_event_topic(self, bootstrap: list[tuple[str, int]]) -> None:
        """The event topic's writer (docs/events.md), before the shards load so their loads are in it."""
        s = self.settings
        if not s.events_topic:
            return
        from kcoord.coordinator.ops.event_topic import EventTopicWriter

        self.event_writer = EventTopicWriter(
            bootstrap,
            s.events_topic,
            partitions=s.events_partitions,
            retention_ms=s.events_retention_ms,
            replication_factor=s.replication_factor,
            queue_max=s.events_queue_max,
            consumer_fencing=s.group.consumer_offset_commit_fencing,
            registry=self.metrics.registry,
            max_frame_size=s.max_frame_size,
            security=self.upstream,
        )
        await self.event_writer.start()
        self.observer.sink = self.event_writer

    def _make_storage(self, bootstrap: list[tuple[str, int]]) -> Storage:
        if self.settings.storage == "memory":
            return MemoryStorage()
        if self.settings.storage == "kafka":
            return KafkaStorage(bootstrap, self.settings, security=self.upstream)
        raise ValueError(f"unknown storage {self.settings.storage!r}")

    def _make_shards(self) -> None:
        from kcoord.coordinator.core.shard_state import GroupCoordinatorShard

        assert self.storage is not None
        max_record_bytes = self.storage.max_record_bytes  # known once the storage is open
        resolve_topic_id, resolve_topic_name = self._topic_id_of, self._topic_name_of
        for i in range(self.settings.shards):

            def make_state(i: int = i) -> Any:
                return GroupCoordinatorShard(
                    self.settings.group,
                    self.clock,
                    shard_index=i,
                    max_record_bytes=max_record_bytes,
                    resolve_topic_id=resolve_topic_id,
                    resolve_topic_name=resolve_topic_name,
                    topic_image=self._topic_image,
                )

            shard = ShardRuntime(
                i,
                make_state,
                self.storage.shard_log(i),
                self.clock,
                self.observer,
                max_in_flight=self.settings.append_max_in_flight,
            )
            shard.after_replies = self.writes.write_now
            self.shards.append(shard)
        self.transactions = TransactionOffsets(self.router, self.storage)

    def _topic_id_of(self, name: str) -> Any:
        """Consumer groups key assignments by topic id; commits name topics. The shards read the
        upstream's name → id map as the topic catalog learns it (read only; None before discovery)."""
        cluster = self.cluster
        return None if cluster is None else cluster.topics.ids.get(name)

    def _topic_image(self) -> Any:
        cluster = self.cluster
        return {} if cluster is None else cluster.topics.image()

    def _topic_name_of(self, topic_id: Any) -> str | None:
        cluster = self.cluster
        return None if cluster is None else cluster.topics.names.get(topic_id)

    async def _open_broker_listener(self, broker: Broker) -> int:
        """Listen for ``broker``: on the next of ``broker.ports``, else on the listen port + 1, + 2, ...

        A derived port another socket already holds (it may have been handed out as the ephemeral
        port of some outgoing connection) is an error naming the settings: a port the OS picks
        instead is one that clients behind published container ports or a firewall can never
        reach, and they would fail far from the cause. With ``broker.ports.auto`` (tests, hosts
        whose every port is reachable) it is passed over for one the OS picks, with a warning. A
        port the operator listed is theirs to free, so failing to bind it raises.
        """
        s = self.settings
        # A worker derives its broker ports from the port all workers share, and shares them too:
        # whichever worker a client's connection lands on relays it.
        base = s.shared_listen if s.shared_listen is not None else s.listen
        derived = False
        if self._broker_port_index < len(s.broker_ports):
            port = s.broker_ports[self._broker_port_index]
        elif base[1] != 0 and not s.broker_ports:
            port = base[1] + 1 + self._broker_port_index
            derived = True
        else:
            port = 0
        self._broker_port_index += 1
        listener = Listener(self, broker.node_id)
        shared = s.shared_listen is not None
        try:
            actual = await listener.start(s.listen[0], port, shared=shared)
        except OSError as exc:
            if not derived:
                raise ListenError(
                    f"cannot listen for broker {broker.node_id} on {s.listen[0]}:{port} (broker.ports): {exc}"
                ) from None
            if not s.broker_ports_auto:
                raise ListenError(
                    f"port {port} for broker {broker.node_id} (listen port + {self._broker_port_index}) is "
                    f"taken: {exc}; free it, name the ports with broker.ports, or set broker.ports.auto=true "
                    "to let the OS pick one (unreachable behind published ports or a firewall)"
                ) from None
            actual = await listener.start(s.listen[0], 0)
            log.warning(
                "port %d for broker %d is taken (%s): serving it on %d instead",
                port,
                broker.node_id,
                exc,
                actual,
            )
        self.listeners.append(listener)
        return actual

    @property
    def port(self) -> int:
        return self.listeners[0].port

    def upstream_lost(self) -> bool:
        """The upstream is known to be gone: silent past the readiness timeout, failing since its
        last answer, or (embedded) exited. Nothing waiting on it will be answered."""
        embedded_gone = self.embedded is not None and (
            self.embedded.process is None or self.embedded.process.poll() is not None
        )
        return embedded_gone or self.upstream_health.suspect

    async def stop(self, grace: float = 10.0) -> None:
        """Stop accepting, let in-flight requests finish, flush the shards' logs, shut down.

        With the upstream gone, nothing in flight can finish and nothing more can be acknowledged:
        each wait below is then cut to a fraction of a second (what was acknowledged is stored
        already; what was not was never answered), so SIGTERM ends in well under 2 s."""
        lost = self.upstream_lost()

        def wait(seconds: float) -> float:
            return min(seconds, STOP_WAIT_UPSTREAM_LOST) if lost else seconds

        if lost:
            log.info("upstream unreachable: stopping without waiting for it")
        for listener in self.listeners:
            listener.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._embedded_watch is not None:
            self._embedded_watch.cancel()
        if self.upstream_probe is not None:
            await self.upstream_probe.close()
        self.gc_pauses.uninstall()
        deadline = asyncio.get_running_loop().time() + wait(grace)
        while any(not c.idle for c in self.connections) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        if self.membership is not None:
            # Releases (drains) this node's shards and leaves the group: the others take them now.
            try:
                await asyncio.wait_for(self.membership.stop(), wait(10.0))
            except (TimeoutError, OSError) as exc:
                log.warning("cluster: leaving the group did not finish: %r", exc)
        # Flush what was written, all shards at once and for a bounded time: with the cluster
        # unreachable nothing more can be acknowledged, and shutdown must not wait on it.
        await asyncio.gather(*(shard.drain(timeout=wait(5.0)) for shard in self.shards))
        for shard in self.shards:
            shard.close()
        self.router.close()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        for listener in self.listeners:
            if listener.server is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(listener.server.wait_closed(), 2.0)
        if self.event_writer is not None:
            await self.event_writer.close(timeout=wait(5.0))  # events are lossy by design (events.md)
        if self.acl_source is not None:
            await self.acl_source.close()
        if self.cluster is not None:
            await self.cluster.close()
        if self.storage is not None:
            try:
                await asyncio.wait_for(self.storage.close(), wait(5.0))
            except (TimeoutError, OSError) as exc:
                log.warning("storage did not close cleanly: %r", exc)
        if self.embedded is not None:
            await self.embedded.stop_async()
        if self.metrics_server is not None:
            await self.metrics_server.close()
        self.loop_steps.close()
        self.stopped.set()

    # -- connection bookkeeping -----------------------------------------------------------------------
    def connection_opened(self, conn: ClientConnection) -> bool:
        """Count a new connection in; False (logged, counted) if it is over max.connections(.per.ip)."""
        s = self.settings
        open_now = len(self.connections)
        if open_now >= s.max_connections:
            self._refuse(conn, "max.connections", s.max_connections, f"{open_now} connections open")
            return False
        ip = conn.ip
        from_ip = self._per_ip.get(ip, 0)
        limit = s.max_connections_per_ip_overrides.get(ip, s.max_connections_per_ip)
        if from_ip >= limit:
            name = "max.connections.per.ip" + (
                ".overrides" if ip in s.max_connections_per_ip_overrides else ""
            )
            self._refuse(conn, name, limit, f"{from_ip} connections open from {ip}")
            return False
        self._per_ip[ip] = from_ip + 1
        self.connections.add(conn)
        self.metrics.connections.inc()
        self.metrics.connections_total.inc()
        return True

    def _refuse(self, conn: ClientConnection, limit: str, value: int, why: str) -> None:
        self.metrics.connection_limited("limit")
        now = time.monotonic()
        seen = self._refusals.get(limit)
        if seen is not None and now - seen[0] < REFUSAL_LOG_INTERVAL:
            seen[1] += 1
            return
        more = (
            f"; {int(seen[1])} more refused since the last such line" if seen is not None and seen[1] else ""
        )
        log.warning("refusing connection from %s: %s (%s=%d)%s", conn.peer, why, limit, value, more)
        self._refusals[limit] = [now, 0]

    def connection_closed(self, conn: ClientConnection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            self.metrics.connections.dec()
            left = self._per_ip.get(conn.ip, 0) - 1
            if left > 0:
                self._per_ip[conn.ip] = left
            else:
                self._per_ip.pop(conn.ip, None)
        self._output_holders.discard(conn)
        self._output_paused.discard(conn)

    def output_changed(self, conn: ClientConnection, old: int, new: int) -> None:
        """``conn``'s unsent output went from ``old`` to ``new`` bytes (not called when unchanged)."""
        total = self.output_bytes = self.output_bytes + new - old
        if not new:
            self._output_holders.discard(conn)
            if conn in self._output_paused:  # it holds none now: nothing to hold it back for
                self._output_paused.discard(conn)
                conn.resume_for_total()
        elif not old:
            self._output_holders.add(conn)
        cap = self.settings.queued_max_response_bytes
        if cap < 0:
            return
        if self._output_over:
            if total <= cap // 2:
                self._output_over = False
                log.info("unsent responses of all connections down to %d bytes: reading resumes", total)
                paused, self._output_paused = self._output_paused, set()
                for holder in paused:
                    holder.resume_for_total()
            elif new and not old:
                self._pause_for_total(conn)
        elif total > cap:
            self._output_over = True
            log.warning(
                "unsent responses of all connections (%d bytes) passed queued.max.response.bytes=%d: "
                "reading pauses on the %d connections holding some",
                total,
                cap,
                len(self._output_holders),
            )
            for holder in self._output_holders:
                self._pause_for_total(holder)

    def _pause_for_total(self, conn: ClientConnection) -> None:
        if conn in self.connections:  # not one closing
            self._output_paused.add(conn)
            conn.pause_for_total()

    # -- idle and slow connections --------------------------------------------------------------------
    def _timeouts(self) -> tuple[float, float]:
        """(connections.max.idle.ms, request.receive.timeout.ms) in seconds; inf when off."""
        s = self.settings
        idle = s.connections_max_idle_ms / 1000 if s.connections_max_idle_ms > 0 else math.inf
        slow = s.request_receive_timeout_ms / 1000 if s.request_receive_timeout_ms > 0 else math.inf
        return idle, slow

    async def _sweep_forever(self) -> None:
        # A quarter of the shorter timeout, at most a second (it also refreshes the output accounting).
        interval = max(0.05, min(1.0, min(self._timeouts()) / 4))
        while True:
            await asyncio.sleep(interval)
            try:
                for _ in self.sweep_in_steps(time.perf_counter()):
                    await asyncio.sleep(0)  # requests are served between the slices
            except Exception:  # pragma: no cover - a bug; the sweep must go on
                log.exception("connection sweep failed")

    def sweep(self, now: float) -> None:
        """The whole sweep at once (see :meth:`sweep_in_steps`)."""
        for _ in self.sweep_in_steps(now):
            pass

    def sweep_in_steps(self, now: float) -> Iterator[None]:
        """Close idle and slow connections, abort closed ones that never took their last answers.
        Yields after every SWEEP_SLICE connections: at 10,000 connections one pass held the loop for
        ~10 ms every second, and the heartbeats that came in meanwhile made the p99."""
        idle, slow = self._timeouts()
        connections = self.connections
        pending = list(connections)
        for start in range(0, len(pending), SWEEP_SLICE):
            if start:
                yield
            for conn in pending[start : start + SWEEP_SLICE]:
                if conn in connections:  # not released while the sweep yielded
                    conn.expire(now, idle, slow)
        log_unlogged_failures(self.failed_logins.expired(now))
        budget = self.frame_budget
        self.heap_trimmer.observe(self.output_bytes + (budget.used if budget is not None else 0))
