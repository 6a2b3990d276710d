"""kcoord's view of the upstream cluster, and the rewriting that keeps clients talking to kcoord.

Every upstream broker gets a kcoord listener port of its own ("port per broker"); traffic on that
port goes to that broker over a connection paired with the client's. Metadata and DescribeCluster
responses are rewritten so each broker's address is kcoord's host and that broker's port, and
kcoord's own coordinator node is added to the broker list (so clients that prune brokers absent
from metadata keep their coordinator connection). FindCoordinator for group keys answers with
kcoord's coordinator listener; for transaction keys the upstream answer is rewritten like metadata.

ApiVersions is answered by kcoord: for each API, the range both kcoord and the upstream support;
for the group APIs kcoord serves, kcoord's own ranges; group-coordinator APIs kcoord does not
serve yet (KIP-848, share and streams groups) are left out so clients fall back to the classic
protocol instead of reaching a coordinator that does not know their group.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from client import BrokerError, Connection
from protocol import messages as m
from protocol.errors import ErrorCode
from protocol.messages import KCOORD_VERSIONS, REWRITTEN_VERSIONS

log = logging.getLogger("kcoord.gateway")

# Coordinator APIs of group kinds kcoord does not serve (yet): never advertised, never passed through.
UNSERVED_GROUP_APIS = frozenset({68, 69, 76, 77, 78, 79, 88, 89, 90, 91, 92})


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
    ) -> None:
        self.bootstrap = bootstrap
        self.advertised_host = advertised_host
        self.coordinator_port = coordinator_port
        self.coordinator_node_id = coordinator_node_id
        self._open_listener = open_listener
        self.brokers: dict[int, Broker] = {}
        self.upstream_versions: dict[int, tuple[int, int]] = {}
        self.finalized_features: list[Any] = []
        self.supported_features: list[Any] = []
        self.cluster_id: str | None = None
        self._lock = asyncio.Lock()

    # -- discovery ----------------------------------------------------------------------------------
    async def discover(self) -> None:
        """Learn the upstream's API versions and brokers; open a listener per broker."""
        last_error: Exception | None = None
        for address in self.bootstrap:
            try:
                conn = await Connection.open(address)
            except (TimeoutError, OSError) as exc:
                last_error = exc
                continue
            try:
                await self._fetch_api_versions(conn)
                meta = await conn.request(m.MetadataRequest(topics=[]), 1)
                self.cluster_id = getattr(meta, "cluster_id", None)
                for b in meta.brokers:
                    await self.ensure_broker(b.node_id, b.host, b.port, b.rack)
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
        self.supported_features = list(resp.supported_features or [])
        self.finalized_features = list(resp.finalized_features or [])

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
                    "broker %d (%s:%d) is served on %s:%d", node_id, host, port, self.advertised_host, broker.listen_port
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
    def api_versions(self) -> list[tuple[int, int, int]]:
        ranges: dict[int, tuple[int, int]] = {}
        for key, (lo, hi) in self.upstream_versions.items():
            if key in UNSERVED_GROUP_APIS or key in KCOORD_VERSIONS:
                continue
            if key in REWRITTEN_VERSIONS:
                rlo, rhi = REWRITTEN_VERSIONS[key]
                lo, hi = max(lo, rlo), min(hi, rhi)
                if lo > hi:
                    continue
            ranges[key] = (lo, hi)
        for key, (lo, hi) in KCOORD_VERSIONS.items():
            ranges[key] = (lo, hi)
        return sorted((k, lo, hi) for k, (lo, hi) in ranges.items())

    def api_versions_response(self, error: int = 0) -> Any:
        R = m.ApiVersionsResponse
        return R(
            error_code=error,
            api_keys=[R.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in self.api_versions()],
            supported_features=self.supported_features,
            finalized_features=self.finalized_features,
            finalized_features_epoch=-1 if not self.finalized_features else 0,
        )

    def supports(self, api_key: int, version: int) -> bool:
        rng = KCOORD_VERSIONS.get(api_key) or self.upstream_versions.get(api_key)
        return rng is not None and api_key not in UNSERVED_GROUP_APIS and rng[0] <= version <= rng[1]

    # -- rewriting ----------------------------------------------------------------------------------
    async def rewrite_metadata(self, resp: Any) -> Any:
        B = m.MetadataResponse.MetadataResponseBroker
        brokers = []
        for b in resp.brokers:
            broker = await self.ensure_broker(b.node_id, b.host, b.port, b.rack)
            brokers.append(B(node_id=b.node_id, host=self.advertised_host, port=broker.listen_port, rack=b.rack))
        brokers.append(B(node_id=self.coordinator_node_id, host=self.advertised_host, port=self.coordinator_port))
        resp.brokers = brokers
        return resp

    async def rewrite_describe_cluster(self, resp: Any) -> Any:
        B = m.DescribeClusterResponse.DescribeClusterBroker
        brokers = []
        for b in resp.brokers:
            broker = await self.ensure_broker(b.broker_id, b.host, b.port, b.rack)
            brokers.append(
                B(broker_id=b.broker_id, host=self.advertised_host, port=broker.listen_port, rack=b.rack,
                  is_fenced=getattr(b, "is_fenced", False))
            )
        brokers.append(B(broker_id=self.coordinator_node_id, host=self.advertised_host, port=self.coordinator_port))
        resp.brokers = brokers
        return resp

    async def rewrite_find_coordinator(self, resp: Any) -> Any:
        """Rewrite an upstream (transaction-key) FindCoordinator answer to kcoord's broker ports."""
        entries = resp.coordinators if resp.coordinators else [resp]
        for e in entries:
            if e.error_code == ErrorCode.NONE and e.node_id >= 0:
                broker = await self.ensure_broker(e.node_id, e.host, e.port)
                e.host, e.port = self.advertised_host, broker.listen_port
        return resp

    def group_coordinator_response(self, request: Any, version: int) -> Any:
        R = m.FindCoordinatorResponse
        if version >= 4:
            return R(
                coordinators=[
                    R.Coordinator(
                        key=k, node_id=self.coordinator_node_id, host=self.advertised_host,
                        port=self.coordinator_port, error_code=ErrorCode.NONE,
                    )
                    for k in request.coordinator_keys
                ]
            )
        return R(
            error_code=ErrorCode.NONE, error_message=None, node_id=self.coordinator_node_id,
            host=self.advertised_host, port=self.coordinator_port,
        )
