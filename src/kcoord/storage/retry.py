"""The one retry rule of the Kafka storage: after a failed attempt, retry after a back-off, give up,
or report the topic gone.

Every storage loop that retries a request (produce, reads of a partition, InitProducerId,
AddPartitionsToTxn, waiting for a new topic's leaders, the event topic's writer) asks a
:class:`Retry` what a failure means instead of carrying its own copy of the rule:

- an error retrying cannot fix (not in ``retriable`` nor ``leadership``): :attr:`Verdict.GIVE_UP`;
- the deadline passed (checked before and after each wait): :attr:`Verdict.EXPIRED`;
- UNKNOWN_TOPIC_OR_PARTITION while the topic is gone upstream (``topic_gone`` says why):
  :attr:`Verdict.TOPIC_GONE`. Apache Kafka refuses a Produce to a deleted topic so, and a leadership
  move answers the same error while the topic stays, hence the Metadata check;
- otherwise wait the back-off (doubling up to ``max_backoff``) and :attr:`Verdict.RETRY`; after a
  leadership error or no answer at all (connection lost, timed out) the leaders are refreshed
  first, since the broker asked may no longer lead the partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
from collections.abc import Awaitable, Callable

from kcoord.protocol.errors import ErrorCode

from .base import StorageError
from .kafka_client import LEADERSHIP_ERRORS, TRANSIENT_ERRORS


class Verdict(enum.Enum):
    RETRY = "retry"  # waited the back-off (and refreshed the leaders if they may have moved)
    GIVE_UP = "give up"  # an error that another attempt cannot fix
    EXPIRED = "expired"  # the deadline passed
    TOPIC_GONE = "topic gone"  # the topic was deleted or re-created upstream (:attr:`Retry.gone`)


class Retry:
    """The deadline, back-off and failure rule of one operation that retries (module docstring).

    ``timeout`` None: no deadline (a background writer that retries until it is closed).
    """

    def __init__(
        self,
        timeout: float | None,
        *,
        backoff: float = 0.02,
        max_backoff: float = 1.0,
        retriable: frozenset[int] = TRANSIENT_ERRORS,
        leadership: frozenset[int] = LEADERSHIP_ERRORS,
        refresh_leaders: Callable[[], Awaitable[None]] | None = None,
        topic_gone: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.first_backoff = backoff
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.retriable = retriable
        self.leadership = leadership
        self.refresh_leaders = refresh_leaders
        self.topic_gone = topic_gone
        self.attempts = 0  # failed attempts so far
        self.last = ""  # what the last failed attempt said
        self.gone = ""  # why the topic is gone, after :attr:`Verdict.TOPIC_GONE`

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    async def failed(self, error_code: int | None, detail: str) -> Verdict:
        """A failed attempt: ``error_code`` is the cluster's answer, None when there was none
        (connection lost, timed out). Waits the back-off before :attr:`Verdict.RETRY`."""
        self.attempts += 1
        self.last = detail
        if error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and self.topic_gone is not None:
            self.gone = await self._topic_gone()
            if self.gone:
                return Verdict.TOPIC_GONE
        moved = error_code is None or error_code in self.leadership
        if not moved and error_code not in self.retriable:
            return Verdict.GIVE_UP
        if self.expired():
            return Verdict.EXPIRED
        await self.wait()
        if moved and self.refresh_leaders is not None:
            with contextlib.suppress(StorageError):  # the next attempt fails again and says why
                await self.refresh_leaders()
        return Verdict.EXPIRED if self.expired() else Verdict.RETRY

    async def wait(self) -> None:
        """Sleep the current back-off, then double it (up to ``max_backoff``)."""
        await asyncio.sleep(self.backoff)
        self.backoff = min(self.backoff * 2, self.max_backoff)

    def succeeded(self) -> None:
        """Back to the first back-off (a long-running loop after a success)."""
        self.backoff = self.first_backoff

    async def _topic_gone(self) -> str:
        """A Metadata round trip that fails counts as "not gone": the error is then retried as the
        leadership error it also is."""
        assert self.topic_gone is not None
        try:
            return await self.topic_gone()
        except StorageError:
            return ""
