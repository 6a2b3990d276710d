"""What a pure handler hands back to the shard runtime.

Handlers in the group state machines never write to the network or to storage. They return a
:class:`Result`: the records to append to the shard's log, and replies for pending requests.
A reply may answer a request other than the one being handled — completing a rebalance answers
every parked JoinGroup — so replies name their request by its opaque :class:`RequestContext`.
The runtime appends the records, and only after the cluster acknowledged them sends the replies.
``events`` (:mod:`kcoord.coordinator.core.events`) report what happened to groups and members, for metrics
and logs; they never affect state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kcoord.protocol.codegen import Message
from kcoord.protocol.records import Record

from .events import GroupEvent


@dataclass(eq=False, slots=True)
class RequestContext:
    """Identifies one request in flight. Compared by identity: two requests are never the same."""

    api_version: int
    client_id: str = ""
    client_host: str = ""
    correlation_id: int = 0


@dataclass(slots=True)
class Result:
    records: list[Record] = field(default_factory=list)
    replies: list[tuple[RequestContext, Message]] = field(default_factory=list)
    events: list[GroupEvent] = field(default_factory=list)

    def reply(self, ctx: RequestContext, response: Message) -> Result:
        self.replies.append((ctx, response))
        return self

    def emit(self, event: GroupEvent) -> Result:
        self.events.append(event)
        return self

    def extend(self, other: Result) -> Result:
        self.records.extend(other.records)
        self.replies.extend(other.replies)
        self.events.extend(other.events)
        return self
