"""Ask the upstream, every second or so, whether it still answers (readiness, ``/readyz``).

Without traffic nothing else notices a lost upstream: the shards only learn it when a write
fails, and a paused broker (SIGSTOP, a network partition) accepts TCP connections and answers
nothing. One cheap Metadata request (no topics) on one connection of kcoord's own, with a
deadline, says whether the cluster answers; the result goes to
:class:`~kcoord.coordinator.ops.upstream_health.UpstreamHealth`, which logs the state changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from kcoord.client import PLAINTEXT, Connection, KafkaClientError, UpstreamSecurity
from kcoord.coordinator.ops.upstream_health import UpstreamHealth
from kcoord.protocol import messages as m

log = logging.getLogger("kcoord.upstream")

PROBE_METADATA_VERSION = 1  # the oldest Metadata with "no topics" as an empty list; every broker has it


def probe_interval(timeout: float) -> float:
    """A quarter of the readiness timeout, between 0.1 and 1 s: a silence is seen within it."""
    return max(0.1, min(1.0, timeout / 4))


class UpstreamProbe:
    def __init__(
        self,
        health: UpstreamHealth,
        addresses: Callable[[], list[tuple[str, int]]],
        security: UpstreamSecurity = PLAINTEXT,
    ) -> None:
        self.health = health
        self.addresses = addresses  # the brokers to try, best first (the cluster view's, live)
        self.security = security
        self.interval = probe_interval(health.timeout)
        self._conn: Connection | None = None
        self._next = 0  # which address the next new connection tries
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            attempt = asyncio.ensure_future(self.probe_once())
            try:
                # A paused broker answers late or never: the silence is judged every interval
                # while the attempt waits, not only when it gives up.
                while not attempt.done():
                    await asyncio.wait({attempt}, timeout=self.interval)
                    self.health.update()
                attempt.result()
            except asyncio.CancelledError:
                attempt.cancel()
                raise
            except Exception as exc:  # pragma: no cover - a bug; the probe must go on
                log.exception("upstream probe failed")
                self.health.failed(repr(exc))
            await asyncio.sleep(max(0.0, self.interval - (loop.time() - started)))

    async def probe_once(self) -> bool:
        """One Metadata round trip within the readiness timeout; True when it answered."""
        timeout = self.health.timeout
        try:
            conn = self._conn
            if conn is None or conn.closed:
                conn = self._conn = await self._open(timeout)
            await conn.request(m.MetadataRequest(topics=[]), PROBE_METADATA_VERSION, timeout=timeout)
        except (TimeoutError, OSError, KafkaClientError) as exc:
            if self._conn is not None:
                self._conn.close()  # a timed-out connection may answer late: start clean
                self._conn = None
            self._next += 1  # another broker next time, if there are several
            self.health.failed(str(exc) or type(exc).__name__)
            return False
        self.health.answered()
        return True

    async def _open(self, timeout: float) -> Connection:
        addresses = self.addresses()
        address = addresses[self._next % len(addresses)]
        return await Connection.open(address, timeout=timeout, security=self.security)
