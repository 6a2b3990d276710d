"""When a shard converts a group between the classic and the consumer protocol, and what comes with it:
the migration policy and limits checked (Kafka's ``validateOnlineUpgrade`` / ``validateOnlineDowngrade``),
the records built (:mod:`.migration`), and the soft state around them: requests parked in the
classic group answered REBALANCE_IN_PROGRESS, the converted members' sessions, the classic
rebalance after a downgrade (a timer, so it runs once the records are replayed).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import Record

from . import migration
from . import responses as r
from .classic.manager import ClassicGroupManager
from .classic.store import ClassicGroups
from .clock import NowMs
from .consumer.group import ConsumerGroup
from .consumer.manager import ConsumerGroupManager, metadata_hash
from .consumer.member import ConsumerGroupMember
from .consumer.store import ConsumerGroups
from .group_config import GroupConfig
from .result import RequestContext, Result
from .timer import TimerQueue


def downgrade_rebalance_key(group_id: str) -> tuple[str, str]:
    return ("classic-downgrade-rebalance", group_id)


class MigrationSteps:
    def __init__(
        self,
        policy: migration.MigrationPolicy,
        config: GroupConfig,
        classic_groups: ClassicGroups,
        classic_manager: ClassicGroupManager,
        consumer_manager: ConsumerGroupManager,
        timers: TimerQueue,
        now_ms: NowMs,
        log: logging.Logger,
    ) -> None:
        self.policy = policy
        self.config = config
        self.classic_groups = classic_groups
        self.classic_manager = classic_manager
        self.consumer_manager = consumer_manager
        self.timers = timers
        self.now_ms = now_ms
        self.log = log
        # Parked classic requests a conversion answered, handed to the request's Result by the shard
        # (which looks at this list on every request, and takes it only when it holds any).
        self.parked_replies: list[tuple[RequestContext, Message]] = []

    def take_replies(self) -> list[tuple[RequestContext, Message]]:
        replies, self.parked_replies = self.parked_replies, []
        return replies

    # -- upgrade ---------------------------------------------------------------------------------------
    def upgrade(self, group_id: str, records: list[Record]) -> ConsumerGroup | None:
        """Kafka's ``validateOnlineUpgrade`` then ``convertToConsumerGroup``: the records that turn the
        classic group in use into a consumer group are appended to ``records``, and the group they
        make is returned (built by replaying them into a scratch store: the same code as the shard's
        replay, so the heartbeat goes on with exactly the group the log will hold). None when the
        policy, the protocol type, the size or a member's metadata forbids it."""
        classic = self.classic_groups.get(group_id)
        if classic is None:
            return None
        why_not = None
        if not self.policy.upgrade_enabled:
            why_not = "online upgrade is disabled (group.consumer.migration.policy)"
        elif not classic.uses_consumer_protocol:
            why_not = f"its protocol type is {classic.protocol_type!r}, not the consumer protocol"
        elif classic.num_members >= self.config.consumer_max_size:
            why_not = "it has more members than a consumer group may have"
        if why_not is not None:
            self.log.info(
                "group %s: cannot upgrade the classic group to a consumer group: %s", group_id, why_not
            )
            return None
        topics = self.consumer_manager.topic_image()
        try:
            conversion = migration.upgrade_records(
                classic, topics, lambda names: metadata_hash(names, topics)
            )
        except migration.MalformedEmbeddedProtocol as error:
            self.log.warning(
                "group %s: cannot upgrade the classic group, a member's consumer protocol is malformed: %s",
                group_id, error,
            )  # fmt: skip
            return None
        scratch = ConsumerGroups()
        for record in conversion[1:]:
            scratch.replay(record.key, record.value)
        group = scratch.get(group_id)
        assert group is not None
        records.extend(conversion)
        for member in classic.members.values():
            if member.awaiting_join is not None:
                parked = member.awaiting_join
                member.awaiting_join = None
                self.parked_replies.append(
                    (
                        parked,
                        r.join_response(
                            parked.api_version, ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id
                        ),
                    )
                )
            if member.awaiting_sync is not None:
                self.parked_replies.append(
                    (member.awaiting_sync, r.sync_response(ErrorCode.REBALANCE_IN_PROGRESS))
                )
                member.awaiting_sync = None
        for converted in group.members.values():
            classic_metadata = converted.classic_member_metadata
            assert classic_metadata is not None
            self.consumer_manager._schedule_session_timeout(
                group_id, converted.member_id, classic_metadata.session_timeout_ms
            )
        self.log.info(
            "group %s: converted the classic group (generation %d, %d members) to a consumer group",
            group_id, classic.generation_id, classic.num_members,
        )  # fmt: skip
        return group

    # -- downgrade -------------------------------------------------------------------------------------
    def downgrade(self, group: ConsumerGroup, leaving: Iterable[str]) -> list[Record] | None:
        """Kafka's ``validateOnlineDowngradeWithFencedMembers`` then ``convertToClassicGroup``: the
        records that turn ``group`` into a classic group once ``leaving`` are gone, when every member
        left speaks the classic protocol and the policy allows; None otherwise. The classic group's
        rebalance is prepared by a timer due now, which fires after the records are replayed."""
        remaining = migration.remaining_classic_members(group, leaving)
        if remaining is None:
            return None
        group_id = group.group_id
        if not self.policy.downgrade_enabled:
            self.log.info(
                "group %s: cannot downgrade to a classic group: online downgrade is disabled", group_id
            )
            return None
        if len(remaining) > self.config.max_size:
            self.log.info(
                "group %s: cannot downgrade to a classic group: more members than group.max.size", group_id
            )
            return None
        now = self.now_ms()
        records = migration.downgrade_records(group, remaining, self.consumer_manager.topic_image(), now)
        if records is None:
            self.log.warning(
                "group %s: cannot downgrade, its classic members share no readable protocol", group_id
            )
            return None
        generation = group.group_epoch
        self.timers.schedule(
            downgrade_rebalance_key(group_id),
            now,
            lambda out: self._rebalance_after_downgrade(group_id, generation, out),
        )
        self.log.info(
            "group %s: converting the consumer group (epoch %d) to a classic group of %d members",
            group_id, generation, len(remaining),
        )  # fmt: skip
        return records

    def downgrade_replacing(
        self, group: ConsumerGroup, replaced_id: str, joining: ConsumerGroupMember
    ) -> list[Record] | None:
        """Kafka's ``validateOnlineDowngradeWithReplacedMemberId``: a classic static member that takes
        the place of the group's last consumer-protocol member (its records already written) turns
        the group into a classic group with itself in, holding the replaced member's target; no
        rebalance follows. None when the group stays a consumer group."""
        others = [mm for mid, mm in group.members.items() if mid not in (replaced_id, joining.member_id)]
        if not all(mm.uses_classic_protocol for mm in others):
            return None
        if not self.policy.downgrade_enabled or len(others) + 1 > self.config.max_size:
            return None
        group_id = group.group_id
        now = self.now_ms()
        records = migration.downgrade_records(
            group, [*others, joining], self.consumer_manager.topic_image(), now,
            joining=(replaced_id, joining.member_id),
        )  # fmt: skip
        if records is None:
            return None
        generation = group.group_epoch
        self.timers.schedule(
            downgrade_rebalance_key(group_id),
            now,
            lambda out: self.classic_manager.rebalance_after_downgrade(
                group_id, generation, out, rebalance=False
            ),
        )
        self.log.info(
            "group %s: converting the consumer group (epoch %d) to a classic group: static member %s "
            "replaced the last consumer-protocol member %s",
            group_id, generation, joining.member_id, replaced_id,
        )  # fmt: skip
        return records

    def _rebalance_after_downgrade(self, group_id: str, generation: int, out: Result) -> None:
        self.classic_manager.rebalance_after_downgrade(group_id, generation, out)
