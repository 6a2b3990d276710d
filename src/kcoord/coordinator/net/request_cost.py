"""What a request costs in memory while it is in flight, estimated from its frame before dispatch.

A request kcoord serves is decoded into Python objects that live until it is answered, and so do
the answer's objects while they are built (for a multi-group request, every shard's part until
the last one answered, then the merged answer and its bytes). Measured on a DescribeGroups v5 of
20,000 ids of 15 characters (a 320 KB frame): the decoded request 1.4 MB (4.5x its frame), the
answer's objects ~3.4 MB, its bytes 0.6 MB, the merge ~2 MB. So:

- a served request costs its frame × ``DECODED_PER_FRAME_BYTE`` + ``PER_REQUEST``;
- a multi-group one (DescribeGroups, DeleteGroups, ConsumerGroupDescribe, OffsetFetch v8+) adds
  ``PER_GROUP`` for each group it names (the opening array's length, read from the frame:
  frames.peek_first_array_length), since ids of one character cost as much to answer as long ones;
- a relayed request costs ``PER_REQUEST``: its frame goes upstream at the end of the read that
  brought it (relay/passthrough.py), and its answer is counted as output (connection.py) as it
  arrives; a producer pipelining 1 MB batches is not held back by what it already sent.

The estimate errs high: it is a budget, not a measurement (bench/hostile_clients.py measures RSS).
A heartbeat or a one-partition commit costs ~2 KB, so ``connection.inflight.max.bytes`` (4 MiB)
lets a connection have ``max.inflight`` (1000) of them in flight; a commit of 100 partitions costs
~40 KB (100 in flight).
"""

from __future__ import annotations

from kcoord.protocol import frames
from kcoord.protocol.messages import KCOORD_VERSIONS, ApiKey

DECODED_PER_FRAME_BYTE = 8
PER_REQUEST = 1024  # the slot, the reply closure, the context, the futures of a routed request
PER_GROUP = 384  # each group a multi-group request names: its answer's objects and bytes, the merge

# Multi-group APIs whose opening array lists the groups, with the first version that does.
_GROUPS_FIRST: dict[int, int] = {
    ApiKey.DESCRIBE_GROUPS: 0,
    ApiKey.DELETE_GROUPS: 0,
    ApiKey.CONSUMER_GROUP_DESCRIBE: 0,
    ApiKey.OFFSET_FETCH: 8,
}


def request_cost(payload: bytes, api_key: int, api_version: int) -> int:
    """The estimated bytes kcoord holds for this request (its frame ``payload``) until it is answered."""
    if api_key not in KCOORD_VERSIONS:
        return PER_REQUEST
    cost = PER_REQUEST + len(payload) * DECODED_PER_FRAME_BYTE
    since = _GROUPS_FIRST.get(api_key)
    if since is not None and api_version >= since:
        cost += frames.peek_first_array_length(payload, api_key, api_version) * PER_GROUP
    return cost
