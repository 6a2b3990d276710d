"""Size-prefixed framing and request/response headers — bytes in, objects out, no sockets.

Every Kafka message on a connection is ``int32 size`` + ``size`` bytes. A request frame starts
with the request header (v1: api key, api version, correlation id, nullable client id with an
int16 length even in flexible versions; v2 adds tagged fields); a response frame starts with
the response header (v0: correlation id; v1 adds tagged fields). ApiVersions responses always
use header v0 so a client can read them whatever version it asked for.

:class:`FrameDecoder` never buffers more than one frame beyond ``max_frame_size``: a size prefix
above the cap (or negative) raises :class:`FrameTooLarge` before any of the body is stored.

Large partial frames share a :class:`FrameBudget` (Kafka's ``queued.max.request.bytes`` memory
pool): when the length prefix of a frame above ``reserve_above`` bytes arrives, its decoder
reserves the frame's whole declared size, and releases it when the frame completes or the decoder
is closed. A decoder that cannot reserve is queued (``waiting``); its owner stops reading until
``on_ready`` is called, in arrival order, once the memory is granted. Reservations are all or
nothing, so a set of waiting connections cannot deadlock: each one holding memory holds all it
needs. Frames up to ``reserve_above`` never touch the budget (the hot path is unchanged).

The same budget holds the requests in flight, as Kafka's memory pool does (a request's memory is
released once it was handled, not once it was read): a server charges each request's estimated
cost (:meth:`FrameBudget.charge`, never refused: the request is read already) and, for a costly
one, first :meth:`FrameBudget.reserve` s it with a :class:`MemoryWaiter`, which waits in the same
arrival order when the budget is spent. ``partial_frames`` and ``inflight`` say which is which.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from .codec import Message, c_offset_commit_response
from .messages import REQUESTS, RESPONSES, ApiKey, HeartbeatResponse
from .primitives import CodecError, decode_uvarint

_SIZE = struct.Struct(">i")
_HEADER_FIXED = struct.Struct(">hhi")
_HEADER_CLIENT_LEN = struct.Struct(">h")
_SIZE_AND_CORRELATION = struct.Struct(">ii")

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024


class FrameTooLarge(CodecError):
    """A size prefix beyond the configured maximum (or negative)."""


# Frames above this many bytes reserve their size from the FrameBudget while they are received.
LARGE_FRAME = 64 * 1024


class MemoryWaiter:
    """Someone waiting for budget memory: ``waiting`` bytes; ``on_ready`` once they are reserved."""

    __slots__ = ("waiting", "granted", "on_ready")

    def __init__(self) -> None:
        self.waiting = 0
        self.granted = 0  # what was reserved for it, last time
        self.on_ready: Callable[[], None] | None = None

    def _granted(self) -> None:
        self.granted, self.waiting = self.waiting, 0
        if self.on_ready is not None:
            self.on_ready()


class FrameBudget:
    """Bytes of large partial frames and of requests in flight, shared by every connection."""

    __slots__ = ("capacity", "used", "inflight", "_queue")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0  # partial frames' reservations and requests in flight
        self.inflight = 0  # of which requests in flight
        self._queue: deque[FrameDecoder | MemoryWaiter] = deque()  # waiting for memory, in arrival order

    @property
    def waiters(self) -> int:
        return len(self._queue)

    @property
    def partial_frames(self) -> int:
        return self.used - self.inflight

    def _reserve(self, decoder: FrameDecoder | MemoryWaiter, size: int) -> bool:
        """All of ``size`` or nothing; nobody overtakes a decoder already waiting."""
        if self._queue or self.used + size > self.capacity:
            self._queue.append(decoder)
            return False
        self.used += size
        return True

    def _release(self, size: int) -> None:
        self.used -= size
        if self._queue:
            self._wake()

    def _cancel(self, waiter: FrameDecoder | MemoryWaiter) -> None:
        try:
            self._queue.remove(waiter)
        except ValueError:
            return
        self._wake()

    def _wake(self) -> None:
        queue = self._queue
        while queue and self.used + queue[0].waiting <= self.capacity:
            waiter = queue.popleft()
            self.used += waiter.waiting
            waiter._granted()

    # -- requests in flight ---------------------------------------------------------------------------
    def reserve(self, waiter: MemoryWaiter, size: int) -> bool:
        """Reserve ``size`` bytes (at most the capacity) for a request about to be dispatched: True
        now, or False and ``waiter.on_ready()`` once reserved (in arrival order). A reservation turns
        into the request's charge: call :meth:`charge` with ``reserved=True``."""
        size = min(size, self.capacity)
        if self._reserve(waiter, size):
            return True
        waiter.waiting = size
        return False

    def cancel(self, waiter: MemoryWaiter) -> None:
        """``waiter`` no longer wants its memory (its connection closed)."""
        if waiter.waiting:
            waiter.waiting = 0
            self._cancel(waiter)

    def unreserve(self, size: int) -> None:
        """Give back a reservation that no request was charged against."""
        self._release(size)

    def charge(self, size: int, reserved: int = 0) -> None:
        """A request costing ``size`` bytes is in flight; ``reserved`` of them were reserved for it
        (:meth:`reserve`). An unreserved charge may take the budget past its capacity: cheap requests
        are never held back (the connection's own limit bounds them)."""
        self.used += size - reserved
        self.inflight += size

    def discharge(self, size: int) -> None:
        """The request charged ``size`` bytes was answered (or dropped)."""
        self.inflight -= size
        self.used -= size  # _release, inlined: every answer passes here
        if self._queue:
            self._wake()


class FrameDecoder:
    """Accumulate bytes and yield whole frames (without their size prefix).

    With a ``budget``, ``reserved`` is what the partial frame being received holds of it and
    ``waiting`` what it waits for (the owner should not feed more until ``on_ready`` is called).

    A frame above ``reserve_above`` bytes that does not arrive in one read is kept as the list of
    the reads that brought it and joined once when complete: one copy of its bytes, where growing
    one buffer by every read and slicing the frame out of it were two and more (a relay moving
    1 MB Produce and Fetch frames spent most of its CPU copying them).
    """

    __slots__ = (
        "_buf",
        "_pieces",
        "_need",
        "_large",
        "max_frame_size",
        "budget",
        "reserve_above",
        "reserved",
        "waiting",
        "on_ready",
    )

    def __init__(
        self,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        budget: FrameBudget | None = None,
        reserve_above: int = LARGE_FRAME,
    ) -> None:
        self._buf = bytearray()
        self._pieces: list[bytes] | None = None  # the received part of a large frame's body
        self._need = 0  # bytes of that body still to come
        self._large = 0  # its size
        self.max_frame_size = max_frame_size
        self.budget = budget
        self.reserve_above = reserve_above
        self.reserved = 0
        self.waiting = 0
        self.on_ready: Callable[[], None] | None = None

    def feed(self, data: bytes) -> list[bytes]:
        pieces = self._pieces
        if pieces is None and not self._buf and type(data) is bytes and len(data) >= 4:
            # One whole frame in one read, nothing buffered (a relay's small requests and answers,
            # one in flight per connection): the frame is sliced out once, nothing else to do.
            (size,) = _SIZE.unpack_from(data, 0)
            if size == len(data) - 4 and size <= self.max_frame_size:
                return [data[4:]]
        frames: list[bytes] = []
        view: bytes | bytearray | memoryview = data
        if pieces is not None:
            need = self._need
            if len(data) < need:
                pieces.append(data)
                self._need = need - len(data)
                return frames
            if len(data) == need:
                pieces.append(data)
                view = b""
            else:
                view = memoryview(data)  # the frame's end and what follows it, sliced without a copy
                pieces.append(bytes(view[:need]))
                view = view[need:]
            frames.append(b"".join(pieces))
            self._pieces = None
            self._need = self._large = 0
            self._large_done()
            if not view:
                return frames
        buf = self._buf
        if buf:
            buf += view
            view = buf
        # Else frames are cut out of the read itself: copying it into the buffer first was a second
        # copy of a large frame's first piece, page faults included (bench/RESULTS.md, hostile clients).
        pos = 0
        end = len(view)
        large = self.reserve_above
        partial = 0
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(view, pos)
            if size < 0 or size > self.max_frame_size:
                raise FrameTooLarge(f"frame size {size} outside 0..{self.max_frame_size}")
            if end - pos - 4 < size:
                partial = size
                break
            if size > large and view is buf:
                with memoryview(buf) as whole:  # one copy of a large frame, not two
                    frames.append(bytes(whole[pos + 4 : pos + 4 + size]))
            else:
                frames.append(bytes(view[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if partial > large:
            # The rest of this frame comes in later reads: collect them as they are (see above).
            self._pieces = [bytes(view[pos + 4 :])] if end > pos + 4 else []
            self._need = partial - (end - pos - 4)
            self._large = partial
            if view is buf:
                if end > large:
                    self._buf = bytearray()  # let go of a large allocation
                else:
                    buf.clear()
            if self.budget is not None and not self.reserved and not self.waiting:
                if self.budget._reserve(self, partial):
                    self.reserved = partial
                else:
                    self.waiting = partial
            return frames
        if view is not buf:
            if pos < end:
                buf += view[pos:]  # the beginning of a frame of at most reserve_above bytes
        elif pos:
            if pos > large and end - pos <= large:
                self._buf = buf[pos:]  # let go of a large allocation
            else:
                del buf[:pos]
        return frames

    def finish_large(self, data: bytes) -> tuple[list[bytes], bytes] | None:
        """When ``data`` completes the large frame being received: that frame as the pieces it
        came in, not joined (a relay that already wrote most of it needs no copy of the whole),
        and what follows it in ``data``, still to be fed. None (nothing taken) otherwise."""
        pieces = self._pieces
        need = self._need
        if pieces is None or len(data) < need:
            return None
        rest = b""
        if len(data) == need:
            pieces.append(data)
        else:
            pieces.append(data[:need])
            rest = data[need:]
        self._pieces = None
        self._need = self._large = 0
        self._large_done()
        return pieces, rest

    def _granted(self) -> None:
        self.reserved, self.waiting = self.waiting, 0
        if self.on_ready is not None:
            self.on_ready()

    def _large_done(self) -> None:
        if self.reserved:
            assert self.budget is not None
            self.budget._release(self.reserved)
            self.reserved = 0

    def close(self) -> None:
        """Drop what is buffered and give back (or stop waiting for) budget memory."""
        self._buf = bytearray()
        self._pieces = None
        self._need = self._large = 0
        self.on_ready = None
        budget = self.budget
        if budget is None:
            return
        if self.waiting:
            self.waiting = 0
            budget._cancel(self)
        if self.reserved:
            reserved, self.reserved = self.reserved, 0
            budget._release(reserved)

    @property
    def receiving_large(self) -> bool:
        """A frame above ``reserve_above`` has begun and is not complete."""
        return self._pieces is not None

    @property
    def large_partial(self) -> tuple[int, list[bytes]] | None:
        """The large frame being received, if any: its size and the pieces of its payload so far
        (the same list object until it completes; a relay forwards the pieces as they come)."""
        pieces = self._pieces
        return None if pieces is None else (self._large, pieces)

    @property
    def buffered(self) -> int:
        """Bytes of frames begun and not complete (the size prefix of a large one included)."""
        if self._pieces is not None:
            return len(self._buf) + 4 + self._large - self._need
        return len(self._buf)


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def size_prefix(size: int) -> bytes:
    """The 4 bytes that frame a payload of ``size`` bytes: a relay writes them and a large payload
    as two buffers, or ahead of an answer it streams."""
    return _SIZE.pack(size)


def frame_parts(payload: bytes) -> tuple[bytes, bytes | None]:
    """``payload`` framed for writing: one buffer, or for a large payload its size prefix and the
    payload itself, written as two buffers (writev) rather than copied into one frame."""
    if len(payload) > LARGE_FRAME:
        return _SIZE.pack(len(payload)), payload
    return _SIZE.pack(len(payload)) + payload, None


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int  # bytes of header; the body starts here

    @property
    def flexible(self) -> bool:
        return request_is_flexible(self.api_key, self.api_version)


def request_is_flexible(api_key: int, api_version: int) -> bool:
    cls = REQUESTS.get(api_key)
    return cls is not None and api_version in cls.SCHEMA.flexible


def peek_header(frame_bytes: bytes) -> tuple[int, int, int]:
    """Just (api_key, api_version, correlation_id): all a pass-through needs to know."""
    if len(frame_bytes) < 8:
        raise CodecError("request shorter than its header")
    return _HEADER_FIXED.unpack_from(frame_bytes, 0)


def skip_tagged_fields(frame_bytes: bytes, pos: int) -> int:
    """Skip a header's tagged-field section at ``pos``; returns where the body starts."""
    end = len(frame_bytes)
    if pos < end and frame_bytes[pos] == 0:
        return pos + 1  # no tagged fields: nearly always
    count, pos = decode_uvarint(frame_bytes, pos)
    for _ in range(count):
        _tag, pos = decode_uvarint(frame_bytes, pos)
        size, pos = decode_uvarint(frame_bytes, pos)
        pos += size
        if pos > end:
            raise CodecError("header tagged field past end of frame")
    return pos


def client_id_and_body_start(frame_bytes: bytes, flexible: bool) -> tuple[str | None, int]:
    """The nullable client id after the fixed request header, and where the body starts."""
    end = len(frame_bytes)
    if end < 10:
        raise CodecError("request header truncated before client id")
    (n,) = _HEADER_CLIENT_LEN.unpack_from(frame_bytes, 8)
    pos = 10
    client_id: str | None = None
    if n >= 0:
        pos += n
        if pos > end:
            raise CodecError("client id runs past end of frame")
        try:
            client_id = frame_bytes[10:pos].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CodecError(f"client id is not utf-8: {exc}") from exc
    if flexible:
        pos = skip_tagged_fields(frame_bytes, pos)
    return client_id, pos


def parse_request_header(frame_bytes: bytes, flexible: bool | None = None) -> RequestHeader:
    """Parse a request header. ``flexible`` defaults to what our schemas say for the API version."""
    api_key, api_version, correlation_id = peek_header(frame_bytes)
    if flexible is None:
        flexible = request_is_flexible(api_key, api_version)
    client_id, pos = client_id_and_body_start(frame_bytes, flexible)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def peek_first_array_length(frame_bytes: bytes, api_key: int, api_version: int) -> int:
    """The length of the array that opens a request's body (0 if null or past the frame's end),
    read without decoding the request; never more than the frame's size."""
    cls = REQUESTS.get(api_key)
    if cls is None:
        raise CodecError(f"unknown api key {api_key}")
    flexible = api_version in cls.SCHEMA.flexible
    _client_id, pos = client_id_and_body_start(frame_bytes, flexible)
    end = len(frame_bytes)
    if flexible:
        if pos >= end:
            return 0
        length, _ = decode_uvarint(frame_bytes, pos)
        length -= 1
    else:
        if pos + 4 > end:
            return 0
        (length,) = _SIZE.unpack_from(frame_bytes, pos)
    return max(0, min(length, end))


def decode_request(frame_bytes: bytes) -> tuple[RequestHeader, Message]:
    """Decode a whole request frame of an API kcoord knows."""
    header = parse_request_header(frame_bytes)
    cls = REQUESTS.get(header.api_key)
    if cls is None:
        raise CodecError(f"unknown api key {header.api_key}")
    body = cls.decode_from(frame_bytes, header.size, header.api_version)[0]
    return header, body


def decode_request_body(frame_bytes: bytes, api_key: int, api_version: int) -> tuple[str | None, Message]:
    """(client id, body) of a request whose api key and version the caller already peeked.

    The server's hot path: the same checks as :func:`decode_request`, without building a
    :class:`RequestHeader` or looking the message class up twice.
    """
    known = _REQUEST_CLASS_FLEXIBLE.get((api_key, api_version))
    if known is None:  # once per (api key, version) asked: a bounded set (api keys are int16s)
        cls = REQUESTS.get(api_key)
        if cls is None:
            raise CodecError(f"unknown api key {api_key}")
        known = _REQUEST_CLASS_FLEXIBLE[(api_key, api_version)] = (cls, api_version in cls.SCHEMA.flexible)
    cls, flexible = known
    client_id, pos = client_id_and_body_start(frame_bytes, flexible)
    return client_id, cls.decode_from(frame_bytes, pos, api_version)[0]


# (api key, version) -> (request class, whether its header is flexible): asked for every request
# served; the version range's ``in`` is a Python-level call, this a dict lookup.
_REQUEST_CLASS_FLEXIBLE: dict[tuple[int, int], tuple[type[Message], bool]] = {}


def response_header_flexible(api_key: int, api_version: int) -> bool:
    if api_key == ApiKey.API_VERSIONS:
        return False
    cls = RESPONSES.get(api_key)
    return cls is not None and api_version in cls.SCHEMA.flexible


# (api key, version) -> whether its response header is flexible: asked for every response sent.
_RESPONSE_HEADER_FLEXIBLE: dict[tuple[int, int], bool] = {}


_OFFSET_COMMIT = int(ApiKey.OFFSET_COMMIT)  # a plain int: compared with every response's api key
_HEARTBEAT = int(ApiKey.HEARTBEAT)
# A heartbeat's answer is a few fixed-size fields: its whole frame (size prefix, correlation id, the
# flexible header's empty tagged fields, the body) is one pack. The sizes count what follows the prefix.
_HEARTBEAT_V1_FRAME = struct.Struct(">iiih")  # 10: correlation id, throttle_time_ms, error_code
_HEARTBEAT_V4_FRAME = struct.Struct(">iiBihB")  # 12: the same and the header's and body's tag counts (0)


def encode_response(api_key: int, api_version: int, correlation_id: int, response: Message) -> bytes:
    """A complete response frame, size prefix included.

    An OffsetCommit answer (one per commit, the hot path of a commit storm) is written by the C
    extension where it is built, ~8x faster than the generated encoder; it answers None for what only
    the generated encoder handles (v10, unknown tagged fields, non-ASCII names), and gives the same
    bytes otherwise (tests/unit/test_offset_commit_response_c.py). A Heartbeat answer (one per member
    every few seconds) is packed in one call, the same bytes as the generated encoder's
    (tests/unit/test_heartbeat_response_frame.py)."""
    if api_key == _OFFSET_COMMIT and c_offset_commit_response is not None:
        frame = c_offset_commit_response(api_version, correlation_id, response)
        if frame is not None:
            return frame
    elif api_key == _HEARTBEAT and type(response) is HeartbeatResponse and not response.unknown_tagged:
        try:
            if api_version == 4:
                return _HEARTBEAT_V4_FRAME.pack(
                    12, correlation_id, 0, response.throttle_time_ms, response.error_code, 0
                )
            if 1 <= api_version <= 3:
                return _HEARTBEAT_V1_FRAME.pack(
                    10, correlation_id, response.throttle_time_ms, response.error_code
                )
        except struct.error:
            pass  # a field out of its range: the generated encoder says which
    return encode_response_generic(api_key, api_version, correlation_id, response)


def encode_response_generic(api_key: int, api_version: int, correlation_id: int, response: Message) -> bytes:
    """:func:`encode_response` through the generated encoders only."""
    out = bytearray(_SIZE_AND_CORRELATION.pack(0, correlation_id))  # size is patched in below
    flexible = _RESPONSE_HEADER_FLEXIBLE.get((api_key, api_version))
    if flexible is None:  # once per (api key, version) kcoord answers: a bounded set
        flexible = _RESPONSE_HEADER_FLEXIBLE[(api_key, api_version)] = response_header_flexible(
            api_key, api_version
        )
    if flexible:
        out.append(0)  # no tagged fields in the header
    response.encode_into(out, api_version)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, request: Message
) -> bytes:
    """A complete request frame, size prefix included: kcoord's one request encoder (its client,
    storage, tools, tests and load generator all use it).

    The header is v2 (tagged fields) iff ``api_version`` is flexible for the request's own class, so
    the APIs only storage sends (not in :data:`~kcoord.protocol.messages.REQUESTS`) are framed right.
    """
    schema = request.SCHEMA
    if schema.api_key != api_key:
        raise CodecError(f"{type(request).__name__} is api key {schema.api_key}, not {api_key}")
    out = bytearray(4)
    out += _HEADER_FIXED.pack(api_key, api_version, correlation_id)
    if client_id is None:
        out += b"\xff\xff"
    else:
        cid = client_id.encode("utf-8")
        out += _HEADER_CLIENT_LEN.pack(len(cid))
        out += cid
    if api_version in schema.flexible:
        out.append(0)  # request header v2: no tagged fields
    request.encode_into(out, api_version)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def decode_response(api_key: int, api_version: int, frame_bytes: bytes) -> tuple[int, Message]:
    """Decode a response frame (without size prefix) → (correlation_id, response)."""
    if len(frame_bytes) < 4:
        raise CodecError("response shorter than its header")
    (correlation_id,) = _SIZE.unpack_from(frame_bytes, 0)
    pos = 4
    if response_header_flexible(api_key, api_version):
        pos = skip_tagged_fields(frame_bytes, pos)
    cls = RESPONSES[api_key]
    body, end = cls.decode_from(frame_bytes, pos, api_version)
    if end != len(frame_bytes):
        raise CodecError(f"{cls.__name__} v{api_version}: {len(frame_bytes) - end} trailing bytes")
    return correlation_id, body
