"""Which topics exist upstream, for the offset-commit APIs (Kafka's ``metadataCache.contains``).

Kafka 4.0's ``KafkaApis.handleOffsetCommitRequest`` and ``handleTxnOffsetCommitRequest`` check every
topic of a commit against the broker's metadata before the group coordinator sees it: a topic
that does not exist gets UNKNOWN_TOPIC_OR_PARTITION for each of its partitions, so does a
partition the topic does not have, and only the rest goes to the coordinator (nothing at all when
nothing is left); the two answers are merged. kcoord is not a broker, so :class:`TopicCatalog`
keeps that view of the upstream cluster:

- it learns every topic of every Metadata answer kcoord relays (``relay.addresses.rewrite_metadata``)
  and of its own lookups: a Metadata request naming the topics, ``allow_auto_topic_creation``
  false, sent only when a commit names a topic (or a partition) the catalog does not know;
- a topic known to exist stays known; entries not confirmed for ``recheck_s`` (30 s) are looked
  up again in the background, so a deleted topic is noticed within about a minute; "does not
  exist" is believed for ``missing_ttl_s`` (2 s) only, so a new topic is committable at once
  when its creation passes through kcoord, and within 2 s otherwise;
- a lookup that fails (upstream unreachable, a Metadata version without the auto-creation flag)
  decides nothing: the commit goes to the coordinator as it came, and a warning says why.

The common path is synchronous: :func:`unknown_partitions` answers from a dict lookup per topic
and a range check per partition. Only a commit naming something not yet known waits for a
lookup (see ``ClientConnection``: the connection's later group requests wait behind it, so the
shard applies them in arrival order, as a broker handles a connection's requests one at a time).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from kcoord.coordinator.core.consumer.subscriptions import TopicMetadata
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey

log = logging.getLogger("kcoord.gateway")

# The APIs whose topics are checked before the coordinator sees them.
COMMIT_APIS = frozenset({ApiKey.OFFSET_COMMIT, ApiKey.TXN_OFFSET_COMMIT})

_MISSING = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION)
_LOOKUP_CHUNK = 1000  # topics per Metadata request

# (topic, partition) pairs a commit names that do not exist upstream
Missing = set[tuple[str, int]]
# A lookup: Metadata for these topic names (auto-creation off), or None when it cannot be asked.
Fetch = Callable[[list[str]], Awaitable[Any]]
# A lookup by topic id (Metadata v12+), or None when the upstream cannot be asked by id.
FetchIds = Callable[[list[uuid.UUID]], Awaitable[Any]]
_ZERO_ID = uuid.UUID(int=0)


class TopicCatalog:
    def __init__(
        self,
        fetch: Fetch,
        *,
        fetch_ids: FetchIds | None = None,
        fetch_all: Callable[[], Awaitable[Any]] | None = None,
        recheck_s: float = 30.0,
        missing_ttl_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._fetch_ids = fetch_ids
        self._fetch_all = fetch_all
        self.recheck_s = recheck_s
        self.missing_ttl_s = missing_ttl_s
        self.clock = clock
        self.partitions: dict[str, int] = {}  # topic -> partition count, for topics known to exist
        # Topic ids of the topics known to exist (OffsetCommit/OffsetFetch v10 name topics by id).
        self.names: dict[uuid.UUID, str] = {}
        self.ids: dict[str, uuid.UUID] = {}
        self._image: Mapping[uuid.UUID, TopicMetadata] | None = None  # cached until the topics change
        self._confirmed: dict[str, float] = {}  # topic -> when its entry was last confirmed
        self._missing: dict[str, float] = {}  # topic -> until when "does not exist" is believed
        self._inflight: dict[str, asyncio.Future[None]] = {}
        self._refresher: asyncio.Task[None] | None = None
        self.lookups = 0  # Metadata requests sent (tests, metrics)

    # -- what Metadata answers say ----------------------------------------------------------------
    def learn(self, topics: Iterable[Any]) -> None:
        """Take in the topics of a Metadata answer (any version)."""
        now = self.clock()
        for t in topics:
            name = t.name
            if name is None:  # a topic asked for by id (Metadata v12+)
                continue
            if t.error_code == ErrorCode.NONE:
                if self.partitions.get(name) != len(t.partitions):
                    self._image = None
                self.partitions[name] = len(t.partitions)
                self._confirmed[name] = now
                self._missing.pop(name, None)
                topic_id = getattr(t, "topic_id", None)
                if topic_id is not None and topic_id != _ZERO_ID and self.ids.get(name) != topic_id:
                    old = self.ids.get(name)
                    if old is not None:  # re-created under the same name: the old id names nothing now
                        self.names.pop(old, None)
                    self.ids[name] = topic_id
                    self.names[topic_id] = name
                    self._image = None
            elif t.error_code in _MISSING:
                self._forget(name)
                self._missing[name] = now + self.missing_ttl_s
            # Other errors (LEADER_NOT_AVAILABLE while a topic is created, ...) say nothing certain.

    def image(self) -> Mapping[uuid.UUID, TopicMetadata]:
        """The topics known to exist with an id, as the consumer groups' topic image (id → name and
        partition count): read-only, and the same object until the topics change (the heartbeat
        keeps what it derives from an image while it is handed the same one)."""
        image = self._image
        if image is None:
            partitions = self.partitions
            image = self._image = MappingProxyType({
                topic_id: TopicMetadata(name, partitions[name])
                for name, topic_id in self.ids.items() if name in partitions
            })  # fmt: skip
        return image

    def _forget(self, name: str) -> None:
        self._image = None
        self.partitions.pop(name, None)
        self._confirmed.pop(name, None)
        topic_id = self.ids.pop(name, None)
        if topic_id is not None:
            self.names.pop(topic_id, None)

    async def lookup_ids(self, ids: list[uuid.UUID]) -> None:
        """Ask the upstream about topic ids the catalog does not know (Metadata by id); an id it
        does not know either stays unknown (UNKNOWN_TOPIC_ID for the client)."""
        if self._fetch_ids is None or not ids:
            return
        self.lookups += 1
        try:
            resp = await self._fetch_ids(list(dict.fromkeys(ids)))
        except Exception as exc:
            log.warning("topic id lookup of %s failed: %r", [str(i) for i in ids[:5]], exc)
            return
        if resp is not None:
            self.learn(resp.topics)

    # -- the check ----------------------------------------------------------------------------------
    def classify(self, topics: Iterable[Any], *, looked_up: bool = False) -> tuple[Missing, list[str]]:
        """``(missing, to_look_up)`` for a commit's topics (each with ``name`` and ``partitions``).

        ``missing``: partitions known not to exist. ``to_look_up``: topics the catalog cannot
        decide now; after a lookup (``looked_up``) nothing is left undecided: what is still
        unknown is taken to exist (the lookup failed and the commit goes on as it came).
        """
        now = self.clock()
        missing: Missing = set()
        to_look_up: list[str] = []
        for t in topics:
            name = t.name
            count = self.partitions.get(name)
            if count is None:
                if self._missing.get(name, 0.0) > now:
                    missing.update((name, p.partition_index) for p in t.partitions)
                elif not looked_up:
                    to_look_up.append(name)
                continue
            outside = [p.partition_index for p in t.partitions if not 0 <= p.partition_index < count]
            if not outside:
                continue
            if looked_up or now - self._confirmed.get(name, 0.0) < self.missing_ttl_s:
                missing.update((name, p) for p in outside)  # the count was just confirmed
            else:
                to_look_up.append(name)  # partitions may have been added since: ask again
        return missing, to_look_up

    def learn_created(self, created: Iterable[tuple[str, uuid.UUID, int]]) -> None:
        """Take in topics a relayed CreateTopics (v7+) says it created: (name, id, partitions).
        A consumer group may subscribe to one the moment its creator hears back, by name or by a
        regular expression, before any Metadata answer names it."""
        now = self.clock()
        for name, topic_id, partition_count in created:
            if topic_id == _ZERO_ID or partition_count <= 0:
                continue
            old = self.ids.get(name)
            if old is not None and old != topic_id:
                self.names.pop(old, None)
            self.partitions[name] = partition_count
            self.ids[name] = topic_id
            self.names[topic_id] = name
            self._confirmed[name] = now
            self._missing.pop(name, None)
            self._image = None

    def unsure(self, names: Iterable[str]) -> list[str]:
        """The names a consumer group's topic image cannot decide now: neither known to exist nor
        believed missing (for ``missing_ttl_s`` after the upstream said so)."""
        known = self.partitions
        if all(name in known for name in names):
            return []
        now = self.clock()
        return [
            name for name in dict.fromkeys(names) if name not in known and self._missing.get(name, 0.0) <= now
        ]

    async def lookup(self, names: list[str]) -> None:
        """Ask the upstream about ``names`` (once, however many commits wait for the answer)."""
        loop = asyncio.get_running_loop()
        waits = [self._inflight[n] for n in names if n in self._inflight]
        todo = [n for n in dict.fromkeys(names) if n not in self._inflight]
        if todo:
            done: asyncio.Future[None] = loop.create_future()
            for n in todo:
                self._inflight[n] = done
            try:
                await self._ask(todo)
            finally:
                for n in todo:
                    self._inflight.pop(n, None)
                done.set_result(None)
        for w in waits:
            await asyncio.shield(w)

    async def _ask(self, names: list[str]) -> None:
        for i in range(0, len(names), _LOOKUP_CHUNK):
            chunk = names[i : i + _LOOKUP_CHUNK]
            self.lookups += 1
            try:
                resp = await self._fetch(chunk)
            except Exception as exc:  # a lookup that fails decides nothing (module docstring)
                log.warning("topic lookup of %s failed: %r; their commits go on unchecked", chunk[:5], exc)
                continue
            if resp is not None:
                self.learn(resp.topics)

    # -- keeping positive answers fresh -------------------------------------------------------------
    def start(self) -> None:
        if self._refresher is None:
            self._refresher = asyncio.get_running_loop().create_task(self._refresh_loop())

    async def close(self) -> None:
        task, self._refresher = self._refresher, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _refresh_loop(self) -> None:
        while True:
            await self.refresh_all()
            await asyncio.sleep(self.recheck_s / 2)
            await self.refresh_stale()

    async def refresh_all(self) -> None:
        """Learn every topic of the cluster (Metadata for all topics): consumer groups resolve their
        regular expressions against the whole cluster, and a topic created elsewhere becomes known."""
        if self._fetch_all is None:
            return
        self.lookups += 1
        try:
            resp = await self._fetch_all()
        except Exception as exc:
            log.warning("listing the cluster's topics failed: %r", exc)
            return
        if resp is not None:
            self.learn(resp.topics)

    async def refresh_stale(self) -> None:
        """Look up again every known topic not confirmed for ``recheck_s``."""
        now = self.clock()
        stale = [name for name, at in self._confirmed.items() if now - at >= self.recheck_s]
        if stale:
            await self.lookup(stale)


def all_known(partitions: dict[str, int], topics: Iterable[Any]) -> bool:
    """The common path: every topic known and every partition in range (``TopicCatalog.partitions``)."""
    for t in topics:
        count = partitions.get(t.name)
        if count is None:
            return False
        for p in t.partitions:
            if not 0 <= p.partition_index < count:
                return False
    return True


# -- splitting a commit and merging the answers ---------------------------------------------------------
def without(request: Any, missing: Missing) -> Any | None:
    """``request`` (OffsetCommit or TxnOffsetCommit) without the ``missing`` partitions; None if
    nothing is left."""
    topics = []
    for t in request.topics:
        kept = [p for p in t.partitions if (t.name, p.partition_index) not in missing]
        if len(kept) == len(t.partitions):
            topics.append(t)
        elif kept:
            part = copy.copy(t)
            part.partitions = kept
            topics.append(part)
    if not topics:
        return None
    rest = copy.copy(request)
    rest.topics = topics
    return rest


def merged(api_key: int, request: Any, missing: Missing, answer: Any | None) -> Any:
    """The answer to the whole ``request``: UNKNOWN_TOPIC_OR_PARTITION for ``missing``, the
    coordinator's ``answer`` (to :func:`without`'s request; None if there was none) for the
    rest, topics and partitions in request order."""
    codes: dict[tuple[str, int], int] = {}
    if answer is not None:
        for t in answer.topics:
            for p in t.partitions:
                codes[(t.name, p.partition_index)] = p.error_code
    unknown = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def code(topic: str, partition: int) -> int:
        if (topic, partition) in missing:
            return unknown
        return codes.get((topic, partition), int(ErrorCode.UNKNOWN_SERVER_ERROR))

    throttle_time_ms = 0 if answer is None else answer.throttle_time_ms
    if api_key == ApiKey.OFFSET_COMMIT:
        C = m.OffsetCommitResponse
        return C(throttle_time_ms=throttle_time_ms, topics=[
            C.OffsetCommitResponseTopic(name=t.name, partitions=[
                C.OffsetCommitResponsePartition(partition_index=p.partition_index,
                                                error_code=code(t.name, p.partition_index))
                for p in t.partitions])
            for t in request.topics
        ])  # fmt: skip
    T = m.TxnOffsetCommitResponse
    return T(throttle_time_ms=throttle_time_ms, topics=[
        T.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            T.TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                               error_code=code(t.name, p.partition_index))
            for p in t.partitions])
        for t in request.topics
    ])  # fmt: skip
