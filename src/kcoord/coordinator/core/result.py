"""What a pure handler hands back to the shard runtime.

Handlers in the group state machines never write to the network or to storage. They return a
:class:`Result`: the records to append to the shard's log, and replies for pending requests.
A reply may answer a request other than the one being handled — completing a rebalance answers
every parked JoinGroup — so replies name their request by its opaque :class:`RequestContext`.
The runtime appends the records, and only after the cluster acknowledged them sends the replies.
``events`` (:mod:`kcoord.coordinator.core.events`) report what happened to groups and members, for metrics
and logs; they never affect state.

``transactional`` holds writes made *for a client's transaction* (a TxnOffsetCommit's offsets, or the
opening of a transaction in the shard's partition for AddOffsetsToTxn): each is one transactional
batch with the client's producer id and epoch, written after ``records``, in order. Its reply waits
for it like any other; if the cluster refuses it for the producer's sake (fenced, wrong state), that
error answers ``ctx``, the request it was written for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kcoord.protocol.codec import Message
from kcoord.protocol.records import Record, TransactionalRecords

from .events import GroupEvent


@dataclass(eq=False, slots=True)
class RequestContext:
    """Identifies one request in flight. Compared by identity: two requests are never the same."""

    api_version: int
    client_id: str = ""
    client_host: str = ""
    correlation_id: int = 0
    # The topics the request's principal may DESCRIBE, when the upstream's ACLs are enforced (None:
    # every topic). A KIP-848 regular expression resolved on this request's behalf keeps only
    # those, as Kafka filters a regex's topics by the heartbeating member's rights.
    topic_describable: Callable[[str], bool] | None = None


@dataclass(frozen=True, slots=True)
class TransactionalWrite:
    """One transactional batch for ``transactional_id``'s producer (see the module docstring). An
    empty ``batch.records`` opens the producer's transaction in the shard's log with no offsets."""

    ctx: RequestContext
    transactional_id: str
    batch: TransactionalRecords


@dataclass(slots=True)
class Result:
    records: list[Record] = field(default_factory=list)
    replies: list[tuple[RequestContext, Message]] = field(default_factory=list)
    events: list[GroupEvent] = field(default_factory=list)
    transactional: list[TransactionalWrite] = field(default_factory=list)

    def reply(self, ctx: RequestContext, response: Message) -> Result:
        self.replies.append((ctx, response))
        return self

    def emit(self, event: GroupEvent) -> Result:
        self.events.append(event)
        return self

    def write_transactional(
        self,
        ctx: RequestContext,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        records: list[Record],
    ) -> Result:
        self.transactional.append(
            TransactionalWrite(
                ctx, transactional_id, TransactionalRecords(producer_id, producer_epoch, records)
            )
        )
        return self

    def extend(self, other: Result) -> Result:
        self.records.extend(other.records)
        self.replies.extend(other.replies)
        self.events.extend(other.events)
        self.transactional.extend(other.transactional)
        return self
