"""kcoord's own small Kafka client for its storage: connections, versions, metadata, leaders.

One :class:`~coordinator.upstream.UpstreamConnection` per broker node (keyed by node id), opened
on first use and reopened after it drops. Requests on a connection are pipelined: Kafka answers
them in order, and the connection matches responses FIFO. Every connection starts with an
ApiVersions exchange; each request is then sent at the highest version both we
(:data:`VERSION_RANGES`) and that broker support — never one the broker did not advertise.

Leaders come from Metadata and are cached per partition of the internal topic; callers that get
a leadership error (NOT_LEADER_OR_FOLLOWER, ...) call :meth:`KafkaCluster.refresh` and retry.
Nothing here knows about records or shards.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from coordinator.upstream import UpstreamClosed, UpstreamConnection
from protocol import storage_messages as sm
from protocol.codegen import Message
from protocol.primitives import CodecError

from .base import StorageError

log = logging.getLogger("kcoord.storage")

# The versions kcoord speaks, as (lowest acceptable, highest preferred). Capped where a newer
# version changes semantics we do not implement (Produce 12+/Fetch 13+ use topic ids; Produce
# 12 carries KIP-890 implicit transaction verification).
VERSION_RANGES: dict[type[Message], tuple[int, int]] = {
    sm.ApiVersionsRequest: (0, 0),
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
LEADERSHIP_ERRORS = frozenset({3, 5, 6, 74, 75})  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER, FENCED/UNKNOWN_LEADER_EPOCH
# Errors that are transient on the same leader.
TRANSIENT_ERRORS = frozenset({7, 13, 14, 15, 16, 19, 20, 51, 56})


class BrokerConnection:
    """One broker connection with its negotiated API versions."""

    def __init__(self, conn: UpstreamConnection, versions: dict[int, tuple[int, int]], client_id: str) -> None:
        self.conn = conn
        self.versions = versions  # api key -> broker's (min, max)
        self.client_id = client_id
        self._ids = itertools.count(1)

    @classmethod
    async def open(cls, address: tuple[str, int], max_frame_size: int, client_id: str, timeout: float) -> BrokerConnection:
        conn = await UpstreamConnection.open(address, max_frame_size, timeout)
        self = cls(conn, {}, client_id)
        try:
            resp = await self.request(sm.ApiVersionsRequest(), timeout, version=0)
        except BaseException:
            conn.close()
            raise
        if resp.error_code != 0:
            conn.close()
            raise StorageError(f"broker {address[0]}:{address[1]} refused ApiVersions (error {resp.error_code})")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        return self

    @property
    def closed(self) -> bool:
        return self.conn.closed

    def version_for(self, request_cls: type[Message]) -> int:
        lo, hi = VERSION_RANGES[request_cls]
        api_key = request_cls.SCHEMA.api_key
        assert api_key is not None
        broker = self.versions.get(api_key)
        if broker is None:
            raise StorageError(f"broker {self.conn.address[0]}:{self.conn.address[1]} does not support {request_cls.__name__}")
        version = min(hi, broker[1])
        if version < max(lo, broker[0]):
            raise StorageError(
                f"broker {self.conn.address[0]}:{self.conn.address[1]} supports {request_cls.__name__} "
                f"v{broker[0]}-{broker[1]}, kcoord needs v{lo}-{hi}"
            )
        return version

    async def request(self, body: Message, timeout: float, version: int | None = None) -> Any:
        """Send ``body`` and wait for its response; connection trouble becomes StorageError."""
        if version is None:
            version = self.version_for(type(body))
        correlation_id = next(self._ids) & 0x7FFFFFFF
        frame = sm.encode_request(body, version, correlation_id, self.client_id)
        try:
            fut = self.conn.send(frame)
            assert fut is not None
            payload = await asyncio.wait_for(fut, timeout)
        except (UpstreamClosed, OSError) as exc:
            raise StorageError(f"connection to {self.conn.address[0]}:{self.conn.address[1]} lost: {exc}") from exc
        except TimeoutError as exc:
            raise StorageError(
                f"{type(body).__name__} to {self.conn.address[0]}:{self.conn.address[1]} timed out after {timeout}s"
            ) from exc
        got, response = sm.decode_response(sm.RESPONSE_OF[type(body)], version, payload)
        if got != correlation_id:
            self.conn.close()
            raise CodecError(f"correlation id mismatch: sent {correlation_id}, got {got}")
        return response

    def close(self) -> None:
        self.conn.close()


class KafkaCluster:
    """Connections to the brokers plus the leader map of one topic."""

    def __init__(
        self, bootstrap: list[tuple[str, int]], max_frame_size: int, client_id: str = "kcoord-storage",
        request_timeout: float = 30.0,
    ) -> None:
        if not bootstrap:
            raise StorageError("no bootstrap servers for the Kafka storage")
        self.bootstrap = list(bootstrap)
        self.max_frame_size = max_frame_size
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[int, int] = {}  # partition -> leader node id (-1: none)
        self.partition_count: int | None = None
        self._conns: dict[int | tuple[str, int], BrokerConnection] = {}
        self._connecting: dict[int | tuple[str, int], asyncio.Future[BrokerConnection]] = {}
        self._refresh: asyncio.Future[None] | None = None

    # -- connections ----------------------------------------------------------------------------------
    async def _connect(self, key: int | tuple[str, int], address: tuple[str, int]) -> BrokerConnection:
        conn = self._conns.get(key)
        if conn is not None and not conn.closed:
            return conn
        pending = self._connecting.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[BrokerConnection] = asyncio.get_running_loop().create_future()
        self._connecting[key] = fut
        try:
            try:
                conn = await BrokerConnection.open(address, self.max_frame_size, self.client_id, self.request_timeout)
            except (OSError, TimeoutError) as exc:
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

    async def node(self, node_id: int) -> BrokerConnection:
        address = self.brokers.get(node_id)
        if address is None:
            raise StorageError(f"broker node {node_id} is not in the cluster metadata")
        return await self._connect(node_id, address)

    async def any_node(self) -> BrokerConnection:
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

    async def leader(self, partition: int) -> BrokerConnection:
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
        resp = await conn.request(req, self.request_timeout)
        self.brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        for key in [k for k in self._conns if isinstance(k, int) and k not in self.brokers]:
            self._conns.pop(key).close()
        return resp

    async def refresh(self, topic: str) -> None:
        """Reload the leader map of ``topic``; concurrent callers share one Metadata round trip."""
        if self._refresh is not None:
            return await asyncio.shield(self._refresh)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._refresh = fut
        try:
            resp = await self.metadata(topic)
            for t in resp.topics:
                if t.name == topic and t.error_code == 0:
                    self.partition_count = len(t.partitions)
                    self.leaders = {p.partition_index: p.leader_id for p in t.partitions}
            fut.set_result(None)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()
            raise
        finally:
            self._refresh = None

    async def transaction_coordinator(self, transactional_id: str) -> BrokerConnection:
        """The broker coordinating ``transactional_id`` (FindCoordinator key type 1)."""
        conn = await self.any_node()
        version = conn.version_for(sm.FindCoordinatorRequest)
        if version >= 4:
            req = sm.FindCoordinatorRequest(key_type=1, coordinator_keys=[transactional_id])
        else:
            req = sm.FindCoordinatorRequest(key=transactional_id, key_type=1)
        resp = await conn.request(req, self.request_timeout, version)
        if version >= 4:
            c = resp.coordinators[0]
            error, node_id, host, port = c.error_code, c.node_id, c.host, c.port
        else:
            error, node_id, host, port = resp.error_code, resp.node_id, resp.host, resp.port
        if error != 0:
            raise StorageError(f"FindCoordinator for transactional id {transactional_id!r}: error {error}")
        self.brokers.setdefault(node_id, (host, port))
        return await self._connect(node_id, (host, port))

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
