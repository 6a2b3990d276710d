"""The event topic: kcoord's group history, appended to a time-retained topic on the upstream cluster.

The shard runtime's observer hands every :mod:`kcoord.coordinator.core.events` event to
:meth:`EventTopicWriter.offer`, which only appends to an in-memory queue (a deque append, or a
counter increment for commits): nothing on a heartbeat's or a commit's path waits for the cluster.
A background task takes the queue every ``linger`` seconds (or sooner once ``batch`` events wait;
while nothing waits it sleeps until an event comes), turns the events into JSON records and produces
them, one Kafka record batch per partition and one Produce request per broker, through the project's
own Kafka client (:mod:`kcoord.storage.kafka_client`).

A deleted event topic is created again: Apache Kafka refuses a Produce to it
(UNKNOWN_TOPIC_OR_PARTITION), and every ``check_interval`` seconds Metadata says whether it still
exists (tansu acknowledges a Produce to a deleted topic and keeps nothing, so only that check sees
it there; the events acknowledged in between are lost). Meanwhile events wait in the bounded queue.
The writer logs each change of its state once (writing, topic missing, failing), not every retry.

Lossy under back-pressure, and says so: when the cluster is slow or away and ``events.queue.max``
events are waiting, new events are dropped and counted in ``kcoord_events_dropped_total{reason}``
(``queue_full``; ``produce_failed`` when a batch still fails after its retries). Nothing else
blocks or grows without bound. Written events are counted in ``kcoord_events_written_total``.

Schema (version 1, ``docs/events.md``): one JSON object per record, key = the group id (so a
group's events keep their order in one partition), value = ``{"v": 1, "type": ..., "ts": epoch ms,
"shard": n, ...}``. Commits are not one event each: they are summed per group and per second of
wall-clock time into one ``commits`` event (``count`` partitions committed, ``requests``,
``fenced``/``rejected`` by error name, ``mode`` the fencing rule that applied).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import struct
import time
import zlib
from collections import deque
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from kcoord.client import PLAINTEXT, UpstreamSecurity
from kcoord.coordinator.core import events as ev
from kcoord.protocol import messages as m
from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.record_batch import encode_batch
from kcoord.storage.base import StorageError
from kcoord.storage.kafka_client import KafkaCluster, request
from kcoord.storage.retry import Retry
from kcoord.storage.topic import TopicCreationError, TopicSpec, ensure_topic

log = logging.getLogger("kcoord.events.topic")

# The events of one Produce, encoded bytes: a backlog (thousands of joins at once, or a cluster that
# was away) goes out in Produces of this size. A larger batch for one partition would exceed Kafka's
# default max.message.bytes (1 MB: MESSAGE_TOO_LARGE, retried for ever), and encoding it is time the
# event loop serves nothing else (8,000 events were ~200 ms).
SEND_BYTES = 128 * 1024

SCHEMA_VERSION = 1
COMMIT_APIS = ("offset_commit", "txn_offset_commit")
# Produce errors that mean the topic is no longer there.
TOPIC_GONE_ERRORS = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID)

# The writer's states (:meth:`EventTopicWriter._enter`): each change is logged once.
STARTING, WRITING, TOPIC_MISSING, FAILING = "starting", "writing", "topic missing", "failing"


class EventTopicGone(StorageError):
    """A Produce answered that the event topic does not exist (any more)."""


def decode_consumer_assignment(data: bytes | None) -> list[tuple[str, int]] | None:
    """A classic consumer-protocol assignment (ConsumerProtocolAssignment with its int16 version)
    → sorted (topic, partition); [] for an empty one, None if unreadable."""
    if data is None:
        return None
    if not data:
        return []
    if len(data) < 2:
        return None
    (version,) = struct.unpack_from(">h", data, 0)
    try:
        body, _ = m.ConsumerProtocolAssignment.decode_from(data, 2, min(max(version, 0), 3))
    except Exception:  # a custom protocol that only claims to be "consumer"
        return None
    return sorted((tp.topic, p) for tp in body.assigned_partitions for p in tp.partitions)


class EventEncoder:
    """Events → schema-v1 dicts. Keeps who joined (client id, host, kind, protocol) so that leave and
    expiry events carry them too, and which groups are KIP-848 groups (their commit fencing mode)."""

    def __init__(self, consumer_fencing: str = "assignment-epoch", max_members: int = 1_000_000) -> None:
        self.consumer_fencing = consumer_fencing
        self.max_members = max_members
        self.members: dict[tuple[str, str], tuple[str, str]] = {}  # (group, member) -> (client id, host)
        self.kip848: set[str] = set()

    def _who(self, group: str, member: str) -> dict[str, Any]:
        client_id, host = self.members.get((group, member), ("", ""))
        return {"client_id": client_id, "host": host}

    def mode(self, group: str) -> str:
        return f"kip848:{self.consumer_fencing}" if group in self.kip848 else "classic:generation"

    def encode(self, shard: int, ts: int, e: Any) -> dict[str, Any] | None:
        base: dict[str, Any] = {"v": SCHEMA_VERSION, "ts": ts, "shard": shard}
        if isinstance(e, ev.MemberJoined):
            if e.protocol_type == "kip848":
                self.kip848.add(e.group)
            if len(self.members) < self.max_members:
                self.members[(e.group, e.member_id)] = (e.client_id, e.client_host)
            return base | {
                "type": "member_joined",
                "group": e.group,
                "member": e.member_id,
                "instance": e.instance_id,
                "kind": "static" if e.instance_id is not None else "dynamic",
                "client_id": e.client_id,
                "host": e.client_host,
                "protocol_type": e.protocol_type,
                "rejoin": e.rejoin,
            }
        if isinstance(e, ev.MemberLeft):
            who = self._who(e.group, e.member_id)
            self.members.pop((e.group, e.member_id), None)
            return (
                base
                | who
                | {
                    "type": "member_left",
                    "group": e.group,
                    "member": e.member_id,
                    "instance": e.instance_id,
                    "kind": "static" if e.instance_id is not None else "dynamic",
                    "reason": e.reason,
                    "detail": e.detail,
                }
            )
        if isinstance(e, ev.MemberExpired):
            who = self._who(e.group, e.member_id)
            self.members.pop((e.group, e.member_id), None)
            return (
                base
                | who
                | {
                    "type": "member_expired",
                    "group": e.group,
                    "member": e.member_id,
                    "instance": e.instance_id,
                    "kind": "static" if e.instance_id is not None else "dynamic",
                    "timeout_ms": e.timeout_ms,
                }
            )
        if isinstance(e, ev.MemberFenced):
            return (
                base
                | self._who(e.group, e.member_id)
                | {
                    "type": "member_fenced",
                    "group": e.group,
                    "member": e.member_id,
                    "instance": e.instance_id,
                    "kind": "static" if e.instance_id is not None else "dynamic",
                    "error": e.reason,
                    "api": e.api,
                    "mode": self.mode(e.group),
                }
            )
        if isinstance(e, ev.RebalanceStarted):
            return base | {
                "type": "rebalance_started",
                "group": e.group,
                "reason": e.reason,
                "generation": e.generation,
                "members": e.members,
                "detail": e.detail,
            }
        if isinstance(e, ev.RebalanceCompleted):
            return base | {
                "type": "rebalance_completed",
                "group": e.group,
                "generation": e.generation,
                "duration_ms": e.duration_ms,
                "members": e.members,
                "protocol": e.protocol,
            }
        if isinstance(e, ev.AssignmentComputed):
            if e.protocol_type == "kip848":
                self.kip848.add(e.group)
            members = []
            for a in e.members:
                if a.partitions is not None:
                    parts: list[tuple[str, int]] | None = list(a.partitions)
                elif e.protocol_type == "consumer":
                    parts = decode_consumer_assignment(a.raw)
                else:
                    parts = None  # another protocol's opaque assignment (connect, ...)
                members.append(
                    {
                        "member": a.member_id,
                        "instance": a.instance_id,
                        "partitions": None if parts is None else [f"{t}:{p}" for t, p in parts],
                        "bytes": None if a.raw is None else len(a.raw),
                    }
                )
            return base | {
                "type": "assignment",
                "group": e.group,
                "generation": e.generation,
                "protocol_type": e.protocol_type,
                "protocol": e.protocol,
                "members": len(members),
                "assignment": members,
            }
        if isinstance(e, ev.ReconciliationCompleted):
            return base | {
                "type": "reconciliation_completed",
                "group": e.group,
                "generation": e.epoch,
                "duration_ms": e.duration_ms,
                "members": e.members,
            }
        if isinstance(e, ev.GroupDeleted):
            return base | {"type": "group_deleted", "group": e.group, "reason": e.reason}
        return None


class _CommitBucket:
    __slots__ = ("count", "fenced", "rejected", "requests")

    def __init__(self) -> None:
        self.count = 0
        self.requests = 0
        self.fenced: dict[str, int] = {}
        self.rejected: dict[str, int] = {}


class EventTopicWriter:
    """Queue, batch and produce events to the event topic (module docstring)."""

    def __init__(
        self,
        bootstrap: list[tuple[str, int]],
        topic: str,
        *,
        partitions: int = 6,
        retention_ms: int = 7 * 24 * 3600 * 1000,
        replication_factor: int | None = None,
        queue_max: int = 100_000,
        batch: int = 2000,
        linger: float = 0.2,
        consumer_fencing: str = "assignment-epoch",
        registry: CollectorRegistry | None = None,
        max_frame_size: int = 100 << 20,
        request_timeout: float = 10.0,
        security: UpstreamSecurity = PLAINTEXT,
        check_interval: float = 5.0,
    ) -> None:
        self.topic = topic
        self.check_interval = check_interval
        self.state = STARTING
        self._checked_at = 0.0  # time.monotonic() of the last Metadata check of the topic
        self.partitions = partitions
        self.retention_ms = retention_ms
        self.replication_factor = replication_factor
        self.queue_max = queue_max
        self.batch = batch
        self.linger = linger
        self.request_timeout = request_timeout
        self.cluster = KafkaCluster(
            bootstrap,
            max_frame_size,
            client_id="kcoord-events",
            request_timeout=request_timeout,
            security=security,
        )
        self.encoder = EventEncoder(consumer_fencing)
        self.queue: deque[tuple[int, int, Any]] = deque()  # (ts ms, shard, event or encoded dict)
        self.commits: dict[tuple[int, str], _CommitBucket] = {}  # (second, group) -> sums
        self._commit_shard: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._idle = False  # the background task sleeps until an event comes (nothing waits)
        self._closing = False
        self.written = 0
        self.dropped = 0
        r = registry or CollectorRegistry()
        self._written_total = Counter(
            "kcoord_events_written", "Events appended to the event topic", registry=r
        )
        dropped = Counter(
            "kcoord_events_dropped",
            "Events not appended to the event topic, by reason (queue_full, produce_failed)",
            ["reason"],
            registry=r,
        )
        self._dropped = {reason: dropped.labels(reason) for reason in ("queue_full", "produce_failed")}
        Gauge("kcoord_events_queued", "Events waiting for the event topic", registry=r).set_function(
            lambda: len(self.queue)
        )

    # -- the observer's side: never blocks ----------------------------------------------------------
    def offer(self, shard: int, events: Iterable[Any]) -> None:
        now = int(time.time() * 1000)
        for e in events:
            t = type(e)
            if t is ev.OffsetsCommitted:
                b = self._bucket(now, e.group, shard)
                b.count += e.partitions
                b.requests += 1
            elif t is ev.CommitRejected:
                b = self._bucket(now, e.group, shard)
                b.rejected[e.error] = b.rejected.get(e.error, 0) + 1
            elif t is ev.GroupStateChanged:
                continue  # implied by the rebalance events
            else:
                if t is ev.MemberFenced and e.api in COMMIT_APIS:
                    b = self._bucket(now, e.group, shard)
                    b.fenced[e.reason] = b.fenced.get(e.reason, 0) + 1
                self._put(now, shard, e)

    def shard_loaded(self, shard: int, records: int, seconds: float, records_read: int) -> None:
        self._put(
            int(time.time() * 1000),
            shard,
            {
                "v": SCHEMA_VERSION,
                "type": "shard_loaded",
                "ts": int(time.time() * 1000),
                "shard": shard,
                "group": "",
                "records": records,
                "records_read": records_read,
                "seconds": round(seconds, 4),
            },
        )

    def _bucket(self, now: int, group: str, shard: int) -> _CommitBucket:
        key = (now // 1000, group)
        b = self.commits.get(key)
        if b is None:
            b = self.commits[key] = _CommitBucket()
            self._commit_shard[group] = shard
            if self._idle:
                self._wake.set()
        return b

    def _put(self, ts: int, shard: int, item: Any) -> None:
        if len(self.queue) >= self.queue_max:
            self.dropped += 1
            self._dropped["queue_full"].inc()
            return
        self.queue.append((ts, shard, item))
        if self._idle or len(self.queue) >= self.batch:
            self._wake.set()

    def _flush_commits(self, everything: bool) -> None:
        """Move the finished seconds' commit sums (all of them when closing) into the queue."""
        if not self.commits:
            return
        current = int(time.time())
        for key in [k for k in self.commits if everything or k[0] < current]:
            second, group = key
            b = self.commits.pop(key)
            shard = self._commit_shard.get(group, -1)
            self._put(
                second * 1000,
                shard,
                {
                    "v": SCHEMA_VERSION,
                    "type": "commits",
                    "ts": second * 1000,
                    "shard": shard,
                    "group": group,
                    "count": b.count,
                    "requests": b.requests,
                    "fenced": b.fenced,
                    "rejected": b.rejected,
                    "mode": self.encoder.mode(group),
                },
            )
        if not self.commits:
            self._commit_shard.clear()

    # -- the background side ------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the background writer; it creates the topic first (kcoord's start never waits for it)."""
        self._task = asyncio.ensure_future(self._run())

    async def close(self, timeout: float = 5.0) -> None:
        self._closing = True
        self._wake.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
        self.cluster.close()

    def _enter(self, state: str, detail: str = "") -> None:
        """Log a change of the writer's state, once: a topic gone or a cluster away for an hour is
        one line when it starts and one when writing resumes, not one per retry."""
        if state == self.state:
            return
        previous, self.state = self.state, state
        if state == WRITING:
            if previous != STARTING:
                log.info(
                    "event topic %s: writing again (%d events waiting, %d dropped since start)",
                    self.topic,
                    len(self.queue),
                    self.dropped,
                )
        elif state == TOPIC_MISSING:
            log.warning(
                "event topic %s: gone upstream (%s); creating it again, events wait (at most %d)",
                self.topic,
                detail,
                self.queue_max,
            )
        else:
            log.warning(
                "event topic %s: %s; retrying, events wait (at most %d)", self.topic, detail, self.queue_max
            )

    async def _topic_missing(self) -> bool:
        """Metadata's word on the topic, at most every ``check_interval`` seconds (tansu takes a
        Produce to a deleted topic without an error): True when it says the topic does not exist."""
        now = time.monotonic()
        if now - self._checked_at < self.check_interval:
            return False
        self._checked_at = now
        resp = await self.cluster.metadata(self.topic)
        topic = next((t for t in resp.topics if t.name == self.topic), None)
        return topic is None or topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    async def _run(self) -> None:
        # Lossy by design (module docstring): no deadline, every failure is retried after a back-off
        # until the writer closes.
        retry = Retry(None, backoff=0.1, max_backoff=5.0)
        ready = False
        while True:
            if not ready:
                try:
                    ready = await self._ensure_topic()
                except Exception as exc:  # noqa: BLE001 - retried like a StorageError
                    self._enter(FAILING, f"not ready ({exc})")
                if not ready:
                    if self._closing:
                        self._drop_all("produce_failed")
                        return
                    await retry.wait()
                    continue
                retry.succeeded()
                self._checked_at = time.monotonic()
            if not (self.queue or self.commits or self._closing):
                # Nothing waits: sleep until the first event, then linger for the rest as usual. A
                # wake-up every ``linger`` for nothing was 5 of an idle kcoord's ~15 a second (each
                # one 2-4 polls of the loop).
                self._idle = True
                try:
                    await self._wake.wait()
                finally:
                    self._idle = False
                if not self._closing:
                    self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.linger)
            self._wake.clear()
            closing = self._closing
            self._flush_commits(everything=closing)
            try:
                if not closing and await self._topic_missing():
                    raise EventTopicGone("Metadata says it does not exist")
                while self.queue:
                    await self._send(min(len(self.queue), self.batch * 4))
                retry.succeeded()
                self._enter(WRITING)
            except EventTopicGone as exc:
                self.cluster.forget_topic()
                self._enter(TOPIC_MISSING, str(exc))
                ready = False
                if closing:
                    self._drop_all("produce_failed")
                    return
                continue  # create it again at once
            except Exception as exc:  # StorageError, or anything else: the writer must outlive it
                if not isinstance(exc, StorageError):
                    log.exception("event topic %s: writing failed", self.topic)
                self._enter(FAILING, f"produce failed ({exc})")
                if closing:
                    self._drop_all("produce_failed")
                    return
                await retry.wait()
                continue
            if closing:
                return

    def _drop_all(self, reason: str) -> None:
        n = len(self.queue)
        self.queue.clear()
        self.dropped += n
        self._dropped[reason].inc(n)

    def _encode(self, ts: int, shard: int, item: Any) -> tuple[bytes, bytes] | None:
        doc = item if isinstance(item, dict) else self.encoder.encode(shard, ts, item)
        if doc is None:
            return None
        key = doc.get("group") or ""
        return key.encode(), json.dumps(doc, separators=(",", ":"), default=str).encode()

    async def _send(self, n: int) -> None:
        """Produce the first queued events, at most ``n`` and about :data:`SEND_BYTES` of them; they
        leave the queue only once acknowledged."""
        by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
        size = taken = 0
        for ts, shard, item in itertools.islice(self.queue, n):
            taken += 1
            pair = self._encode(ts, shard, item)
            if pair is not None:
                by_partition.setdefault(zlib.crc32(pair[0]) % self.partitions, []).append(pair)
                size += len(pair[0]) + len(pair[1])
                if size >= SEND_BYTES:
                    break
        if by_partition:
            await self._produce(by_partition)
        for _ in range(taken):
            self.queue.popleft()
        self.written += sum(len(v) for v in by_partition.values())
        self._written_total.inc(sum(len(v) for v in by_partition.values()))

    async def _produce(self, by_partition: dict[int, list[tuple[bytes, bytes]]]) -> None:
        if not self.cluster.leaders:
            await self.cluster.refresh(self.topic)
        by_leader: dict[int, list[tuple[int, bytes]]] = {}
        now = int(time.time() * 1000)
        for partition, pairs in by_partition.items():
            leader = self.cluster.leaders.get(partition, -1)
            by_leader.setdefault(leader, []).append((partition, encode_batch(pairs, timestamp=now)))
        for leader, batches in by_leader.items():
            if leader < 0:
                await self.cluster.refresh(self.topic)
                raise StorageError(
                    f"event topic {self.topic}: no leader for partitions {[p for p, _ in batches]}"
                )
            conn = await self.cluster.node(leader)
            req = sm.ProduceRequest(
                transactional_id=None,
                acks=1,
                timeout_ms=int(self.request_timeout * 1000),
                topic_data=[
                    sm.ProduceRequest.TopicProduceData(
                        name=self.topic,
                        partition_data=[
                            sm.ProduceRequest.PartitionProduceData(index=p, records=b) for p, b in batches
                        ],
                    )
                ],
            )
            resp = await request(conn, req, self.request_timeout)
            for t in resp.responses:
                for part in t.partition_responses:
                    if part.error_code in TOPIC_GONE_ERRORS:
                        raise EventTopicGone(f"Produce error {part.error_code} on partition {part.index}")
                    if part.error_code != ErrorCode.NONE:
                        await self.cluster.refresh(self.topic)
                        raise StorageError(
                            f"event topic {self.topic}[{part.index}]: Produce error {part.error_code}"
                        )

    async def _ensure_topic(self) -> bool:
        """Create the topic (cleanup.policy=delete, retention.ms) unless it exists; learn its leaders.
        False while it has no partitions yet."""
        spec = TopicSpec(
            self.topic,
            self.partitions,
            {"cleanup.policy": "delete", "retention.ms": str(self.retention_ms)},
            self.replication_factor,
            label="event topic",
        )
        try:
            ensured = await ensure_topic(self.cluster, spec, self.request_timeout)
        except TopicCreationError as exc:
            log.warning("event topic %s: cannot create it: error %s", self.topic, exc.error_code)
        else:
            if ensured.create_error is not None:
                log.info(
                    "event topic %s: %d partitions, retention %d ms",
                    self.topic,
                    self.partitions,
                    self.retention_ms,
                )
        await self.cluster.refresh(self.topic)
        if self.cluster.partition_count:
            self.partitions = self.cluster.partition_count
            return True
        return False
