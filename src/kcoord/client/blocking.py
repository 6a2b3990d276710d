"""A :class:`~kcoord.client.connection.Connection` for synchronous code: the ``kcoord groups`` tool, tests.

Each call runs a private event loop until its answer is in, so there is one client
implementation (framing, correlation ids, version negotiation) whether or not the caller is
async. Not for use inside a running event loop: await the :class:`Connection` there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from kcoord.protocol.codec import Message

from .connection import Address, Connection, connect

T = TypeVar("T")


class BlockingConnection:
    def __init__(
        self, address: Address, timeout: float = 10.0, *, negotiate: bool = True, **options: Any
    ) -> None:
        """Connect to ``address`` (and negotiate versions unless told not to); ``timeout`` bounds every wait."""
        self.timeout = timeout
        self._loop = asyncio.new_event_loop()
        options.setdefault("request_timeout", timeout)
        try:
            opening = (
                connect(address, timeout=timeout, **options)
                if negotiate
                else Connection.open(address, timeout=timeout, **options)
            )
            self.conn: Connection = self._run(opening)
        except BaseException:
            self._loop.close()
            raise

    def _run(self, awaitable: Awaitable[T]) -> T:
        # A coroutine or a future (Connection.request returns the response's future).
        return self._loop.run_until_complete(awaitable)

    @property
    def name(self) -> str:
        return self.conn.name

    @property
    def versions(self) -> dict[int, tuple[int, int]]:
        return self.conn.versions

    def version_for(self, request_cls: type[Message], highest: int | None = None) -> int:
        return self.conn.version_for(request_cls, highest)

    def negotiate(self, **software: str) -> Any:
        """ApiVersions (see :meth:`Connection.negotiate`); returns the broker's response."""
        return self._run(self.conn.negotiate(**software, timeout=self.timeout))

    def request(self, request: Message, version: int | None = None) -> Any:
        """Send ``request`` and return its decoded response."""
        return self._run(self.conn.request(request, version))

    def send(self, request: Message, version: int | None = None) -> None:
        """Send ``request`` without waiting; its response is read and dropped when it comes."""
        fut = self.conn.call(request, version)
        fut.add_done_callback(_retrieve)
        self._run(asyncio.sleep(0))  # one loop iteration: the write goes out

    def send_frame(self, framed: bytes, expect_response: bool = True) -> bytes | None:
        """Write raw bytes as they are; with ``expect_response``, wait for and return the next response payload."""
        fut = self.conn.send(framed, expect_response)
        if fut is None:
            self._run(asyncio.sleep(0))
            return None
        return self._run(asyncio.wait_for(fut, self.timeout))

    def wait_closed_by_peer(self, timeout: float) -> bool:
        """Whether the other side closes the connection within ``timeout`` seconds."""
        try:
            self._run(asyncio.wait_for(self.conn.wait_closed(), timeout))
        except TimeoutError:
            return False
        return self.conn.closed_by_peer

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self.conn.close()
        self._run(self.conn.wait_closed())
        self._loop.close()

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _retrieve(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
