"""One asyncio Kafka connection: pipelined requests, ApiVersions negotiation, its own errors.

Invariants:
- A broker answers a connection's requests strictly in order, so in-flight requests are a FIFO:
  each response frame belongs to the oldest request still waiting. For a request this client
  encoded, the response's correlation id must be that request's; anything else means the stream
  is out of step (:class:`~kcoord.client.errors.CorrelationMismatch`) and the connection closes.
- Raw frames (:meth:`Connection.send`) travel unchanged and take a FIFO slot only if a response
  is expected (``Produce`` with ``acks=0`` gets none). Their correlation ids are the sender's
  own and are not checked: that is the gateway's pass-through.
- Every request sent in one loop iteration leaves in ONE write (a buffer flushed by
  ``call_soon``): the storage's appends for all shards and the load generator's heartbeats
  share few connections, and a syscall per frame was a hot spot in both.
- When the connection goes away, every in-flight request fails with
  :class:`~kcoord.client.errors.ConnectionLost`; nothing waits for a response that cannot come.
- A connection kcoord logged in on itself re-authenticates (KIP-368) before the session the broker
  gave it runs out, at 85-95% of its lifetime as Kafka's clients do. From its SaslHandshake to its
  last SaslAuthenticate answer the broker takes nothing else on the connection, so requests sent
  meanwhile are held back, in order, and go out once the login is over; the ones already in flight
  are answered as usual. Nothing is lost: a failed re-authentication closes the connection, and the
  held requests fail with :class:`~kcoord.client.errors.ConnectionLost` like the in-flight ones.

Bytes ↔ messages is :mod:`protocol`'s job (``frames.encode_request`` and
``decode_response``: request header v1/v2, response header v0/v1, ApiVersions' header v0 rule);
this module only frames, matches and waits. Three ways to wait for an answer:
``await request(...)`` (decoded response, with a timeout), ``call(...)`` (a future, for many in
flight) and ``call_cb``/``send_prepared`` (a callback, no future: the load generator's hot path).
"""

from __future__ import annotations

import asyncio
import logging
import random
import struct
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol import storage_messages as sm
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.primitives import CodecError

from .errors import BrokerError, ConnectionLost, CorrelationMismatch, RequestTimedOut, UnsupportedVersion
from .sasl import SaslCredentials, authenticate
from .security import PLAINTEXT, UpstreamSecurity

log = logging.getLogger("kcoord.client")

Address = tuple[str, int]
Callback = Callable[[Any], None]

SOFTWARE_NAME = "kcoord"
SOFTWARE_VERSION = "0.1.0"
# The ApiVersions version tried first: v3 carries the client software name and version.
API_VERSIONS_VERSION = 3

_I32 = struct.Struct(">i")
_CORRELATION_OFFSET = 8  # size(4) + api key(2) + api version(2)
_UNCHECKED = -1  # correlation id of a raw frame: the sender's own, not ours to check
# When to re-authenticate, as a share of the session lifetime: Kafka's clients pick at random in
# this window (SaslClientAuthenticator), early enough for latency and clock drift, spread so that
# connections opened together do not all log in again at once.
REAUTHENTICATE_WITHIN = (0.85, 0.95)

# A request waiting for its response: (correlation id, api key, response class or None for the raw
# payload, version, queued at, target: a future or a callback).
_Entry = tuple[int, int, "type[Message] | None", int, float, Any]


class Observer(Protocol):
    """Sees every response of a connection as it arrives (the load generator's statistics)."""

    def response(self, api_key: int, seconds: float) -> None:
        """A response to a request of ``api_key`` arrived ``seconds`` after the request was queued."""

    def failure(self, api_key: int, error: BaseException) -> None:
        """A callback request failed (its callback gets ``None``; futures carry their own error)."""


_RESPONSES: dict[type[Message], tuple[int, type[Message]]] = {}


def response_of(request_cls: type[Message]) -> tuple[int, type[Message]]:
    """(api key, response class) of a request class, from the storage or the served registry."""
    found = _RESPONSES.get(request_cls)
    if found is None:
        api_key = request_cls.SCHEMA.api_key
        assert api_key is not None
        found = _RESPONSES[request_cls] = (api_key, sm.RESPONSE_OF.get(request_cls) or m.RESPONSES[api_key])
    return found


def prepare(request: Message, version: int, client_id: str) -> bytearray:
    """A request frame encoded once, to send many times with :meth:`Connection.send_prepared`."""
    api_key, _ = response_of(type(request))
    return bytearray(frames.encode_request(api_key, version, 0, client_id, request))


class StreamingTarget:
    """A :meth:`Connection.send_cb` callback that also takes a large answer while it arrives:
    ``stream(size, pieces)`` with each read's new pieces of its payload. When ``stream`` returned
    True (the target writes the answer on as it comes), the answer ends with ``finish(pieces)``:
    every piece, never joined into one buffer. Else with the call with the whole payload, as for
    any callback (so do a failure's ``None`` and an answer that came in one read). ``stream`` and
    ``finish`` must not raise."""

    __slots__ = ()

    def __call__(self, payload: bytes | None) -> None:
        raise NotImplementedError

    def stream(self, size: int, pieces: list[bytes]) -> bool:
        raise NotImplementedError

    def finish(self, pieces: list[bytes]) -> None:
        raise NotImplementedError


class Connection(asyncio.Protocol):
    """A client connection to one Kafka broker (or to anything speaking the Kafka protocol)."""

    def __init__(
        self,
        address: Address,
        max_frame_size: int = frames.DEFAULT_MAX_FRAME_SIZE,
        *,
        client_id: str = SOFTWARE_NAME,
        name: str | None = None,
        request_timeout: float = 30.0,
        limits: Mapping[type[Message], tuple[int, int]] | None = None,
        observer: Observer | None = None,
    ) -> None:
        self.address = address
        self.name = name or f"{address[0]}:{address[1]}"
        self.client_id = client_id
        self.request_timeout = request_timeout
        # Our own (lowest, highest) per request class where narrower than its schema.
        self.limits = dict(limits or {})
        self.observer = observer
        self.versions: dict[int, tuple[int, int]] = {}  # api key -> the broker's (min, max)
        self.api_versions: Any = None  # the broker's whole ApiVersions response (features)
        self.on_close: list[Callable[[Connection], Any]] = []
        # Called after each read's responses were all handed out (a relay writes them on at once).
        self.after_read: Callable[[], None] | None = None
        self.reading = False  # handing out the responses of a read: after_read comes next
        # Corked: what is sent waits for flush(), which the owner promises to call (a relay, at the
        # end of the client read that brought the frames); no write callback per loop iteration.
        self.corked = False
        self.closed_by_peer = False
        self._loop = asyncio.get_running_loop()
        self._decoder = frames.FrameDecoder(max_frame_size)
        self._pending: deque[_Entry] = deque()
        self._next_id = 1
        self._wbuf: list[bytes] = []
        # The large answer whose pieces went to a StreamingTarget (the decoder's list), and how many.
        self._streamed_frame: list[bytes] | None = None
        self._streamed = 0
        self._streaming_to: StreamingTarget | None = None  # it took that answer: it gets the pieces
        self._wbuf_large = False  # _wbuf holds a large frame's rest (_write_parts): writelines, not join
        self._transport: asyncio.Transport | None = None
        self._closing = False
        self._lost: ConnectionLost | None = None
        self._close_when_idle = False
        self._closed_fut: asyncio.Future[None] = self._loop.create_future()
        # KIP-368: kcoord's own login on this connection, and the timer that renews it.
        self._login: SaslCredentials | None = None
        self._reauthentication: asyncio.TimerHandle | asyncio.Task[None] | None = None
        # While re-authenticating: what was sent meanwhile, (entry or None, frame, rest of a large
        # frame), held back until the login is over. None: not re-authenticating.
        self._held: list[tuple[_Entry | None, bytes, bytes | None]] | None = None
        self.reauthentications = 0
        self.reauthentication_seconds = 0.0  # the total time requests were held back by them

    # -- opening and closing --------------------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        address: Address,
        max_frame_size: int = frames.DEFAULT_MAX_FRAME_SIZE,
        timeout: float | None = 10.0,
        *,
        security: UpstreamSecurity = PLAINTEXT,
        **options: Any,
    ) -> Connection:
        """Connect (no ApiVersions: see :meth:`negotiate` and :func:`connect`); ``timeout`` None waits
        as long as TCP does. ``security.ssl``: speak TLS (kcoord.client.tls.client_context), the
        handshake within ``timeout``; the server's name checked against ``address``'s host if the
        context says so. ``security.sasl``: log in as these credentials before anything else
        (kcoord.client.sasl); a refusal raises :class:`~kcoord.client.sasl.SaslAuthenticationFailed`
        and closes the connection."""
        loop = asyncio.get_running_loop()
        opening = loop.create_connection(
            lambda: cls(address, max_frame_size, **options), address[0], address[1], ssl=security.ssl
        )
        _, proto = await (asyncio.wait_for(opening, timeout) if timeout is not None else opening)
        if security.sasl is not None:
            try:
                lifetime_ms = await authenticate(proto, security.sasl, timeout)
            except BaseException:
                proto.close()
                raise
            proto._logged_in(security.sasl, lifetime_ms)
        return proto

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if isinstance(self._reauthentication, asyncio.TimerHandle):
            self._reauthentication.cancel()
        if self._lost is None:
            self.closed_by_peer = not self._closing
            reason = f": {exc}" if exc is not None else ""
            if self.closed_by_peer:
                log.debug("%s closed the connection%s", self.name, reason)
            self._lost = ConnectionLost(f"connection to {self.name} closed{reason}")
        self._fail_pending(self._lost)
        if not self._closed_fut.done():
            self._closed_fut.set_result(None)
        for cb in self.on_close:
            cb(self)

    @property
    def closed(self) -> bool:
        """True once closing or lost: nothing sent now could be answered."""
        return self._closing or self._lost is not None or self._transport is None

    @property
    def in_flight(self) -> int:
        return len(self._pending) + len(self._held or ())

    def close(self) -> None:
        """Close after writing what was already sent; in-flight requests then fail."""
        if self._transport is not None and not self._closing:
            self._closing = True
            self._write_out()
            self._transport.close()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed_fut)

    def close_when_idle(self, timeout: float = 30.0) -> None:
        """Close once every request sent has its response (or after ``timeout``).

        A client that disconnects has still sent its requests; a broker may abandon requests whose
        connection closes under them, so the connection stays until they are answered.
        """
        if not self._pending and not self._held:
            self.close()
            return
        self._close_when_idle = True
        self._loop.call_later(timeout, self.close)

    def _abort(self, error: ConnectionLost) -> None:
        """The broker broke the protocol: fail everything in flight with ``error`` and close."""
        log.error("%s", error)
        if self._lost is None:
            self._lost = error
        self._fail_pending(error)
        self.close()

    def _fail_pending(self, error: ConnectionLost) -> None:
        pending, self._pending = self._pending, deque()
        held, self._held = self._held or [], None
        for _cid, api_key, _cls, _version, _sent, target in [
            *pending,
            *(e for e, _, _ in held if e is not None),
        ]:
            # One exception object each: an exception raised in many tasks would collect all their tracebacks.
            self._fail(target, api_key, ConnectionLost(str(error)))

    def _fail(self, target: Any, api_key: int, error: BaseException) -> None:
        if isinstance(target, asyncio.Future):
            if not target.done():
                target.set_exception(error)
        else:
            if self.observer is not None:
                self.observer.failure(api_key, error)
            target(None)

    # -- sending --------------------------------------------------------------------------------------
    def _closed_error(self) -> ConnectionLost:
        return ConnectionLost(
            str(self._lost) if self._lost is not None else f"connection to {self.name} is closed"
        )

    def _write(self, data: bytes) -> None:
        if not self._wbuf and not self.corked:
            self._loop.call_soon(self._write_out)
        self._wbuf.append(data)

    def _write_parts(self, head: bytes, body: bytes) -> None:
        """A frame as its first bytes and a large rest, written as two buffers (writev), never joined."""
        self._write(head)
        self._wbuf.append(body)
        self._wbuf_large = True

    def flush(self) -> None:
        """Write what was sent so far now rather than at the end of this loop iteration (a relay
        at the end of the read that brought the frames: one wake-up less between client and broker)."""
        if self._wbuf:
            self._write_out()

    def _write_out(self) -> None:
        buf, self._wbuf = self._wbuf, []
        large, self._wbuf_large = self._wbuf_large, False
        if buf and self._transport is not None and self._lost is None:
            if large:
                self._transport.writelines(buf)
            else:
                self._transport.write(b"".join(buf) if len(buf) > 1 else buf[0])

    def send(self, framed: bytes, expect_response: bool = True) -> asyncio.Future[bytes] | None:
        """Write a whole frame (size prefix included) as it is; a future for the raw response payload.

        ``None`` when no response is expected. The frame's correlation id is not checked.
        """
        if self._closing or self._lost is not None:
            raise self._closed_error()
        fut: asyncio.Future[bytes] | None = None
        entry: _Entry | None = None
        if expect_response:
            fut = self._loop.create_future()
            entry = (_UNCHECKED, -1, None, 0, 0.0, fut)
        if self._held is not None:
            self._held.append((entry, framed, None))
            return fut
        if entry is not None:
            self._pending.append(entry)
        self._write(framed)
        return fut

    def send_cb(
        self, framed: bytes, callback: Callable[[bytes | None], None], rest: bytes | None = None
    ) -> None:
        """:meth:`send`, the raw response payload going to ``callback`` (``None`` if the request fails).

        Why: a relay's answer then reaches the client within the read that brought it; a future
        costs an allocation, a done-callback and a loop iteration per frame. ``callback`` must not raise.
        ``rest``: the frame's remaining bytes after ``framed``, for a large frame a relay does not copy.
        """
        if self._closing or self._lost is not None:
            raise self._closed_error()
        if self._held is not None:
            self._held.append(((_UNCHECKED, -1, None, 0, 0.0, callback), framed, rest))
            return
        self._pending.append((_UNCHECKED, -1, None, 0, 0.0, callback))
        if rest is None:
            wbuf = self._wbuf  # _write, inlined: a relay's every frame passes here
            if not wbuf and not self.corked:
                self._loop.call_soon(self._write_out)
            wbuf.append(framed)
        else:
            self._write_parts(framed, rest)

    # The three senders below are the load generator's per-request path: checks and calls inlined.
    def _queue(self, request: Message, version: int, decode: bool, target: Any, ahead: bool = False) -> None:
        """``ahead``: a re-authentication's own request, sent while the others are held back."""
        if self._closing or self._lost is not None:
            raise self._closed_error()
        api_key, response_cls = _RESPONSES.get(type(request)) or response_of(type(request))
        cid = self._next_id
        self._next_id = cid + 1 if cid < 0x7FFFFFFF else 1
        frame = frames.encode_request(api_key, version, cid, self.client_id, request)
        sent = time.perf_counter() if self.observer is not None else 0.0
        entry = (cid, api_key, response_cls if decode else None, version, sent, target)
        if self._held is not None and not ahead:
            self._held.append((entry, frame, None))
            return
        self._pending.append(entry)
        if not self._wbuf:
            self._loop.call_soon(self._write_out)
        self._wbuf.append(frame)

    def call(self, request: Message, version: int | None = None) -> asyncio.Future[Any]:
        """Send ``request`` (at the negotiated version if None); the future resolves with the response."""
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._queue(request, self.version_for(type(request)) if version is None else version, True, fut)
        return fut

    def call_cb(self, request: Message, version: int, callback: Callback) -> None:
        """Send ``request``; ``callback(response)`` on arrival, ``callback(None)`` if it fails."""
        self._queue(request, version, True, callback)

    def send_prepared(
        self, frame: bytearray, request_cls: type[Message], version: int, callback: Callback
    ) -> None:
        """Send a frame from :func:`prepare` under a fresh correlation id; callback as in :meth:`call_cb`.

        Why: a member's heartbeat is the same bytes every time but for the correlation id;
        encoding it once per generation keeps the load generator's cost per heartbeat low.
        """
        if self._closing or self._lost is not None:
            raise self._closed_error()
        api_key, response_cls = _RESPONSES.get(request_cls) or response_of(request_cls)
        cid = self._next_id
        self._next_id = cid + 1 if cid < 0x7FFFFFFF else 1
        _I32.pack_into(frame, _CORRELATION_OFFSET, cid)
        sent = time.perf_counter() if self.observer is not None else 0.0
        if self._held is not None:
            self._held.append(((cid, api_key, response_cls, version, sent, callback), bytes(frame), None))
            return
        self._pending.append((cid, api_key, response_cls, version, sent, callback))
        if not self._wbuf:
            self._loop.call_soon(self._write_out)
        self._wbuf.append(bytes(frame))

    def request(
        self, request: Message, version: int | None = None, *, timeout: float | None = None
    ) -> asyncio.Future[Any]:
        """Send ``request``; await the result for its decoded response or :class:`RequestTimedOut`.

        ``timeout`` defaults to ``request_timeout``. A timer on the future instead of
        ``asyncio.wait_for``: no coroutine per request on the storage's append path.
        """
        fut = self.call(request, version)
        self._expire_after(fut, request, timeout)
        return fut

    def _expire_after(self, fut: asyncio.Future[Any], request: Message, timeout: float | None) -> None:
        limit = self.request_timeout if timeout is None else timeout
        timer = self._loop.call_later(limit, _expire, fut, self.name, type(request).__name__, limit)
        fut.add_done_callback(lambda _: timer.cancel())

    # -- re-authentication (KIP-368) ------------------------------------------------------------------
    def _logged_in(self, login: SaslCredentials, lifetime_ms: int) -> None:
        """A login (or re-login) as ``login`` succeeded; renew it before ``lifetime_ms`` runs out."""
        self._login = login
        self._reauthentication = None
        if lifetime_ms > 0 and not self.closed:
            share = random.uniform(*REAUTHENTICATE_WITHIN)
            self._reauthentication = self._loop.call_later(
                lifetime_ms / 1000 * share, self._start_reauthentication
            )

    def _start_reauthentication(self) -> None:
        self._reauthentication = None
        if not self.closed:
            self._reauthentication = self._loop.create_task(self.reauthenticate())

    async def reauthenticate(self) -> None:
        """Log in again on this connection as it logged in first, holding back what is sent meanwhile.

        Closes the connection if the login fails (its in-flight and held requests fail with
        :class:`ConnectionLost`): a broker would close it anyway once the session ran out.
        """
        login = self._login
        if login is None or self.closed or self._held is not None:
            return
        began = time.monotonic()
        self._held = []
        try:
            lifetime_ms = await authenticate(self, login, self.request_timeout, send=self._request_ahead)
        except Exception as exc:  # whatever it was, the connection would not outlive its session
            if not self.closed:
                log.warning("%s: re-authentication failed (%s); closing the connection", self.name, exc)
                self.close()
            return
        held = self._release_held()
        took = time.monotonic() - began
        self.reauthentications += 1
        self.reauthentication_seconds += took
        log.debug(
            "%s (%s): re-authenticated as %s in %.1f ms (%d requests held meanwhile); session %d ms",
            self.name,
            self.client_id,
            login.principal,
            took * 1000,
            held,
            lifetime_ms,
        )
        self._logged_in(login, lifetime_ms)

    def _request_ahead(
        self, request: Message, version: int | None = None, *, timeout: float | None = None
    ) -> asyncio.Future[Any]:
        """:meth:`request` for the re-authentication's own requests: sent now, past the held ones."""
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._queue(request, self.version_for(type(request)) if version is None else version, True, fut, True)
        self._expire_after(fut, request, timeout)
        self.flush()  # also on a corked connection: nobody else flushes while the others are held
        return fut

    def _release_held(self) -> int:
        """Send what was held back during a re-authentication, in the order it was sent; how many."""
        held, self._held = self._held or [], None
        for entry, frame, rest in held:
            if entry is not None:
                self._pending.append(entry)
            if rest is None:
                self._write(frame)
            else:
                self._write_parts(frame, rest)
        self.flush()
        return len(held)

    # -- receiving ------------------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        finished = None
        if self._streaming_to is not None:  # a streamed answer: its end is not joined (StreamingTarget)
            finished = self._decoder.finish_large(data)
            if finished is not None:
                data = finished[1]
        try:
            payloads = self._decoder.feed(data) if data else []
        except CodecError as exc:
            self._abort(ConnectionLost(f"{self.name} sent a bad frame ({exc}); closing"))
            return
        if not payloads and finished is None:
            partial = self._decoder.large_partial
            if partial is not None:
                self._stream_partial(*partial)
            return
        pending = self._pending
        observed = self.observer.response if self.observer is not None else None
        now = time.perf_counter() if observed is not None else 0.0
        unpack = _I32.unpack_from
        decode = sm.decode_response
        future = asyncio.Future
        self.reading = True
        if finished is not None:
            self._finish_streamed(finished[0])
        for payload in payloads:
            if not pending:
                self._abort(ConnectionLost(f"{self.name} sent an unsolicited response; closing"))
                break
            cid, api_key, response_cls, version, sent, target = pending.popleft()
            if cid != _UNCHECKED:
                got = unpack(payload, 0)[0] if len(payload) >= 4 else None
                if got != cid:
                    self._fail(
                        target,
                        api_key,
                        CorrelationMismatch(f"{self.name}: response correlation id {got}, expected {cid}"),
                    )
                    self._abort(ConnectionLost(f"{self.name}: responses out of step with requests; closing"))
                    break
                if observed is not None:
                    observed(api_key, now - sent)
            if response_cls is None:
                if not isinstance(target, future):
                    target(payload)  # send_cb
                elif not target.done():
                    target.set_result(payload)
                continue
            is_future = isinstance(target, future)
            if is_future and target.done():
                continue  # timed out or cancelled: nobody reads it, the FIFO stays in step
            try:
                response = decode(response_cls, version, payload)[1]
            except Exception as exc:  # a malformed response fails that request, not the connection
                self._fail(target, api_key, exc)
                continue
            if is_future:
                target.set_result(response)
            else:
                target(response)
        self.reading = False
        partial = self._decoder.large_partial
        if partial is not None:
            if self._lost is None:
                self._stream_partial(*partial)  # after the answers completed by this read: they come first
        elif self._streamed_frame is not None:
            self._streamed_frame = None  # that frame is complete: let go of its pieces
        if self.after_read is not None:  # also after an abort: what was handed out before it goes on
            self.after_read()
        if self._close_when_idle and not pending and not self._held and self._lost is None:
            self.close()

    def _stream_partial(self, size: int, pieces: list[bytes]) -> None:
        """Hand the new pieces of a large answer still arriving to its target, if it takes them
        (a :class:`StreamingTarget`: a relay forwarding the answer as it comes)."""
        if pieces is not self._streamed_frame:  # a new frame: nothing of it handed out yet
            self._streamed_frame, self._streamed = pieces, 0
            self._streaming_to = None
        if self._streamed == len(pieces) or not self._pending:
            return
        target = self._pending[0][5]
        if isinstance(target, StreamingTarget):
            new = pieces[self._streamed :]
            self._streamed = len(pieces)
            if target.stream(size, new):
                self._streaming_to = target

    def _finish_streamed(self, pieces: list[bytes]) -> None:
        """The end of the answer :attr:`_streaming_to` took while it arrived: all its pieces to it."""
        target, self._streaming_to = self._streaming_to, None
        self._streamed_frame = None
        pending = self._pending
        if target is None or not pending or pending[0][5] is not target:
            # Not expected: the first answer owed is the one streamed (answers come in order).
            self._abort(ConnectionLost(f"{self.name}: a streamed answer lost its place; closing"))
            return
        pending.popleft()
        target.finish(pieces)

    # -- versions -------------------------------------------------------------------------------------
    async def negotiate(
        self,
        software_name: str = SOFTWARE_NAME,
        software_version: str = SOFTWARE_VERSION,
        timeout: float | None = None,
    ) -> Any:
        """ApiVersions: learn the broker's version ranges (:attr:`versions`); returns its response.

        Asks at v3 first. A broker that does not speak that version answers UNSUPPORTED_VERSION in
        a v0 body (Kafka's rule, whatever the version asked), advertising its own ApiVersions range:
        ask again at the highest version both speak.
        """
        version = API_VERSIONS_VERSION
        while True:
            req = m.ApiVersionsRequest(
                client_software_name=software_name, client_software_version=software_version
            )
            fut: asyncio.Future[bytes] = self._loop.create_future()
            self._queue(req, version, False, fut)
            self._expire_after(fut, req, timeout)
            payload = await fut
            try:
                resp = sm.decode_response(m.ApiVersionsResponse, version, payload)[1]
            except CodecError:
                if version == 0:
                    raise
                resp = sm.decode_response(m.ApiVersionsResponse, 0, payload)[1]
            if resp.error_code == ErrorCode.UNSUPPORTED_VERSION and version > 0:
                theirs = next((k.max_version for k in resp.api_keys if k.api_key == m.ApiKey.API_VERSIONS), 0)
                version = max(0, min(version - 1, theirs))
                continue
            break
        if resp.error_code:
            raise BrokerError(
                f"{self.name} answered ApiVersions with error {resp.error_code}", resp.error_code
            )
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        self.api_versions = resp
        return resp

    def version_for(self, request_cls: type[Message], highest: int | None = None) -> int:
        """The highest version both sides speak: min(ours, the broker's), if not below either's lowest.

        Ours is the message schema's range, narrowed by :attr:`limits` and ``highest``.
        """
        api_key, _ = response_of(request_cls)
        valid = request_cls.SCHEMA.valid
        lo, hi = self.limits.get(request_cls, (valid.low, valid.high if valid.high is not None else 0x7FFF))
        if highest is not None:
            hi = min(hi, highest)
        broker = self.versions.get(api_key)
        if broker is None:
            raise UnsupportedVersion(f"{self.name} does not support {request_cls.__name__}")
        version = min(hi, broker[1])
        if version < max(lo, broker[0]):
            raise UnsupportedVersion(
                f"{self.name} supports {request_cls.__name__} v{broker[0]}-{broker[1]}, we speak v{lo}-{hi}"
            )
        return version


def _expire(fut: asyncio.Future[Any], name: str, what: str, limit: float) -> None:
    if not fut.done():
        fut.set_exception(RequestTimedOut(f"{what} to {name} timed out after {limit}s"))


async def connect(
    address: Address,
    max_frame_size: int = frames.DEFAULT_MAX_FRAME_SIZE,
    timeout: float | None = 10.0,
    *,
    software_name: str = SOFTWARE_NAME,
    software_version: str = SOFTWARE_VERSION,
    **options: Any,
) -> Connection:
    """Open a :class:`Connection` and negotiate its versions; closes it again if that fails."""
    conn = await Connection.open(address, max_frame_size, timeout, **options)
    try:
        await conn.negotiate(software_name, software_version, timeout)
    except BaseException:
        conn.close()
        raise
    return conn
