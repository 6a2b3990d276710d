"""One client connection: frames in, responses out, strictly in request order.

Each request gets a slot in arrival order, filled with the response bytes once its answer is
known; a response is written only when every earlier slot has been written, so a parked JoinGroup
holds back the responses behind it on that connection, as Kafka's clients expect. Requests
kcoord serves go to the router; all others go to this listener's upstream broker over a
connection paired with this one, and their answers come back unchanged unless they name a
broker by address (Metadata, DescribeCluster, transaction FindCoordinator, and Produce/Fetch
answers carrying KIP-951 leader endpoints: see gateway.py). Produce with acks=0 gets no response
and takes no slot. OffsetCommit and TxnOffsetCommit have their topics checked against the
upstream's first (topics.py); while one waits for a topic lookup, the connection's later group
requests wait behind it, so the shards see a connection's requests in the order they came.

Bad input never reaches past this class: an oversized or malformed frame, an unknown API key or
an unsupported version closes this connection with a log line; other clients are unaffected.

Limits. Reading from a connection pauses, and requests already read wait undispatched
(``_backlog``), while any of these holds; it resumes when none does:
- ``max.inflight`` requests are in flight (resumes at half);
- its unsent output passes ``connection.output.pause.bytes`` (resumes at half). Unsent output is
  the answers filled but not yet handed to the transport (``_queued``: slots behind a parked one,
  ``_out``) plus what the transport holds; the transport's write-buffer limits are 0, so
  pause_writing/resume_writing say exactly when it holds any;
- the unsent output of all connections passes ``queued.max.response.bytes`` (App; it holds some);
- a large request waits for ``queued.max.request.bytes`` memory (protocol.frames.FrameBudget).
A connection whose unsent output passes ``connection.output.max.bytes`` is closed. The App's sweep
closes connections idle for ``connections.max.idle.ms`` (no complete request, no answer written,
nothing in flight) and those whose frame has been arriving for ``request.receive.timeout.ms``
(not while we are the ones not reading). Closing drops every buffer at once (slots, output,
undispatched frames, the partial frame and its reserved memory) and the App's accounting with it.
The hot path pays a few integer compares per request: no timers, no allocations.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kcoord.client import Connection as UpstreamConnection
from kcoord.client import ConnectionLost as UpstreamClosed
from kcoord.client import StreamingTarget
from kcoord.coordinator.core.responses import error_response
from kcoord.coordinator.core.result import RequestContext
from kcoord.coordinator.runtime.router import GROUP_APIS
from kcoord.protocol import frames, storage_messages
from kcoord.protocol import messages as m
from kcoord.protocol.codegen import DECODER_BACKEND, Message
from kcoord.protocol.endpoints import NODE_ENDPOINTS_SINCE, carries_node_endpoints, without_node_endpoints
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import KCOORD_VERSIONS, ApiKey
from kcoord.protocol.primitives import CodecError, decode_uvarint
from kcoord.protocol.storage_messages import CreateTopicsResponse

from .topic_ids import TOPIC_ID_APIS, TOPIC_ID_SINCE, by_id, by_name, request_ids
from .topics import COMMIT_APIS, all_known, merged, without

if TYPE_CHECKING:
    from .server import Listener

log = logging.getLogger("kcoord.connection")

Reply = Callable[[Any], None]

_INT16 = struct.Struct(">h")
_ACKS_ONE = _INT16.pack(1)

# Relayed answers above this many bytes are written while they arrive (ClientConnection._relay_stream),
# all but their last STREAM_HOLD_BACK bytes, which wait for the whole answer to be checked for
# KIP-951 NodeEndpoints. Finding that field without decoding the records needs the C decoder.
STREAM_ABOVE = 256 * 1024 if DECODER_BACKEND == "c" else 1 << 62
STREAM_HOLD_BACK = 64 * 1024
_UNDECIDED = -1  # _Slot.sent: no piece of a large answer seen yet
_NOT_STREAMING = -2  # _Slot.sent: written when whole, as any answer


# Why reading is paused (bits of ClientConnection._pause_reasons); _CLOSED never clears.
_INFLIGHT = 1  # max.inflight requests in flight
_OUTPUT = 2  # unsent output over connection.output.pause.bytes
_TOTAL = 4  # all connections' unsent output over queued.max.response.bytes
_MEMORY = 8  # a large request waits for queued.max.request.bytes
_CLOSED = 16


METADATA_BY_ID_SINCE = 12  # MetadataRequestTopic.name is nullable: a topic may be asked for by id
CREATE_TOPICS = CreateTopicsResponse.SCHEMA.api_key  # relayed, not served: not in ApiKey
END_TXN = storage_messages.EndTxnRequest.SCHEMA.api_key  # relayed, and watched (transactions)
END_TXN_FLEXIBLE_SINCE = 3
CREATE_TOPICS_WITH_IDS_SINCE = 7  # CreatableTopicResult has TopicId (and NumPartitions since v5)
_ZERO_ID = uuid.UUID(int=0)


def metadata_asked_by_id(payload: bytes, version: int, correlation_id: int) -> bytes:
    """A Metadata v12+ request whose topics asked for by id carry the name "" (the Java consumer
    sends the schema default) with null names instead. Kafka looks a topic with a non-zero id up by
    its id whatever the name says; tansu answers such a topic INVALID_TOPIC_EXCEPTION, and the
    consumer of the consumer protocol, which learns its partitions' names this way, then never
    fetches. Other requests are relayed as they came."""
    client_id, request = frames.decode_request_body(payload, ApiKey.METADATA, version)
    topics = getattr(request, "topics", None) or ()
    by_id = [t for t in topics if t.name == "" and t.topic_id != _ZERO_ID]
    if not by_id:
        return payload
    for topic in by_id:
        topic.name = None
    return frames.encode_request(ApiKey.METADATA, version, correlation_id, client_id, request)[4:]


class UnsupportedApi(CodecError):
    """A well-formed request for an API version kcoord neither serves nor relays."""


def request_body_start(frame_bytes: bytes, flexible: bool) -> int:
    """Where a request's body starts: past the client id (not decoded: a relay has no use for it)
    and, when ``flexible``, the header's tagged fields. A truncated header raises CodecError."""
    end = len(frame_bytes)
    if end < 10:
        raise CodecError("request header truncated before client id")
    (n,) = _INT16.unpack_from(frame_bytes, 8)
    pos = 10 + max(n, 0)
    if pos > end:
        raise CodecError("client id runs past end of frame")
    return frames.skip_tagged_fields(frame_bytes, pos) if flexible else pos


def produce_acks(frame_bytes: bytes, header_size: int, version: int) -> tuple[int, int]:
    """The ``acks`` of a Produce request (v3+: after the nullable transactional id) and its offset.

    A frame that ends before its acks raises CodecError (bad input: the connection closes)."""
    pos = header_size
    end = len(frame_bytes)
    if version >= 3:
        if version >= 9:
            n, pos = decode_uvarint(frame_bytes, pos)
            pos += max(n - 1, 0)
        else:
            if pos + 2 > end:
                raise CodecError(f"Produce v{version} truncated in its transactional id")
            (n,) = _INT16.unpack_from(frame_bytes, pos)
            pos += 2 + max(n, 0)
    if pos + 2 > end:
        raise CodecError(f"Produce v{version} ends before its acks ({end} bytes, acks at {pos})")
    (acks,) = _INT16.unpack_from(frame_bytes, pos)
    return acks, pos


class ClientConnection(asyncio.Protocol):
    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.app = listener.app
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.ip = ""
        self.client_host = ""
        settings = self.app.settings
        self._decoder = frames.FrameDecoder(settings.max_frame_size, self.app.frame_budget)
        self._decoder.on_ready = self._memory_granted
        self._max_inflight = settings.max_inflight
        self._output_pause = settings.connection_output_pause_bytes
        self._output_max = settings.connection_output_max_bytes
        self._slots: deque[_Slot] = deque()
        self._frame_api = -1
        self._frame_received = 0.0
        self._upstream: UpstreamConnection | None = None
        self._upstream_opening: asyncio.Future[None] | None = None
        # Frames waiting for the upstream connection to open, each with where its answer goes.
        self._outbox: list[
            tuple[bytes, bool, asyncio.Future[bytes] | Callable[[bytes | None], None] | None]
        ] = []
        # Relayed bytes [out, in], added to per relayed frame (Metrics.upstream_byte_counts).
        self._relayed_bytes: list[int] = self.app.metrics.upstream_byte_counts
        self._pause_reasons = 0
        self._backlog: list[bytes] | None = None  # frames read but not dispatched while paused
        self._continue_scheduled = False
        self._closed = False
        self._closed_at = 0.0
        # Unsent output: answers filled but not handed to the transport yet (``_queued``), and what
        # the App last counted for this connection (``_held``: that plus the transport's backlog).
        self._queued = 0
        self._held = 0
        self._transport_backlog = False  # between pause_writing and resume_writing
        # perf_counter of the last complete request or answer written (connections.max.idle.ms), and
        # of the first byte of a frame not complete yet (request.receive.timeout.ms; 0: none).
        self._active = time.perf_counter()
        self._partial_since = 0.0
        # Responses ready to write. They go out in one write per read (at the end of data_received)
        # or per loop iteration (answers that waited for the log arrive many per tick): a write
        # is a syscall, and one per response was a tenth of kcoord's CPU in a commit storm.
        self._out: list[bytes] = []
        self._out_large = False  # _out holds a large answer's payload (see _Slot.body)
        self._writes = (
            self.app.writes
        )  # one write callback per loop iteration for all connections (writes.py)
        self._dispatching = False
        self._write_scheduled = False
        # While a commit waits for a topic lookup, this connection's later group requests wait
        # here (with their reply callbacks), so the shards see them in arrival order.
        self._held_requests: list[tuple[int, RequestContext, Message, Reply]] | None = None

    # -- asyncio.Protocol -----------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = f"{peer[0]}:{peer[1]}"
            self.ip = str(peer[0])
            self.client_host = "/" + self.ip
        if not self.app.connection_opened(self):  # over max.connections(.per.ip): logged and counted there
            self._closed = True
            self._pause_reasons = _CLOSED
            self._decoder.close()
            transport.close()
            return
        # No write buffering in the transport before it tells us: pause_writing as soon as the socket
        # does not take everything, resume_writing once all of it went (see _account).
        set_limits = getattr(transport, "set_write_buffer_limits", None)
        if set_limits is not None:
            set_limits(0)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._pause_reasons |= _CLOSED
        upstream = self._upstream
        if upstream is not None and self._upstream_opening is None:
            upstream.close_when_idle()  # what the client sent is still delivered and processed
            self._upstream = None
        self._release()  # answers still owed are dropped when they come (see _fill)
        self._transport_backlog = False
        self._account()
        self.app.connection_closed(self)

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        decoder = self._decoder
        try:
            payloads = decoder.feed(data)
        except frames.FrameTooLarge as exc:
            self.close_with(f"oversized frame: {exc}")
            return
        now = self._frame_received = time.perf_counter()
        if decoder.buffered:  # a frame has begun: request.receive.timeout.ms runs from its first byte
            if payloads or not self._partial_since:
                self._partial_since = now
        else:
            self._partial_since = 0.0
        if decoder.waiting:  # a large frame waits for queued.max.request.bytes: read no more of it
            self._pause(_MEMORY)
        if payloads:
            self._active = now
            if self._backlog is not None:  # not expected: reading was paused
                payloads = self._backlog + payloads
                self._backlog = None
            self._run(payloads)

    def _run(self, payloads: list[bytes]) -> None:
        """Dispatch frames in order until reading pauses (the rest waits in ``_backlog``)."""
        rest = None
        self._dispatching = True
        try:
            frames_left = iter(payloads)
            for payload in frames_left:
                try:
                    self._dispatch(payload)
                except UnsupportedApi as exc:
                    self.close_with(str(exc))
                    return
                except CodecError as exc:
                    self.close_with(f"malformed request: {exc}")
                    return
                if self._pause_reasons:
                    if not self._closed:
                        rest = list(frames_left)
                    break
        finally:
            self._dispatching = False
            self._write_out()
            if self._upstream is not None:
                self._upstream.flush()  # the frames of this read go upstream in one write, now
        if rest and not self._closed:  # (that write may have closed it: over connection.output.max.bytes)
            self._backlog = rest
            if not self._pause_reasons:  # resumed by that write
                self._schedule_continue()

    def _schedule_continue(self) -> None:
        if not self._continue_scheduled:
            self._continue_scheduled = True
            asyncio.get_running_loop().call_soon(self._continue)

    def _continue(self) -> None:
        self._continue_scheduled = False
        backlog = self._backlog
        if backlog is not None and not self._pause_reasons:
            self._backlog = None
            self._run(backlog)

    # -- pausing ------------------------------------------------------------------------------------
    def _pause(self, reason: int) -> None:
        if not self._pause_reasons and self.transport is not None:
            self.transport.pause_reading()
        self._pause_reasons |= reason

    def _resume(self, reason: int) -> None:
        reasons = self._pause_reasons
        if not reasons & reason:
            return
        reasons &= ~reason
        self._pause_reasons = reasons
        if reasons or self.transport is None:
            return
        self.transport.resume_reading()
        if self._partial_since:  # the client could not send while we did not read
            self._partial_since = time.perf_counter()
        if self._backlog is not None and not self._dispatching:
            self._schedule_continue()

    def _memory_granted(self) -> None:
        """The FrameBudget reserved the memory our large partial frame waited for."""
        self._resume(_MEMORY)

    def pause_writing(self) -> None:
        # Called inside transport.write(): _write_out accounts for it once the write returns.
        self._transport_backlog = True

    def resume_writing(self) -> None:
        self._transport_backlog = False
        self._active = time.perf_counter()  # the client took all we sent
        self._account()

    def _account(self) -> None:
        """Update this connection's share of the App's unsent-output total, then apply the
        per-connection limits: pause above connection.output.pause.bytes (resume at half), close
        above connection.output.max.bytes."""
        held = self._queued
        if self._transport_backlog and self.transport is not None:
            held += self.transport.get_write_buffer_size()
        old = self._held
        if held != old:
            self._held = held
            self.app.output_changed(self, old, held)
        if self._closed:
            return
        if held > self._output_max:
            self.close_for_limit(
                "output_cap",
                f"{held} bytes of responses unsent (connection.output.max.bytes={self._output_max})",
            )
        elif held > self._output_pause:
            if not self._pause_reasons & _OUTPUT:
                self._pause(_OUTPUT)
        elif self._pause_reasons & _OUTPUT and held <= self._output_pause // 2:
            self._resume(_OUTPUT)

    # -- dispatch -------------------------------------------------------------------------------------
    def _dispatch(self, payload: bytes) -> None:
        api_key, version, correlation_id = frames.peek_header(payload)
        self._frame_api = api_key
        self.app.metrics.request_received(api_key, version)
        if api_key == ApiKey.API_VERSIONS:
            self._reply_now(api_key, version, correlation_id, self._api_versions(version))
            return
        if api_key in KCOORD_VERSIONS:
            lo, hi = KCOORD_VERSIONS[api_key]
            if not lo <= version <= hi:
                raise UnsupportedApi(f"unsupported api {api_key} v{version}: kcoord serves v{lo}-{hi}")
            client_id, request = frames.decode_request_body(payload, api_key, version)
            ctx = RequestContext(version, client_id or "", self.client_host, correlation_id)
            if api_key in GROUP_APIS:
                self._serve_group(api_key, ctx, request)
            elif isinstance(request, m.FindCoordinatorRequest):
                self._find_coordinator(payload, ctx, request)
            elif isinstance(request, m.AddOffsetsToTxnRequest):
                self._add_offsets_to_txn(ctx, request)
            return
        cluster = self.app.cluster
        if not cluster.supports(api_key, version):
            # As Kafka does for an API version it cannot parse.
            raise UnsupportedApi(
                f"unsupported api {api_key} v{version}: served neither by kcoord nor upstream"
            )
        if api_key == ApiKey.METADATA:
            if version >= METADATA_BY_ID_SINCE:
                payload = metadata_asked_by_id(payload, version, correlation_id)
            self._forward_and_rewrite(payload, api_key, version, cluster.rewrite_metadata)
        elif api_key == ApiKey.DESCRIBE_CLUSTER:
            self._forward_and_rewrite(payload, api_key, version, cluster.rewrite_describe_cluster)
        elif api_key == ApiKey.PRODUCE:
            acks, offset = produce_acks(payload, request_body_start(payload, flexible=version >= 9), version)
            if acks == 0:
                # The client expects no response. Some brokers (tansu) answer acks=0 anyway, which
                # would shift every later response on the paired connection; asking for acks=1 and
                # dropping the answer keeps the pairing exact with any broker.
                payload = payload[:offset] + _ACKS_ONE + payload[offset + 2 :]
                self._forward(payload, expect_response=True, reply=False)
            else:
                self._forward(payload, expect_response=True, api=(api_key, version))
        elif api_key == ApiKey.FETCH:
            self._forward(payload, expect_response=True, api=(api_key, version))
        elif api_key == END_TXN:
            self._forward(payload, expect_response=True, observe=self._end_txn_observer(payload, version))
        elif api_key == CREATE_TOPICS and version >= CREATE_TOPICS_WITH_IDS_SINCE:
            self._forward(
                payload, expect_response=True, observe=lambda raw: self._learn_created_topics(raw, version)
            )
        else:
            self._forward(payload, expect_response=True)

    def _end_txn_observer(self, payload: bytes, version: int) -> Callable[[bytes], None] | None:
        """What watches a relayed EndTxn: once the upstream answers NONE, the shards holding the
        producer's transaction open expect its marker (coordinator/runtime/transactions.py), before
        the client reads the answer and can start its next transaction."""
        try:
            header = frames.parse_request_header(payload, flexible=version >= END_TXN_FLEXIBLE_SINCE)
            request = storage_messages.EndTxnRequest.decode_from(payload, header.size, version)[0]
        except Exception as exc:  # relayed as it came; the upstream judges it
            log.warning(
                "%s: an EndTxn v%d request kcoord cannot read (%r); relayed as is", self.peer, version, exc
            )
            return None
        producer_id = request.producer_id

        def observe(raw: bytes) -> None:  # runs as a future's callback: never raise
            try:
                _, response = storage_messages.decode_response(storage_messages.EndTxnResponse, version, raw)
                if response.error_code == ErrorCode.NONE:
                    self.app.transactions.transaction_ended(producer_id)
            except Exception as exc:
                log.warning(
                    "%s: an EndTxn v%d answer kcoord cannot read (%r); relayed as is", self.peer, version, exc
                )

        return observe

    def _learn_created_topics(self, raw: bytes, version: int) -> None:
        """What a relayed CreateTopics answer says was created goes to the topic catalog before the
        client reads it (the answer itself is relayed as it came)."""
        try:
            _, response = storage_messages.decode_response(CreateTopicsResponse, version, raw)
        except Exception as exc:  # runs as a future's callback: never raise; the answer is relayed anyway
            log.warning(
                "%s: a CreateTopics v%d answer kcoord cannot read (%r); relayed as is",
                self.peer,
                version,
                exc,
            )
            return
        self.app.cluster.topics.learn_created(
            (t.name, t.topic_id, t.num_partitions) for t in response.topics if t.error_code == ErrorCode.NONE
        )

    def _api_versions(self, version: int) -> tuple[int, Any]:
        cluster = self.app.cluster
        if version > KCOORD_VERSIONS[ApiKey.API_VERSIONS][1]:
            # Kafka answers an ApiVersions it cannot parse with a v0 body: error 35 and its ranges.
            return 0, cluster.api_versions_response(ErrorCode.UNSUPPORTED_VERSION)
        return version, cluster.api_versions_response()

    def _serve_group(self, api_key: int, ctx: RequestContext, request: Message) -> None:
        if api_key == ApiKey.LIST_GROUPS and not self.listener.is_coordinator:
            # kcoord's coordinator node is in the metadata; admin clients ask every node for its
            # groups, so broker ports answer with none to keep each group listed exactly once.
            self._reply_now(
                api_key, ctx.api_version, ctx.correlation_id, (ctx.api_version, m.ListGroupsResponse())
            )
            return
        slot = self._new_slot()
        version = ctx.api_version
        correlation_id = ctx.correlation_id
        metrics = self.app.metrics

        def reply(response: Any) -> None:
            # Runs inside the shard's write path (often before route() returns): never raise.
            if self._closed:
                return
            try:
                metrics.response_sent(api_key, version, response)
                data = frames.encode_response(api_key, version, correlation_id, response)
            except Exception as exc:
                log.exception("%s: cannot encode the response to api=%d v%d", self.peer, api_key, version)
                self._fail(slot, f"cannot encode a response: {exc!r}")
                return
            self._fill(slot, data)

        self._route(api_key, ctx, request, reply)

    def _add_offsets_to_txn(self, ctx: RequestContext, request: m.AddOffsetsToTxnRequest) -> None:
        """Answered by kcoord, not relayed: the group's shard partition joins the client's
        transaction (coordinator/runtime/transactions.py)."""
        slot = self._new_slot()
        api_key, version, correlation_id = ApiKey.ADD_OFFSETS_TO_TXN, ctx.api_version, ctx.correlation_id

        def done(task: asyncio.Future[Message]) -> None:
            if self._closed:
                return
            if task.cancelled() or task.exception() is not None:
                log.error(
                    "%s: AddOffsetsToTxn failed: %r",
                    self.peer,
                    None if task.cancelled() else task.exception(),
                )
                response = error_response(api_key, version, request, ErrorCode.UNKNOWN_SERVER_ERROR)
            else:
                response = task.result()
            self.app.metrics.response_sent(api_key, version, response)
            self._fill(slot, frames.encode_response(api_key, version, correlation_id, response))

        asyncio.ensure_future(self.app.transactions.add_offsets_to_txn(ctx, request)).add_done_callback(done)

    def _route(self, api_key: int, ctx: RequestContext, request: Message, reply: Reply) -> None:
        """To the router; a commit's topics are checked first, as a broker checks them (topics.py),
        and topic ids (OffsetCommit/OffsetFetch v10) are resolved to names (topic_ids.py)."""
        if self._held_requests is not None:
            self._held_requests.append((api_key, ctx, request, reply))
        elif (
            api_key == ApiKey.TXN_OFFSET_COMMIT
            and self.app.router.shard_of(request.group_id).has_open_transactions()
        ):  # type: ignore[attr-defined]
            # Every marker already in the shard's log first: a commit after its transaction ended
            # must find it ended (runtime/shard.py, "Transactions").
            shard = self.app.router.shard_of(request.group_id)  # type: ignore[attr-defined]
            self._hold_requests_until(
                shard.catch_up(),
                "transaction marker catch-up",
                lambda: self._route_by_name(api_key, ctx, request, reply),
            )
        elif api_key in TOPIC_ID_APIS and ctx.api_version >= TOPIC_ID_SINCE:
            self._route_by_topic_ids(api_key, ctx, request, reply)
        elif api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT and request.subscribed_topic_names:  # type: ignore[attr-defined]
            self._route_subscription(ctx, request, reply)
        elif api_key not in COMMIT_APIS or all_known(self.app.cluster.topics.partitions, request.topics):  # type: ignore[attr-defined]
            self.app.router.route(api_key, ctx, request, reply)
        else:
            self._route_commit(api_key, ctx, request, reply)

    def _route_by_name(self, api_key: int, ctx: RequestContext, request: Message, reply: Reply) -> None:
        """:meth:`_route` for a request whose topic ids were resolved (or that has none)."""
        if api_key not in COMMIT_APIS or all_known(self.app.cluster.topics.partitions, request.topics):  # type: ignore[attr-defined]
            self.app.router.route(api_key, ctx, request, reply)
        else:
            self._route_commit(api_key, ctx, request, reply)

    def _route_subscription(self, ctx: RequestContext, request: Any, reply: Reply) -> None:
        """A ConsumerGroupHeartbeat naming its topics: names the catalog neither knows nor believes
        missing are looked up first (a topic created a moment ago, through kcoord or around it), so
        the member is assigned its partitions now rather than after the catalog's next listing."""
        catalog = self.app.cluster.topics
        unsure = catalog.unsure(request.subscribed_topic_names)
        if not unsure:
            self.app.router.route(ApiKey.CONSUMER_GROUP_HEARTBEAT, ctx, request, reply)
            return
        self._hold_requests_until(
            catalog.lookup(unsure), "subscription topic lookup",
            lambda: self.app.router.route(ApiKey.CONSUMER_GROUP_HEARTBEAT, ctx, request, reply),
        )  # fmt: skip

    def _route_by_topic_ids(self, api_key: int, ctx: RequestContext, request: Any, reply: Reply) -> None:
        """A v10 OffsetCommit/OffsetFetch: ids the catalog does not know are looked up first (the
        connection's later group requests wait behind it, as for a commit's topic lookup)."""
        catalog = self.app.cluster.topics
        unknown = [i for i in request_ids(api_key, request) if i not in catalog.names]
        if not unknown:
            self._serve_by_topic_ids(api_key, ctx, request, reply)
            return
        self._hold_requests_until(
            catalog.lookup_ids(unknown),
            "topic id lookup",
            lambda: self._serve_by_topic_ids(api_key, ctx, request, reply),
        )

    def _serve_by_topic_ids(self, api_key: int, ctx: RequestContext, request: Any, reply: Reply) -> None:
        catalog = self.app.cluster.topics
        names = {i: catalog.names[i] for i in request_ids(api_key, request) if i in catalog.names}
        named, _unknown = by_name(api_key, request, names)

        def answer(response: Any) -> None:  # runs in the shard's write path: never raise
            try:
                out = by_id(api_key, request, response, names, catalog.ids)
            except Exception:
                log.exception("%s: cannot answer api %d v%d by topic id", self.peer, api_key, ctx.api_version)
                out = error_response(api_key, ctx.api_version, request, ErrorCode.UNKNOWN_SERVER_ERROR)
            reply(out)

        if named is None:
            answer(None)
        else:
            self._route_by_name(api_key, ctx, named, answer)

    def _route_commit(self, api_key: int, ctx: RequestContext, request: Any, reply: Reply) -> None:
        catalog = self.app.cluster.topics
        missing, to_look_up = catalog.classify(request.topics)
        if not to_look_up:
            self._route_without(api_key, ctx, request, reply, missing)
            return

        def looked_up() -> None:
            missing, _rest = catalog.classify(request.topics, looked_up=True)
            self._route_without(api_key, ctx, request, reply, missing)

        self._hold_requests_until(catalog.lookup(to_look_up), "topic lookup", looked_up)

    def _hold_requests_until(self, lookup: Awaitable[None], what: str, then: Callable[[], None]) -> None:
        """Run ``then`` once ``lookup`` is done; the connection's group requests that come meanwhile
        wait (``_held_requests``) and are routed after it, in order, so the shards see them in the
        order they came. One of them may start a lookup and hold the rest again."""
        self._held_requests = []

        def done(task: asyncio.Future[None]) -> None:
            if not task.cancelled() and task.exception() is not None:  # the lookups themselves do not fail
                log.error("%s: %s failed: %r", self.peer, what, task.exception())
            then()
            held, self._held_requests = self._held_requests or [], None
            for entry in held:
                self._route(*entry)

        asyncio.ensure_future(lookup).add_done_callback(done)

    def _route_without(
        self, api_key: int, ctx: RequestContext, request: Any, reply: Reply, missing: Any
    ) -> None:
        """The commit without the partitions that do not exist; their UNKNOWN_TOPIC_OR_PARTITION
        joins the coordinator's answer (none at all if nothing is left for it)."""
        rest = without(request, missing) if missing else request
        if rest is None:
            reply(merged(api_key, request, missing, None))
        elif rest is request:
            self.app.router.route(api_key, ctx, request, reply)
        else:

            def merge(answer: Any) -> None:  # runs in the shard's write path: never raise
                try:
                    response = merged(api_key, request, missing, answer)
                except Exception:
                    log.exception("%s: cannot merge the answer to api %d", self.peer, api_key)
                    response = error_response(
                        api_key, ctx.api_version, request, ErrorCode.UNKNOWN_SERVER_ERROR
                    )
                reply(response)

            self.app.router.route(api_key, ctx, rest, merge)

    def _find_coordinator(
        self, payload: bytes, ctx: RequestContext, request: m.FindCoordinatorRequest
    ) -> None:
        version = ctx.api_version
        key_type = request.key_type
        if key_type == 0:
            resp = self.app.cluster.group_coordinator_response(request, version)
            self._reply_now(ApiKey.FIND_COORDINATOR, version, ctx.correlation_id, (version, resp))
        elif key_type == 1:
            self._forward_and_rewrite(
                payload, ApiKey.FIND_COORDINATOR, version, self.app.cluster.rewrite_find_coordinator
            )
        else:
            resp = error_response(ApiKey.FIND_COORDINATOR, version, request, ErrorCode.INVALID_REQUEST)
            self._reply_now(ApiKey.FIND_COORDINATOR, version, ctx.correlation_id, (version, resp))

    # -- slots ----------------------------------------------------------------------------------------
    def _new_slot(self) -> _Slot:
        slot = _Slot(self._frame_api, self._frame_received)
        slots = self._slots
        slots.append(slot)
        if len(slots) >= self._max_inflight:
            self._pause(_INFLIGHT)
        return slot

    def _fill(self, slot: _Slot, data: bytes, body: bytes | None = None) -> None:
        """Answer ``slot`` (``b""``: nothing to write); written once every earlier slot is.
        ``body``: a large answer's payload, written after ``data`` rather than copied into it."""
        if slot.data is not None or self._closed:
            return
        slot.data = data
        size = len(data)
        if body is not None:
            slot.body = body
            size += len(body)
        queued = self._queued = self._queued + size
        slots = self._slots
        if slots and slots[0] is slot:  # only the head can unblock writes
            self._flush()
        if queued > self._output_pause:
            if self._out:
                self._write_out()  # now, not at the end of the read: the transport says if the client keeps up
            else:
                self._account()  # answers waiting behind an unanswered request

    def _fail(self, slot: _Slot, reason: str) -> None:
        """The connection closes when ``slot`` comes up, after the answers before it are written."""
        if slot.data is None:
            slot.failure = reason
        self._fill(slot, b"")

    def _reply_now(self, api_key: int, version: int, correlation_id: int, answer: tuple[int, Any]) -> None:
        slot = self._new_slot()
        resp_version, response = answer
        self.app.metrics.response_sent(api_key, resp_version, response)
        self._fill(slot, frames.encode_response(api_key, resp_version, correlation_id, response))

    def _flush(self) -> None:
        slots = self._slots
        transport = self.transport
        if transport is None or self._closed:
            return
        metrics = self.app.metrics
        out = self._out
        pending = len(out)
        now = 0.0
        while slots and slots[0].data is not None:
            slot = slots.popleft()
            if slot.failure is not None:
                self.close_with(slot.failure)
                return
            data = slot.data
            if data:
                out.append(data)
                if slot.body is not None:
                    out.append(slot.body)
                    self._out_large = True
                if not now:
                    now = time.perf_counter()
                metrics.request_done(slot.api_key, now - slot.received)
        if len(out) > pending:
            self._active = now
            up = self._upstream
            if up is not None and up.reading:
                pass  # answers of an upstream read: its after_read writes them (see _open_upstream)
            elif not self._dispatching and not self._write_scheduled:
                self._write_scheduled = True
                self._writes.write_soon(self)
        if self._pause_reasons & _INFLIGHT and len(slots) <= self._max_inflight // 2:
            self._resume(_INFLIGHT)

    def _write_out(self) -> None:
        self._write_scheduled = False
        out = self._out
        if not out:
            return
        self._out = []
        transport = self.transport
        if transport is None or self._closed:
            return
        if self._out_large:  # large relayed answers among them: handed over as they are (writev), not joined
            self._out_large = False
            self._queued -= sum(map(len, out))
            transport.writelines(out)
        else:
            data = b"".join(out) if len(out) > 1 else out[0]
            self._queued -= len(data)
            transport.write(data)
        if self._transport_backlog or self._queued or self._held:
            self._account()

    # -- pass-through ---------------------------------------------------------------------------------
    # Frames go to the paired upstream connection strictly in arrival order. Until that connection is
    # open they wait in ``_outbox``; when the client goes away, whatever it already sent is still
    # delivered (an acks=0 Produce has no other chance) before the upstream connection closes.

    def _send_upstream(self, framed: bytes, expect_response: bool) -> asyncio.Future[bytes] | None:
        """Send now, or queue behind earlier frames; the future resolves with the response payload."""
        self._relayed_bytes[0] += len(framed)
        up = self._upstream
        if up is not None and not up.closed and not self._outbox:
            return up.send(framed, expect_response)
        if up is not None and up.closed:
            raise UpstreamClosed(f"upstream {up.address[0]}:{up.address[1]} is closed")
        proxy: asyncio.Future[bytes] | None = (
            asyncio.get_running_loop().create_future() if expect_response else None
        )
        self._outbox.append((framed, expect_response, proxy))
        if self._upstream_opening is None:
            self._upstream_opening = asyncio.ensure_future(self._open_upstream())
        return proxy

    async def _open_upstream(self) -> None:
        address = self.app.cluster.upstream_address(self.listener.node_id)
        try:
            conn = await UpstreamConnection.open(address, self.app.settings.max_frame_size)
        except (TimeoutError, OSError) as exc:
            outbox, self._outbox = self._outbox, []
            for _, _, proxy in outbox:
                if proxy is None:
                    continue
                if not isinstance(proxy, asyncio.Future):
                    proxy(None)
                elif not proxy.done():
                    proxy.set_exception(
                        UpstreamClosed(f"upstream {address[0]}:{address[1]} unreachable: {exc}")
                    )
            return
        finally:
            self._upstream_opening = None
        conn.on_close.append(self._upstream_lost)
        conn.after_read = self._write_out  # the answers of one upstream read go out in one write, now
        conn.corked = (
            True  # frames go upstream when _run (or the outbox below) flushes, not a loop iteration later
        )
        self._upstream = conn
        outbox, self._outbox = self._outbox, []
        for framed, expect_response, proxy in outbox:
            if proxy is not None and not isinstance(proxy, asyncio.Future):
                conn.send_cb(framed, proxy)
                continue
            fut = conn.send(framed, expect_response)
            if proxy is not None and fut is not None:
                _chain(fut, proxy)
        conn.flush()
        if self._closed:
            conn.close_when_idle()  # the client left while we connected: deliver what it sent, then close
            self._upstream = None

    def _upstream_lost(self, conn: UpstreamConnection) -> None:
        if conn is self._upstream and self._slots:
            # Responses owed by the broker will never come: the client must reconnect and retry.
            self.close_with(f"upstream {conn.address[0]}:{conn.address[1]} closed with requests in flight")

    def _forward(
        self,
        payload: bytes,
        expect_response: bool,
        reply: bool = True,
        api: tuple[int, int] | None = None,
        observe: Callable[[bytes], None] | None = None,
    ) -> None:
        """Relay a frame. ``api``: (key, version) of a Produce or Fetch, whose answer may carry
        KIP-951 leader endpoints that must be rewritten before the client sees them. ``observe``:
        called with the answer's payload before it is relayed unchanged (never with ``api``)."""
        if reply and observe is None:
            self._relay(payload, api)
            return
        try:
            fut = self._send_upstream(frames.frame(payload), expect_response)
        except UpstreamClosed as exc:
            self.close_with(str(exc))
            return
        if fut is None:
            return
        if observe is not None:
            fut.add_done_callback(
                lambda f: None if f.cancelled() or f.exception() is not None else observe(f.result())
            )
        if not reply:
            fut.add_done_callback(_discard)
            return
        slot = self._new_slot()
        fut.add_done_callback(lambda f: self._passthrough_done(slot, f))

    def _relay(self, payload: bytes, api: tuple[int, int] | None) -> None:
        """The plain pass-through (most frames): the answer comes back through a callback run
        inside the upstream connection's read, so every answer of one read is written to the
        client in one write, with no future or loop iteration per frame."""
        framed, body = frames.frame_parts(payload)
        self._relayed_bytes[0] += len(payload) + 4
        slot = self._new_slot()
        endpoints = api if api is not None and api[1] >= NODE_ENDPOINTS_SINCE[api[0]] else None
        answered = _RelayedAnswer(self, slot, endpoints)
        up = self._upstream
        try:
            if up is not None and not up.closed and not self._outbox:
                up.send_cb(framed, answered, body)
                return
            if up is not None and up.closed:
                raise UpstreamClosed(f"upstream {up.address[0]}:{up.address[1]} is closed")
        except UpstreamClosed as exc:
            self.close_with(str(exc))
            return
        self._outbox.append((framed if body is None else framed + body, True, answered))
        if self._upstream_opening is None:
            self._upstream_opening = asyncio.ensure_future(self._open_upstream())

    def _relay_stream(self, slot: _Slot, size: int, pieces: list[bytes]) -> None:
        """Write the first pieces of a large relayed answer while the rest is still arriving
        (cut-through), when its slot is the next to be written: a client fetching megabytes then
        waits for one transfer, not for kcoord to receive the whole answer before it sends any.
        The last STREAM_HOLD_BACK bytes wait for the whole answer, which is checked as any other
        (see _relay_answered): KIP-951's NodeEndpoints sit at its very end."""
        if slot.sent < 0:  # first pieces: start streaming now or never (its earlier pieces are gone)
            transport = self.transport
            if (
                slot.sent == _NOT_STREAMING
                or size < STREAM_ABOVE
                or not self._slots
                or self._slots[0] is not slot
                or transport is None
                or self._closed
                or slot.data is not None
            ):
                slot.sent = _NOT_STREAMING
                return
            self._write_out()  # answers before this one, already filled, go first
            transport.write(frames.size_prefix(size))
            slot.sent = 0
        elif self._closed:
            return
        assert self.transport is not None
        limit = size - STREAM_HOLD_BACK
        sent = slot.sent
        write = self.transport.write
        for piece in pieces:
            room = limit - sent
            if room <= 0:
                break
            if len(piece) > room:
                piece = piece[:room]
            write(piece)
            sent += len(piece)
        slot.sent = sent
        self._active = time.perf_counter()
        if self._transport_backlog:
            self._account()

    def _relay_answered(self, slot: _Slot, raw: bytes | None, endpoints: tuple[int, int] | None) -> None:
        """Fill ``slot`` with a relayed answer; a Produce/Fetch answer naming a leader by address is
        rewritten first (``endpoints``: its api key and version, when it may carry them)."""
        if raw is None:
            self.app.metrics.upstream_error()
            self._fail(slot, "request failed: the upstream connection closed before answering")
            return
        self._relayed_bytes[1] += len(raw) + 4
        if slot.sent >= 0:
            self._relay_streamed_rest(slot, raw, endpoints)
            return
        if endpoints is not None:
            api_key, version = endpoints
            try:
                rewrite = carries_node_endpoints(api_key, version, raw)
            except CodecError as exc:
                log.warning(
                    "%s: upstream api %d v%d response is malformed (%s); relayed as is",
                    self.peer,
                    api_key,
                    version,
                    exc,
                )
                rewrite = False
            if rewrite:
                task = asyncio.ensure_future(
                    self._rewritten(raw, api_key, version, self.app.cluster.rewrite_node_endpoints)
                )
                task.add_done_callback(lambda t: self._passthrough_done(slot, t, framed=True))
                return
        self._fill(slot, *frames.frame_parts(raw))

    def _relay_streamed_rest(self, slot: _Slot, raw: bytes, endpoints: tuple[int, int] | None) -> None:
        """The held-back end of a streamed answer. Its size prefix went out with its first bytes,
        so a NodeEndpoints field that needs rewriting is replaced by an unknown tagged field of
        the same length (clients skip unknown tags): the client learns the new leader from
        Metadata, which kcoord rewrites, instead of from the answer."""
        sent = slot.sent
        rest = raw[sent:]
        if endpoints is not None:
            api_key, version = endpoints
            try:
                rest = without_node_endpoints(api_key, version, raw, sent) or rest
            except CodecError as exc:
                # Its first bytes are with the client already: it cannot be relayed any other way.
                self._fail(slot, f"cannot relay a streamed api {api_key} v{version} answer: {exc}")
                return
        self._fill(slot, rest)

    @staticmethod
    async def _rewritten(raw: bytes, api_key: int, version: int, rewrite: Any) -> bytes:
        correlation_id, response = frames.decode_response(api_key, version, raw)
        response = await rewrite(response)
        return frames.encode_response(api_key, version, correlation_id, response)

    def _passthrough_done(self, slot: _Slot, fut: Any, framed: bool = False) -> None:
        """Fill a slot from an upstream answer: a raw payload, or (``framed``) a whole rewritten frame."""
        failed = None if fut.cancelled() else fut.exception()  # retrieve it even if the client left
        if fut.cancelled():
            self._fill(slot, b"")
        elif failed is not None:
            self.app.metrics.upstream_error()
            self._fail(slot, f"request failed: {failed!r}")
        elif framed:
            self._fill(slot, fut.result())
        else:
            payload = fut.result()
            self._relayed_bytes[1] += len(payload) + 4
            self._fill(slot, *frames.frame_parts(payload))

    def _forward_and_rewrite(self, payload: bytes, api_key: int, version: int, rewrite: Any) -> None:
        try:
            fut = self._send_upstream(frames.frame(payload), True)
        except UpstreamClosed as exc:
            self.close_with(str(exc))
            return
        assert fut is not None
        slot = self._new_slot()

        async def run() -> bytes:
            raw = await fut
            self._relayed_bytes[1] += len(raw) + 4
            return await self._rewritten(raw, api_key, version, rewrite)

        task = asyncio.ensure_future(run())
        task.add_done_callback(lambda t: self._passthrough_done(slot, t, framed=True))

    # -- closing --------------------------------------------------------------------------------------
    def close_with(self, reason: str) -> None:
        """Close after the answers already written (bad input, a failed request)."""
        if self._closed:
            return
        log.warning("closing connection from %s: %s", self.peer, reason)
        out = self._out
        self._closing()
        if self.transport is not None:
            if out:  # answers to the requests before the bad one still go out
                self.transport.write(b"".join(out))
            self.transport.close()
        self._account()  # the transport's backlog stays counted until it is gone (App.sweep bounds it)

    def close_for_limit(self, reason: str, message: str) -> None:
        """Close for one of the limits (``reason``: metrics.CLOSE_REASONS), dropping unsent output."""
        if self._closed:
            return
        # Idle connections are closed in the ordinary course of things (clients reconnect): not a warning.
        level = logging.INFO if reason == "idle" else logging.WARNING
        log.log(level, "closing connection from %s: %s", self.peer, message)
        self.app.metrics.connection_limited(reason)
        self._closing()
        transport = self.transport
        if transport is not None:
            if self._transport_backlog:
                transport.abort()  # a client that does not read would keep a graceful close waiting
                self._transport_backlog = False
            else:
                transport.close()
        self._account()

    def _closing(self) -> None:
        self._closed = True
        self._pause_reasons |= _CLOSED
        self._closed_at = time.perf_counter()
        self._release()

    def _release(self) -> None:
        """Drop every buffer: slots and their answers, unsent output, frames not dispatched, the
        partial frame and the memory it reserved."""
        self._slots.clear()
        self._out = []
        self._backlog = None
        self._queued = 0
        self._decoder.close()

    def expire(self, now: float, idle_after: float, slow_after: float) -> None:
        """The App's periodic sweep: the idle and receive timeouts (seconds; inf: off)."""
        if self._closed:
            # Closed after its last answers, which a client that does not read never takes.
            if self._closed_at and now - self._closed_at > min(idle_after, slow_after) and self.transport:
                self.transport.abort()
            return
        reasons = self._pause_reasons
        if self._partial_since and not reasons and now - self._partial_since > slow_after:
            self.close_for_limit(
                "slow_frame",
                (
                    f"a request has been arriving for {now - self._partial_since:.1f}s "
                    f"(request.receive.timeout.ms={slow_after * 1000:.0f}), {self._decoder.buffered} bytes so far"
                ),
            )
        elif not self._slots and not reasons & _MEMORY and now - self._active > idle_after:
            self.close_for_limit(
                "idle",
                (f"idle for {now - self._active:.1f}s (connections.max.idle.ms={idle_after * 1000:.0f})"),
            )
        elif self._held:
            self._account()  # the transport may have sent some without telling (it only says when all went)

    @property
    def idle(self) -> bool:
        return not self._slots

    @property
    def held(self) -> int:
        return self._held

    def pause_for_total(self) -> None:
        self._pause(_TOTAL)

    def resume_for_total(self) -> None:
        self._resume(_TOTAL)


class _Slot:
    """A response owed to the client, in request order."""

    __slots__ = ("api_key", "received", "data", "body", "failure", "sent")

    def __init__(self, api_key: int, received: float) -> None:
        self.api_key = api_key
        # perf_counter when its frame arrived: the latency histogram measures frame received →
        # response written, including the wait for earlier slots.
        self.received = received
        self.data: bytes | None = None  # None: not answered yet; b"": nothing to write
        self.body: bytes | None = None  # a large answer's payload, written after ``data`` (its size prefix)
        self.failure: str | None = None  # set: close the connection when this slot comes up
        # Bytes of a large relayed answer's payload already written while it arrived (_relay_stream);
        # _UNDECIDED before its first piece, _NOT_STREAMING when it waits to be whole.
        self.sent = _UNDECIDED


class _RelayedAnswer(StreamingTarget):
    """Where a relayed answer goes, called within the upstream connection's read (never raises:
    a bug here must not break that read for the answers behind it)."""

    __slots__ = ("conn", "slot", "endpoints")

    def __init__(self, conn: ClientConnection, slot: _Slot, endpoints: tuple[int, int] | None) -> None:
        self.conn = conn
        self.slot = slot
        self.endpoints = endpoints

    def __call__(self, raw: bytes | None) -> None:
        self._guarded(self.conn._relay_answered, raw, self.endpoints)

    def stream(self, size: int, pieces: list[bytes]) -> None:
        self._guarded(self.conn._relay_stream, size, pieces)

    def _guarded(self, step: Callable[..., None], *args: Any) -> None:
        try:
            step(self.slot, *args)
        except Exception as exc:
            log.exception("%s: cannot relay an answer", self.conn.peer)
            self.conn._fail(self.slot, f"cannot relay an answer: {exc!r}")


def _chain(source: asyncio.Future[bytes], target: asyncio.Future[bytes]) -> None:
    def copy(f: asyncio.Future[bytes]) -> None:
        if target.done():
            return
        if f.cancelled():
            target.cancel()
        elif f.exception() is not None:
            target.set_exception(f.exception())  # type: ignore[arg-type]
        else:
            target.set_result(f.result())

    source.add_done_callback(copy)


def _discard(fut: asyncio.Future[bytes]) -> None:
    """Drop a response nobody asked for, retrieving its exception so asyncio does not warn."""
    if not fut.cancelled():
        fut.exception()
