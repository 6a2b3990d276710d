"""The storage's view of the cluster: a connection per broker, and the leaders of one topic.

Connections are :class:`client.Connection` (pipelined; ApiVersions on open, then every request
at the highest version both the broker and kcoord (:data:`VERSION_RANGES`) speak), one per
broker node (keyed by node id), opened on first use and reopened after it drops. :func:`request`
turns connection trouble into :class:`StorageError`, which every caller here retries on.

Leaders come from Metadata and are cached per partition of the internal topic; callers that get
a leadership error (NOT_LEADER_OR_FOLLOWER, ...) call :meth:`KafkaCluster.refresh` and retry.
Nothing here knows about records or shards.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kcoord.client import (
    PLAINTEXT,
    Connection,
    ConnectionLost,
    KafkaClientError,
    RequestTimedOut,
    UnsupportedVersion,
    UpstreamSecurity,
    connect,
)
from kcoord.protocol import storage_messages as sm
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode

from .base import StorageError

log = logging.getLogger("kcoord.storage")

# The versions kcoord speaks, as (lowest acceptable, highest preferred). Capped where a newer
# version changes semantics we do not implement (Produce 12+/Fetch 13+ use topic ids; Produce
# 12 carries KIP-890 implicit transaction verification).
VERSION_RANGES: dict[type[Message], tuple[int, int]] = {
    sm.MetadataRequest: (1, 12),
    sm.ProduceRequest: (3, 11),
    sm.FetchRequest: (4, 12),
    sm.ListOffsetsRequest: (1, 7),
    sm.InitProducerIdRequest: (0, 4),
    sm.FindCoordinatorRequest: (1, 4),
    sm.CreateTopicsRequest: (2, 7),
    sm.DescribeConfigsRequest: (1, 4),
    sm.AddPartitionsToTxnRequest: (0, 3),
    sm.EndTxnRequest: (0, 3),
}

# Errors after which the leader we used may be stale: refresh metadata, retry.
LEADERSHIP_ERRORS = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    }
)
# Errors that are transient on the same leader.
TRANSIENT_ERRORS = frozenset(
    {
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)


async def request(conn: Connection, body: Message, timeout: float, version: int | None = None) -> Any:
    """``body``'s response from ``conn``; a lost connection, a timeout or no common version is a StorageError."""
    try:
        if version is None:
            return await conn.request(body, timeout=timeout)
        return await conn.request(body, version, timeout=timeout)
    except REQUEST_FAILURES as exc:
        raise as_storage_error(conn, exc) from exc


# What a request to a broker can fail with, each turned into a StorageError by as_storage_error.
REQUEST_FAILURES = (ConnectionLost, OSError, RequestTimedOut, UnsupportedVersion)


def as_storage_error(conn: Connection, exc: BaseException) -> StorageError:
    """The StorageError for a failed request on ``conn``: a lost connection says so."""
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, ConnectionLost | OSError):
        return StorageError(f"connection to {conn.name} lost: {exc}")
    if isinstance(exc, RequestTimedOut | UnsupportedVersion):
        return StorageError(str(exc))
    return StorageError(repr(exc))


class KafkaCluster:
    """Connections to the brokers plus the leader map of one topic."""

    def __init__(
        self,
        bootstrap: list[tuple[str, int]],
        max_frame_size: int,
        client_id: str = "kcoord-storage",
        request_timeout: float = 30.0,
        *,
        security: UpstreamSecurity = PLAINTEXT,
    ) -> None:
        if not bootstrap:
            raise StorageError("no bootstrap servers for the Kafka storage")
        self.bootstrap = list(bootstrap)
        self.max_frame_size = max_frame_size
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.security = security  # TLS and kcoord's own SASL login to the brokers
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[int, int] = {}  # partition -> leader node id (-1: none)
        self.partition_count: int | None = None
        self._conns: dict[int | tuple[str, int], Connection] = {}
        self._connecting: dict[int | tuple[str, int], asyncio.Future[Connection]] = {}
        self._refresh: asyncio.Future[None] | None = None

    # -- connections ----------------------------------------------------------------------------------
    async def _connect(self, key: int | tuple[str, int], address: tuple[str, int]) -> Connection:
        conn = self._conns.get(key)
        if conn is not None and not conn.closed:
            return conn
        pending = self._connecting.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[Connection] = asyncio.get_running_loop().create_future()
        self._connecting[key] = fut
        try:
            try:
                conn = await connect(
                    address,
                    self.max_frame_size,
                    self.request_timeout,
                    client_id=self.client_id,
                    request_timeout=self.request_timeout,
                    limits=VERSION_RANGES,
                    security=self.security,
                )
            except (OSError, TimeoutError, KafkaClientError) as exc:
                raise StorageError(f"cannot connect to broker {address[0]}:{address[1]}: {exc}") from exc
            self._conns[key] = conn
            fut.set_result(conn)
            return conn
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved: a failed connect is reported to the caller above
            raise
        finally:
            del self._connecting[key]

    async def node(self, node_id: int) -> Connection:
        address = self.brokers.get(node_id)
        if address is None:
            raise StorageError(f"broker node {node_id} is not in the cluster metadata")
        return await self._connect(node_id, address)

    async def any_node(self) -> Connection:
        """A live connection to some broker: an open one if any, else the bootstrap list in order."""
        for conn in self._conns.values():
            if not conn.closed:
                return conn
        errors = []
        for address in list(self.brokers.values()) + self.bootstrap:
            try:
                return await self._connect(address, address)
            except StorageError as exc:
                errors.append(str(exc))
        raise StorageError("no broker reachable: " + "; ".join(errors))

    async def leader(self, partition: int) -> Connection:
        node_id = self.leaders.get(partition, -1)
        if node_id < 0:
            raise StorageError(f"partition {partition} has no leader")
        return await self.node(node_id)

    # -- metadata -------------------------------------------------------------------------------------
    async def metadata(self, topic: str) -> Any:
        """A Metadata response for ``topic`` (never auto-creates it); updates the broker map."""
        conn = await self.any_node()
        req = sm.MetadataRequest(
            topics=[sm.MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
        )
        resp = await request(conn, req, self.request_timeout)
        self.brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        for key in [k for k in self._conns if isinstance(k, int) and k not in self.brokers]:
            self._conns.pop(key).close()
        return resp

    def forget_topic(self) -> None:
        """The topic was deleted: its leaders and partition count are unknown again (a topic
        created again under its name may have others), as before the first :meth:`refresh`."""
        self.leaders = {}
        self.partition_count = None

    async def refresh(self, topic: str) -> None:
        """Reload the leader map of ``topic``; concurrent callers share one Metadata round trip."""
        if self._refresh is not None:
            return await asyncio.shield(self._refresh)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._refresh = fut
        try:
            resp = await self.metadata(topic)
            for t in resp.topics:
                if t.name == topic and t.error_code == ErrorCode.NONE:
                    self.partition_count = len(t.partitions)
                    self.leaders = {p.partition_index: p.leader_id for p in t.partitions}
            fut.set_result(None)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()
            raise
        finally:
            self._refresh = None

    async def transaction_coordinator(self, transactional_id: str) -> Connection:
        """The broker coordinating ``transactional_id`` (FindCoordinator key type 1)."""
        conn = await self.any_node()
        try:
            version = conn.version_for(sm.FindCoordinatorRequest)
        except UnsupportedVersion as exc:
            raise StorageError(str(exc)) from exc
        if version >= 4:
            req = sm.FindCoordinatorRequest(key_type=1, coordinator_keys=[transactional_id])
        else:
            req = sm.FindCoordinatorRequest(key=transactional_id, key_type=1)
        resp = await request(conn, req, self.request_timeout, version)
        if version >= 4:
            c = resp.coordinators[0]
            error, node_id, host, port = c.error_code, c.node_id, c.host, c.port
        else:
            error, node_id, host, port = resp.error_code, resp.node_id, resp.host, resp.port
        if error != ErrorCode.NONE:
            raise StorageError(f"FindCoordinator for transactional id {transactional_id!r}: error {error}")
        self.brokers.setdefault(node_id, (host, port))
        return await self._connect(node_id, (host, port))

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
