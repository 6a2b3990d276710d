"""Connections from kcoord to the upstream brokers.

An :class:`UpstreamConnection` carries whole frames. Kafka brokers answer requests on a
connection strictly in order, so matching a response to its request is a FIFO — except
``Produce`` with ``acks=0``, which gets no response and therefore takes no FIFO slot.
Frames are forwarded unchanged: the client's correlation ids travel through as they are.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from typing import Any

from protocol import frames
from protocol.codegen import Message
from protocol.primitives import CodecError

log = logging.getLogger("kcoord.upstream")


class UpstreamClosed(ConnectionError):
    pass


class UpstreamConnection(asyncio.Protocol):
    def __init__(self, address: tuple[str, int], max_frame_size: int) -> None:
        self.address = address
        self._decoder = frames.FrameDecoder(max_frame_size)
        self._pending: deque[asyncio.Future[bytes]] = deque()
        self._transport: asyncio.Transport | None = None
        self._closed = False
        self._close_when_idle = False
        # Frames sent in one loop iteration leave in one write: every shard's appends share the
        # storage connection, and a client's pipelined requests share its paired connection; a
        # syscall per frame was a hot spot.
        self._wbuf: list[bytes] = []
        self.on_close: list[Any] = []
        self.bytes_in = 0
        self.bytes_out = 0

    @classmethod
    async def open(cls, address: tuple[str, int], max_frame_size: int, timeout: float = 10.0) -> UpstreamConnection:
        loop = asyncio.get_running_loop()
        _, proto = await asyncio.wait_for(
            loop.create_connection(lambda: cls(address, max_frame_size), address[0], address[1]), timeout
        )
        return proto

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.bytes_in += len(data)
        try:
            for payload in self._decoder.feed(data):
                if not self._pending:
                    log.error("upstream %s:%d sent an unsolicited response; closing", *self.address)
                    self.close()
                    return
                fut = self._pending.popleft()
                if not fut.done():
                    fut.set_result(payload)
            if self._close_when_idle and not self._pending:
                self.close()
        except CodecError as exc:
            log.error("upstream %s:%d sent a bad frame (%s); closing", *self.address, exc)
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        pending, self._pending = self._pending, deque()
        for fut in pending:
            if not fut.done():
                fut.set_exception(UpstreamClosed(f"upstream {self.address[0]}:{self.address[1]} closed"))
        for cb in self.on_close:
            cb(self)

    # API
    @property
    def closed(self) -> bool:
        return self._closed

    def send(self, frame_with_size: bytes, expect_response: bool = True) -> asyncio.Future[bytes] | None:
        """Write a request frame; returns a future for its response payload (None for acks=0 Produce)."""
        if self._closed or self._transport is None:
            raise UpstreamClosed(f"upstream {self.address[0]}:{self.address[1]} is closed")
        fut: asyncio.Future[bytes] | None = None
        if expect_response:
            fut = asyncio.get_running_loop().create_future()
            self._pending.append(fut)
        self.bytes_out += len(frame_with_size)
        if not self._wbuf:
            asyncio.get_running_loop().call_soon(self._write_out)
        self._wbuf.append(frame_with_size)
        return fut

    def _write_out(self) -> None:
        buf, self._wbuf = self._wbuf, []
        if buf and self._transport is not None and not self._closed:
            self._transport.write(b"".join(buf) if len(buf) > 1 else buf[0])

    def close(self) -> None:
        if self._transport is not None and not self._closed:
            self._write_out()  # what was sent before the close still goes out
            self._transport.close()

    def close_when_idle(self, timeout: float = 30.0) -> None:
        """Close once every request sent has its response (or after ``timeout``).

        A client that disconnects has still sent its requests; a broker may abandon requests whose
        connection closes under them, so the paired connection stays until they are answered.
        """
        if not self._pending:
            self.close()
            return
        self._close_when_idle = True
        asyncio.get_running_loop().call_later(timeout, self.close)


class UpstreamClient:
    """A small request/response client over one upstream connection (kcoord's own control traffic)."""

    def __init__(self, conn: UpstreamConnection, client_id: str = "kcoord") -> None:
        self.conn = conn
        self.client_id = client_id
        self._ids = itertools.count(1)

    @classmethod
    async def connect(cls, address: tuple[str, int], max_frame_size: int = frames.DEFAULT_MAX_FRAME_SIZE) -> UpstreamClient:
        return cls(await UpstreamConnection.open(address, max_frame_size))

    async def request(self, api_key: int, version: int, request: Message, timeout: float = 30.0) -> Message:
        correlation_id = next(self._ids) & 0x7FFFFFFF
        fut = self.conn.send(frames.encode_request(api_key, version, correlation_id, self.client_id, request))
        assert fut is not None
        payload = await asyncio.wait_for(fut, timeout)
        got, response = frames.decode_response(api_key, version, payload)
        if got != correlation_id:
            raise CodecError(f"correlation id mismatch: sent {correlation_id}, got {got}")
        return response

    def close(self) -> None:
        self.conn.close()
