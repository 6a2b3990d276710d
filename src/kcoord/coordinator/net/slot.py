"""A response owed to a client: one slot per request, kept in the order the requests came."""

from __future__ import annotations

# Slot.sent before the relay saw any piece of a large answer (relay/passthrough.py streams those).
STREAM_UNDECIDED = -1


class Slot:
    """A response owed to the client, in request order."""

    __slots__ = ("api_key", "received", "data", "body", "failure", "upstream_failure", "sent", "cost")

    def __init__(self, api_key: int, received: float) -> None:
        self.api_key = api_key
        # perf_counter when its frame arrived: the latency histogram measures frame received →
        # response written, including the wait for earlier slots.
        self.received = received
        self.data: bytes | None = None  # None: not answered yet; b"": nothing to write
        # A large answer's payload, written after ``data`` (its size prefix) without being joined to
        # it: one buffer, or the pieces a stepped encoding produced.
        self.body: bytes | list[bytes] | None = None
        self.failure: str | None = None  # set: close the connection when this slot comes up
        self.upstream_failure = (
            False  # that failure is the upstream's (logged once per outage: App.upstream_health)
        )
        # Bytes of a large relayed answer's payload already written while it arrived (the relay's
        # business: STREAM_UNDECIDED before its first piece, negative while it is not streamed).
        self.sent = STREAM_UNDECIDED
        # The request's estimated memory while in flight (request_cost.py), charged until answered.
        self.cost = 0
