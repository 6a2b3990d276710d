"""Is the upstream cluster answering? The readiness half that is not about shards.

The upstream probe (``net/upstream_probe.py``) reports every answer and every failure here; the
relay reports the failures its client connections meet. :class:`UpstreamHealth` turns them into
one state, *answering* or *silent* (no answer for ``timeout`` seconds), read by ``/readyz``, and
logs one line when the state changes, never one per failed connection: with the upstream gone,
every client reconnects every few hundred milliseconds, and a line each buried the one that said
why. Time comes from an injected clock (``now``), so the transitions are tested without sleeping.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("kcoord.upstream")


ANSWERING, FAILING, SILENT = "answering", "failing", "silent"


class UpstreamHealth:
    """The upstream's state: *answering*; *failing* (an attempt failed since the last answer, but
    it answered within ``timeout``: still ready); *silent* (no answer for ``timeout`` seconds: not
    ready). One log line per change of state."""

    def __init__(
        self,
        timeout: float,
        now: Callable[[], float] = time.monotonic,
        logger: logging.Logger = log,
    ) -> None:
        self.timeout = timeout  # seconds without an answer after which the upstream counts as silent
        self._now = now
        self.log = logger
        self.last_answer: float | None = None  # monotonic; None: never answered
        self.last_failure: str | None = None  # the latest reason an attempt failed, since the last answer
        self.failures_since_answer = 0
        self.state = ANSWERING  # the state last logged; start-up counts as answering for the log
        self._started = now()

    def answered(self) -> None:
        """The upstream answered a request (the probe's, or any of kcoord's own)."""
        self.last_answer = self._now()
        self.last_failure = None
        failures, self.failures_since_answer = self.failures_since_answer, 0
        if self.state != ANSWERING:
            self.log.info(
                "upstream answers again after %d failed attempts; ready once every owned shard is loaded",
                failures,
            )
            self.state = ANSWERING

    def failed(self, why: str) -> None:
        """An attempt to reach the upstream failed (the probe's, or a client connection's)."""
        self.last_failure = why
        self.failures_since_answer += 1
        if not self.update() and self.state == ANSWERING:
            self.state = FAILING
            self.log.warning(
                "upstream failing: %s; failures of client connections are logged at DEBUG until it answers",
                why,
            )

    @property
    def suspect(self) -> bool:
        """Something failed since the last answer, or nothing answered for ``timeout``: a client
        connection's failure is then part of an outage already logged, and its line goes to DEBUG."""
        return self.state != ANSWERING or self.failures_since_answer > 0 or not self.is_answering()

    def silence(self) -> float:
        """Seconds since the last answer (since start while there has been none)."""
        return self._now() - (self.last_answer if self.last_answer is not None else self._started)

    def is_answering(self) -> bool:
        """Readiness: a real answer within ``timeout`` (start-up is not one)."""
        return self.last_answer is not None and self.silence() <= self.timeout

    def update(self) -> bool:
        """Log the change to *silent*, if it is one; True when that line was written. The probe
        calls it after every attempt, so the line comes within a probe interval of the timeout."""
        if self.state == SILENT or self.silence() <= self.timeout:
            return False
        self.state = SILENT
        self.log.warning(
            "upstream silent: no answer for %.1f s (last error: %s); not ready until it answers",
            self.silence(),
            self.last_failure or "none, requests unanswered",
        )
        return True

    def describe(self) -> dict[str, object]:
        """For /readyz's body."""
        return {
            "state": self.state if self.is_answering() or self.state != ANSWERING else SILENT,
            "seconds_since_answer": None if self.last_answer is None else round(self.silence(), 3),
            "timeout_seconds": self.timeout,
            "last_error": self.last_failure,
        }
