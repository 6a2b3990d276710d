"""One pipelined Kafka connection on our codec: many requests in flight, matched by correlation id.

Why an ``asyncio.Protocol`` and not streams: the steady-state scenario pushes tens of thousands of
heartbeats a second through a handful of sockets from one Python process that shares two cores
with the server under test. Every request sent in the same loop iteration goes out in ONE write
(a per-connection buffer flushed by ``call_soon``), responses are decoded straight from
``data_received``, and the hot path (heartbeats, commits) uses callbacks instead of futures.

Latency is measured from the moment a request is queued to the moment its response frame is
read, per API, into :class:`Stats`. A Kafka server answers a connection's requests in order, so a
response for an unknown correlation id is a protocol error and closes the connection.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from protocol import frames
from protocol.messages import ApiKey

from .histogram import Histogram

API_NAMES: dict[int, str] = {
    ApiKey.FIND_COORDINATOR: "FindCoordinator",
    ApiKey.JOIN_GROUP: "JoinGroup",
    ApiKey.SYNC_GROUP: "SyncGroup",
    ApiKey.HEARTBEAT: "Heartbeat",
    ApiKey.LEAVE_GROUP: "LeaveGroup",
    ApiKey.OFFSET_COMMIT: "OffsetCommit",
    ApiKey.OFFSET_FETCH: "OffsetFetch",
    ApiKey.API_VERSIONS: "ApiVersions",
    ApiKey.METADATA: "Metadata",
}

_CORRELATION_OFFSET = 8  # size(4) + api key(2) + api version(2)
_I32 = struct.Struct(">i")

Callback = Callable[[Any], None]


class Stats:
    """Per-API latency histograms, response counts and error codes for one run."""

    def __init__(self) -> None:
        self.latency: dict[int, Histogram] = {}
        self.errors: Counter[tuple[int, int]] = Counter()
        self.window_start = time.perf_counter()

    def histogram(self, api_key: int) -> Histogram:
        h = self.latency.get(api_key)
        if h is None:
            h = self.latency[api_key] = Histogram()
        return h

    def error(self, api_key: int, code: int) -> None:
        self.errors[(api_key, code)] += 1

    def reset(self) -> None:
        """Start a measurement window: drop everything recorded during setup and warm-up."""
        for h in self.latency.values():
            h.reset()
        self.errors.clear()
        self.window_start = time.perf_counter()

    def snapshot(self, seconds: float | None = None) -> dict[str, Any]:
        """{api: {count, rate_per_s, p50_ms, ...}} plus error counts by API and code."""
        seconds = seconds if seconds is not None else time.perf_counter() - self.window_start
        apis: dict[str, Any] = {}
        for key, h in sorted(self.latency.items()):
            if h.count:
                row = h.summary_ms()
                row["rate_per_s"] = round(h.count / seconds, 1) if seconds > 0 else 0.0
                apis[API_NAMES.get(key, str(key))] = row
        errors = {f"{API_NAMES.get(k, k)}:{code}": n for (k, code), n in sorted(self.errors.items())}
        return {"window_s": round(seconds, 3), "apis": apis, "errors": errors}


class ConnectionClosed(ConnectionError):
    """The connection went away with requests in flight."""


class KafkaConnection(asyncio.Protocol):
    """A client connection; ``call`` returns a future, ``call_cb``/``send_prepared`` a callback."""

    def __init__(self, stats: Stats, client_id: str = "kcoord-loadgen", name: str = "") -> None:
        self.stats = stats
        self.client_id = client_id
        self.name = name
        self.transport: asyncio.Transport | None = None
        self._decoder = frames.FrameDecoder()
        # correlation id -> (api key, version, sent at, future or callback)
        self._pending: dict[int, tuple[int, int, float, Any]] = {}
        self._next_id = 1
        self._out: list[bytes] = []
        self._closed: asyncio.Future[None] | None = None
        self.lost: BaseException | None = None

    # -- opening and closing --------------------------------------------------------------------------
    @classmethod
    async def open(cls, host: str, port: int, stats: Stats, client_id: str = "kcoord-loadgen", name: str = "") -> KafkaConnection:
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_connection(lambda: cls(stats, client_id, name), host, port)
        return proto

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._closed = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionClosed(f"connection {self.name} closed")
        pending, self._pending = self._pending, {}
        for api_key, _v, _t, target in pending.values():
            if isinstance(target, asyncio.Future):
                if not target.done():
                    target.set_exception(ConnectionClosed(f"connection {self.name} closed"))
            else:
                self.stats.error(api_key, -1)
                target(None)
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    async def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self._flush()
            self.transport.close()
        if self._closed is not None:
            await self._closed

    @property
    def is_open(self) -> bool:
        return self.lost is None and self.transport is not None and not self.transport.is_closing()

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    # -- sending --------------------------------------------------------------------------------------
    def _correlation_id(self) -> int:
        cid = self._next_id
        self._next_id = cid + 1 if cid < 0x7FFFFFFF else 1
        return cid

    def _write(self, data: bytes) -> None:
        if not self._out:
            asyncio.get_running_loop().call_soon(self._flush)
        self._out.append(data)

    def _flush(self) -> None:
        if self._out and self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(self._out))
        self._out.clear()

    def _check_open(self) -> None:
        if self.lost is not None:
            raise ConnectionClosed(f"connection {self.name} closed: {self.lost}")

    def call(self, api_key: int, version: int, request: Any) -> asyncio.Future[Any]:
        """Send a request; the future resolves with the decoded response."""
        self._check_open()
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        cid = self._correlation_id()
        self._pending[cid] = (api_key, version, time.perf_counter(), fut)
        self._write(frames.encode_request(api_key, version, cid, self.client_id, request))
        return fut

    def call_cb(self, api_key: int, version: int, request: Any, callback: Callback) -> None:
        """Send a request; ``callback(response)`` runs on arrival (``None`` if the connection dies)."""
        self._check_open()
        cid = self._correlation_id()
        self._pending[cid] = (api_key, version, time.perf_counter(), callback)
        self._write(frames.encode_request(api_key, version, cid, self.client_id, request))

    def send_prepared(self, frame: bytearray, api_key: int, version: int, callback: Callback) -> None:
        """Send a frame encoded once up front (see :func:`prepare`), patching in a fresh correlation id.

        Why: a member's heartbeat is the same bytes every time but for the correlation id;
        encoding it once per generation keeps the generator's cost per heartbeat low.
        """
        self._check_open()
        cid = self._correlation_id()
        _I32.pack_into(frame, _CORRELATION_OFFSET, cid)
        self._pending[cid] = (api_key, version, time.perf_counter(), callback)
        self._write(bytes(frame))

    # -- receiving ------------------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        pending = self._pending
        stats = self.stats
        for payload in self._decoder.feed(data):
            (cid,) = _I32.unpack_from(payload, 0)
            entry = pending.pop(cid, None)
            if entry is None:
                self.lost = ConnectionClosed(f"unexpected correlation id {cid} on {self.name}")
                if self.transport is not None:
                    self.transport.close()
                return
            api_key, version, sent, target = entry
            stats.histogram(api_key).record(int((now - sent) * 1_000_000))
            try:
                response = frames.decode_response(api_key, version, payload)[1]
            except Exception as exc:  # a malformed response fails that request, not the run
                if isinstance(target, asyncio.Future):
                    if not target.done():
                        target.set_exception(exc)
                else:
                    stats.error(api_key, -2)
                    target(None)
                continue
            if isinstance(target, asyncio.Future):
                if not target.done():
                    target.set_result(response)
            else:
                target(response)


def prepare(api_key: int, version: int, client_id: str, request: Any) -> bytearray:
    """A request frame to reuse with :meth:`KafkaConnection.send_prepared`."""
    return bytearray(frames.encode_request(api_key, version, 0, client_id, request))
