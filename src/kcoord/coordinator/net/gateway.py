"""kcoord's view of the upstream cluster: its brokers, each with a kcoord listener, and its APIs.

Every upstream broker gets a kcoord listener port of its own ("port per broker"); traffic on that
port goes to that broker over a connection paired with the client's (relay/passthrough.py). The
broker map here (:attr:`ClusterView.brokers`) is what the relay's address rewriting
(relay/addresses.py) turns a broker's address into: kcoord's host and that broker's port. A broker
an answer names for the first time gets its listener then (:meth:`ClusterView.ensure_broker`).
FindCoordinator for group keys answers with kcoord's coordinator listener (in cluster mode, the
kcoord node serving the group's shard).

ApiVersions is answered by kcoord: for each API, the range both kcoord and the upstream support;
for the group APIs kcoord serves, kcoord's own ranges; group-coordinator APIs kcoord does not
serve yet (KIP-848, share and streams groups) are left out so clients fall back to the classic
protocol instead of reaching a coordinator that does not know their group. An API whose
responses carry addresses is advertised only in the versions kcoord can rewrite. SaslHandshake and
SaslAuthenticate are advertised on SASL listeners only, where the client's login is relayed to the
upstream (sasl.py). What is not advertised is not relayed either.

:attr:`ClusterView.topics` is kcoord's view of which topics exist upstream, for the offset-commit
APIs (:mod:`kcoord.coordinator.net.topics`): fed by every Metadata answer relayed here and by its
own Metadata lookups (``allow_auto_topic_creation`` false) on a connection of its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kcoord.client import PLAINTEXT, BrokerError, Connection, UpstreamSecurity, connect
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import KCOORD_VERSIONS

from .relay.addresses import ADDRESS_FREE_VERSIONS, REWRITTEN_VERSIONS
from .relay.guard import GUARDED_VERSIONS
from .topics import TopicCatalog

log = logging.getLogger("kcoord.gateway")

METADATA_AUTO_CREATE_FLAG_SINCE = 4  # MetadataRequest.allow_auto_topic_creation
METADATA_BY_TOPIC_ID_SINCE = 12  # MetadataRequestTopic.name nullable: a topic asked for by id

# Coordinator APIs of group kinds kcoord does not serve (yet): never advertised, never passed through.
# 76-79 and 90-92 share groups, 88-89 streams groups. (68-69, KIP-848 consumer groups, kcoord serves.)
UNSERVED_GROUP_APIS = frozenset({76, 77, 78, 79, 88, 89, 90, 91, 92})

# KRaft controller APIs (Vote, BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot, UpdateRaftVoter):
# brokers do not serve them to clients, and their answers name controllers by address.
CONTROLLER_APIS = frozenset({52, 53, 54, 59, 82})

# SaslHandshake and SaslAuthenticate: on a SASL listener the client's login is relayed on its own
# upstream connection (sasl.py), up to these versions (v0: raw tokens; SaslAuthenticate v1 session
# lifetimes, v2 flexible). Elsewhere never offered: a SASL client there is refused, not half-served.
SASL_VERSIONS: dict[int, tuple[int, int]] = {17: (0, 1), 36: (0, 2)}
SASL_APIS = frozenset(SASL_VERSIONS)

NOT_RELAYED = UNSERVED_GROUP_APIS | CONTROLLER_APIS | SASL_APIS


# Transactions v1 only (docs/transactions.md, docs/compatibility.md "Exactly-once"): with KIP-890's v2 a client
# adds a group's offsets partition implicitly on TxnOffsetCommit, which kcoord cannot do for its own
# topic, so kcoord offers the transaction APIs up to their last v1 versions (EndTxn v5 and
# TxnOffsetCommit v5 are the v2 forms; AddPartitionsToTxn v4+ is the broker-to-broker form) and
# never the ``transaction.version`` feature: clients then send AddOffsetsToTxn, which kcoord answers.
TRANSACTION_FEATURE = "transaction.version"
TRANSACTIONS_V1_VERSIONS: dict[int, tuple[int, int]] = {
    22: (0, 5),  # InitProducerId (v6: KIP-939 prepared transactions)
    24: (0, 3),  # AddPartitionsToTxn
    26: (0, 4),  # EndTxn
}


def without_transaction_version(features: list[Any] | None) -> list[Any]:
    """An ApiVersions feature list as kcoord passes it on: without ``transaction.version``."""
    return [f for f in features or [] if f.name != TRANSACTION_FEATURE]


@dataclass
class Broker:
    node_id: int
    host: str  # upstream address
    port: int
    rack: str | None = None
    listen_port: int | None = None  # kcoord's port for this broker


class ClusterView:
    def __init__(
        self,
        bootstrap: list[tuple[str, int]],
        advertised_host: str,
        coordinator_port: int,
        coordinator_node_id: int,
        open_listener: Callable[[Broker], Awaitable[int]],
        *,
        security: UpstreamSecurity = PLAINTEXT,
    ) -> None:
        self.bootstrap = bootstrap
        # TLS to the upstream (upstream.security.protocol, upstream.ssl.*) for every connection there,
        # and kcoord's own SASL login (upstream.sasl.*) on its own connections.
        self.security = security
        self.advertised_host = advertised_host
        self.coordinator_port = coordinator_port
        self.coordinator_node_id = coordinator_node_id
        self._open_listener = open_listener
        self.brokers: dict[int, Broker] = {}
        self.upstream_versions: dict[int, tuple[int, int]] = {}
        self.finalized_features: list[Any] = []
        self.supported_features: list[Any] = []
        self.cluster_id: str | None = None
        self._advertised: dict[int, tuple[int, int]] = dict(KCOORD_VERSIONS)
        self._sasl_advertised: dict[int, tuple[int, int]] = {}  # added on SASL listeners
        self._lock = asyncio.Lock()
        self.topics = TopicCatalog(
            self._fetch_topics, fetch_ids=self._fetch_topic_ids, fetch_all=self._fetch_all_topics
        )
        self._metadata_conn: Connection | None = None
        self._metadata_lock = asyncio.Lock()
        # Cluster mode (server.App sets them): the node serving a group's shard, and every live
        # kcoord node, so Metadata lists them all and FindCoordinator names the right one.
        self.group_owner: Callable[[str], tuple[int, str, int] | None] | None = None
        self.coordinator_nodes: Callable[[], dict[int, tuple[str, int]]] = self._this_coordinator
        self._warned_old_metadata = False
        # The upstream answers ListOffsets LATEST short of the log end (tansu): kcoord raises each
        # such answer to the partition's Fetch high watermark (relay/latest_offsets.py).
        self.latest_offset_from_fetch = False

    def _this_coordinator(self) -> dict[int, tuple[str, int]]:
        return {self.coordinator_node_id: (self.advertised_host, self.coordinator_port)}

    # -- discovery ----------------------------------------------------------------------------------
    async def discover(self) -> None:
        """Learn the upstream's API versions and brokers; open a listener per broker."""
        last_error: Exception | None = None
        for address in self.bootstrap:
            try:
                conn = await Connection.open(address, security=self.security)
            except (TimeoutError, OSError) as exc:
                last_error = exc
                continue
            try:
                await self._fetch_api_versions(conn)
                meta = await conn.request(m.MetadataRequest(topics=[]), 1)
                self.cluster_id = getattr(meta, "cluster_id", None)
                for b in meta.brokers:
                    await self.ensure_broker(b.node_id, b.host, b.port, b.rack)
                self.topics.start()
                return
            finally:
                conn.close()
        raise ConnectionError(f"no upstream broker reachable at {self.bootstrap}: {last_error}")

    async def _fetch_api_versions(self, conn: Connection) -> None:
        try:
            resp = await conn.negotiate()
        except BrokerError as exc:
            raise ConnectionError(f"upstream ApiVersions failed with error {exc.error_code}") from None
        self.upstream_versions = dict(conn.versions)
        self._compute_advertised()
        self.supported_features = without_transaction_version(resp.supported_features)
        self.finalized_features = without_transaction_version(resp.finalized_features)

    async def close(self) -> None:
        await self.topics.close()
        if self._metadata_conn is not None:
            self._metadata_conn.close()
            self._metadata_conn = None

    async def _metadata_connection(self) -> Connection:
        async with self._metadata_lock:
            conn = self._metadata_conn
            if conn is None or conn.closed:
                conn = self._metadata_conn = await connect(
                    self.upstream_address(None),
                    timeout=5.0,
                    request_timeout=10.0,
                    security=self.security,
                )
            return conn

    async def high_watermarks(self, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """The high watermarks of these partitions (relay/latest_offsets.py), on kcoord's own
        metadata connection."""
        from .relay.latest_offsets import high_watermarks

        conn = await self._metadata_connection()
        return await high_watermarks(conn, offsets, timeout=10.0)

    async def _fetch_all_topics(self) -> Any:
        """Metadata for every topic of the cluster (the catalog's periodic listing)."""
        conn = await self._metadata_connection()
        return await conn.request(m.MetadataRequest(topics=None, allow_auto_topic_creation=False))

    async def _fetch_topic_ids(self, ids: list[Any]) -> Any:
        """Metadata for topic ids (the catalog's lookup by id); None when the upstream's Metadata
        cannot ask by id (below v12)."""
        conn = await self._metadata_connection()
        version = conn.version_for(m.MetadataRequest)
        if version < METADATA_BY_TOPIC_ID_SINCE:
            return None
        T = m.MetadataRequest.MetadataRequestTopic
        request = m.MetadataRequest(
            topics=[T(topic_id=i, name=None) for i in ids], allow_auto_topic_creation=False
        )
        return await conn.request(request, version)

    async def _fetch_topics(self, names: list[str]) -> Any:
        """Metadata for ``names`` without creating any (the topic catalog's lookup); None when the
        upstream's Metadata has no auto-creation flag (below v4), so asking could create them."""
        conn = await self._metadata_connection()
        version = conn.version_for(m.MetadataRequest)
        if version < METADATA_AUTO_CREATE_FLAG_SINCE:
            if not self._warned_old_metadata:
                self._warned_old_metadata = True
                log.warning(
                    "upstream Metadata v%d cannot ask without creating topics: commits go on unchecked",
                    version,
                )
            return None
        T = m.MetadataRequest.MetadataRequestTopic
        request = m.MetadataRequest(topics=[T(name=n) for n in names], allow_auto_topic_creation=False)
        return await conn.request(request, version)

    async def ensure_broker(self, node_id: int, host: str, port: int, rack: str | None = None) -> Broker:
        broker = self.brokers.get(node_id)
        if broker is not None and broker.listen_port is not None:
            if (broker.host, broker.port) != (host, port):
                log.info("upstream broker %d moved to %s:%d", node_id, host, port)
                broker.host, broker.port = host, port
            broker.rack = rack
            return broker
        async with self._lock:
            broker = self.brokers.get(node_id)
            if broker is None:
                broker = Broker(node_id, host, port, rack)
                self.brokers[node_id] = broker
            if broker.listen_port is None:
                broker.listen_port = await self._open_listener(broker)
                log.info(
                    "broker %d (%s:%d) is served on %s:%d",
                    node_id,
                    host,
                    port,
                    self.advertised_host,
                    broker.listen_port,
                )
        return broker

    def upstream_address(self, node_id: int | None) -> tuple[str, int]:
        """Where a listener's pass-through goes; the coordinator listener uses any known broker."""
        if node_id is not None and node_id in self.brokers:
            b = self.brokers[node_id]
            return b.host, b.port
        if self.brokers:
            b = self.brokers[min(self.brokers)]
            return b.host, b.port
        return self.bootstrap[0]

    # -- ApiVersions --------------------------------------------------------------------------------
    def _compute_advertised(self) -> None:
        ranges: dict[int, tuple[int, int]] = {}
        for key, (lo, hi) in self.upstream_versions.items():
            if key in NOT_RELAYED or key in KCOORD_VERSIONS:
                continue
            limit = (
                REWRITTEN_VERSIONS.get(key)
                or ADDRESS_FREE_VERSIONS.get(key)
                or TRANSACTIONS_V1_VERSIONS.get(key)
            )
            for bound in (limit, GUARDED_VERSIONS.get(key)):
                if bound is not None:
                    lo, hi = max(lo, bound[0]), min(hi, bound[1])
            if lo > hi:
                continue
            ranges[key] = (lo, hi)
        ranges.update(KCOORD_VERSIONS)
        self._advertised = ranges
        sasl: dict[int, tuple[int, int]] = {}
        for key, (lo, hi) in SASL_VERSIONS.items():
            theirs = self.upstream_versions.get(key)
            if theirs is not None and max(lo, theirs[0]) <= min(hi, theirs[1]):
                sasl[key] = (max(lo, theirs[0]), min(hi, theirs[1]))
        self._sasl_advertised = sasl

    def api_versions(self, sasl: bool = False) -> list[tuple[int, int, int]]:
        advertised = {**self._advertised, **self._sasl_advertised} if sasl else self._advertised
        return sorted((k, lo, hi) for k, (lo, hi) in advertised.items())

    def api_versions_response(self, error: int = 0, *, sasl: bool = False) -> Any:
        """What kcoord's ApiVersions answer says; ``sasl``: on a SASL listener (the SASL APIs too)."""
        R = m.ApiVersionsResponse
        return R(
            error_code=error,
            api_keys=[
                R.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, lo, hi in self.api_versions(sasl)
            ],
            supported_features=self.supported_features,
            finalized_features=self.finalized_features,
            finalized_features_epoch=-1 if not self.finalized_features else 0,
        )

    def supports(self, api_key: int, version: int) -> bool:
        """Whether kcoord serves or relays this API version: exactly what it advertises."""
        rng = self._advertised.get(api_key)
        return rng is not None and rng[0] <= version <= rng[1]

    def _group_coordinator(self, group_id: str) -> tuple[int, int, str, int]:
        """(error, node id, host, port) of the kcoord node serving ``group_id``; in cluster mode
        COORDINATOR_NOT_AVAILABLE while no node serves its shard (clients retry)."""
        if self.group_owner is None:
            return ErrorCode.NONE, self.coordinator_node_id, self.advertised_host, self.coordinator_port
        owner = self.group_owner(group_id)
        if owner is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        return ErrorCode.NONE, *owner

    def group_coordinator_response(
        self, request: m.FindCoordinatorRequest, version: int
    ) -> m.FindCoordinatorResponse:
        R = m.FindCoordinatorResponse
        if version >= 4:
            coordinators = []
            for k in request.coordinator_keys:
                error, node_id, host, port = self._group_coordinator(k)
                coordinators.append(
                    R.Coordinator(key=k, node_id=node_id, host=host, port=port, error_code=error)
                )
            return R(coordinators=coordinators)
        error, node_id, host, port = self._group_coordinator(request.key)
        return R(error_code=error, error_message=None, node_id=node_id, host=host, port=port)
