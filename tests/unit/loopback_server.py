"""A server on a free loopback port for the client's unit tests: a subclass answers connections in
``_serve`` (a fake broker speaking just what the test needs)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Self


class LoopbackServer:
    server: asyncio.Server | None = None

    async def __aenter__(self) -> Self:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.server.wait_closed(), 1.0)

    @property
    def address(self) -> tuple[str, int]:
        assert self.server is not None
        return self.server.sockets[0].getsockname()[:2]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError
