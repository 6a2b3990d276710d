"""Committed offsets of one shard: OffsetCommit, OffsetFetch, OffsetDelete, and offset retention.

Behaviour follows Kafka 4.x's ``OffsetMetadataManager`` for classic and consumer (KIP-848) groups.

Invariants:
- :class:`OffsetStore` changes only in :meth:`OffsetManager.replay`. Handlers validate, answer and
  return records; a commit is visible to OffsetFetch once its record was replayed (the runtime
  replays before it acknowledges anything, and answers only after the log acknowledged it).
- Offsets are independent of group objects: the store is keyed by group id. The shard's replay
  creates the "simple" Empty group a commit for an unknown group implies (as Kafka does for
  consumers that store offsets without group management), so loading the log rebuilds exactly
  the groups the live shard had.
- Commit fencing is the group's rule (:meth:`ClassicGroup.validate_offset_commit`, and for a
  consumer group :func:`.consumer.commit_fencing.validate_offset_commit` in the mode
  ``group.consumer.offset.commit.fencing`` names); what a valid commit means for a classic member's session is the group manager's (the
  ``committed`` hook).
- A group id names at most one group: a consumer group's offsets are its own, and a commit to it
  never creates a "simple" classic group (the shard's replay sees the consumer group first).
- A consumer group's assignment epochs are keyed by topic id, requests name topics: the injected
  :data:`TopicResolver` (read-only, name -> id) bridges them. A topic it does not know is held by
  no member, so only a commit at the member's current epoch covers it.
- Every offset removal (OffsetDelete, DeleteGroups, retention) is a tombstone record.
- Transactional offset commits (Kafka's ``pendingTransactionalOffsets``) are kept apart, per
  producer id, in :class:`PendingTransactions`, and change only by replay too: a transactional
  batch's commit is pending until its producer's marker; COMMIT makes it visible unless the
  partition's committed offset was written after it in log order, ABORT drops it; a tombstone of
  the partition drops every pending offset of it. While a partition has one, OffsetFetch with
  RequireStable answers it UNSTABLE_OFFSET_COMMIT, retention keeps its offset and group, and
  OffsetDelete/DeleteGroups tombstone it even with no committed offset.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kcoord.protocol import messages as m
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.record_batch import DEFAULT_MAX_RECORD_BYTES
from kcoord.protocol.records import OffsetCommitKey, OffsetCommitValue, Record, encode_record

from . import events as ev
from .classic.group import ClassicGroup, ClassicGroupState
from .clock import NowMs
from .consumer.commit_fencing import (
    UNKNOWN_TOPIC_ID,
    OffsetCommitFencing,
    TopicIdPartition,
    request_error,
    validate_offset_commit,
)
from .consumer.group import ConsumerGroup
from .group_config import GroupConfig
from .records import NO_EXPIRE_TIMESTAMP, offset_commit_record, offset_tombstone
from .responses import error_response
from .result import RequestContext, Result

S = ClassicGroupState
# A record value as plain data (its ``to_dict()``), for comparing states in tests.
PlainValue = dict[str, Any]
# The topics of an OffsetCommit or a TxnOffsetCommit request: the same fields under two names.
CommitTopic = (
    m.OffsetCommitRequest.OffsetCommitRequestTopic | m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
)
# name -> topic id, or None for a topic it does not know (the net layer's TopicCatalog ``ids.get``).
TopicResolver = Callable[[str], "uuid.UUID | None"]
DEFAULT_RETENTION_TIME = -1  # OffsetCommitRequest.DEFAULT_RETENTION_TIME
# An offset commit record without its three strings: key type, string lengths and partition;
# value version, offset, leader epoch, metadata length, commit and expire timestamps (rounded up).
_MAX_OFFSET_RECORD_FIXED = 64
_UNSTABLE = int(ErrorCode.UNSTABLE_OFFSET_COMMIT)


def no_topic_ids(topic: str) -> uuid.UUID | None:
    """The default :data:`TopicResolver`: knows no topic. Consumer-group commits then pass their
    fencing only at the member's current epoch (or as simple commits to an Empty group), which is
    safe, never more permissive than Kafka; the runtime injects the cluster's topic ids."""
    return None


class OffsetStore:
    """group -> topic -> partition -> OffsetCommitValue, in first-commit order."""

    def __init__(self) -> None:
        self._by_group: dict[str, dict[str, dict[int, OffsetCommitValue]]] = {}

    def get(self, group_id: str, topic: str, partition: int) -> OffsetCommitValue | None:
        return self._by_group.get(group_id, {}).get(topic, {}).get(partition)

    def group(self, group_id: str) -> dict[str, dict[int, OffsetCommitValue]] | None:
        return self._by_group.get(group_id)

    def put(self, group_id: str, topic: str, partition: int, value: OffsetCommitValue) -> None:
        self._by_group.setdefault(group_id, {}).setdefault(topic, {})[partition] = value

    def remove(self, group_id: str, topic: str, partition: int) -> None:
        topics = self._by_group.get(group_id)
        if topics is None or topic not in topics:
            return
        topics[topic].pop(partition, None)
        if not topics[topic]:
            del topics[topic]
        if not topics:
            del self._by_group[group_id]

    def partitions(self, group_id: str) -> Iterator[tuple[str, int, OffsetCommitValue]]:
        for topic, partitions in list(self._by_group.get(group_id, {}).items()):
            for partition, value in list(partitions.items()):
                yield topic, partition, value

    def view(self) -> dict[str, dict[str, dict[int, PlainValue]]]:
        return {
            group_id: {
                topic: {partition: value.to_dict() for partition, value in partitions.items()}
                for topic, partitions in topics.items()
            }
            for group_id, topics in self._by_group.items()
        }


OffsetKey = tuple[str, str, int]  # (group, topic, partition)


class PendingTransactions:
    """Transactional offset commits whose transaction has not ended: Kafka's
    ``pendingTransactionalOffsets`` (per producer id) and ``openTransactions`` (per partition).

    Log order decides between a transactional commit and the partition's committed offset, as in
    Kafka's ``replayEndTransactionMarker`` (a COMMIT applies a pending offset only when it was
    written after the committed one). Kafka compares record offsets; replay here happens before the
    log assigns them, so this counts positions in replay order instead, which is log order, and
    needs them only while a partition has a pending offset: a committed offset written when the
    partition had none is older than every later pending one. ``committed_at`` therefore only holds
    partitions with pending offsets whose committed offset was written after the first of them.
    """

    __slots__ = ("by_producer", "open", "open_groups", "committed_at", "position", "producers", "ending")

    def __init__(self) -> None:
        # producer id -> the epoch of its transaction open in this log: it wrote a transactional
        # batch (offsets, or only the opening AddOffsetsToTxn writes) and no marker ended it yet.
        # Only such a producer may commit offsets transactionally here (TxnOffsetCommit).
        self.producers: dict[int, int] = {}
        # Soft state, not from the log: producers whose open transaction the client ended (EndTxn
        # answered) and whose marker this log does not hold yet. Kafka's transaction coordinator
        # refuses the producer's next transaction until its markers are written; an upstream may
        # let it start sooner (tansu does), or kcoord may read the marker later, so the shard makes
        # the next AddOffsetsToTxn wait for the marker instead (docs/transactions.md).
        self.ending: set[int] = set()
        # producer id -> partition -> (OffsetCommitValue, position)
        self.by_producer: dict[int, dict[OffsetKey, tuple[OffsetCommitValue, int]]] = {}
        self.open: dict[OffsetKey, set[int]] = {}  # partition -> producer ids with a pending offset
        self.open_groups: dict[str, int] = {}  # group -> how many of its partitions are in ``open``
        self.committed_at: dict[OffsetKey, int] = {}
        self.position = 0

    def add(self, producer_id: int, key: OffsetKey, value: OffsetCommitValue) -> None:
        self.position += 1
        self.by_producer.setdefault(producer_id, {})[key] = (value, self.position)
        producers = self.open.get(key)
        if producers is None:
            self.open[key] = {producer_id}
            self.open_groups[key[0]] = self.open_groups.get(key[0], 0) + 1
        else:
            producers.add(producer_id)

    def committed(self, key: OffsetKey) -> None:
        """A non-transactional commit of ``key`` was replayed (the caller checked ``key in open``)."""
        self.position += 1
        self.committed_at[key] = self.position

    def drop(self, key: OffsetKey) -> None:
        """A tombstone of ``key``: every pending offset of it goes (Kafka's replay of a tombstone)."""
        producers = self.open.pop(key, None)
        if producers is None:
            return
        for producer_id in producers:
            offsets = self.by_producer[producer_id]
            del offsets[key]
            if not offsets:
                del self.by_producer[producer_id]
        self._closed(key)

    def begin(self, producer_id: int, producer_epoch: int) -> None:
        """A transactional batch of the producer was replayed: its transaction is open here."""
        self.producers[producer_id] = producer_epoch

    def end(self, producer_id: int, commit: bool) -> list[tuple[OffsetKey, OffsetCommitValue]]:
        """The producer's transaction ended: what becomes visible (nothing on ABORT)."""
        self.producers.pop(producer_id, None)
        self.ending.discard(producer_id)
        offsets = self.by_producer.pop(producer_id, None)
        if offsets is None:
            return []
        visible = []
        for key, (value, position) in offsets.items():
            applies = commit and position > self.committed_at.get(key, 0)
            if applies:
                visible.append((key, value))
            producers = self.open[key]
            producers.discard(producer_id)
            if not producers:
                del self.open[key]
                self._closed(key)
            elif applies:
                self.committed_at[key] = position
        return visible

    def _closed(self, key: OffsetKey) -> None:
        self.committed_at.pop(key, None)
        left = self.open_groups[key[0]] - 1
        if left:
            self.open_groups[key[0]] = left
        else:
            del self.open_groups[key[0]]

    def keys_of(self, group_id: str) -> list[OffsetKey]:
        if group_id not in self.open_groups:
            return []
        return [key for key in self.open if key[0] == group_id]

    def view(self) -> dict[int, dict[str, dict[str, dict[int, PlainValue]]]]:
        out: dict[int, dict[str, dict[str, dict[int, PlainValue]]]] = {}
        for producer_id, offsets in self.by_producer.items():
            groups = out.setdefault(producer_id, {})
            for (group_id, topic, partition), (value, _) in offsets.items():
                groups.setdefault(group_id, {}).setdefault(topic, {})[partition] = value.to_dict()
        return out


class OffsetManager:
    def __init__(
        self,
        config: GroupConfig,
        now_ms: NowMs,
        find_group: Callable[[str], ClassicGroup | None],
        committed: Callable[[ClassicGroup, str, int], None],
        log: logging.Logger,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        *,
        find_consumer_group: Callable[[str], ConsumerGroup | None] = lambda group_id: None,
        resolve_topic_id: TopicResolver = no_topic_ids,
    ) -> None:
        """``find_group`` and ``find_consumer_group`` look a group id up among the shard's classic and
        consumer groups (one id names at most one of them); ``resolve_topic_id`` maps the topic names
        of requests to the ids consumer groups key assignments by."""
        self.config = config
        self.max_record_bytes = max_record_bytes  # the largest record the shard's log takes
        self.now_ms = now_ms
        self._find_group = find_group
        self._committed = committed  # told of every valid commit: (group, member id, commit time)
        self._find_consumer_group = find_consumer_group
        self._resolve_topic_id = resolve_topic_id
        self.consumer_fencing = OffsetCommitFencing(config.consumer_offset_commit_fencing)
        self.log = log
        self.store = OffsetStore()
        self.pending = PendingTransactions()

    # -- OffsetCommit -------------------------------------------------------------------------------
    def commit(self, ctx: RequestContext, req: m.OffsetCommitRequest, out: Result) -> None:
        group_id = req.group_id
        now = self.now_ms()  # one clock read: the commit timestamp, and its member's new session deadline
        consumer_group = self._find_consumer_group(group_id) if group_id is not None else None
        if consumer_group is not None:
            error = self._validate_consumer_group_commit(
                consumer_group, req.member_id, req.group_instance_id, req.generation_id_or_member_epoch,
                req.topics, is_transactional=False, api_version=ctx.api_version,
            )  # fmt: skip
        else:
            group = self._find_group(group_id) if group_id is not None else None
            error = self._validate_commit(ctx, req, group, now)
        if error:  # ErrorCode.NONE is 0
            if req.group_id is not None:
                if error == ErrorCode.FENCED_INSTANCE_ID:
                    self.log.info(
                        "group %s: offset commit by member %s of instance %s is fenced",
                        req.group_id, req.member_id, req.group_instance_id,
                    )  # fmt: skip
                ev.emit_fenced(
                    out, req.group_id, req.member_id, req.group_instance_id, error, "offset_commit"
                )
            out.reply(ctx, error_response(ApiKey.OFFSET_COMMIT, ctx.api_version, req, int(error)))
            return
        retention = req.retention_time_ms if 2 <= ctx.api_version <= 4 else DEFAULT_RETENTION_TIME
        expire = NO_EXPIRE_TIMESTAMP if retention == DEFAULT_RETENTION_TIME else now + retention
        first_record = len(out.records)
        codes = self._offset_records(req.group_id, req.topics, now, expire, out.records)
        if codes is None:
            self._refuse_oversized_commit(ApiKey.OFFSET_COMMIT, ctx, req, out)
            return
        out.emit(ev.OffsetsCommitted(req.group_id or "", len(out.records) - first_record))
        R = m.OffsetCommitResponse
        out.reply(ctx, R(topics=[
            R.OffsetCommitResponseTopic(name=name, partitions=[
                R.OffsetCommitResponsePartition(partition_index=p, error_code=int(code)) for p, code in parts
            ])
            for name, parts in codes
        ]))  # fmt: skip

    def _offset_records(
        self, group_id: str, topics: Iterable[CommitTopic], now: int, expire: int, records: list[Record]
    ) -> list[tuple[str, list[tuple[int, ErrorCode]]]] | None:
        """Append a commit's offset records to ``records``; returns each topic's partition codes
        (OFFSET_METADATA_TOO_LARGE writes nothing for that partition), or None when a record would be
        larger than the log takes (the records appended by this call are removed again then)."""
        first_record = len(records)
        # The largest record a partition of this group could need, from string lengths (UTF-8 takes
        # at most 4 bytes a character): far below the log's limit but for huge group ids, topic names
        # or metadata, so the exact size is computed only then, never on the common path.
        bound = _MAX_OFFSET_RECORD_FIXED + 4 * (len(group_id) + self.config.offset_metadata_max_bytes)
        codes = []
        for topic in topics:
            exact = bound + 4 * len(topic.name) > self.max_record_bytes
            partitions = []
            for p in topic.partitions:
                metadata = p.committed_metadata
                if self._metadata_too_large(metadata):
                    code = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    code = ErrorCode.NONE
                    record = offset_commit_record(
                        group_id,
                        topic.name,
                        p.partition_index,
                        offset=p.committed_offset,
                        leader_epoch=p.committed_leader_epoch,
                        metadata=metadata or "",
                        commit_timestamp=now,
                        expire_timestamp=expire,
                    )
                    if exact:
                        key, value = encode_record(record)
                        size = len(key) + len(value or b"")
                        if size > self.max_record_bytes:
                            self.log.warning(
                                "group %s: offset commit makes a %d-byte record; the log takes records up to %d "
                                "bytes: not written", group_id, size, self.max_record_bytes,
                            )  # fmt: skip
                            del records[first_record:]
                            return None
                    records.append(record)
                partitions.append((p.partition_index, code))
            codes.append((topic.name, partitions))
        return codes

    def _metadata_too_large(self, metadata: str | None) -> bool:
        return metadata is not None and len(metadata) > self.config.offset_metadata_max_bytes

    def _validate_consumer_group_commit(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        member_epoch: int,
        topics: Iterable[CommitTopic],
        *,
        is_transactional: bool,
        api_version: int,
    ) -> ErrorCode:
        """The consumer group's fencing over the partitions the commit would write.

        Kafka 4.3 (``OffsetMetadataManager.commitOffset`` / ``commitTransactionalOffset`` with the
        ``CommitPartitionValidator`` of ``ConsumerGroup.validateOffsetCommit``) validates each
        partition as it writes it and fails the whole request at the first one refused: every
        partition then gets that error and nothing is written. So does kcoord
        (:func:`request_error`). A partition whose metadata is too large is not validated, as in
        Kafka: it gets OFFSET_METADATA_TOO_LARGE and writes nothing either way. (So a commit made
        only of such partitions answers them so, where Kafka would first refuse an unknown member;
        neither writes anything.)"""
        partitions: list[TopicIdPartition] = [
            (self._resolve_topic_id(topic.name) or UNKNOWN_TOPIC_ID, p.partition_index)
            for topic in topics
            for p in topic.partitions
            if not self._metadata_too_large(p.committed_metadata)
        ]
        codes = validate_offset_commit(
            group, member_id, instance_id, member_epoch, partitions, is_transactional,
            fencing=self.consumer_fencing, api_version=api_version,
        )  # fmt: skip
        error = request_error(codes)
        if error != ErrorCode.NONE:
            self.log.info(
                "group %s: %soffset commit by member %s at epoch %d refused: %s",
                group.group_id, "transactional " if is_transactional else "", member_id, member_epoch, error.name,
            )  # fmt: skip
        return error

    @staticmethod
    def _refuse_oversized_commit(api_key: ApiKey, ctx: RequestContext, req: Message, out: Result) -> None:
        """Kafka writes a commit's records atomically and refuses a write holding a record larger
        than a batch may be (RecordTooLargeException); GroupCoordinatorService answers that
        MESSAGE_TOO_LARGE with UNKNOWN_SERVER_ERROR for every partition. Nothing is written."""
        out.reply(ctx, error_response(api_key, ctx.api_version, req, int(ErrorCode.UNKNOWN_SERVER_ERROR)))

    def _validate_commit(
        self, ctx: RequestContext, req: m.OffsetCommitRequest, group: ClassicGroup | None, now_ms: int
    ) -> ErrorCode:
        """Kafka's ``OffsetMetadataManager.validateOffsetCommit``: a commit with no group id is
        invalid; one for an unknown group is a "simple" commit when it carries no generation
        (replaying it creates the group); otherwise the group's own fencing rule decides."""
        if req.group_id is None:
            return ErrorCode.INVALID_GROUP_ID
        generation = req.generation_id_or_member_epoch
        if group is None:
            if generation < 0:
                return ErrorCode.NONE
            return ErrorCode.GROUP_ID_NOT_FOUND if ctx.api_version >= 9 else ErrorCode.ILLEGAL_GENERATION
        error = group.validate_offset_commit(req.member_id, req.group_instance_id, generation)
        if not error:
            self._committed(group, req.member_id, now_ms)
        return error

    # -- transactions ---------------------------------------------------------------------------------
    def add_offsets_to_txn(self, ctx: RequestContext, req: m.AddOffsetsToTxnRequest, out: Result) -> None:
        """Open the producer's transaction in this shard's log (the runtime has already added the
        shard's partition to it at the upstream transaction coordinator, and replayed every marker
        the log held): a transactional batch with no offsets, so that the transaction is known to be
        open here from the log alone, after a restart too. Nothing is written when it is open already
        (a second group of this shard, or a retry)."""
        open_epoch = self.pending.producers.get(req.producer_id)
        if open_epoch is not None and open_epoch > req.producer_epoch:
            error = ErrorCode.INVALID_PRODUCER_EPOCH  # a zombie: its producer id has a newer epoch here
        elif req.producer_id in self.pending.ending:
            # The previous transaction's marker is still to come: what Kafka answers until its
            # markers are written (retriable; the runtime waits for the marker a while first).
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        else:
            error = ErrorCode.NONE
            if open_epoch != req.producer_epoch:
                if open_epoch is not None:
                    self.log.warning(
                        "producer %d: transaction at epoch %d still open in the log when epoch %d starts one",
                        req.producer_id, open_epoch, req.producer_epoch,
                    )  # fmt: skip
                out.write_transactional(ctx, req.transactional_id, req.producer_id, req.producer_epoch, [])
        out.reply(ctx, m.AddOffsetsToTxnResponse(error_code=int(error)))

    def transaction_ending(self, producer_id: int) -> None:
        """The client ended the producer's transaction (EndTxn answered): if it is open here, its
        marker is on its way (:attr:`PendingTransactions.ending`)."""
        if producer_id in self.pending.producers:
            self.pending.ending.add(producer_id)

    def _validate_txn_producer(self, producer_id: int, producer_epoch: int) -> ErrorCode:
        """What Kafka's transaction verification (KIP-890 part 1) checks before a TxnOffsetCommit is
        written: the group's partition is in the producer's ongoing transaction at this epoch. Here
        that is a transaction of the producer open in the shard's log, which AddOffsetsToTxn opens
        and a marker closes: none means the partition was never added or the transaction ended
        (INVALID_TXN_STATE, also while its marker is on its way); an older epoch than the open one
        is a fenced producer."""
        open_epoch = self.pending.producers.get(producer_id)
        if producer_id in self.pending.ending:
            return ErrorCode.INVALID_TXN_STATE  # its transaction ended; the marker is on its way
        if open_epoch == producer_epoch:
            return ErrorCode.NONE
        if open_epoch is not None and producer_epoch < open_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        return ErrorCode.INVALID_TXN_STATE

    def txn_commit(self, ctx: RequestContext, req: m.TxnOffsetCommitRequest, out: Result) -> None:
        """Kafka's ``commitTransactionalOffset``: the producer's transaction must be open here
        (:meth:`_validate_txn_producer`), then the group's fencing
        (``validateTransactionalOffsetCommit``), then the offsets are written as a transactional
        batch of the producer, pending until its transaction's marker.

        A refusal is answered on every partition, as Kafka does: for a consumer group UNKNOWN_MEMBER_ID,
        or ILLEGAL_GENERATION for an epoch the fencing refuses (TxnOffsetCommit has no
        STALE_MEMBER_EPOCH); for a classic group its member and generation checks (transactional
        form: no REBALANCE_IN_PROGRESS, and a commit naming no member is accepted); for an unknown
        group with a generation, ILLEGAL_GENERATION. Nothing is written then."""
        error = self._validate_txn_producer(req.producer_id, req.producer_epoch)
        generation = req.generation_id_or_member_epoch
        if error == ErrorCode.NONE:
            consumer_group = self._find_consumer_group(req.group_id)
            if consumer_group is not None:
                error = self._validate_consumer_group_commit(
                    consumer_group, req.member_id, req.group_instance_id, generation, req.topics,
                    is_transactional=True, api_version=ctx.api_version,
                )  # fmt: skip
            else:
                group = self._find_group(req.group_id)
                if group is not None:
                    error = group.validate_offset_commit(
                        req.member_id, req.group_instance_id, generation, is_transactional=True
                    )
                elif generation >= 0:
                    error = ErrorCode.ILLEGAL_GENERATION
            if error != ErrorCode.NONE:
                ev.emit_fenced(
                    out, req.group_id, req.member_id, req.group_instance_id, error, "txn_offset_commit"
                )
        else:
            self.log.info(
                "group %s: transactional offset commit of %r (producer %d, epoch %d) refused: %s",
                req.group_id, req.transactional_id, req.producer_id, req.producer_epoch, error.name,
            )  # fmt: skip
        if error != ErrorCode.NONE:
            out.reply(ctx, error_response(ApiKey.TXN_OFFSET_COMMIT, ctx.api_version, req, int(error)))
            return
        records: list[Record] = []
        codes = self._offset_records(req.group_id, req.topics, self.now_ms(), NO_EXPIRE_TIMESTAMP, records)
        if codes is None:
            self._refuse_oversized_commit(ApiKey.TXN_OFFSET_COMMIT, ctx, req, out)
            return
        if records:
            out.write_transactional(ctx, req.transactional_id, req.producer_id, req.producer_epoch, records)
        out.emit(ev.OffsetsCommitted(req.group_id, len(records)))
        R = m.TxnOffsetCommitResponse
        out.reply(ctx, R(topics=[
            R.TxnOffsetCommitResponseTopic(name=name, partitions=[
                R.TxnOffsetCommitResponsePartition(partition_index=p, error_code=int(code)) for p, code in parts
            ])
            for name, parts in codes
        ]))  # fmt: skip

    # -- OffsetFetch --------------------------------------------------------------------------------
    def fetch(self, ctx: RequestContext, req: m.OffsetFetchRequest, out: Result) -> None:
        R = m.OffsetFetchResponse
        require_stable = ctx.api_version >= 7 and req.require_stable
        if ctx.api_version >= 8:
            groups = []
            for g in req.groups:
                requested = None if g.topics is None else [(t.name, t.partition_indexes) for t in g.topics]
                # Before v9 a request names no member: (None, -1), what the admin client sends.
                error = self._validate_fetch(g.group_id, g.member_id, g.member_epoch)
                topics = (
                    self._fetch_group(g.group_id, requested, require_stable)
                    if error == ErrorCode.NONE
                    else []
                )
                groups.append(
                    R.OffsetFetchResponseGroup(
                        group_id=g.group_id,
                        error_code=int(error),
                        topics=[
                            R.OffsetFetchResponseTopics(
                                name=name,
                                partitions=[
                                    R.OffsetFetchResponsePartitions(
                                        partition_index=p,
                                        committed_offset=o,
                                        committed_leader_epoch=e,
                                        metadata=md,
                                        error_code=code,
                                    )
                                    for p, o, e, md, code in parts
                                ],  # fmt: skip
                            )
                            for name, parts in topics
                        ],
                    )
                )
            out.reply(ctx, R(groups=groups))
            return
        requested = None if req.topics is None else [(t.name, t.partition_indexes) for t in req.topics]
        topics = self._fetch_group(req.group_id, requested, require_stable)
        out.reply(
            ctx,
            R(
                topics=[
                    R.OffsetFetchResponseTopic(
                        name=name,
                        partitions=[
                            R.OffsetFetchResponsePartition(
                                partition_index=p,
                                committed_offset=o,
                                committed_leader_epoch=e,
                                metadata=md,
                                error_code=code,
                            )
                            for p, o, e, md, code in parts
                        ],  # fmt: skip
                    )
                    for name, parts in topics
                ],
            ),
        )

    def _validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """Kafka's ``validateOffsetFetch``: a consumer group checks the member (UNKNOWN_MEMBER_ID,
        STALE_MEMBER_EPOCH), which fails the group's whole fetch; a classic group checks nothing."""
        consumer_group = self._find_consumer_group(group_id)
        if consumer_group is None:
            return ErrorCode.NONE
        return consumer_group.validate_offset_fetch(member_id, member_epoch)

    def _fetch_group(
        self, group_id: str, requested: list[tuple[str, list[int]]] | None, require_stable: bool = False
    ) -> list[tuple[str, list[tuple[int, int, int, str, int]]]]:
        """(topic, [(partition, offset, leader epoch, metadata, error code)]) for the requested
        partitions, or for every committed partition when ``requested`` is None. With
        ``require_stable`` a partition with a pending transactional offset is answered
        UNSTABLE_OFFSET_COMMIT and no offset, as Kafka's ``fetchOffsets``/``fetchAllOffsets`` do (the
        latter only looks at partitions with a committed offset)."""
        if self._find_consumer_group(group_id) is not None:
            known = True
        else:
            group = self._find_group(group_id)
            known = group is not None and not group.is_in(S.DEAD)
        unstable = require_stable and group_id in self.pending.open_groups
        open_keys = self.pending.open
        if requested is None:
            if not known:
                return []
            by_topic: dict[str, list[tuple[int, int, int, str, int]]] = {}
            for topic, partition, value in self.store.partitions(group_id):
                if unstable and (group_id, topic, partition) in open_keys:
                    row = (partition, -1, -1, "", _UNSTABLE)
                else:
                    row = (partition, value.offset, value.leader_epoch, value.metadata, 0)
                by_topic.setdefault(topic, []).append(row)
            return list(by_topic.items())
        result = []
        for topic, partitions in requested:
            rows = []
            for partition in partitions:
                committed = self.store.get(group_id, topic, partition) if known else None
                if unstable and (group_id, topic, partition) in open_keys:
                    rows.append((partition, -1, -1, "", _UNSTABLE))
                elif committed is None:
                    rows.append((partition, -1, -1, "", 0))
                else:
                    rows.append((partition, committed.offset, committed.leader_epoch, committed.metadata, 0))
            result.append((topic, rows))
        return result

    # -- OffsetDelete -------------------------------------------------------------------------------
    def delete(self, ctx: RequestContext, req: m.OffsetDeleteRequest, out: Result) -> None:
        R = m.OffsetDeleteResponse
        if not req.group_id:
            out.reply(ctx, R(error_code=int(ErrorCode.INVALID_GROUP_ID), topics=[]))
            return
        is_subscribed_to_topic: Callable[[str], bool]
        consumer_group = self._find_consumer_group(req.group_id)
        if consumer_group is not None:
            # Kafka's ConsumerGroup.validateOffsetDelete accepts any state: only the offsets of
            # topics the group subscribes to are refused, below.
            is_subscribed_to_topic = consumer_group.subscribed_topic_names().__contains__
        else:
            group = self._find_group(req.group_id)
            if group is None or group.is_in(S.DEAD):
                out.reply(ctx, R(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), topics=[]))
                return
            if not group.is_empty and not group.uses_consumer_protocol:
                out.reply(ctx, R(error_code=int(ErrorCode.NON_EMPTY_GROUP), topics=[]))
                return
            is_subscribed_to_topic = group.is_subscribed_to_topic
        topics = []
        for topic in req.topics:
            subscribed = is_subscribed_to_topic(topic.name)
            partitions = []
            for p in topic.partitions:
                if subscribed:
                    code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    code = ErrorCode.NONE
                    # Kafka: a tombstone when the partition has a committed or a pending offset.
                    if self.store.get(
                        req.group_id, topic.name, p.partition_index
                    ) is not None or self.has_pending(req.group_id, topic.name, p.partition_index):
                        out.records.append(offset_tombstone(req.group_id, topic.name, p.partition_index))
                partitions.append(
                    R.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=int(code))
                )
            topics.append(R.OffsetDeleteResponseTopic(name=topic.name, partitions=partitions))
        out.reply(ctx, R(error_code=0, topics=topics))

    def delete_all(self, group_id: str, out: Result) -> None:
        """Kafka's ``deleteAllOffsets``: every committed offset, then every partition with only a
        pending transactional offset (one tombstone per partition)."""
        for topic, partition, _ in self.store.partitions(group_id):
            out.records.append(offset_tombstone(group_id, topic, partition))
        for _, topic, partition in self.pending.keys_of(group_id):
            if self.store.get(group_id, topic, partition) is None:
                out.records.append(offset_tombstone(group_id, topic, partition))

    # -- retention ----------------------------------------------------------------------------------
    def expire(self, group: ClassicGroup, now_ms: int, out: Result) -> bool:
        """Tombstone the group's expired offsets (Kafka's ``cleanupExpiredOffsets``). Returns True
        when the group has no offsets left, i.e. it may be deleted if Empty."""
        if self.store.group(group.group_id) is None:
            return group.group_id not in self.pending.open_groups
        base = group.offset_expiration_base()
        if base is None:
            return False
        return self._expire(group.group_id, base, group.is_subscribed_to_topic, now_ms, out)

    def expire_consumer_group(self, group: ConsumerGroup, now_ms: int, out: Result) -> bool:
        """Kafka's ``cleanupExpiredOffsets`` for a consumer group (its ``offsetExpirationCondition``):
        in any state, an offset of a topic the group does not subscribe to expires a retention after
        its commit (or at its explicit expire timestamp); offsets of subscribed topics never do.
        Returns True when the group has no offsets left (it may be deleted if Empty)."""
        if self.store.group(group.group_id) is None:
            return group.group_id not in self.pending.open_groups
        subscribed = group.subscribed_topic_names()
        return self._expire(
            group.group_id, lambda commit_timestamp: commit_timestamp, subscribed.__contains__, now_ms, out
        )

    def _expire(
        self,
        group_id: str,
        base: Callable[[int], int],
        is_subscribed_to_topic: Callable[[str], bool],
        now_ms: int,
        out: Result,
    ) -> bool:
        """Tombstone the expired offsets of topics the group does not subscribe to; ``base`` maps a
        commit timestamp to the time its retention counts from. True when none is left and no
        transaction has a pending offset in the group (Kafka's ``cleanupExpiredOffsets``: an offset
        with a pending transactional offset of its partition does not expire yet)."""
        retention = self.config.offsets_retention_ms
        all_expired = True
        for topic, partition, value in self.store.partitions(group_id):
            if is_subscribed_to_topic(topic):
                all_expired = False
                continue
            if value.expire_timestamp != -1:
                expired = now_ms >= value.expire_timestamp  # explicit per-commit retention (v2-v4)
            else:
                expired = now_ms - base(value.commit_timestamp) >= retention
            if expired and not self.has_pending(group_id, topic, partition):
                out.records.append(offset_tombstone(group_id, topic, partition))
            else:
                all_expired = False
        return all_expired and group_id not in self.pending.open_groups

    # -- replay -------------------------------------------------------------------------------------
    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        """A non-transactional OffsetCommit record (or any tombstone of one)."""
        if value is None:
            self.store.remove(key.group, key.topic, key.partition)
        else:
            self.store.put(key.group, key.topic, key.partition, value)
        if self.pending.open:  # only while some transaction has a pending offset
            k = (key.group, key.topic, key.partition)
            if k in self.pending.open:
                if value is None:
                    self.pending.drop(k)
                else:
                    self.pending.committed(k)

    def replay_transactional(
        self, producer_id: int, key: OffsetCommitKey, value: OffsetCommitValue | None
    ) -> None:
        """An OffsetCommit record of ``producer_id``'s transactional batch: pending until its
        marker. A tombstone is a tombstone whoever writes it (Kafka's replay ignores the producer)."""
        if value is None:
            self.replay(key, None)
        else:
            self.pending.add(producer_id, (key.group, key.topic, key.partition), value)

    def replay_end_transaction_marker(self, producer_id: int, committed: bool) -> list[str]:
        """``producer_id``'s transaction ended; returns the groups that got a committed offset."""
        groups = []
        for (group_id, topic, partition), value in self.pending.end(producer_id, committed):
            self.store.put(group_id, topic, partition, value)
            groups.append(group_id)
        return groups

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        """Kafka's ``hasPendingTransactionalOffsets``."""
        return bool(self.pending.open) and (group_id, topic, partition) in self.pending.open
