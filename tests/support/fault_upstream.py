"""A Kafka-protocol upstream for kcoord that sends what tansu never does: KIP-951 leader endpoints.

Since KIP-951 a Kafka broker that is not a partition's leader answers Produce (v10+) and Fetch
(v16+) with NOT_LEADER_OR_FOLLOWER, the partition's ``CurrentLeader`` and the leader's address in
``NodeEndpoints``. tansu, the embedded upstream, never does, so this server stands in for Kafka:

- in front of a real broker (``target``), it relays every frame in order over kcoord's own
  client (:class:`kcoord.client.Connection`, as the gateway relays) and rewrites the
  broker addresses in Metadata, DescribeCluster and transaction FindCoordinator answers to its
  own, as a broker behind a load balancer would; ``fault_produce_every`` makes it answer every
  Nth Produce itself with NOT_LEADER_OR_FOLLOWER plus endpoints (the batch is *not* written, so
  the client must retry it, as after a real leader move); ``max_message_bytes`` (topic -> bytes)
  makes it refuse a partition's batch larger than that with MESSAGE_TOO_LARGE, as a Kafka broker
  enforces a topic's ``max.message.bytes`` (tansu stores the config but accepts any size): the
  rest of the Produce goes upstream and the refused partitions join its answer;
- with no target it is a fake broker: ApiVersions and Metadata from its own tables, and every
  other request answered by :attr:`responder`.

It listens on its own loopback address (127.0.0.2 by default) so an upstream address is told
apart from kcoord's (127.0.0.1) in any bytes a client receives, and it records the
``client_software_name`` of every ApiVersions it is sent: kcoord sends "kcoord"; a client that
went around kcoord sends its own name.

The server runs on an event loop in a thread of its own, so synchronous tests drive it directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from kcoord.client import Connection
from kcoord.coordinator.net.embedded import free_port
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey

log = logging.getLogger("tests.fault_upstream")

# ApiVersions of an Apache Kafka 4.0 broker, for the APIs a fake upstream is asked about.
KAFKA_40_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 12),
    ApiKey.FETCH: (4, 17),
    ApiKey.LIST_OFFSETS: (1, 10),
    ApiKey.METADATA: (0, 13),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    55: (0, 2),  # DescribeQuorum
}

Responder = Callable[[int, int, Any], Any]  # (api key, version, request) -> response object


class FaultUpstream:
    def __init__(
        self,
        target: tuple[str, int] | None = None,
        host: str = "127.0.0.2",
        node_id: int = 1,
        versions: dict[int, tuple[int, int]] | None = None,
    ) -> None:
        self.target = target
        self.host = host
        self.port = free_port(host)
        self.node_id = node_id
        self.versions = versions or KAFKA_40_VERSIONS
        self.responder: Responder | None = None
        self.fault_produce_every = 0  # 0: never
        self.max_message_bytes: dict[str, int] = {}  # topic -> largest batch a Produce may carry
        # (bytes, seconds): answers larger than that many bytes are written that many bytes at a
        # time, a pause between slices (0: whole); paced_done_at: time.monotonic() of the last one's end.
        self.paced_writes: tuple[int, float] = (0, 0.0)
        self.paced_done_at = 0.0
        self.software_names: list[str] = []
        self.faults = Counter[str]()
        self.requests = Counter[int]()
        self._produce_seen = itertools.count(1)
        self._leader_epoch = itertools.count(1000)  # newer than any epoch the target reports
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-upstream", daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._flowing: asyncio.Event | None = None  # cleared: a network stall in both directions
        self._writers: set[asyncio.StreamWriter] = set()  # open client connections, for cut()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> FaultUpstream:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    async def _start(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        await self._start_server()

    async def _start_server(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)

    def pause(self) -> None:
        """Stall every connection: frames are neither relayed nor answered until :meth:`resume`
        (connections stay open, as in a network partition or a broker stuck in a GC pause)."""
        assert self._flowing is not None
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def resume(self) -> None:
        assert self._flowing is not None
        self._loop.call_soon_threadsafe(self._flowing.set)

    def cut(self) -> None:
        """Cut the network: every open connection is reset and new ones are refused (nothing
        listens) until :meth:`reconnect`."""

        async def cut() -> None:
            if self._server is not None:
                self._server.close()
                self._server = None
            for writer in list(self._writers):
                writer.transport.abort()

        asyncio.run_coroutine_threadsafe(cut(), self._loop).result(10)

    def reconnect(self) -> None:
        """Listen again on the same address after :meth:`cut`."""
        asyncio.run_coroutine_threadsafe(self._start_server(), self._loop).result(10)

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def __enter__(self) -> FaultUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- one connection -----------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Answers leave strictly in request order, whichever of them this server makes itself.
        answers: asyncio.Queue[asyncio.Future[bytes] | None] = asyncio.Queue()
        self._writers.add(writer)
        upstream = await Connection.open(self.target) if self.target is not None else None
        tasks = [asyncio.ensure_future(self._write_answers(writer, answers))]
        try:
            while True:
                payload = await _read_frame(reader)
                if payload is None:
                    break
                assert self._flowing is not None
                await self._flowing.wait()
                api_key, version, correlation_id = frames.peek_header(payload)
                self.requests[api_key] += 1
                refused: list[tuple[str, Any, int]] = []
                if api_key == ApiKey.PRODUCE and self.max_message_bytes:
                    payload, own = self._refuse_oversized(payload, version, correlation_id, refused)
                else:
                    own = None
                own = own or self._own_answer(payload, api_key, version, correlation_id)
                if own is not None:
                    fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
                    fut.set_result(own)
                elif upstream is not None:
                    relayed = upstream.send(frames.frame(payload))
                    assert relayed is not None
                    rewrite = (
                        self._rewriter(payload, api_key, version)
                        if not refused
                        else (self._add_refused(version, refused))
                    )
                    fut = relayed if rewrite is None else _then(relayed, rewrite)
                else:
                    log.error("fake upstream has no answer for api %d v%d", api_key, version)
                    break
                await answers.put(fut)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            await answers.put(None)
            with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError, ConnectionError):
                await asyncio.wait_for(tasks[-1], 5)  # the answers already owed go out
            for task in tasks:
                task.cancel()
            if upstream is not None:
                upstream.close()
            writer.close()
            self._writers.discard(writer)

    async def _write_answers(
        self, writer: asyncio.StreamWriter, answers: asyncio.Queue[asyncio.Future[bytes] | None]
    ) -> None:
        while True:
            fut = await answers.get()
            if fut is None:
                return
            try:
                answer = await fut
            except Exception:  # the broker closed the relayed connection: close this one, as a proxy does
                writer.close()
                return
            assert self._flowing is not None
            await self._flowing.wait()
            framed = frames.frame(answer)
            chunk, pause = self.paced_writes
            if chunk and len(framed) > chunk:  # a slow broker: the answer leaves in paced slices
                for start in range(0, len(framed), chunk):
                    if start:
                        await asyncio.sleep(pause)
                    writer.write(framed[start : start + chunk])
                    await writer.drain()
                self.paced_done_at = time.monotonic()
                continue
            writer.write(framed)
            await writer.drain()

    # -- what this server answers itself ------------------------------------------------------------
    def _own_answer(self, payload: bytes, api_key: int, version: int, correlation_id: int) -> bytes | None:
        if api_key == ApiKey.API_VERSIONS:
            _, request = frames.decode_request_body(payload, api_key, version)
            self.software_names.append(getattr(request, "client_software_name", "") or "")
            if self.target is not None:
                return None
            R = m.ApiVersionsResponse
            keys = [
                R.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in self.versions.items()
            ]
            return _payload(
                frames.encode_response(api_key, min(version, 3), correlation_id, R(api_keys=keys))
            )
        if (
            api_key == ApiKey.PRODUCE
            and self.fault_produce_every
            and version >= 10
            and next(self._produce_seen) % self.fault_produce_every == 0
        ):
            _, request = frames.decode_request_body(payload, api_key, version)
            self.faults["produce"] += 1
            response = self.not_leader_produce_response(request)
            return _payload(frames.encode_response(api_key, version, correlation_id, response))
        if self.target is not None:
            return None
        _, request = frames.decode_request_body(payload, api_key, version)
        if api_key == ApiKey.METADATA:
            response = m.MetadataResponse(
                brokers=[
                    m.MetadataResponse.MetadataResponseBroker(
                        node_id=self.node_id, host=self.host, port=self.port
                    )
                ],
                cluster_id="fault-upstream",
                controller_id=self.node_id,
                topics=[],
            )
        elif self.responder is not None:
            response = self.responder(api_key, version, request)
        else:
            return None
        return _payload(frames.encode_response(api_key, version, correlation_id, response))

    # -- max.message.bytes, as a Kafka broker enforces it ----------------------------------------------
    def _refuse_oversized(
        self, payload: bytes, version: int, correlation_id: int, refused: list[tuple[str, Any, int]]
    ) -> tuple[bytes, bytes | None]:
        """Take the partitions whose batch is over their topic's limit out of a Produce (adding
        them to ``refused``): the payload to relay, or this server's whole answer if none is left."""
        client_id, request = frames.decode_request_body(payload, ApiKey.PRODUCE, version)
        for t in request.topic_data:
            limit = self.max_message_bytes.get(t.name)
            if limit is None:
                continue
            kept = []
            for p in t.partition_data:
                if any(size > limit for size in _batch_sizes(p.records or b"")):
                    refused.append((t.name, t.topic_id, p.index))
                else:
                    kept.append(p)
            t.partition_data = kept
        if not refused:
            return payload, None
        self.faults["message_too_large"] += len(refused)
        log.info("refusing Produce to %s: batch over max.message.bytes", refused)
        request.topic_data = [t for t in request.topic_data if t.partition_data]
        if request.topic_data:
            return _payload(
                frames.encode_request(ApiKey.PRODUCE, version, correlation_id, client_id, request)
            ), None
        response = m.ProduceResponse(responses=[])
        self._add_refused_to(response, refused)
        return payload, _payload(frames.encode_response(ApiKey.PRODUCE, version, correlation_id, response))

    def _add_refused(self, version: int, refused: list[tuple[str, Any, int]]) -> Callable[[bytes], bytes]:
        def rewrite(raw: bytes) -> bytes:
            correlation_id, resp = frames.decode_response(ApiKey.PRODUCE, version, raw)
            self._add_refused_to(resp, refused)
            return _payload(frames.encode_response(ApiKey.PRODUCE, version, correlation_id, resp))

        return rewrite

    @staticmethod
    def _add_refused_to(response: Any, refused: list[tuple[str, Any, int]]) -> None:
        R = m.ProduceResponse
        for name, topic_id, index in refused:
            topic = next((t for t in response.responses if t.name == name), None)
            if topic is None:
                topic = R.TopicProduceResponse(name=name, topic_id=topic_id, partition_responses=[])
                response.responses.append(topic)
            topic.partition_responses.append(R.PartitionProduceResponse(
                index=index, error_code=ErrorCode.MESSAGE_TOO_LARGE, base_offset=-1, log_append_time_ms=-1,
                log_start_offset=-1, error_message="The request included a message larger than the max message "
                "size the server will accept."))  # fmt: skip

    def not_leader_produce_response(self, request: Any) -> Any:
        """NOT_LEADER_OR_FOLLOWER for every partition of a Produce, naming this node as the new
        leader with a newer epoch and this server's address, as Kafka does after a leader move."""
        R = m.ProduceResponse
        epoch = next(self._leader_epoch)
        leader = R.LeaderIdAndEpoch(leader_id=self.node_id, leader_epoch=epoch)
        topics = [
            R.TopicProduceResponse(
                name=t.name,
                topic_id=t.topic_id,
                partition_responses=[
                    R.PartitionProduceResponse(
                        index=p.index,
                        error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        base_offset=-1,
                        log_append_time_ms=-1,
                        log_start_offset=-1,
                        current_leader=leader,
                    )
                    for p in t.partition_data
                ],
            )
            for t in request.topic_data
        ]
        return R(
            responses=topics,
            node_endpoints=[R.NodeEndpoint(node_id=self.node_id, host=self.host, port=self.port, rack=None)],
        )

    # -- rewriting relayed answers ------------------------------------------------------------------
    def _rewriter(self, payload: bytes, api_key: int, version: int) -> Callable[[bytes], bytes] | None:
        if api_key in (ApiKey.METADATA, ApiKey.DESCRIBE_CLUSTER):

            def brokers(resp: Any) -> None:
                for b in resp.brokers:
                    b.host, b.port = self.host, self.port
        elif api_key == ApiKey.FIND_COORDINATOR:

            def brokers(resp: Any) -> None:
                for e in resp.coordinators or [resp]:
                    if e.node_id >= 0:
                        e.host, e.port = self.host, self.port
        else:
            return None

        def rewrite(raw: bytes) -> bytes:
            correlation_id, resp = frames.decode_response(api_key, version, raw)
            brokers(resp)
            return _payload(frames.encode_response(api_key, version, correlation_id, resp))

        return rewrite


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


def _batch_sizes(records: bytes) -> list[int]:
    """The size of each record batch in a Produce partition's records (its log overhead included,
    as Kafka compares it with max.message.bytes)."""
    sizes, pos = [], 0
    while pos + 12 <= len(records):
        size = 12 + int.from_bytes(records[pos + 8 : pos + 12], "big", signed=True)
        sizes.append(size)
        pos += size
    return sizes


def _payload(framed: bytes) -> bytes:
    return framed[4:]


def _then(fut: asyncio.Future[bytes], fn: Callable[[bytes], bytes]) -> asyncio.Future[bytes]:
    out: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def done(f: asyncio.Future[bytes]) -> None:
        if f.exception() is not None:
            out.set_exception(f.exception())  # type: ignore[arg-type]
        else:
            out.set_result(fn(f.result()))

    fut.add_done_callback(done)
    return out
