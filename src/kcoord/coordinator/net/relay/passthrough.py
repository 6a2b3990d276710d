"""The pass-through: a client connection's relayed requests, to its listener's upstream broker and back.

Frames go to one upstream connection paired with the client's, strictly in arrival order; until
that connection is open they wait in ``_outbox``; when the client goes away, whatever it already
sent is still delivered (an acks=0 Produce has no other chance) before the upstream connection
closes. Each relayed request takes a slot of the client connection, filled with the answer as it
came unless the answer names a broker by address (addresses.py): Metadata, DescribeCluster and
transaction FindCoordinator answers are decoded and rewritten; a Produce/Fetch answer is checked
for KIP-951 leader endpoints without decoding its records and rewritten only when it has some.
Produce with acks=0 gets no response and takes no slot.

Most answers come back through a callback run inside the upstream connection's read, so every
answer of one read is written to the client in one write, with no future or loop iteration per
frame. Answers above :data:`STREAM_ABOVE` bytes are written while they arrive (cut-through), all
but their last :data:`STREAM_HOLD_BACK` bytes, which wait for the whole answer to be checked.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, cast

from kcoord.client import Connection as UpstreamConnection
from kcoord.client import ConnectionLost as UpstreamClosed
from kcoord.client import KafkaClientError, StreamingTarget
from kcoord.protocol import frames
from kcoord.protocol.codec import DECODER_BACKEND
from kcoord.protocol.endpoints import (
    NODE_ENDPOINTS_SINCE,
    carries_node_endpoints,
    streamed_rest,
)
from kcoord.protocol.fetch_pieces import tail
from kcoord.protocol.frames import LARGE_FRAME
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.primitives import CodecError
from kcoord.protocol.relay_messages import body_start

from ..slot import Slot
from .addresses import (
    Rewrite,
    rewrite_describe_cluster,
    rewrite_find_coordinator,
    rewrite_metadata,
    rewrite_node_endpoints,
)
from .latest_offsets import corrected, latest_partitions
from .requests import ACKS_ONE, METADATA_BY_ID_SINCE, metadata_asked_by_id, produce_acks

if TYPE_CHECKING:
    from ..connection import ClientConnection

log = logging.getLogger("kcoord.connection")

# Relayed answers above this many bytes are written while they arrive (UpstreamRelay._stream), all
# but their last STREAM_HOLD_BACK bytes, which wait for the whole answer to be checked for
# KIP-951 NodeEndpoints. Finding that field without decoding the records needs the C decoder
# (but in a Fetch answer: protocol/fetch_pieces.py).
STREAM_ABOVE = 256 * 1024 if DECODER_BACKEND == "c" else 1 << 62
STREAM_HOLD_BACK = 64 * 1024
_NOT_STREAMING = -2  # Slot.sent: written when whole, as any answer
_SIZE = struct.Struct(">i")
_PRODUCE, _FETCH = int(ApiKey.PRODUCE), int(ApiKey.FETCH)
_PRODUCE_ENDPOINTS_SINCE = NODE_ENDPOINTS_SINCE[ApiKey.PRODUCE]
_FETCH_ENDPOINTS_SINCE = NODE_ENDPOINTS_SINCE[ApiKey.FETCH]

# Where an answer goes once the upstream connection is open: a future, a callback, or nowhere.
_AnswerTarget = asyncio.Future[bytes] | Callable[[bytes | None], None] | None


class UpstreamRelay:
    """The relayed half of one client connection (``conn``): its paired upstream connection."""

    __slots__ = ("conn", "upstream", "_opening", "_outbox", "_relayed_bytes")

    def __init__(self, conn: ClientConnection) -> None:
        self.conn = conn
        self.upstream: UpstreamConnection | None = None
        self._opening: asyncio.Future[None] | None = None
        # Frames waiting for the upstream connection to open, each with where its answer goes.
        self._outbox: list[tuple[bytes, bool, _AnswerTarget]] = []
        # Relayed bytes [out, in], added to per relayed frame (Metrics.upstream_byte_counts).
        self._relayed_bytes: list[int] = conn.app.metrics.upstream_byte_counts

    # -- what the dispatcher relays -----------------------------------------------------------------
    def forward(self, payload: bytes) -> None:
        """Relay a frame whose answer comes back as it came."""
        self._relay(payload, None)

    def produce(self, payload: bytes, version: int, acks: int | None = None, offset: int = 0) -> None:
        """Relay a Produce; ``acks`` and its ``offset`` in ``payload``, when the caller read them."""
        if acks is None:
            acks, offset = produce_acks(payload, body_start(payload, flexible=version >= 9), version)
        if acks == 0:
            # The client expects no response. Some brokers (tansu) answer acks=0 anyway, which
            # would shift every later response on the paired connection; asking for acks=1 and
            # dropping the answer keeps the pairing exact with any broker.
            payload = payload[:offset] + ACKS_ONE + payload[offset + 2 :]
            self._forward_unanswered(payload)
        else:
            self._relay(payload, (_PRODUCE, version) if version >= _PRODUCE_ENDPOINTS_SINCE else None)

    def fetch(self, payload: bytes, version: int) -> None:
        self._relay(payload, (_FETCH, version) if version >= _FETCH_ENDPOINTS_SINCE else None)

    def metadata(self, payload: bytes, version: int, correlation_id: int) -> None:
        if version >= METADATA_BY_ID_SINCE:
            payload = metadata_asked_by_id(payload, version, correlation_id)
        self._forward_and_rewrite(payload, ApiKey.METADATA, version, rewrite_metadata)

    def list_offsets(self, payload: bytes, version: int) -> None:
        """A ListOffsets: as it came, unless the upstream answers LATEST short of the log end
        (latest_offsets.py); then its LATEST partitions are raised to their high watermarks."""
        cluster = self.conn.app.cluster
        wanted = latest_partitions(payload, version) if cluster.latest_offset_from_fetch else []
        if not wanted:
            self._relay(payload, None)
            return
        self.forward_amended(payload, lambda raw: corrected(raw, version, wanted, cluster.high_watermarks))

    def describe_cluster(self, payload: bytes, version: int) -> None:
        self._forward_and_rewrite(payload, ApiKey.DESCRIBE_CLUSTER, version, rewrite_describe_cluster)

    def find_transaction_coordinator(self, payload: bytes, version: int) -> None:
        self._forward_and_rewrite(payload, ApiKey.FIND_COORDINATOR, version, rewrite_find_coordinator)

    def forward_observed(self, payload: bytes, observe: Callable[[bytes], None] | None) -> None:
        """Relay a frame; ``observe`` is called with its answer's payload (before the client gets
        it, unchanged). It runs as a future's callback: it must not raise."""
        if observe is None:
            self._relay(payload, None)
            return
        fut = self._send_framed(payload, expect_response=True)
        if fut is None:
            return
        fut.add_done_callback(
            lambda f: None if f.cancelled() or f.exception() is not None else observe(f.result())
        )
        slot = self.conn.new_slot()
        fut.add_done_callback(lambda f: self._passthrough_done(slot, f))

    def exchange(self, payload: bytes) -> asyncio.Future[bytes] | None:
        """Relay a frame, taking no slot: the future resolves with its answer's payload (the SASL
        steps of a client on a SASL listener, whose answers kcoord reads first: sasl.py). None: the
        upstream connection is gone and the client connection closed."""
        return self._send_framed(payload, expect_response=True)

    # -- the client connection's lifecycle ----------------------------------------------------------
    def flush(self) -> None:
        """Send the frames of this read upstream in one write, now."""
        if self.upstream is not None:
            self.upstream.flush()

    def client_closed(self) -> None:
        upstream = self.upstream
        if upstream is not None and self._opening is None:
            upstream.close_when_idle()  # what the client sent is still delivered and processed
            self.upstream = None

    # -- sending ------------------------------------------------------------------------------------
    def _forward_unanswered(self, payload: bytes) -> None:
        fut = self._send_framed(payload, expect_response=True)
        if fut is not None:
            fut.add_done_callback(_discard)

    def _send_framed(self, payload: bytes, expect_response: bool) -> asyncio.Future[bytes] | None:
        try:
            return self._send_upstream(frames.frame(payload), expect_response)
        except UpstreamClosed as exc:
            self.conn.close_with(str(exc), upstream=True)
            return None

    def _relay(self, payload: bytes, endpoints: tuple[int, int] | None) -> None:
        """The plain pass-through (most frames): the answer comes back through a callback run
        inside the upstream connection's read, so every answer of one read is written to the
        client in one write, with no future or loop iteration per frame. ``endpoints``: (key,
        version) of a Produce or Fetch whose answer may carry KIP-951 leader endpoints to rewrite."""
        size = len(payload)
        if size > LARGE_FRAME:
            framed, body = _SIZE.pack(size), payload
        else:
            framed, body = _SIZE.pack(size) + payload, None
        self._relayed_bytes[0] += size + 4
        answered = cast(_RelayedAnswer, self.conn.new_slot(_RelayedAnswer))
        answered.relay = self
        answered.endpoints = endpoints
        up = self.upstream
        try:
            if up is not None and not self._outbox:
                up.send_cb(framed, answered, body)  # raises UpstreamClosed once it is closed
                return
        except UpstreamClosed as exc:
            self.conn.close_with(str(exc), upstream=True)
            return
        self._outbox.append((framed if body is None else framed + body, True, answered))
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._open_upstream())

    def _send_upstream(self, framed: bytes, expect_response: bool) -> asyncio.Future[bytes] | None:
        """Send now, or queue behind earlier frames; the future resolves with the response payload."""
        self._relayed_bytes[0] += len(framed)
        up = self.upstream
        if up is not None and not up.closed and not self._outbox:
            return up.send(framed, expect_response)
        if up is not None and up.closed:
            raise UpstreamClosed(f"upstream {up.address[0]}:{up.address[1]} is closed")
        proxy: asyncio.Future[bytes] | None = (
            asyncio.get_running_loop().create_future() if expect_response else None
        )
        self._outbox.append((framed, expect_response, proxy))
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._open_upstream())
        return proxy

    async def _open_upstream(self) -> None:
        conn = self.conn
        address = conn.app.cluster.upstream_address(conn.listener.node_id)
        # On a SASL listener the client logs this connection in itself (sasl.py); elsewhere, on a
        # SASL upstream, it is kcoord's own login (the only principal such a client can have there).
        security = conn.app.cluster.security
        if conn.sasl is not None:
            security = security.without_login()
        try:
            up = await UpstreamConnection.open(address, conn.app.settings.max_frame_size, security=security)
        except (TimeoutError, OSError, KafkaClientError) as exc:
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
            self._opening = None
        up.on_close.append(self._upstream_lost)
        up.after_read = conn.write_out  # the answers of one upstream read go out in one write, now
        # Frames go upstream when the client's read (or the outbox below) flushes, not a loop iteration later.
        up.corked = True
        self.upstream = up
        outbox, self._outbox = self._outbox, []
        for framed, expect_response, proxy in outbox:
            if proxy is not None and not isinstance(proxy, asyncio.Future):
                up.send_cb(framed, proxy)
                continue
            fut = up.send(framed, expect_response)
            if proxy is not None and fut is not None:
                _chain(fut, proxy)
        up.flush()
        if conn.closed:
            up.close_when_idle()  # the client left while we connected: deliver what it sent, then close
            self.upstream = None

    def _upstream_lost(self, up: UpstreamConnection) -> None:
        if up is not self.upstream:
            return
        if self.conn.has_slots:
            # Responses owed by the broker will never come: the client must reconnect and retry.
            self.conn.close_with(
                f"upstream {up.address[0]}:{up.address[1]} closed with requests in flight", upstream=True
            )
        elif self.conn.sasl is not None:
            # The client's authenticated session was that connection (a session lifetime ran out,
            # say): it must log in again, as it would to a broker.
            self.conn.close_with(f"upstream {up.address[0]}:{up.address[1]} closed the client's SASL session")

    # -- answers ------------------------------------------------------------------------------------
    def _stream(self, slot: Slot, size: int, pieces: list[bytes]) -> bool:
        """Write the first pieces of a large relayed answer while the rest is still arriving
        (cut-through), when its slot is the next to be written: a client fetching megabytes then
        waits for one transfer, not for kcoord to receive the whole answer before it sends any.
        The last STREAM_HOLD_BACK bytes wait for the whole answer (_finish_streamed): KIP-951's
        NodeEndpoints sit at its very end. True while the answer is streamed."""
        conn = self.conn
        if slot.sent < 0:  # first pieces: start streaming now or never (its earlier pieces are gone)
            if slot.sent == _NOT_STREAMING or size < STREAM_ABOVE or not conn.start_streaming(slot, size):
                slot.sent = _NOT_STREAMING
                return False
            slot.sent = 0
        elif conn.closed:
            return True
        limit = size - STREAM_HOLD_BACK
        sent = slot.sent
        chunks = []
        for piece in pieces:
            room = limit - sent
            if room <= 0:
                break
            if len(piece) > room:
                piece = piece[:room]
            chunks.append(piece)
            sent += len(piece)
        slot.sent = sent
        conn.write_streamed(chunks)
        return True

    def _finish_streamed(self, slot: Slot, pieces: list[bytes], endpoints: tuple[int, int] | None) -> None:
        """The held-back end of a streamed answer, from the pieces it came in (never joined: the
        rest of it is with the client already). Its size prefix went out with its first bytes, so
        a NodeEndpoints field that needs rewriting is replaced by an unknown tagged field of the
        same length (clients skip unknown tags): the client learns the new leader from Metadata,
        which kcoord rewrites, instead of from the answer."""
        sent = slot.sent
        self._relayed_bytes[1] += sum(map(len, pieces)) + 4
        try:
            rest = tail(pieces, sent) if endpoints is None else streamed_rest(*endpoints, pieces, sent)
        except CodecError as exc:
            # Its first bytes are with the client already: it cannot be relayed any other way.
            api_key, version = endpoints or (-1, -1)
            self.conn.fail(slot, f"cannot relay a streamed api {api_key} v{version} answer: {exc}")
            return
        self.conn.fill(slot, rest)

    def _answered(self, slot: Slot, raw: bytes | None, endpoints: tuple[int, int] | None) -> None:
        """Fill ``slot`` with a relayed answer; a Produce/Fetch answer naming a leader by address is
        rewritten first (``endpoints``: its api key and version, when it may carry them)."""
        conn = self.conn
        if raw is None:
            conn.app.metrics.upstream_error()
            conn.fail(slot, "request failed: the upstream connection closed before answering", upstream=True)
            return
        if slot.sent >= 0:  # not expected (a streamed answer ends in _finish_streamed): the same there
            self._finish_streamed(slot, [raw], endpoints)
            return
        self._relayed_bytes[1] += len(raw) + 4
        if endpoints is not None:
            api_key, version = endpoints
            try:
                rewrite = carries_node_endpoints(api_key, version, raw)
            except CodecError as exc:
                log.warning(
                    "%s: upstream api %d v%d response is malformed (%s); relayed as is",
                    conn.peer,
                    api_key,
                    version,
                    exc,
                )
                rewrite = False
            if rewrite:
                task = asyncio.ensure_future(self._rewritten(raw, api_key, version, rewrite_node_endpoints))
                task.add_done_callback(lambda t: self._passthrough_done(slot, t, framed=True))
                return
        conn.fill(slot, *frames.frame_parts(raw))

    async def _rewritten(self, raw: bytes, api_key: int, version: int, rewrite: Rewrite) -> bytes:
        correlation_id, response = frames.decode_response(api_key, version, raw)
        response = await rewrite(self.conn.app.cluster, response)
        return frames.encode_response(api_key, version, correlation_id, response)

    def _passthrough_done(self, slot: Slot, fut: asyncio.Future[bytes], framed: bool = False) -> None:
        """Fill a slot from an upstream answer: a raw payload, or (``framed``) a whole rewritten frame."""
        conn = self.conn
        failed = None if fut.cancelled() else fut.exception()  # retrieve it even if the client left
        if fut.cancelled():
            conn.fill(slot, b"")
        elif failed is not None:
            conn.app.metrics.upstream_error()
            conn.fail(slot, f"request failed: {failed!r}", upstream=True)
        elif framed:
            conn.fill(slot, fut.result())
        else:
            payload = fut.result()
            self._relayed_bytes[1] += len(payload) + 4
            conn.fill(slot, *frames.frame_parts(payload))

    def _forward_and_rewrite(self, payload: bytes, api_key: int, version: int, rewrite: Rewrite) -> None:
        self.forward_amended(payload, lambda raw: self._rewritten(raw, api_key, version, rewrite))

    def forward_amended(self, payload: bytes, amend: Callable[[bytes], Awaitable[bytes]]) -> None:
        """Relay a frame; the client gets the whole frame ``amend`` makes of the answer's payload
        (a failure there fails the request: the connection closes)."""
        fut = self._send_framed(payload, expect_response=True)
        if fut is None:
            return
        slot = self.conn.new_slot()

        async def run() -> bytes:
            raw = await fut
            self._relayed_bytes[1] += len(raw) + 4
            return await amend(raw)

        task = asyncio.ensure_future(run())
        task.add_done_callback(lambda t: self._passthrough_done(slot, t, framed=True))


class _RelayedAnswer(Slot, StreamingTarget):
    """A relayed request's slot, and where its answer goes, called within the upstream
    connection's read (never raises: a bug here must not break that read for the answers behind
    it). One object per relayed request: the slot carries what its answer needs."""

    __slots__ = ("relay", "endpoints")

    relay: UpstreamRelay
    endpoints: tuple[int, int] | None  # (key, version) of a Produce/Fetch whose answer may name leaders

    def __call__(self, raw: bytes | None) -> None:
        try:
            if raw is not None and self.endpoints is None and len(raw) <= LARGE_FRAME and self.sent < 0:
                # Most answers: small, never streamed, nothing to check. _answered's work inlined
                # (a relayed answer's calls are a measurable share of kcoord's CPU per request).
                relay = self.relay
                relay._relayed_bytes[1] += len(raw) + 4
                relay.conn.fill(self, _SIZE.pack(len(raw)) + raw)
                return
            self.relay._answered(self, raw, self.endpoints)
        except Exception as exc:
            log.exception("%s: cannot relay an answer", self.relay.conn.peer)
            self.relay.conn.fail(self, f"cannot relay an answer: {exc!r}")

    def stream(self, size: int, pieces: list[bytes]) -> bool:
        try:
            return self.relay._stream(self, size, pieces)
        except Exception as exc:
            log.exception("%s: cannot relay an answer", self.relay.conn.peer)
            self.relay.conn.fail(self, f"cannot relay an answer: {exc!r}")
            return False

    def finish(self, pieces: list[bytes]) -> None:
        try:
            self.relay._finish_streamed(self, pieces, self.endpoints)
        except Exception as exc:
            log.exception("%s: cannot relay an answer", self.relay.conn.peer)
            self.relay.conn.fail(self, f"cannot relay an answer: {exc!r}")


def _chain(source: asyncio.Future[bytes], target: asyncio.Future[bytes]) -> None:
    def copy(f: asyncio.Future[bytes]) -> None:
        if target.done():
            return
        if f.cancelled():
            target.cancel()
            return
        exc = f.exception()
        if exc is not None:
            target.set_exception(exc)
        else:
            target.set_result(f.result())

    source.add_done_callback(copy)


def _discard(fut: asyncio.Future[bytes]) -> None:
    """Drop a response nobody asked for, retrieving its exception so asyncio does not warn."""
    if not fut.cancelled():
        fut.exception()
