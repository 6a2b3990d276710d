"""A minimal blocking Kafka-protocol client on our own codec, for tests that need exact requests."""

from __future__ import annotations

import itertools
import socket
import struct
from typing import Any

from protocol import frames


class WireClient:
    def __init__(self, address: str, timeout: float = 10.0) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._ids = itertools.count(1)

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by server")
            buf += chunk
        return bytes(buf)

    def send(self, api_key: int, version: int, request: Any, client_id: str = "wire-test") -> int:
        correlation_id = next(self._ids)
        self.sock.sendall(frames.encode_request(api_key, version, correlation_id, client_id, request))
        return correlation_id

    def receive(self, api_key: int, version: int, correlation_id: int) -> Any:
        got, response = frames.decode_response(api_key, version, self.recv_frame())
        assert got == correlation_id, (got, correlation_id)
        return response

    def request(self, api_key: int, version: int, request: Any) -> Any:
        return self.receive(api_key, version, self.send(api_key, version, request))

    def request_raw(self, api_key: int, version: int, body: bytes) -> bytes:
        """Send a v1-header request with an arbitrary body; return the response body after header v0."""
        correlation_id = next(self._ids)
        header = struct.pack(">hhih", api_key, version, correlation_id, -1)
        self.sock.sendall(frames.frame(header + body))
        payload = self.recv_frame()
        (got,) = struct.unpack_from(">i", payload, 0)
        assert got == correlation_id
        return payload[4:]

    def is_closed_by_server(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
