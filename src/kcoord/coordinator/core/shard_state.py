"""The pure group-coordinator state of one shard: the contract the asyncio runtime drives.

``handle`` / ``poll`` / ``on_loaded`` return a :class:`~kcoord.coordinator.core.result.Result`; the runtime
appends its records to the shard's log, replays each one through :meth:`replay` at once, and
sends the replies once the log acknowledged them. Loading a shard is replaying its log into a
fresh instance and calling :meth:`on_loaded`.

Invariants (tested by ``tests/unit/test_shard_state_stateful.py``):
- Durable state — committed offsets, pending transactional offsets, each classic group's last
  GroupMetadata snapshot, and every consumer group (KIP-848) — changes only in :meth:`replay`
  (and :meth:`replay_begin_transaction` / :meth:`replay_end_transaction_marker` for what a log
  holds of transactions besides records), so :meth:`durable_view` of the live shard equals that
  of a fresh shard that replayed every record written so far.
- A group id names one group, classic or consumer, with Kafka's rules when records of both types
  meet (:meth:`replay`).
- ``handle`` never raises: a bug costs the request UNKNOWN_SERVER_ERROR (logged), never the shard.
- No record larger than ``max_record_bytes`` (what the shard's log takes) is ever returned: the
  request that would need one is refused instead (see the classic manager and offsets).
- No I/O, no asyncio, no wall clock: time comes from the injected clock (and ``poll``'s ``now``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.record_batch import DEFAULT_MAX_RECORD_BYTES
from kcoord.protocol.records import (
    CONSUMER_GROUP_KEYS,
    GroupMetadataKey,
    GroupMetadataPartKey,
    OffsetCommitKey,
    Record,
)

from .classic.group import ClassicGroup
from .classic.manager import ClassicGroupManager
from .classic.store import ClassicGroups
from .clock import Clock
from .consumer.classic_members import ClassicMembersOfConsumerGroups
from .consumer.describe import ConsumerGroupDescriber, TopicNameResolver, no_topic_names
from .consumer.group import ConsumerGroup, GroupStateError
from .consumer.manager import ConsumerGroupManager, OtherGroup
from .consumer.store import ConsumerGroups
from .consumer.subscriptions import TopicImage, no_topics
from .events import GroupDeleted
from .group_admin import GroupAdmin
from .group_config import GroupConfig
from .migration import MigrationPolicy
from .migration_steps import MigrationSteps
from .offsets import OffsetManager, TopicResolver, no_topic_ids
from .records import consumer_group_tombstones
from .responses import join_response, unexpected_failure
from .result import RequestContext, Result
from .timer import TimerQueue

OFFSETS_RETENTION_KEY = ("offsets-retention",)
# Kafka's RecordBatch.NO_PRODUCER_ID / NO_PRODUCER_EPOCH: a record the shard wrote itself, not one of
# a client's transactional batch.
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
_MAX_TIMERS_PER_POLL = 100_000  # a runaway timer loop must not hang the event loop

Handler = Callable[[RequestContext, Any, Result], None]


class GroupCoordinatorShard:
    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        shard_index: int = 0,
        log: logging.Logger | None = None,
        new_member_id: Callable[[str], str] | None = None,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        resolve_topic_id: TopicResolver = no_topic_ids,
        resolve_topic_name: TopicNameResolver = no_topic_names,
        topic_image: Callable[[], TopicImage] = no_topics,
    ) -> None:
        """``max_record_bytes``: the largest record the shard's log accepts (the storage's
        ``max_record_bytes``); a request that would need a larger one is refused, never written.

        ``resolve_topic_id``: topic name -> topic id, read-only (the net layer's TopicCatalog
        ``ids.get``): consumer groups key assignments by topic id, offset requests name topics. The
        default knows no topic, so a consumer-group commit is accepted only at the member's current
        epoch (never more than Kafka accepts; see :mod:`.offsets`).

        ``resolve_topic_name``: topic id -> topic name, read-only, for ConsumerGroupDescribe. The
        default knows no topic, so assignments are described without their topics (Kafka leaves out
        a topic its metadata does not know; see :mod:`.consumer.describe`).

        ``topic_image``: the cluster's topics now (id -> name and partition count), read-only, for
        ConsumerGroupHeartbeat; the default knows none."""
        self.config = config
        self.max_record_bytes = max_record_bytes
        self.clock = clock
        self.shard_index = shard_index
        self.log = log or logging.getLogger(f"kcoord.shard.{shard_index}")
        self.timers = TimerQueue()
        self.classic = ClassicGroups(clock.now_ms)
        self.classic_manager = ClassicGroupManager(
            config,
            clock.now_ms,
            self.timers,
            self.classic,
            self.log,
            new_member_id,
            max_record_bytes=max_record_bytes,
        )
        self.consumer = ConsumerGroups()
        self.offsets = OffsetManager(
            # The bound dict.get, not a lambda: it runs on every commit. The manager never
            # replaces its groups dict.
            config,
            clock.now_ms,
            self.classic.groups.get,
            self.classic_manager.offsets_committed,
            self.log,
            max_record_bytes=max_record_bytes,
            find_consumer_group=self.consumer.groups.get,
            resolve_topic_id=resolve_topic_id,
        )
        self.consumer_manager = ConsumerGroupManager(
            config,
            clock.now_ms,
            self.timers,
            self.consumer,
            topic_image,
            self.log,
            other_group=self._classic_group_holding,
            upgrade=lambda group_id, records: self.migration.upgrade(group_id, records),
            downgrade=lambda group, leaving: self.migration.downgrade(group, leaving),
        )
        self.classic_in_consumer = ClassicMembersOfConsumerGroups(
            config,
            self.consumer_manager,
            self.log,
            downgrade_replacing=lambda group, replaced_id, joining: self.migration.downgrade_replacing(
                group, replaced_id, joining
            ),
            new_member_id=self.classic_manager._new_member_id,
        )
        self.migration = MigrationSteps(
            MigrationPolicy(config.consumer_migration_policy),
            config,
            self.classic,
            self.classic_manager,
            self.consumer_manager,
            self.timers,
            clock.now_ms,
            self.log,
        )
        self.admin = GroupAdmin(self.classic, self.consumer, self.offsets.delete_all, self.log)
        self._handlers: dict[int, Handler] = {
            ApiKey.JOIN_GROUP: self._join_group,
            ApiKey.SYNC_GROUP: self._sync_group,
            ApiKey.HEARTBEAT: self._heartbeat,
            ApiKey.LEAVE_GROUP: self._leave_group,
            ApiKey.OFFSET_COMMIT: self.offsets.commit,
            ApiKey.TXN_OFFSET_COMMIT: self.offsets.txn_commit,
            ApiKey.ADD_OFFSETS_TO_TXN: self.offsets.add_offsets_to_txn,
            ApiKey.OFFSET_FETCH: self.offsets.fetch,
            ApiKey.OFFSET_DELETE: self.offsets.delete,
            ApiKey.DESCRIBE_GROUPS: self.admin.describe_groups,
            ApiKey.CONSUMER_GROUP_DESCRIBE: ConsumerGroupDescriber(
                self.consumer, self.classic.groups, resolve_topic_name
            ).handle,
            ApiKey.LIST_GROUPS: self.admin.list_groups,
            ApiKey.DELETE_GROUPS: self.admin.delete_groups,
            ApiKey.CONSUMER_GROUP_HEARTBEAT: self.consumer_manager.heartbeat,
        }
        self._schedule_offsets_retention()

    # -- requests -----------------------------------------------------------------------------------
    def handle(self, api_key: int, ctx: RequestContext, request: Message) -> Result:
        out = Result()
        handler = self._handlers.get(api_key)
        try:
            if handler is None:
                raise ValueError(f"shard does not serve api key {api_key}")
            handler(ctx, request, out)
        except Exception:
            # Keep what was already decided for other requests (their soft state moved on), and
            # answer this one if it was not answered yet.
            if not any(replied is ctx for replied, _ in out.replies):
                what = f"shard {self.shard_index}"
                out.reply(ctx, unexpected_failure(self.log, what, api_key, ctx.api_version, request))
            else:
                self.log.exception("shard %d: api %d v%d failed", self.shard_index, api_key, ctx.api_version)
        # Requests parked in a classic group that this one converted are answered with it.
        if self.migration.parked_replies:  # rare: a new list per request was most of this line's cost
            out.replies.extend(self.migration.take_replies())
        return out

    # -- classic requests: to the classic group, or to a consumer group's classic members -------------
    # Kafka's ``classicGroupJoin`` and its siblings: a group id names one group, and a classic request
    # for a consumer group in use is served by that group, never by a new classic group in its place.
    def _consumer_group_in_use(self, group_id: str) -> ConsumerGroup | None:
        group = self.consumer.groups.get(group_id)
        return None if group is None or group.is_empty else group

    def _join_group(self, ctx: RequestContext, req: Any, out: Result) -> None:
        group = self.consumer.groups.get(req.group_id)
        if group is not None and not group.is_empty:
            if (
                not self.config.min_session_timeout_ms
                <= req.session_timeout_ms
                <= self.config.max_session_timeout_ms
            ):
                out.reply(
                    ctx,
                    join_response(
                        ctx.api_version, ErrorCode.INVALID_SESSION_TIMEOUT, member_id=req.member_id
                    ),
                )
                return
            self.classic_in_consumer.join(ctx, req, group, out)
            return
        if group is not None and req.member_id == "":
            # An Empty consumer group gives its id to the classic group the join creates (Kafka's
            # ``maybeDeleteEmptyConsumerGroup``): its tombstones go first.
            self.log.info("group %s: the Empty consumer group becomes a classic group", req.group_id)
            out.records.extend(consumer_group_tombstones(group))
            self.classic_manager.join(ctx, req, out)
            return
        if group is not None:
            out.reply(
                ctx, join_response(ctx.api_version, ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id)
            )
            return
        self.classic_manager.join(ctx, req, out)

    def _sync_group(self, ctx: RequestContext, req: Any, out: Result) -> None:
        group = self._consumer_group_in_use(req.group_id)
        if group is None:
            self.classic_manager.sync(ctx, req, out)
        else:
            self.classic_in_consumer.sync(ctx, req, group, out)

    def _heartbeat(self, ctx: RequestContext, req: Any, out: Result) -> None:
        group = self._consumer_group_in_use(req.group_id)
        if group is None:
            self.classic_manager.heartbeat(ctx, req, out)
        else:
            self.classic_in_consumer.heartbeat(ctx, req, group, out)

    def _leave_group(self, ctx: RequestContext, req: Any, out: Result) -> None:
        group = self._consumer_group_in_use(req.group_id)
        if group is None:
            self.classic_manager.leave(ctx, req, out)
        else:
            self.classic_in_consumer.leave(ctx, req, group, out)

    # -- durable state ------------------------------------------------------------------------------
    def replay(
        self, record: Record, producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH
    ) -> None:
        """Apply one record (Kafka's ``CoordinatorShard.replay(offset, producerId, producerEpoch,
        record)``): one the shard wrote itself (no producer id), or one of a client's transactional
        batch, whose producer's transaction is then open here and whose offset commit stays pending
        until the producer's marker (:meth:`replay_end_transaction_marker`); any other record of such
        a batch, a tombstone included, applies at once, as in Kafka.

        Group types meet as in Kafka's ``GroupMetadataManager.replay``: a GroupMetadata value puts a
        classic group in place of any group with its id, and its tombstone deletes any; a
        consumer-group record takes the place of a "simple" classic group (offsets only, backed by no
        record) and is an error for any other classic group. An offset commit for a group the shard
        does not know implies a simple group, as in Kafka: the group exists for every API from now on."""
        key = record.key
        if producer_id != NO_PRODUCER_ID:
            self.offsets.pending.begin(producer_id, producer_epoch)
        if isinstance(key, OffsetCommitKey):
            value = record.value
            if value is not None:
                self._group_of_offset_commit(key.group)
            if producer_id == NO_PRODUCER_ID:
                self.offsets.replay(key, value)
            else:
                self.offsets.replay_transactional(producer_id, key, value)
        elif isinstance(key, GroupMetadataKey):
            self.consumer.remove(key.group)
            self.classic.replay(key, record.value)
        elif isinstance(key, GroupMetadataPartKey):
            self.classic.replay_part(key, record.value)
        elif isinstance(key, CONSUMER_GROUP_KEYS):
            # The tombstones of a consumer group that a classic join takes the id of come while the
            # join's new classic group is already in place (its record follows them).
            group_id: str = record.key.group_id
            if record.value is not None or group_id not in self.consumer.groups:
                self._make_room_for_consumer_group(group_id)
            self.consumer.replay(key, record.value)
        else:
            self.log.warning(
                "shard %d: ignoring a record of unknown type %s", self.shard_index, type(key).__name__
            )

    def replay_begin_transaction(self, producer_id: int, producer_epoch: int) -> None:
        """A transactional batch of ``producer_id`` that holds none of the shard's records (the one
        AddOffsetsToTxn writes): the producer's transaction is open here from now on."""
        self.offsets.pending.begin(producer_id, producer_epoch)

    def replay_end_transaction_marker(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """A transaction marker of ``producer_id``: its pending offsets become visible (COMMIT) or
        are dropped (ABORT) (Kafka's ``replayEndTransactionMarker``; like Kafka, the epoch is not
        checked: the transaction coordinator wrote the marker for the producer's transaction)."""
        for group_id in self.offsets.replay_end_transaction_marker(producer_id, committed):
            # The commit's replay made the group; it can only be gone if something deleted it
            # without tombstoning the pending offset, which kcoord never writes.
            self._group_of_offset_commit(group_id)

    def _group_of_offset_commit(self, group_id: str) -> None:
        """The group an offset commit belongs to: a consumer group with the id, or else a classic
        one, created as a "simple" group (offsets only, no protocol) when the shard has none."""
        if group_id not in self.consumer.groups:
            self.classic.get_or_create(group_id)

    def _classic_group_holding(self, group_id: str) -> OtherGroup:
        """What ConsumerGroupHeartbeat finds of a classic group with the id ("simple": none)."""
        classic = self.classic.groups.get(group_id)
        if classic is None or classic.is_simple:
            return "none"
        return "empty" if classic.is_empty else "in-use"

    def _make_room_for_consumer_group(self, group_id: str) -> None:
        """Kafka's ``getOrMaybeCreatePersistedConsumerGroup``: a simple classic group becomes an
        empty consumer group; any other classic group with the id is an IllegalStateException."""
        classic = self.classic.groups.get(group_id)
        if classic is None:
            return
        if not classic.is_simple:
            raise GroupStateError(f"group {group_id} is a classic group, not a consumer group")
        self.classic.remove(group_id)
        self.consumer.get_or_create(group_id)

    def durable_view(self) -> dict[str, Any]:
        """Offsets, classic group snapshots and consumer groups as plain data; a simple group
        (offsets only) maps to None."""
        return {
            "offsets": self.offsets.store.view(),
            "groups": self.classic.view(),
            "group_parts": self.classic.parts_view(),
            "consumer_groups": self.consumer.view(),
            "pending_offsets": self.offsets.pending.view(),
            "open_transactions": dict(self.offsets.pending.producers),
        }

    def transaction_ending(self, producer_id: int) -> bool:
        """Soft state from the net layer: the client's EndTxn for this producer was answered. Not a
        replay: the log learns of the ending only from the producer's marker
        (:meth:`replay_end_transaction_marker`), which may come later; until then the shard makes
        the producer's next AddOffsetsToTxn wait. True when the producer's transaction is open here,
        so its marker is now awaited."""
        self.offsets.transaction_ending(producer_id)
        return self.awaits_marker(producer_id)

    def awaits_marker(self, producer_id: int) -> bool:
        return producer_id in self.offsets.pending.ending

    def has_open_transactions(self) -> bool:
        """Whether a producer's transaction is open in this shard's log: its marker is still to come
        (the runtime follows the log for markers only then)."""
        return bool(self.offsets.pending.producers)

    # -- time ---------------------------------------------------------------------------------------
    def poll(self, now_ms: int) -> Result:
        """Fire the timers due at ``now_ms``, one at a time in deadline order, so a timer that an
        earlier one scheduled or cancelled is honoured.

        A timer that writes records ends the poll: the next timer must see the state those records
        produce, and they are replayed only when the runtime has them. The runtime polls again at
        once, since a timer is still due (``next_deadline() <= now``)."""
        out = Result()
        for _ in range(_MAX_TIMERS_PER_POLL):
            due = self.timers.pop_next_due(now_ms)
            if due is None:
                break
            try:
                due.payload(out)
            except Exception:
                self.log.exception("shard %d: timer %r failed", self.shard_index, due.key)
            if out.records:
                break
        return out

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def on_loaded(self) -> Result:
        out = Result()
        self.classic_manager.on_loaded(out)
        self.consumer_manager.on_loaded()
        self._schedule_offsets_retention()
        return out

    def _schedule_offsets_retention(self) -> None:
        self.timers.schedule(
            OFFSETS_RETENTION_KEY,
            self.clock.now_ms() + self.config.offsets_retention_check_interval_ms,
            self._expire_offsets,
        )

    def _expire_offsets(self, out: Result) -> None:
        """Kafka's ``cleanupGroupMetadata``: expire offsets, then delete Empty groups left with none,
        classic and consumer groups alike (an Empty consumer group goes with all its records)."""
        now = self.clock.now_ms()
        before = len(out.records)
        for group in list(self.classic.groups.values()):
            if self.offsets.expire(group, now, out) and group.is_empty:
                out.records.extend(self.classic.tombstone_records(group.group_id))
                out.emit(GroupDeleted(group.group_id, "offsets_expired"))
                self.log.info("group %s: deleted, Empty with no offsets left", group.group_id)
        for consumer_group in list(self.consumer.groups.values()):
            if self.offsets.expire_consumer_group(consumer_group, now, out) and consumer_group.is_empty:
                out.records.extend(consumer_group_tombstones(consumer_group))
                out.emit(GroupDeleted(consumer_group.group_id, "offsets_expired"))
                self.log.info(
                    "consumer group %s: deleted, Empty with no offsets left", consumer_group.group_id
                )
        if len(out.records) > before:
            self.log.info(
                "shard %d: offset retention wrote %d tombstones", self.shard_index, len(out.records) - before
            )
        self._schedule_offsets_retention()

    # -- read-only accessors for the runtime and metrics ----------------------------------------------
    @property
    def groups(self) -> list[ClassicGroup]:
        return list(self.classic.groups.values())

    @property
    def consumer_groups(self) -> list[ConsumerGroup]:
        """The KIP-848 consumer groups, mixed ones (classic members kept by a migration) included."""
        return list(self.consumer.groups.values())

    @property
    def rebalances_prepared(self) -> int:
        return self.classic_manager.rebalances_prepared

    @property
    def rebalances_completed(self) -> int:
        return self.classic_manager.rebalances_completed
