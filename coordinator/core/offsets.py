"""Committed offsets of one shard: OffsetCommit, OffsetFetch, OffsetDelete, and offset retention.

Behaviour follows Kafka 4.x's ``OffsetMetadataManager`` for classic groups.

Invariants:
- :class:`OffsetStore` changes only in :meth:`OffsetManager.replay`. Handlers validate, answer and
  return records; a commit is visible to OffsetFetch once its record was replayed (the runtime
  replays before it acknowledges anything, and answers only after the log acknowledged it).
- Offsets are independent of group objects: the store is keyed by group id. The shard's replay
  creates the "simple" Empty group a commit for an unknown group implies (as Kafka does for
  consumers that store offsets without group management), so loading the log rebuilds exactly
  the groups the live shard had.
- Commit fencing is the group's rule (:meth:`ClassicGroup.validate_offset_commit`); what a valid
  commit means for the member's session is the group manager's (the ``committed`` hook).
- Every offset removal (OffsetDelete, DeleteGroups, retention) is a tombstone record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.records import encode_record
from kcoord.storage.base import DEFAULT_MAX_RECORD_BYTES

from . import events as ev
from .classic.group import ClassicGroup, ClassicGroupState
from .clock import NowMs
from .group_config import GroupConfig
from .records import NO_EXPIRE_TIMESTAMP, offset_commit_record, offset_tombstone
from .responses import error_response
from .result import RequestContext, Result

S = ClassicGroupState
DEFAULT_RETENTION_TIME = -1  # OffsetCommitRequest.DEFAULT_RETENTION_TIME
# An offset commit record without its three strings: key type, string lengths and partition;
# value version, offset, leader epoch, metadata length, commit and expire timestamps (rounded up).
_MAX_OFFSET_RECORD_FIXED = 64


class OffsetStore:
    """group -> topic -> partition -> OffsetCommitValue, in first-commit order."""

    def __init__(self) -> None:
        self._by_group: dict[str, dict[str, dict[int, Any]]] = {}

    def get(self, group_id: str, topic: str, partition: int) -> Any | None:
        return self._by_group.get(group_id, {}).get(topic, {}).get(partition)

    def group(self, group_id: str) -> dict[str, dict[int, Any]] | None:
        return self._by_group.get(group_id)

    def put(self, group_id: str, topic: str, partition: int, value: Any) -> None:
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

    def partitions(self, group_id: str) -> Iterator[tuple[str, int, Any]]:
        for topic, partitions in list(self._by_group.get(group_id, {}).items()):
            for partition, value in list(partitions.items()):
                yield topic, partition, value

    def view(self) -> dict[str, dict[str, dict[int, dict[str, Any]]]]:
        return {
            group_id: {
                topic: {partition: value.to_dict() for partition, value in partitions.items()}
                for topic, partitions in topics.items()
            }
            for group_id, topics in self._by_group.items()
        }


class OffsetManager:
    def __init__(
        self,
        config: GroupConfig,
        now_ms: NowMs,
        find_group: Callable[[str], ClassicGroup | None],
        committed: Callable[[ClassicGroup, str], None],
        log: logging.Logger,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    ) -> None:
        self.config = config
        self.max_record_bytes = max_record_bytes  # the largest record the shard's log takes
        self.now_ms = now_ms
        self._find_group = find_group
        self._committed = committed  # told of every valid commit: (group, member id)
        self.log = log
        self.store = OffsetStore()

    # -- OffsetCommit -------------------------------------------------------------------------------
    def commit(self, ctx: RequestContext, req: m.OffsetCommitRequest, out: Result) -> None:
        group = self._find_group(req.group_id) if req.group_id is not None else None
        error = self._validate_commit(ctx, req, group)
        R = m.OffsetCommitResponse
        topics = []
        if error != ErrorCode.NONE:
            if req.group_id is not None:
                if error == ErrorCode.FENCED_INSTANCE_ID:
                    self.log.info(
                        "group %s: offset commit by member %s of instance %s is fenced",
                        req.group_id, req.member_id, req.group_instance_id,
                    )  # fmt: skip
                ev.emit_fenced(out, req.group_id, req.member_id, req.group_instance_id, error, "offset_commit")
            out.reply(ctx, error_response(ApiKey.OFFSET_COMMIT, ctx.api_version, req, int(error)))
            return
        now = self.now_ms()
        retention = req.retention_time_ms if 2 <= ctx.api_version <= 4 else DEFAULT_RETENTION_TIME
        expire = NO_EXPIRE_TIMESTAMP if retention == DEFAULT_RETENTION_TIME else now + retention
        first_record = len(out.records)
        # The largest record a partition of this group could need, from string lengths (UTF-8 takes
        # at most 4 bytes a character): far below the log's limit but for huge group ids, topic names
        # or metadata, so the exact size is computed only then, never on the common path.
        bound = _MAX_OFFSET_RECORD_FIXED + 4 * (len(req.group_id) + self.config.offset_metadata_max_bytes)
        for topic in req.topics:
            exact = bound + 4 * len(topic.name) > self.max_record_bytes
            partitions = []
            for p in topic.partitions:
                metadata = p.committed_metadata
                if metadata is not None and len(metadata) > self.config.offset_metadata_max_bytes:
                    code = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    code = ErrorCode.NONE
                    record = offset_commit_record(
                        req.group_id,
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
                            self._refuse_oversized_commit(ctx, req, size, first_record, out)
                            return
                    out.records.append(record)
                partitions.append(
                    R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=int(code))
                )
            topics.append(R.OffsetCommitResponseTopic(name=topic.name, partitions=partitions))
        out.reply(ctx, R(topics=topics))

    def _refuse_oversized_commit(
        self, ctx: RequestContext, req: m.OffsetCommitRequest, size: int, first_record: int, out: Result
    ) -> None:
        """Kafka writes a commit's records atomically and refuses a write holding a record larger
        than a batch may be (RecordTooLargeException); GroupCoordinatorService answers that
        MESSAGE_TOO_LARGE with UNKNOWN_SERVER_ERROR for every partition. Nothing is written."""
        del out.records[first_record:]
        self.log.warning(
            "group %s: offset commit makes a %d-byte record; the log takes records up to %d bytes: not written",
            req.group_id, size, self.max_record_bytes,
        )  # fmt: skip
        out.reply(ctx, error_response(ApiKey.OFFSET_COMMIT, ctx.api_version, req, int(ErrorCode.UNKNOWN_SERVER_ERROR)))

    def _validate_commit(
        self, ctx: RequestContext, req: m.OffsetCommitRequest, group: ClassicGroup | None
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
        if error == ErrorCode.NONE:
            self._committed(group, req.member_id)
        return error

    # -- TxnOffsetCommit ------------------------------------------------------------------------------
    def txn_commit(self, ctx: RequestContext, req: m.TxnOffsetCommitRequest, out: Result) -> None:
        """Transactional commits need transaction markers from the cluster, which kcoord does not
        follow yet: every partition gets COORDINATOR_NOT_AVAILABLE (retriable for producers) until
        transactions are implemented."""
        error = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        out.reply(ctx, error_response(ApiKey.TXN_OFFSET_COMMIT, ctx.api_version, req, error))

    # -- OffsetFetch --------------------------------------------------------------------------------
    def fetch(self, ctx: RequestContext, req: m.OffsetFetchRequest, out: Result) -> None:
        R = m.OffsetFetchResponse
        if ctx.api_version >= 8:
            groups = []
            for g in req.groups:
                requested = None if g.topics is None else [(t.name, t.partition_indexes) for t in g.topics]
                topics = self._fetch_group(g.group_id, requested)
                groups.append(
                    R.OffsetFetchResponseGroup(
                        group_id=g.group_id,
                        topics=[
                            R.OffsetFetchResponseTopics(
                                name=name,
                                partitions=[
                                    R.OffsetFetchResponsePartitions(
                                        partition_index=p,
                                        committed_offset=o,
                                        committed_leader_epoch=e,
                                        metadata=md,
                                    )
                                    for p, o, e, md in parts
                                ],  # fmt: skip
                            )
                            for name, parts in topics
                        ],
                    )
                )
            out.reply(ctx, R(groups=groups))
            return
        requested = None if req.topics is None else [(t.name, t.partition_indexes) for t in req.topics]
        topics = self._fetch_group(req.group_id, requested)
        out.reply(
            ctx,
            R(
                topics=[
                    R.OffsetFetchResponseTopic(
                        name=name,
                        partitions=[
                            R.OffsetFetchResponsePartition(
                                partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=md
                            )
                            for p, o, e, md in parts
                        ],  # fmt: skip
                    )
                    for name, parts in topics
                ],
            ),
        )

    def _fetch_group(
        self, group_id: str, requested: list[tuple[str, list[int]]] | None
    ) -> list[tuple[str, list[tuple[int, int, int, str]]]]:
        """(topic, [(partition, offset, leader epoch, metadata)]) for the requested partitions, or
        for every committed partition when ``requested`` is None. No transactions are pending in
        kcoord yet, so RequireStable never has anything to wait for."""
        group = self._find_group(group_id)
        known = group is not None and not group.is_in(S.DEAD)
        if requested is None:
            if not known:
                return []
            by_topic: dict[str, list[tuple[int, int, int, str]]] = {}
            for topic, partition, value in self.store.partitions(group_id):
                by_topic.setdefault(topic, []).append(
                    (partition, value.offset, value.leader_epoch, value.metadata)
                )
            return list(by_topic.items())
        result = []
        for topic, partitions in requested:
            rows = []
            for partition in partitions:
                value = self.store.get(group_id, topic, partition) if known else None
                if value is None:
                    rows.append((partition, -1, -1, ""))
                else:
                    rows.append((partition, value.offset, value.leader_epoch, value.metadata))
            result.append((topic, rows))
        return result

    # -- OffsetDelete -------------------------------------------------------------------------------
    def delete(self, ctx: RequestContext, req: m.OffsetDeleteRequest, out: Result) -> None:
        R = m.OffsetDeleteResponse
        if not req.group_id:
            out.reply(ctx, R(error_code=int(ErrorCode.INVALID_GROUP_ID), topics=[]))
            return
        group = self._find_group(req.group_id)
        if group is None or group.is_in(S.DEAD):
            out.reply(ctx, R(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), topics=[]))
            return
        if not group.is_empty and not group.uses_consumer_protocol:
            out.reply(ctx, R(error_code=int(ErrorCode.NON_EMPTY_GROUP), topics=[]))
            return
        topics = []
        for topic in req.topics:
            subscribed = group.is_subscribed_to_topic(topic.name)
            partitions = []
            for p in topic.partitions:
                if subscribed:
                    code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    code = ErrorCode.NONE
                    if self.store.get(req.group_id, topic.name, p.partition_index) is not None:
                        out.records.append(offset_tombstone(req.group_id, topic.name, p.partition_index))
                partitions.append(
                    R.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=int(code))
                )
            topics.append(R.OffsetDeleteResponseTopic(name=topic.name, partitions=partitions))
        out.reply(ctx, R(error_code=0, topics=topics))

    def delete_all(self, group_id: str, out: Result) -> None:
        for topic, partition, _ in self.store.partitions(group_id):
            out.records.append(offset_tombstone(group_id, topic, partition))

    # -- retention ----------------------------------------------------------------------------------
    def expire(self, group: ClassicGroup, now_ms: int, out: Result) -> bool:
        """Tombstone the group's expired offsets (Kafka's ``cleanupExpiredOffsets``). Returns True
        when the group has no offsets left, i.e. it may be deleted if Empty."""
        if self.store.group(group.group_id) is None:
            return True
        base = group.offset_expiration_base()
        if base is None:
            return False
        retention = self.config.offsets_retention_ms
        all_expired = True
        for topic, partition, value in self.store.partitions(group.group_id):
            if group.is_subscribed_to_topic(topic):
                all_expired = False
                continue
            if value.expire_timestamp != -1:
                expired = now_ms >= value.expire_timestamp  # explicit per-commit retention (v2-v4)
            else:
                expired = now_ms - base(value.commit_timestamp) >= retention
            if expired:
                out.records.append(offset_tombstone(group.group_id, topic, partition))
            else:
                all_expired = False
        return all_expired

    # -- replay -------------------------------------------------------------------------------------
    def replay(self, key: Any, value: Any | None) -> None:
        if value is None:
            self.store.remove(key.group, key.topic, key.partition)
        else:
            self.store.put(key.group, key.topic, key.partition, value)
