"""A client connection's group requests on their way to the router, in the order they came.

OffsetCommit and TxnOffsetCommit have their topics checked against the upstream's first, as a
broker checks them (topics.py): partitions of topics that do not exist are answered
UNKNOWN_TOPIC_OR_PARTITION and only the rest reach the coordinator. OffsetCommit/OffsetFetch v10
name topics by id, resolved to names here (topic_ids.py); a ConsumerGroupHeartbeat naming topics
the catalog is unsure of has them looked up first; a TxnOffsetCommit to a shard with open
transactions waits for the shard to read every marker already in its log.

While one request waits for such a lookup, the connection's later group requests wait behind it
(``_held``), so the shards see a connection's requests in the order they came. The common case,
a commit whose topics are all known, goes straight to the router: no lookup, no allocation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kcoord.coordinator.core.responses import error_response
from kcoord.coordinator.core.result import RequestContext
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey

from .topic_ids import TOPIC_ID_APIS, TOPIC_ID_SINCE, by_id, by_name, request_ids
from .topics import COMMIT_APIS, all_known, merged, without

if TYPE_CHECKING:
    from .connection import ClientConnection

log = logging.getLogger("kcoord.connection")

# Where a group request's answer goes: called once with the response object, never raises.
Reply = Callable[[Any], None]


class GroupRouting:
    """The group requests of one client connection (``conn``), routed in arrival order."""

    __slots__ = ("conn", "app", "_held")

    def __init__(self, conn: ClientConnection) -> None:
        self.conn = conn
        self.app = conn.app
        # While a request waits for a lookup, the later ones wait here (with their reply callbacks).
        self._held: list[tuple[int, RequestContext, Message, Reply]] | None = None

    def route(self, api_key: int, ctx: RequestContext, request: Message, reply: Reply) -> None:
        """To the router; a commit's topics are checked first, as a broker checks them (topics.py),
        and topic ids (OffsetCommit/OffsetFetch v10) are resolved to names (topic_ids.py)."""
        if self._held is not None:
            self._held.append((api_key, ctx, request, reply))
        elif (
            api_key == ApiKey.TXN_OFFSET_COMMIT
            and self.app.router.shard_of(request.group_id).has_open_transactions()  # type: ignore[attr-defined]
        ):
            # Every marker already in the shard's log first: a commit after its transaction ended
            # must find it ended (runtime/shard.py, "Transactions").
            shard = self.app.router.shard_of(request.group_id)  # type: ignore[attr-defined]
            self._hold_until(
                shard.catch_up(),
                "transaction marker catch-up",
                lambda: self._route_by_name(api_key, ctx, request, reply),
            )
        elif api_key in TOPIC_ID_APIS and ctx.api_version >= TOPIC_ID_SINCE:
            self._route_by_topic_ids(api_key, ctx, request, reply)
        elif api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT and request.subscribed_topic_names:  # type: ignore[attr-defined]
            self._route_subscription(ctx, request, reply)
        elif api_key not in COMMIT_APIS or all_known(self.app.cluster.topics.partitions, request.topics):  # type: ignore[attr-defined]
            self.app.router.route(api_key, ctx, request, reply)
        else:
            self._route_commit(api_key, ctx, request, reply)

    def _route_by_name(self, api_key: int, ctx: RequestContext, request: Message, reply: Reply) -> None:
        """:meth:`route` for a request whose topic ids were resolved (or that has none)."""
        if api_key not in COMMIT_APIS or all_known(self.app.cluster.topics.partitions, request.topics):  # type: ignore[attr-defined]
            self.app.router.route(api_key, ctx, request, reply)
        else:
            self._route_commit(api_key, ctx, request, reply)

    def _route_subscription(self, ctx: RequestContext, request: Any, reply: Reply) -> None:
        """A ConsumerGroupHeartbeat naming its topics: names the catalog neither knows nor believes
        missing are looked up first (a topic created a moment ago, through kcoord or around it), so
        the member is assigned its partitions now rather than after the catalog's next listing."""
        catalog = self.app.cluster.topics
        unsure = catalog.unsure(request.subscribed_topic_names)
        if not unsure:
            self.app.router.route(ApiKey.CONSUMER_GROUP_HEARTBEAT, ctx, request, reply)
            return
        self._hold_until(
            catalog.lookup(unsure), "subscription topic lookup",
            lambda: self.app.router.route(ApiKey.CONSUMER_GROUP_HEARTBEAT, ctx, request, reply),
        )  # fmt: skip

    def _route_by_topic_ids(self, api_key: int, ctx: RequestContext, request: Any, reply: Reply) -> None:
        """A v10 OffsetCommit/OffsetFetch: ids the catalog does not know are looked up first (the
        connection's later group requests wait behind it, as for a commit's topic lookup)."""
        catalog = self.app.cluster.topics
        unknown = [i for i in request_ids(api_key, request) if i not in catalog.names]
        if not unknown:
            self._serve_by_topic_ids(api_key, ctx, request, reply)
            return
        self._hold_until(
            catalog.lookup_ids(unknown),
            "topic id lookup",
            lambda: self._serve_by_topic_ids(api_key, ctx, request, reply),
        )

    def _serve_by_topic_ids(self, api_key: int, ctx: RequestContext, request: Any, reply: Reply) -> None:
        catalog = self.app.cluster.topics
        names = {i: catalog.names[i] for i in request_ids(api_key, request) if i in catalog.names}
        named, _unknown = by_name(api_key, request, names)

        def answer(response: Any) -> None:  # runs in the shard's write path: never raise
            try:
                out = by_id(api_key, request, response, names, catalog.ids)
            except Exception:
                log.exception(
                    "%s: cannot answer api %d v%d by topic id", self.conn.peer, api_key, ctx.api_version
                )
                out = error_response(api_key, ctx.api_version, request, ErrorCode.UNKNOWN_SERVER_ERROR)
            reply(out)

        if named is None:
            answer(None)
        else:
            self._route_by_name(api_key, ctx, named, answer)

    def _route_commit(self, api_key: int, ctx: RequestContext, request: Any, reply: Reply) -> None:
        catalog = self.app.cluster.topics
        missing, to_look_up = catalog.classify(request.topics)
        if not to_look_up:
            self._route_without(api_key, ctx, request, reply, missing)
            return

        def looked_up() -> None:
            missing, _rest = catalog.classify(request.topics, looked_up=True)
            self._route_without(api_key, ctx, request, reply, missing)

        self._hold_until(catalog.lookup(to_look_up), "topic lookup", looked_up)

    def _hold_until(self, lookup: Awaitable[None], what: str, then: Callable[[], None]) -> None:
        """Run ``then`` once ``lookup`` is done; the connection's group requests that come meanwhile
        wait (``_held``) and are routed after it, in order, so the shards see them in the order they
        came. One of them may start a lookup and hold the rest again."""
        self._held = []

        def done(task: asyncio.Future[None]) -> None:
            if not task.cancelled() and task.exception() is not None:  # the lookups themselves do not fail
                log.error("%s: %s failed: %r", self.conn.peer, what, task.exception())
            then()
            held, self._held = self._held or [], None
            for entry in held:
                self.route(*entry)

        asyncio.ensure_future(lookup).add_done_callback(done)

    def _route_without(
        self, api_key: int, ctx: RequestContext, request: Any, reply: Reply, missing: Any
    ) -> None:
        """The commit without the partitions that do not exist; their UNKNOWN_TOPIC_OR_PARTITION
        joins the coordinator's answer (none at all if nothing is left for it)."""
        rest = without(request, missing) if missing else request
        if rest is None:
            reply(merged(api_key, request, missing, None))
        elif rest is request:
            self.app.router.route(api_key, ctx, request, reply)
        else:

            def merge(answer: Any) -> None:  # runs in the shard's write path: never raise
                try:
                    response = merged(api_key, request, missing, answer)
                except Exception:
                    log.exception("%s: cannot merge the answer to api %d", self.conn.peer, api_key)
                    response = error_response(
                        api_key, ctx.api_version, request, ErrorCode.UNKNOWN_SERVER_ERROR
                    )
                reply(response)

            self.app.router.route(api_key, ctx, rest, merge)
