"""Authorization denials of kcoord's own group APIs: counted, and logged without flooding the log.

Every denied resource counts in ``kcoord_authorization_denials_total{api}``. A log line names the
principal, the API and the resource, at most once per (principal, API, resource) per
:data:`LOG_INTERVAL_S`: a client retrying a refused commit in a loop would otherwise fill the log.
"""

from __future__ import annotations

import logging
import time

from kcoord.coordinator.ops.metrics import Metrics

log = logging.getLogger("kcoord.authorizer")

LOG_INTERVAL_S = 60.0
MAX_REMEMBERED = 10_000  # (principal, API, resource) keys kept; forgotten all at once beyond it


class DenialLog:
    """Counts denials and logs them, rate-limited."""

    __slots__ = ("metrics", "_last_logged")

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._last_logged: dict[tuple[str, str, str], float] = {}

    def denied(self, principal: str, host: str, api: str, resources: tuple[str, ...]) -> None:
        if not resources:
            return
        self.metrics.authorization_denied(api, len(resources))
        now = time.monotonic()
        last_logged = self._last_logged
        for resource in resources:
            key = (principal, api, resource)
            last = last_logged.get(key)
            if last is not None and now - last < LOG_INTERVAL_S:
                continue
            if len(last_logged) >= MAX_REMEMBERED:
                last_logged.clear()
            last_logged[key] = now
            log.warning(
                "authorization denied: principal %s from %s may not %s on %s "
                "(logged at most once a minute per principal, API and resource)",
                principal,
                host,
                api,
                resource,
            )
