"""What an operator sees: group events as metrics and log lines; /metrics, /healthz and /readyz.

:class:`ShardEventObserver` is the shard runtime's observer: storage and load timings go to
:class:`~kcoord.coordinator.ops.metrics.Metrics`; the :mod:`kcoord.coordinator.core.events` a handler returns become
counters and one structured log line each (:func:`kcoord.coordinator.ops.logs.log_event`).

:class:`MetricsServer` is a deliberately tiny HTTP/1.1 server on the App's event loop rather than
prometheus-client's threaded one: the scrape-time collectors read shard state, which only the
event loop may touch (the single-writer rule), and a scrape then never races a handler.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kcoord.coordinator.core import events as ev

from .http_endpoint import HttpEndpoint
from .logs import log_event
from .metrics import Metrics

if TYPE_CHECKING:
    from kcoord.coordinator.runtime.shard import ShardRuntime

    from .settings import Settings

log = logging.getLogger("kcoord.events")
http_log = logging.getLogger("kcoord.metrics")


class EventSink(Protocol):
    """Where events go besides metrics and logs (the event topic's writer): must not block."""

    def offer(self, shard: int, events: list[Any]) -> None: ...

    def shard_loaded(self, shard: int, records: int, seconds: float, records_read: int) -> None: ...


class ShardEventObserver:
    def __init__(self, metrics: Metrics, logger: logging.Logger = log) -> None:
        self.metrics = metrics
        self.log = logger
        self.sink: EventSink | None = None  # the event topic, when on

    # ShardObserver ------------------------------------------------------------------------------------
    def append_done(self, shard: int, records: int, seconds: float) -> None:
        self.metrics.append_done(shard, records, seconds)

    def shard_loaded(self, shard: int, records: int, seconds: float, records_read: int) -> None:
        self.metrics.shard_loaded(shard, records, seconds, records_read)
        if self.sink is not None:
            self.sink.shard_loaded(shard, records, seconds, records_read)
        log_event(
            self.log,
            "shard.loaded",
            shard=shard,
            records_read=records_read,
            live_records=records,
            seconds=round(seconds, 3),
        )

    def shard_lost(self, shard: int, fenced: bool, reason: str) -> None:
        self.metrics.shard_lost(shard, fenced, reason)
        log_event(
            self.log,
            "shard.lost",
            level=logging.ERROR,
            shard=shard,
            reason="fenced" if fenced else "log_lost",
            detail=reason,
        )

    def group_events(self, shard: int, events: list[Any]) -> None:
        if self.sink is not None:
            self.sink.offer(shard, events)
        for event in events:
            handler = _HANDLERS.get(type(event))
            if handler is not None:
                handler(self, shard, event)

    # one method per event type ----------------------------------------------------------------------------
    def _joined(self, shard: int, e: ev.MemberJoined) -> None:
        self.metrics.member_joined(e.instance_id is not None)
        log_event(
            self.log,
            "member.joined",
            shard=shard,
            group=e.group,
            member=e.member_id,
            instance=e.instance_id,
            client_id=e.client_id,
            host=e.client_host,
            protocol_type=e.protocol_type,
            rejoin=e.rejoin or None,
        )

    def _left(self, shard: int, e: ev.MemberLeft) -> None:
        self.metrics.member_removed(e.reason)
        log_event(
            self.log,
            "member.left",
            shard=shard,
            group=e.group,
            member=e.member_id,
            instance=e.instance_id,
            reason=e.reason,
            detail=e.detail or None,
        )

    def _expired(self, shard: int, e: ev.MemberExpired) -> None:
        self.metrics.member_removed("expired")
        log_event(
            self.log,
            "member.expired",
            shard=shard,
            group=e.group,
            member=e.member_id,
            instance=e.instance_id,
            timeout_ms=e.timeout_ms,
        )

    def _fenced(self, shard: int, e: ev.MemberFenced) -> None:
        # The fenced-requests counter comes from the responses themselves (Metrics.response_sent),
        # which also covers refusals decided outside the state machine; this is the log line.
        log_event(
            self.log,
            "member.fenced",
            level=logging.WARNING,
            shard=shard,
            group=e.group,
            member=e.member_id,
            instance=e.instance_id,
            reason=e.reason,
            api=e.api,
        )

    def _rebalance_started(self, shard: int, e: ev.RebalanceStarted) -> None:
        self.metrics.rebalance_started(e.reason, e.group_type)
        log_event(
            self.log,
            "rebalance.started",
            shard=shard,
            group=e.group,
            reason=e.reason,
            generation=e.generation,
            members=e.members,
            detail=e.detail or None,
            type=e.group_type,
        )

    def _rebalance_completed(self, shard: int, e: ev.RebalanceCompleted) -> None:
        self.metrics.rebalance_completed(e.duration_ms / 1000.0, e.group_type)
        log_event(
            self.log,
            "rebalance.completed",
            shard=shard,
            group=e.group,
            generation=e.generation,
            duration_ms=e.duration_ms,
            members=e.members,
            protocol=e.protocol,
            type=e.group_type,
        )

    def _reconciled(self, shard: int, e: ev.ReconciliationCompleted) -> None:
        self.metrics.reconciliation_completed(e.duration_ms / 1000.0)
        log_event(
            self.log,
            "group.reconciled",
            shard=shard,
            group=e.group,
            epoch=e.epoch,
            duration_ms=e.duration_ms,
            members=e.members,
        )

    def _state_changed(self, shard: int, e: ev.GroupStateChanged) -> None:
        log_event(
            self.log,
            "group.state",
            level=logging.DEBUG,
            shard=shard,
            group=e.group,
            old=e.old,
            new=e.new,
            generation=e.generation,
        )

    def _deleted(self, shard: int, e: ev.GroupDeleted) -> None:
        self.metrics.group_deleted(e.reason)
        log_event(self.log, "group.deleted", shard=shard, group=e.group, reason=e.reason)


_HANDLERS: dict[type, Any] = {
    ev.MemberJoined: ShardEventObserver._joined,
    ev.MemberLeft: ShardEventObserver._left,
    ev.MemberExpired: ShardEventObserver._expired,
    ev.MemberFenced: ShardEventObserver._fenced,
    ev.RebalanceStarted: ShardEventObserver._rebalance_started,
    ev.RebalanceCompleted: ShardEventObserver._rebalance_completed,
    ev.ReconciliationCompleted: ShardEventObserver._reconciled,
    ev.GroupStateChanged: ShardEventObserver._state_changed,
    ev.GroupDeleted: ShardEventObserver._deleted,
}


# -- /metrics, /healthz and /readyz ----------------------------------------------------------------------
class Observed(Protocol):
    """What /metrics, /healthz and /readyz read of the running server (the net layer's App, which
    this layer must not import)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def shards(self) -> Sequence[ShardRuntime]: ...

    @property
    def metrics(self) -> Metrics: ...


def liveness(app: Observed) -> tuple[bool, dict[str, Any]]:
    """/healthz, Kubernetes' liveness: the process works (its event loop answers this very request)
    and has not given up for good. Never about shards or the upstream: a restart cures neither,
    and restarting every kcoord during an upstream outage would only add shard loads to it."""
    fatal = getattr(app, "fatal", None)
    if fatal is not None:
        return False, {"status": "stopping", "reason": fatal}
    return True, {"status": "ok"}


def readiness(app: Observed) -> tuple[bool, dict[str, Any]]:
    """/readyz, Kubernetes' readiness: kcoord serves its listeners, every shard this node owns is
    loaded, and the upstream answered within ``readiness.upstream.timeout.ms``; the body says
    what is missing."""
    expected = app.settings.shards
    # Cluster mode: a node answers for the shards the cluster gave it (a released shard is not its).
    serving = getattr(app, "serving_shards", None)
    indices = range(expected) if serving is None else sorted(serving())
    loaded = {s.index for s in app.shards if s.loaded}
    fenced = sorted(s.index for s in app.shards if s.fenced and s.index in indices)
    lost = {str(s.index): s.lost for s in app.shards if s.lost is not None and not s.fenced}
    not_loaded = [i for i in indices if i not in loaded]
    listening = getattr(app, "listening", True)  # False until the listeners accept (start() is done)
    waiting_for_shards = getattr(app, "waiting_for_shards", False)  # cluster mode: none assigned yet
    upstream = getattr(app, "upstream_health", None)
    if upstream is not None:
        upstream.update()  # a silence seen here is logged now, not at the probe's next look
    upstream_ok = upstream is None or upstream.is_answering()
    ok = not not_loaded and listening and not waiting_for_shards and upstream_ok
    ok = ok and liveness(app)[0]
    body: dict[str, Any] = {
        "status": "ok" if ok else "unavailable",
        "listening": listening,
        "shards": expected,
        "loaded": len(loaded),
        "not_loaded": not_loaded,
        "fenced": fenced,
        "log_lost": lost,  # shard → why, until it is loaded again
        "log_lost_total": app.metrics.log_lost_total,  # shards that lost their log since start
    }
    if waiting_for_shards:
        body["waiting_for_shards"] = True
    if upstream is not None:
        body["upstream"] = upstream.describe()
    return ok, body


class MetricsServer:
    def __init__(self, app: Observed) -> None:
        self.app = app
        self._http = HttpEndpoint(self._respond, http_log)

    @property
    def port(self) -> int:
        return self._http.port

    async def start(self, host: str, port: int) -> int:
        bound = await self._http.start(host, port)
        http_log.info(
            "metrics on http://%s:%d/metrics, liveness on /healthz, readiness on /readyz", host, bound
        )
        return bound

    async def close(self) -> None:
        await self._http.close()

    async def _respond(self, method: str, path: str) -> tuple[int, str, bytes]:
        return self.respond(method, path)

    def respond(self, method: str, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for one request; separated from the socket for tests."""
        path = path.split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            return 405, "text/plain; charset=utf-8", b"method not allowed\n"
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.app.metrics.registry)
        if path in ("/healthz", "/livez"):
            ok, body = liveness(self.app)
            return (200 if ok else 503), "application/json", json.dumps(body).encode() + b"\n"
        if path == "/readyz":
            ok, body = readiness(self.app)
            return (200 if ok else 503), "application/json", json.dumps(body).encode() + b"\n"
        return 404, "text/plain; charset=utf-8", b"not found: try /metrics, /healthz or /readyz\n"
