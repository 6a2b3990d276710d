"""A log of consumer-group records and the shard that replays it, for the KIP-848 model tests.

Every change goes the one way state changes: a record built by :mod:`kcoord.coordinator.core.records`,
encoded and decoded in the stored format (as the shard's log holds it), appended to ``records`` and
replayed into the shard. Nothing here sets a field of a group or member directly.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from kcoord.coordinator.core import records as builders
from kcoord.coordinator.core.clock import ManualClock
from kcoord.coordinator.core.consumer.group import ConsumerGroup
from kcoord.coordinator.core.consumer.member import ConsumerGroupMember, MemberState
from kcoord.coordinator.core.consumer.subscriptions import TopicImage, TopicMetadata
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.result import RequestContext, TransactionalWrite
from kcoord.coordinator.core.shard_state import GroupCoordinatorShard
from kcoord.coordinator.runtime.shard import replay_transaction_entry
from kcoord.protocol.records import Record, decode_record, encode_record

FOO = uuid.UUID("f0000000-0000-0000-0000-000000000001")
BAR = uuid.UUID("b0000000-0000-0000-0000-000000000002")
TOPIC_IDS = {"foo": FOO, "bar": BAR}  # what the cluster would say: topic name -> id


def stored(record: Record) -> Record:
    """The record as a shard reads it back from its log."""
    decoded = decode_record(*encode_record(record))
    assert decoded is not None
    return decoded


def new_shard(
    config: GroupConfig | None = None,
    clock: ManualClock | None = None,
    topic_image: Callable[[], TopicImage] | None = None,
) -> GroupCoordinatorShard:
    return GroupCoordinatorShard(
        config or GroupConfig(), clock or ManualClock(), resolve_topic_id=TOPIC_IDS.get,
        topic_image=topic_image or (lambda: {}),
    )  # fmt: skip


def compacted(records: list[Record]) -> list[Record]:
    """What log compaction keeps: the last record of each key, where it was (tombstones included)."""
    last = {}
    for index, record in enumerate(records):
        last[encode_record(record)[0]] = index
    return [record for index, record in enumerate(records) if last[encode_record(record)[0]] == index]


class ConsumerLog:
    def __init__(
        self, group_id: str = "grp", config: GroupConfig | None = None, topics: TopicImage | None = None
    ) -> None:
        """``topics``: the cluster's topics the shard's ConsumerGroupHeartbeat sees; tests may change
        ``self.topics`` (a topic created, partitions added) between requests."""
        self.group_id = group_id
        self.clock = ManualClock(1_700_000_000_000)
        self.topics: dict[uuid.UUID, TopicMetadata] = dict(topics or {})
        self._image: TopicImage = MappingProxyType(dict(self.topics))
        # Assigning on every epoch bump unless a test says otherwise (as Kafka's request tests do);
        # the assignment interval (KIP-1263) has tests of its own.
        config = config or GroupConfig(consumer_assignment_interval_ms=0)
        self.shard = new_shard(config, self.clock, self.topic_image)
        self.records: list[Record] = []
        self.txn_writes: list[TransactionalWrite] = []

    def topic_image(self) -> TopicImage:
        """``topics`` as the shard reads it: like the net layer's catalog, a new image when the
        topics changed and the same one otherwise (the handler remembers what it derives per image)."""
        if self._image != self.topics:
            self._image = MappingProxyType(dict(self.topics))
        return self._image

    def write(self, *records: Record) -> None:
        for record in records:
            record = stored(record)
            self.records.append(record)
            self.shard.replay(record)

    @property
    def group(self) -> ConsumerGroup:
        group = self.shard.consumer.get(self.group_id)
        assert group is not None
        return group

    def member(self, member_id: str) -> ConsumerGroupMember:
        member = self.group.member(member_id)
        assert member is not None
        return member

    def send(
        self, api_key: int, version: int, request: Any, topic_describable: Callable[[str], bool] | None = None
    ) -> Any:
        """A request through ``handle`` the way the runtime serves it: the request as a client of that
        version sends it, the records it returns written (stored and replayed), the reply as that
        client reads it. ``topic_describable``: the sender's DESCRIBE right on topics (net layer, ACLs)."""
        decoded = type(request).decode(request.encode(version), version)
        ctx = RequestContext(version, "client", "/127.0.0.1", topic_describable=topic_describable)
        result = self.shard.handle(api_key, ctx, decoded)
        self.write(*result.records)
        for write in result.transactional:  # a client's transactional batch: replayed as the runtime does
            self.txn_writes.append(write)
            replay_transaction_entry(self.shard, write.batch)
        [(replied_ctx, response)] = result.replies
        assert replied_ctx is ctx
        return type(response).decode(response.encode(version), version)

    def sleep(self, ms: int) -> None:
        """Advance the clock by ``ms`` and fire the timers due, writing what they return."""
        target = self.clock.now_ms() + ms
        while (deadline := self.shard.next_deadline()) is not None and deadline <= target:
            self.clock.advance(max(deadline - self.clock.now_ms(), 0))
            self.write(*self.shard.poll(self.clock.now_ms()).records)
        self.clock.advance(target - self.clock.now_ms())

    def fresh_replay(self, records: Iterable[Record] | None = None) -> GroupCoordinatorShard:
        shard = new_shard()
        for record in self.records if records is None else records:
            shard.replay(record)
        return shard

    # -- what a heartbeat handler would write, step by step ----------------------------------------------
    def bump_group_epoch(self, epoch: int) -> None:
        self.write(builders.consumer_group_epoch_record(self.group_id, epoch))

    def subscribe(self, member_id: str, topics: Iterable[str] = ("foo",), **fields: Any) -> None:
        """A member's subscription record (its first, when it joins)."""
        group = self.shard.consumer.get(self.group_id)
        base = (group.member(member_id) if group else None) or ConsumerGroupMember(
            member_id, rebalance_timeout_ms=45_000, client_id="c", client_host="h"
        )
        self.write(
            builders.consumer_group_member_subscription_record(
                self.group_id, replace(base, subscribed_topic_names=frozenset(topics), **fields)
            )
        )

    def target(self, epoch: int, assignment: Mapping[str, Mapping[uuid.UUID, Iterable[int]]]) -> None:
        """A new target assignment for these members, computed at ``epoch``."""
        for member_id, partitions in assignment.items():
            self.write(builders.consumer_group_target_assignment_record(self.group_id, member_id, partitions))
        self.write(builders.consumer_group_target_assignment_epoch_record(self.group_id, epoch))

    def reconcile(
        self,
        member_id: str,
        *,
        epoch: int,
        assigned: Mapping[uuid.UUID, Iterable[int]],
        pending: Mapping[uuid.UUID, Iterable[int]] | None = None,
        state: MemberState = MemberState.STABLE,
    ) -> ConsumerGroupMember:
        """The member's next current assignment, with the epochs ``with_assignment`` keeps."""
        group = self.shard.consumer.get(self.group_id)
        old = (group.member(member_id) if group else None) or ConsumerGroupMember(member_id)
        new = old.with_assignment(
            member_epoch=epoch,
            previous_member_epoch=old.member_epoch,
            state=state,
            assigned=assigned,
            pending_revocation=pending,
        )
        self.write(builders.consumer_group_current_assignment_record(self.group_id, new))
        return self.member(member_id)

    def remove_member(self, member_id: str) -> None:
        self.write(*builders.consumer_group_member_tombstones(self.group_id, member_id))
