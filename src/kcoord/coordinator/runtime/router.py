"""Route group requests to shards, splitting multi-group requests and merging their answers.

A group lives on shard ``abs(javaStringHashCode(group_id)) % num_shards`` — Kafka's own
partitioning of ``__consumer_offsets``, so a group lands on the same partition number here as
it would on a Kafka broker with the same partition count.

Cluster mode (:mod:`.membership`): this node serves only the shards the cluster gave it
(:meth:`Router.apply_ownership`). A request for a group on another node's shard is answered
NOT_COORDINATOR at once, as a Kafka broker answers for a partition it does not lead; one for a
shard this node was given but is still loading gets COORDINATOR_LOAD_IN_PROGRESS (the shard's
own answer), and so does one for a shard the cluster named this node for while its previous
holder still releases it (FindCoordinator already sends clients here: they wait, not rediscover). ListGroups lists the groups of this node's shards only, like a broker. A shard that
leaves this node stops being routed to before it is drained and released; a shard that arrives
is loaded in the background. Single-node mode (``owned`` None) routes every shard, as before.

The membership's lease (:class:`.membership.Lease`) is checked on every routed request in cluster
mode: once it ran out, every request is answered NOT_COORDINATOR, never from the shards' state,
and the membership is told to release them. A request read from a socket right after this process
was paused or cut off (before any other task ran) is therefore never answered from state another
node may have moved past. A shard whose log says another node fenced it is reported to the
membership, which releases it and rejoins; a shard the cluster gives this node while it is fenced
is loaded again, as a gained one.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Any, NamedTuple, cast

from kcoord.client import PLAINTEXT, Connection, KafkaClientError, connect
from kcoord.coordinator.core.responses import error_response, loading_response, unexpected_failure
from kcoord.coordinator.core.result import RequestContext
from kcoord.protocol import messages as m
from kcoord.protocol.codec import Message, c_group_partition, c_java_string_hash
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey

from .membership import Lease, Ownership
from .shard import Reply, ShardRuntime

log = logging.getLogger("kcoord.router")

SINGLE_GROUP_APIS = frozenset(
    {
        ApiKey.JOIN_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.OFFSET_COMMIT,
        ApiKey.TXN_OFFSET_COMMIT,
        ApiKey.OFFSET_DELETE,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
    }
)
GROUP_APIS = SINGLE_GROUP_APIS | {
    ApiKey.OFFSET_FETCH,
    ApiKey.DESCRIBE_GROUPS,
    ApiKey.LIST_GROUPS,
    ApiKey.DELETE_GROUPS,
    # Routed but not served: the net layer passes the router only the APIs in KCOORD_VERSIONS.
    ApiKey.CONSUMER_GROUP_DESCRIBE,
}


_PLACEMENT_CACHE_LIMIT = 1_000_000  # group ids remembered; bounded so junk ids cannot grow it forever

# A multi-group request is split and handed to the shards a step at a time: at most this many of its
# groups per loop iteration (~0.2 ms of work: Java's string hash of 100 ids, or a shard answering
# DescribeGroups for 100 unknown ids), so a request naming 20,000 groups does not hold the event loop
# for the ~100 ms it takes in all while every other client waits. At 250 a step took 0.6 ms, as
# long as a heartbeat's whole round trip on a quiet machine, and showed in other clients' p99.
GROUPS_PER_STEP = 50


class _SplitShape(NamedTuple):
    """Where a multi-group request keeps its groups, and its answer their entries."""

    req_field: str  # the request's array of groups
    req_group: Callable[[Any], str]  # the group id of one of its entries
    resp_field: str  # the answer's array
    resp_group: Callable[[Any], str]  # the group id of one of its entries


_SPLIT_SHAPES: dict[int, _SplitShape] = {
    ApiKey.OFFSET_FETCH: _SplitShape("groups", lambda g: g.group_id, "groups", lambda g: g.group_id),  # v8+
    ApiKey.DESCRIBE_GROUPS: _SplitShape("groups", lambda g: g, "groups", lambda g: g.group_id),
    ApiKey.DELETE_GROUPS: _SplitShape("groups_names", lambda g: g, "results", lambda r: r.group_id),
    # a null or empty id is answered with id ""
    ApiKey.CONSUMER_GROUP_DESCRIBE: _SplitShape(
        "group_ids", lambda g: g or "", "groups", lambda g: g.group_id
    ),
}


def py_java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, 32-bit overflow), in Python."""
    h = 0
    if s.isascii() or max(s) < "\U00010000":
        # One UTF-16 code unit per character: the code points themselves, twice as fast as walking
        # the UTF-16 bytes. Short ids wrap once at the end (Python's integers do not overflow); long
        # ones every step, or a 32k-character id would grow a 160k-bit integer, quadratic work.
        if len(s) <= 64:
            for code in map(ord, s):
                h = 31 * h + code
            h &= 0xFFFFFFFF
        else:
            for code in map(ord, s):
                h = (31 * h + code) & 0xFFFFFFFF
        return h - (1 << 32) if h >= 1 << 31 else h
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: like Math.abs, but Integer.MIN_VALUE maps to 0 instead of itself."""
    return 0 if n == -(1 << 31) else abs(n)


def py_shard_for_group(group_id: str, num_shards: int) -> int:
    return kafka_abs(py_java_string_hash(group_id)) % num_shards


# The C versions where the extension is built (protocol/_cdecode.c): the hash in Python was a fifth
# of the CPU of a DescribeGroups request naming 20,000 groups (bench/RESULTS.md, hostile clients).
java_string_hash: Callable[[str], int] = c_java_string_hash or py_java_string_hash
shard_for_group: Callable[[str, int], int] = c_group_partition or py_shard_for_group


def _nobody() -> None:
    pass


def _nobody_for(_index: int) -> None:
    pass


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _child(ctx: RequestContext) -> RequestContext:
    return RequestContext(ctx.api_version, ctx.client_id, ctx.client_host, ctx.correlation_id)


class Router:
    def __init__(self, shards: list[ShardRuntime]) -> None:
        self.shards = shards
        self._placement: dict[str, ShardRuntime] = {}
        # Cluster mode: the shards this node serves (None: single node, all of them), and the
        # node each shard is served by (for FindCoordinator and Metadata).
        self.owned: frozenset[int] | None = None
        self.ownership: Ownership | None = None
        self.node_id: int | None = None
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._peers: dict[tuple[str, int], Connection] = {}  # other nodes, for forward()
        # How forward() reaches other nodes' coordinator listeners: their listener.security.protocol.
        self.peer_security = PLAINTEXT
        # Cluster mode: the membership's lease, and whom to tell when it ran out or a shard was fenced.
        self.lease: Lease | None = None
        self._lease_lapsed: Callable[[], None] = _nobody
        self._shard_fenced: Callable[[int], None] = _nobody_for
        # Multi-group requests larger than a step take turns (FIFO), one step per loop iteration:
        # however many are in flight, the loop runs one step of one of them between other work.
        self._turns = asyncio.Lock()

    def follow_membership(
        self, lease: Lease, lease_lapsed: Callable[[], None], shard_fenced: Callable[[int], None]
    ) -> None:
        """Cluster mode: serve only while ``lease`` holds (``lease_lapsed()`` when a request finds it
        ran out), and report a shard its log says another node fenced (``shard_fenced(index)``)."""
        self.lease = lease
        self._lease_lapsed = lease_lapsed
        self._shard_fenced = shard_fenced
        for shard in self.shards:
            shard.on_fenced = self._fenced

    def _fenced(self, index: int) -> None:
        if self.owned is not None and index in self.owned:
            self._shard_fenced(index)

    def _lease_holds(self) -> bool:
        """Whether owned shards may be served now (always, outside cluster mode)."""
        lease = self.lease
        if lease is None or time.monotonic() < lease.deadline:
            return True
        self._lease_lapsed()
        return False

    # -- cluster mode ---------------------------------------------------------------------------------
    def serves(self, index: int) -> bool:
        owned = self.owned
        return owned is None or (index in owned and self._lease_holds())

    def owned_shards(self) -> list[ShardRuntime]:
        """The shards this node serves (every shard outside cluster mode)."""
        owned = self.owned
        return self.shards if owned is None else [s for s in self.shards if s.index in owned]

    async def apply_ownership(self, ownership: Ownership) -> None:
        """Serve exactly ``ownership.shards``: stop routing to the lost ones at once, drain and
        release them (returns once released), and start loading the gained ones."""
        before = self.shards_owned()
        self.ownership = ownership
        self.owned = ownership.shards
        lost = sorted(before - ownership.shards)
        # A shard kept while fenced (its log went to another node meanwhile) loads again, as a gained
        # one: the cluster gave it to this node, so this node re-takes it; never left fenced.
        fenced = {i for i in ownership.shards & before if self.shards[i].fenced and i not in self._loading}
        gained = sorted((ownership.shards - before) | fenced)
        for index in lost:
            task = self._loading.pop(index, None)
            if task is not None:
                task.cancel()
        if lost:
            await asyncio.gather(*(self.shards[i].drain(timeout=2.0) for i in lost))
            for index in lost:
                if index not in (self.owned or ()):  # not given back while draining
                    self.shards[index].release()
        for index in gained:
            if index in self.owned and index not in self._loading:
                task = asyncio.get_running_loop().create_task(self.shards[index].reacquire())
                self._loading[index] = task
                task.add_done_callback(functools.partial(self._loaded, index))

    def _loaded(self, index: int, _task: asyncio.Task[None]) -> None:
        self._loading.pop(index, None)

    def shards_owned(self) -> frozenset[int]:
        return frozenset(range(len(self.shards))) if self.owned is None else self.owned

    def _refusal(self, index: int, api_key: int, ctx: RequestContext, request: Message) -> Message | None:
        """The answer for a request to shard ``index`` this node must not serve now, or None: another
        node's shard (or one still coming: :meth:`_unowned`), or any shard once the lease ran out."""
        owned = self.owned
        if owned is None:
            return None
        if index not in owned:
            return self._unowned(index, api_key, ctx, request)
        if not self._lease_holds():
            return error_response(api_key, ctx.api_version, request, ErrorCode.NOT_COORDINATOR)
        return None

    def _unowned(self, index: int, api_key: int, ctx: RequestContext, request: Message) -> Message:
        ownership = self.ownership
        if ownership is not None and ownership.owners[index] == self.node_id:  # coming: loads soon
            return loading_response(api_key, ctx.api_version, request)
        return error_response(api_key, ctx.api_version, request, ErrorCode.NOT_COORDINATOR)

    async def forward(self, index: int, api_key: int, ctx: RequestContext, request: Message) -> Message:
        """Cluster mode: the answer of the node serving shard ``index`` to ``request``.

        For requests a client may send to any kcoord node that only the shard's node can answer:
        AddOffsetsToTxn goes to the client's *transaction* coordinator (a broker port of whichever
        node the client asked), not to the group's. COORDINATOR_NOT_AVAILABLE (retriable: the
        client looks its coordinator up again and retries) while no node serves the shard or the
        node cannot be reached.
        """
        ownership = self.ownership
        owner = ownership.owners[index] if ownership is not None else -1
        address = ownership.nodes.get(owner) if ownership is not None and owner != self.node_id else None
        if address is None:
            return error_response(api_key, ctx.api_version, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            conn = self._peers.get(address)
            if conn is None or conn.closed:
                conn = self._peers[address] = await connect(
                    address, timeout=5.0, request_timeout=30.0, security=self.peer_security
                )
            response: Message = await conn.request(request, ctx.api_version, timeout=30.0)
            return response
        except (KafkaClientError, OSError, TimeoutError) as exc:
            log.warning(
                "forwarding api %d for shard %d to node %d at %s:%d failed: %r",
                api_key,
                index,
                owner,
                address[0],
                address[1],
                exc,
            )
            stale = self._peers.pop(address, None)
            if stale is not None:
                stale.close()
            return error_response(api_key, ctx.api_version, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)

    def close(self) -> None:
        """Close the connections :meth:`forward` opened to other nodes."""
        for conn in self._peers.values():
            conn.close()
        self._peers.clear()

    def _submit(
        self, shard: ShardRuntime, api_key: int, ctx: RequestContext, request: Message
    ) -> asyncio.Future[Message]:
        refusal = self._refusal(shard.index, api_key, ctx, request)
        if refusal is None:
            return shard.submit(api_key, ctx, request)
        fut: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        fut.set_result(refusal)
        return fut

    def shard_of(self, group_id: str) -> ShardRuntime:
        shard = self._placement.get(group_id)
        if shard is None:
            # Java's string hash (a Python loop without the C extension): once per group.
            if len(self._placement) >= _PLACEMENT_CACHE_LIMIT:
                self._placement.clear()
            shard = self._placement[group_id] = self.shards[shard_for_group(group_id or "", len(self.shards))]
        return shard

    def owned_shards_or_first(self) -> ShardRuntime:
        """The shard answering a multi-group request that names no group."""
        shards = self.owned_shards()
        return shards[0] if shards else self.shards[0]

    @property
    def all_loaded(self) -> bool:
        return all(s.loaded for s in self.owned_shards())

    def route(self, api_key: int, ctx: RequestContext, request: Message, reply: Reply) -> None:
        """Route a group request; ``reply(response)`` is called once the response may be sent.

        A single-group request goes straight to its shard (answered synchronously when it needs
        no log acknowledgement); a multi-group request is split per shard and its answers merged
        in a task. A failure there is a bug: it is logged and answered UNKNOWN_SERVER_ERROR.
        """
        if api_key in SINGLE_GROUP_APIS or (api_key == ApiKey.OFFSET_FETCH and ctx.api_version < 8):
            # The API key says which class the request is; each of these has a group id (no
            # typing.cast: it is a call on every request).
            group_id: str = request.group_id  # type: ignore[attr-defined]
            shard = self.shard_of(group_id)
            if self.owned is not None:  # cluster mode (the single-node hot path skips the call)
                refusal = self._refusal(shard.index, api_key, ctx, request)
                if refusal is not None:
                    reply(refusal)
                    return
            shard.submit_with(api_key, ctx, request, reply)
            return

        def done(task: asyncio.Task[Message]) -> None:
            if task.cancelled():
                return  # shutting down: the connection is closing too
            failed = task.exception()
            if failed is None:
                reply(task.result())
                return
            reply(unexpected_failure(log, "multi-group request", api_key, ctx.api_version, request, failed))

        asyncio.ensure_future(self._multi_group(api_key, ctx, request)).add_done_callback(done)

    async def _multi_group(self, api_key: int, ctx: RequestContext, request: Message) -> Message:
        if api_key == ApiKey.LIST_GROUPS:
            assert isinstance(request, m.ListGroupsRequest)
            return await self._list_groups(ctx, request)
        shape = _SPLIT_SHAPES.get(api_key)
        if shape is None:
            raise ValueError(f"not a group api: {api_key}")
        return await self._split(api_key, ctx, request, shape)

    async def _split(
        self, api_key: int, ctx: RequestContext, request: Message, shape: _SplitShape
    ) -> Message:
        """Send each shard the part of a multi-group request it owns; answer in request order.

        A request naming more than GROUPS_PER_STEP groups is served by _split_in_steps.
        """
        req_field, req_group, resp_field, resp_group = shape
        items = getattr(request, req_field) or []
        if len(items) > GROUPS_PER_STEP:
            return await self._split_in_steps(api_key, ctx, request, shape)
        by_shard = self._by_shard(items, req_group)
        if len(by_shard) <= 1:
            shard = self.shards[next(iter(by_shard))] if by_shard else self.owned_shards_or_first()
            return await self._submit(shard, api_key, ctx, request)
        futures = [self._submit_part(api_key, ctx, request, req_field, i, p) for i, p in by_shard.items()]
        responses = await asyncio.gather(*futures)
        merged: dict[str, Any] = {}
        for resp in responses:
            for entry in getattr(resp, resp_field):
                merged.setdefault(resp_group(entry), entry)
        first = responses[0]
        setattr(first, resp_field, [merged[req_group(i)] for i in items if req_group(i) in merged])
        return first

    async def _split_in_steps(
        self, api_key: int, ctx: RequestContext, request: Message, shape: _SplitShape
    ) -> Message:
        """_split for a request naming many groups: a step of at most GROUPS_PER_STEP groups per
        loop iteration, and one such request at a time (the turn), so an iteration holds one step
        however many of them are in flight: 64 connections pipelining 20,000-id requests put 64
        steps in every iteration while each request split, merged and ordered on its own.

        The turn is let go only while a part waits for the log (DeleteGroups' tombstones).
        """
        req_field, req_group, resp_field, resp_group = shape
        items = getattr(request, req_field)
        turns = self._turns
        await turns.acquire()
        holding = True
        try:
            by_shard: dict[int, list[Any]] = {}
            for start in range(0, len(items), GROUPS_PER_STEP):
                for index, part in self._by_shard(items[start : start + GROUPS_PER_STEP], req_group).items():
                    by_shard.setdefault(index, []).extend(part)
                await asyncio.sleep(0)
            futures: list[asyncio.Future[Message]] = []
            while by_shard:  # emptied as it goes: it is not all freed at once when the task ends
                index, part = by_shard.popitem()
                for start in range(0, len(part), GROUPS_PER_STEP):
                    futures.append(
                        self._submit_part(
                            api_key, ctx, request, req_field, index, part[start : start + GROUPS_PER_STEP]
                        )
                    )
                    await asyncio.sleep(0)
            # Awaited one by one, not gathered (gather's one callback per part, 400 for 20,000
            # groups, ran in a single iteration); each part's future and answer are let go in the
            # step that merged it (freeing them all when the task ended took ~1 ms at once).
            merged: dict[str, Any] = {}
            first: Message | None = None
            futures.reverse()
            while futures:
                future = futures.pop()
                if not future.done():
                    turns.release()
                    holding = False
                    await asyncio.wait((future,))
                    await turns.acquire()
                    holding = True
                try:
                    resp = future.result()
                except BaseException:
                    for rest in futures:  # their failures are this one's: not "never retrieved"
                        rest.add_done_callback(_retrieve)
                    raise
                del future
                if first is None:
                    first = resp
                for entry in getattr(resp, resp_field):
                    merged.setdefault(resp_group(entry), entry)
                del resp
                await asyncio.sleep(0)
            assert first is not None  # a request is split into one part at least
            ordered: list[Any] = []
            for start in range(0, len(items), 4 * GROUPS_PER_STEP):
                for item in items[start : start + 4 * GROUPS_PER_STEP]:
                    entry = merged.get(req_group(item))
                    if entry is not None:
                        ordered.append(entry)
                await asyncio.sleep(0)
            setattr(first, resp_field, ordered)
            return first
        finally:
            if holding:
                turns.release()

    def _by_shard(self, items: list[Any], req_group: Callable[[Any], str]) -> dict[int, list[Any]]:
        """``items`` by the index of their group's shard. Ids only named in multi-group requests
        are not remembered (shard_of): ids of groups that do not exist would fill the cache."""
        placement = self._placement
        count = len(self.shards)
        by_shard: dict[int, list[Any]] = {}
        for item in items:
            group_id = req_group(item)
            shard = placement.get(group_id)
            index = shard.index if shard is not None else shard_for_group(group_id or "", count)
            by_shard.setdefault(index, []).append(item)
        return by_shard

    def _submit_part(
        self, api_key: int, ctx: RequestContext, request: Message, req_field: str, index: int, part: list[Any]
    ) -> asyncio.Future[Message]:
        cls = type(request)
        sub = cls(**{n: getattr(request, n) for n in cls.FIELDS})
        setattr(sub, req_field, part)
        return self._submit(self.shards[index], api_key, _child(ctx), sub)

    async def _list_groups(self, ctx: RequestContext, request: m.ListGroupsRequest) -> m.ListGroupsResponse:
        shards = self.owned_shards() if self._lease_holds() else []
        if not shards:  # a node serving no shard coordinates no group (a broker leading no partition)
            return m.ListGroupsResponse(error_code=ErrorCode.NONE, groups=[])
        # A shard at a time, taking turns with the large multi-group requests (GROUPS_PER_STEP): a
        # node's groups may be many, and each shard lists all of its own at once.
        futures = []
        async with self._turns:
            for shard in shards:
                futures.append(shard.submit(ApiKey.LIST_GROUPS, _child(ctx), request))
                await asyncio.sleep(0)
        answers = await asyncio.gather(*futures)
        # A shard answers ListGroups with a ListGroupsResponse (or an error response of that class).
        responses = [cast(m.ListGroupsResponse, r) for r in answers]
        error = next((r.error_code for r in responses if r.error_code), 0)
        groups = [g for r in responses for g in r.groups]
        return m.ListGroupsResponse(error_code=error, groups=groups)
