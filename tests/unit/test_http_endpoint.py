"""The tiny HTTP/1.1 server of the metrics endpoints, over a loopback socket: keep-alive, HEAD
without a body, a malformed request line answered 400, and close() ending idle connections."""

from __future__ import annotations

import asyncio
import logging

from kcoord.coordinator.ops.http_endpoint import HttpEndpoint


async def read_answer(reader: asyncio.StreamReader) -> tuple[str, dict[str, str]]:
    """The status line and headers of one answer (its body is left to read)."""
    status = (await reader.readline()).decode().strip()
    headers: dict[str, str] = {}
    while (line := (await reader.readline()).decode().strip()) != "":
        name, _, value = line.partition(":")
        headers[name.lower()] = value.strip()
    return status, headers


async def test_keep_alive_head_and_bad_requests() -> None:
    asked: list[tuple[str, str]] = []

    async def respond(method: str, path: str) -> tuple[int, str, bytes]:
        asked.append((method, path))
        return (200, "text/plain", b"hello\n") if path == "/x" else (404, "text/plain", b"no\n")

    endpoint = HttpEndpoint(respond, logging.getLogger("test"))
    port = await endpoint.start("127.0.0.1", 0)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"GET /x HTTP/1.1\r\nHost: a\r\n\r\nHEAD /x HTTP/1.1\r\n\r\nGET /y HTTP/1.1\r\n\r\nnonsense\r\n\r\n"
    )
    status, headers = await read_answer(reader)
    assert status == "HTTP/1.1 200 OK" and headers["content-length"] == "6"
    assert await reader.readexactly(6) == b"hello\n"
    status, headers = await read_answer(reader)  # HEAD: the length, no body
    assert status == "HTTP/1.1 200 OK" and headers["content-length"] == "6"
    status, headers = await read_answer(reader)  # the same connection: the HEAD sent no body
    assert status == "HTTP/1.1 404 Not Found"
    assert await reader.readexactly(3) == b"no\n"
    status, headers = await read_answer(reader)
    assert status == "HTTP/1.1 400 Bad Request"
    await reader.readexactly(int(headers["content-length"]))
    assert asked == [("GET", "/x"), ("HEAD", "/x"), ("GET", "/y")]
    await asyncio.wait_for(endpoint.close(), 5)  # the idle keep-alive connection is closed too
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
