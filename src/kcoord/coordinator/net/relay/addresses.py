"""The rewriting that keeps clients talking to kcoord: every broker address a relayed answer names.

Metadata and DescribeCluster responses are rewritten so each broker's address is kcoord's host and
that broker's kcoord port (the gateway's listener for it), and kcoord's own coordinator node is
added to the broker list (so clients that prune brokers absent from metadata keep their
coordinator connection). FindCoordinator for group keys is answered by kcoord (the gateway's
``group_coordinator_response``); for transaction keys the upstream answer is rewritten like metadata.

Produce (v10+) and Fetch (v16+) answers may carry a partition leader's address (KIP-951
``NodeEndpoints``); those few are decoded and rewritten the same way, the rest are relayed as they
came (kcoord.protocol.endpoints finds the field without decoding the records). :data:`ADDRESS_HANDLING`
lists every API in Kafka's specs whose response can hold a broker address and what kcoord does
about it; a unit test checks that list against the specs.

A broker an answer names for the first time gets a listener of its own before the answer goes
out; when none can be opened the broker is left out (the client refreshes its metadata instead
of learning the broker's own address).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey

if TYPE_CHECKING:
    from ..gateway import ClusterView

log = logging.getLogger("kcoord.gateway")

# A rewriting step: the decoded upstream answer in, the answer the client may see out.
Rewrite = Callable[["ClusterView", Any], Awaitable[Any]]


def _schema_range(api_key: int) -> tuple[int, int]:
    valid = m.RESPONSES[api_key].SCHEMA.valid
    assert valid.high is not None
    return valid.low, valid.high


# Relayed APIs whose responses kcoord decodes and rewrites: the versions its schemas know. A newer
# upstream version could hold an address in a field kcoord has never heard of, so it is not offered.
REWRITTEN_VERSIONS: dict[int, tuple[int, int]] = {
    api: _schema_range(api)
    for api in (ApiKey.METADATA, ApiKey.DESCRIBE_CLUSTER, ApiKey.PRODUCE, ApiKey.FETCH)
}

# Relayed APIs offered only up to the last version whose responses hold no broker address.
ADDRESS_FREE_VERSIONS: dict[int, tuple[int, int]] = {
    55: (0, 1),  # DescribeQuorum: v2 adds each controller's listeners (host, port)
}

# Every API in Kafka's client-message specs whose response can carry a broker address, and how
# kcoord keeps its clients from learning one (tests/unit/test_gateway_addresses.py checks this
# table against ../shared/kafka-specs). Listed in docs/compatibility.md, "Broker addresses in relayed answers".
ADDRESS_HANDLING: dict[int, str] = {
    ApiKey.METADATA: "rewritten: every broker is kcoord's host and that broker's kcoord port",
    ApiKey.DESCRIBE_CLUSTER: "rewritten like Metadata",
    ApiKey.FIND_COORDINATOR: "group keys answered by kcoord; transaction keys rewritten; share keys refused",
    ApiKey.PRODUCE: "rewritten when the response carries NodeEndpoints (v10+, KIP-951)",
    ApiKey.FETCH: "rewritten when the response carries NodeEndpoints (v16+, KIP-951)",
    55: "DescribeQuorum: offered up to v1 (v2 adds controller listeners)",
    78: "ShareFetch: not advertised, refused (share groups are not served)",
    79: "ShareAcknowledge: not advertised, refused (share groups are not served)",
    88: "StreamsGroupHeartbeat: not advertised, refused (streams groups are not served)",
    89: "StreamsGroupDescribe: not advertised, refused (streams groups are not served)",
    52: "Vote: controller-only, not relayed",
    53: "BeginQuorumEpoch: controller-only, not relayed",
    54: "EndQuorumEpoch: controller-only, not relayed",
    59: "FetchSnapshot: controller-only, not relayed",
    82: "UpdateRaftVoter: controller-only, not relayed",
}


async def _listen_port(
    cluster: ClusterView, node_id: int, host: str, port: int, rack: str | None = None
) -> int | None:
    """kcoord's port for a broker an answer names (opening one for a broker met for the first
    time); None if no listener can be opened: the broker is then left out of the answer, and
    the client refreshes its metadata instead of learning the broker's own address."""
    try:
        broker = await cluster.ensure_broker(node_id, host, port, rack)
    except OSError as exc:
        log.warning("no listener for broker %d (%s:%d): %s; left out of the answer", node_id, host, port, exc)
        return None
    return broker.listen_port


async def rewrite_metadata(cluster: ClusterView, resp: Any) -> Any:
    cluster.topics.learn(resp.topics)
    B = m.MetadataResponse.MetadataResponseBroker
    brokers = []
    for b in resp.brokers:
        if (listen_port := await _listen_port(cluster, b.node_id, b.host, b.port, b.rack)) is not None:
            brokers.append(B(node_id=b.node_id, host=cluster.advertised_host, port=listen_port, rack=b.rack))
    for node_id, (host, port) in sorted(cluster.coordinator_nodes().items()):
        brokers.append(B(node_id=node_id, host=host, port=port))
    resp.brokers = brokers
    return resp


async def rewrite_describe_cluster(cluster: ClusterView, resp: Any) -> Any:
    B = m.DescribeClusterResponse.DescribeClusterBroker
    brokers = []
    for b in resp.brokers:
        if (listen_port := await _listen_port(cluster, b.broker_id, b.host, b.port, b.rack)) is not None:
            brokers.append(
                B(
                    broker_id=b.broker_id,
                    host=cluster.advertised_host,
                    port=listen_port,
                    rack=b.rack,
                    is_fenced=getattr(b, "is_fenced", False),
                )
            )
    for node_id, (host, port) in sorted(cluster.coordinator_nodes().items()):
        brokers.append(B(broker_id=node_id, host=host, port=port))
    resp.brokers = brokers
    return resp


async def rewrite_find_coordinator(cluster: ClusterView, resp: Any) -> Any:
    """Rewrite an upstream (transaction-key) FindCoordinator answer to kcoord's broker ports."""
    entries = resp.coordinators if resp.coordinators else [resp]
    for e in entries:
        if e.error_code == ErrorCode.NONE and e.node_id >= 0:
            listen_port = await _listen_port(cluster, e.node_id, e.host, e.port)
            if listen_port is None:
                e.error_code, e.node_id, e.host, e.port = ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
            else:
                e.host, e.port = cluster.advertised_host, listen_port
    return resp


async def rewrite_node_endpoints(cluster: ClusterView, resp: Any) -> Any:
    """Rewrite a Produce/Fetch answer's KIP-951 leader endpoints to kcoord's broker ports.

    A leader kcoord has no listener for yet (a broker that just joined) gets one (see
    :func:`_listen_port` for when it cannot).
    """
    endpoints = []
    for e in resp.node_endpoints:
        if (listen_port := await _listen_port(cluster, e.node_id, e.host, e.port, e.rack)) is not None:
            e.host, e.port = cluster.advertised_host, listen_port
            endpoints.append(e)
    resp.node_endpoints = endpoints
    return resp
