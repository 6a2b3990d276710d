"""A deliberately tiny HTTP/1.1 server on the event loop: GET and HEAD, keep-alive, no headers read.

It serves kcoord's /metrics, /healthz and /readyz (observability.py) and the worker supervisor's
merged ones (workers/endpoint.py). What to answer is the owner's ``respond(method, path)``; this
module only speaks the protocol: one request line, headers skipped, one answer with its length.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

# (status, content type, body) for (method, path)
Responder = Callable[[str, str], Awaitable[tuple[int, str, bytes]]]

REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}
IDLE_SECONDS = 30.0  # a scraper's keep-alive connection that says nothing for this long is closed


class HttpEndpoint:
    """Serves ``respond`` on ``host:port`` until :meth:`close`."""

    def __init__(self, respond: Responder, log: logging.Logger) -> None:
        self._respond = respond
        self._log = log
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self._open: set[asyncio.StreamWriter] = set()  # scrapers' keep-alive connections

    async def start(self, host: str, port: int) -> int:
        self.server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self.server is None:
            return
        self.server.close()
        # A scraper's idle keep-alive connection would hold its handler until the loop ends and
        # cancels it; closed here, the handler sees EOF and ends by itself.
        for writer in list(self._open):
            writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.server.wait_closed(), 2.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.add(writer)
        try:
            while True:
                request_line = await asyncio.wait_for(reader.readline(), IDLE_SECONDS)
                if not request_line:
                    return
                while (await asyncio.wait_for(reader.readline(), IDLE_SECONDS)) not in (b"\r\n", b"\n", b""):
                    pass  # headers: nothing needed
                parts = request_line.decode("latin-1").split()
                if len(parts) < 2:
                    status, ctype, body = 400, "text/plain; charset=utf-8", b"bad request\n"
                else:
                    status, ctype, body = await self._respond(parts[0], parts[1])
                head = (
                    f"HTTP/1.1 {status} {REASONS[status]}\r\nContent-Type: {ctype}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n"
                )
                writer.write(head.encode("latin-1") + (b"" if parts[:1] == ["HEAD"] else body))
                await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            # Shutdown cancels what is still open. Ended quietly: asyncio's streams read the task's
            # exception() in a done callback, which raises for a cancelled task and logs a traceback.
            pass
        except Exception:
            self._log.exception("HTTP endpoint failed")
        finally:
            self._open.discard(writer)
            writer.close()
