"""AddOffsetsToTxn, answered by kcoord: the group's shard partition joins the client's transaction.

A client sends AddOffsetsToTxn to its transaction coordinator (a kcoord broker port: transaction
FindCoordinator answers are rewritten to them). Kafka's transaction coordinator would add the
group's ``__consumer_offsets`` partition to the transaction; kcoord's offsets live in its own
internal topic, so kcoord adds *that* partition instead, with the client's transactional id,
producer id and epoch (AddPartitionsToTxn v3 to the upstream transaction coordinator), then opens
the transaction in the shard (:meth:`ShardRuntime.add_offsets_to_txn`). The client's EndTxn then
has the transaction coordinator write its marker into kcoord's partition, where the shard follows
it. docs/transactions.md has the whole flow.

The producer's previous transaction must have its marker replayed in the shard before the next
one opens there (transactions v1 keep the epoch, so the shard cannot tell them apart otherwise).
The node that relays the client's EndTxn marks its own shards at once (``transaction_ended``); in a
cluster, the group's shard may be another node's, and the client's next AddOffsetsToTxn reaches
the shard's node forwarded by this one: the forwarded request then carries a kcoord-private tagged
field (:data:`PREVIOUS_TRANSACTION_ENDED_TAG`, AddOffsetsToTxn v3+ is flexible) that tells that
node the producer's transaction open there is the previous one, ended.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Protocol

from kcoord.coordinator.core.responses import error_response
from kcoord.coordinator.core.result import RequestContext
from kcoord.protocol import messages as m
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey

from .router import Router

log = logging.getLogger("kcoord.txn")

# AddOffsetsToTxn v2 added PRODUCER_FENCED; older clients get INVALID_PRODUCER_EPOCH for it, as
# Kafka's transaction coordinator answers them.
PRODUCER_FENCED_SINCE = 2
# kcoord's private tag ("KC", as for its record type and value tag) on an AddOffsetsToTxn one kcoord
# node forwards to another: the producer's EndTxn was answered since its last AddOffsetsToTxn for
# this shard. Clients never send it; a Kafka broker would keep it as an unknown tag and ignore it.
PREVIOUS_TRANSACTION_ENDED_TAG = 0x4B43
FLEXIBLE_SINCE = 3
_ENDED_REMEMBERED = 100_000  # producers whose EndTxn this node relayed, bounded (oldest forgotten)


class TransactionPartitionAdder(Protocol):
    async def add_partition_to_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, shard: int
    ) -> int: ...


class TransactionOffsets:
    def __init__(self, router: Router, storage: TransactionPartitionAdder) -> None:
        self.router = router
        self.storage = storage
        # producer id -> the shards its next transaction has reached through this node since this
        # node relayed its EndTxn (soft state; see the module docstring).
        self._ended: OrderedDict[int, set[int]] = OrderedDict()

    def _first_since_end(self, producer_id: int, shard: int) -> bool:
        """Whether this is the producer's first AddOffsetsToTxn for ``shard`` since the EndTxn this
        node relayed (so a transaction of it open in the shard is the previous one)."""
        reached = self._ended.get(producer_id)
        if reached is None or shard in reached:
            return False
        reached.add(shard)
        return True

    async def add_offsets_to_txn(self, ctx: RequestContext, request: m.AddOffsetsToTxnRequest) -> Message:
        shard = self.router.shard_of(request.group_id)
        previous_ended = self._first_since_end(request.producer_id, shard.index) or any(
            tag == PREVIOUS_TRANSACTION_ENDED_TAG for tag, _ in request.unknown_tagged or ()
        )
        if not self.router.serves(shard.index):  # cluster mode: the shard is another node's
            return await self._forward(shard.index, ctx, request, previous_ended)
        if previous_ended:
            shard.transaction_ended(request.producer_id)
        if not shard.loaded:
            refusal = ErrorCode.NOT_COORDINATOR if shard.fenced else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            return error_response(ApiKey.ADD_OFFSETS_TO_TXN, ctx.api_version, request, refusal)
        if not await shard.previous_transaction_ended(request.producer_id):
            # What Kafka answers while the previous transaction's markers are being written.
            return m.AddOffsetsToTxnResponse(error_code=ErrorCode.CONCURRENT_TRANSACTIONS)
        error = await self.storage.add_partition_to_txn(
            request.transactional_id, request.producer_id, request.producer_epoch, shard.index
        )
        log.debug(
            "AddOffsetsToTxn of producer %d epoch %d for shard %d: added upstream with error %d",
            request.producer_id,
            request.producer_epoch,
            shard.index,
            error,
        )
        if error != ErrorCode.NONE:
            if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < PRODUCER_FENCED_SINCE:
                error = ErrorCode.INVALID_PRODUCER_EPOCH
            return m.AddOffsetsToTxnResponse(error_code=error)
        return await shard.add_offsets_to_txn(ctx, request)

    async def _forward(
        self, index: int, ctx: RequestContext, request: m.AddOffsetsToTxnRequest, previous_ended: bool
    ) -> Message:
        """To the node serving the shard; at a flexible version when the tag must go along (the
        answer's fields are the same in every version, and it is encoded for the client's)."""
        if previous_ended:
            tagged = m.AddOffsetsToTxnRequest(
                transactional_id=request.transactional_id, producer_id=request.producer_id,
                producer_epoch=request.producer_epoch, group_id=request.group_id,
                unknown_tagged=[(PREVIOUS_TRANSACTION_ENDED_TAG, b"\x01")],
            )  # fmt: skip
            forward_ctx = RequestContext(
                max(ctx.api_version, FLEXIBLE_SINCE), ctx.client_id, ctx.client_host, ctx.correlation_id
            )
            response = await self.router.forward(index, ApiKey.ADD_OFFSETS_TO_TXN, forward_ctx, tagged)
        else:
            response = await self.router.forward(index, ApiKey.ADD_OFFSETS_TO_TXN, ctx, request)
        if response.error_code == ErrorCode.PRODUCER_FENCED and ctx.api_version < PRODUCER_FENCED_SINCE:  # type: ignore[attr-defined]
            response.error_code = ErrorCode.INVALID_PRODUCER_EPOCH  # type: ignore[attr-defined]
        return response

    def transaction_ended(self, producer_id: int) -> None:
        """A client's EndTxn for ``producer_id`` was answered NONE (seen as kcoord relays it): every
        shard of this node holding its transaction open expects the marker
        (``ShardRuntime.transaction_ended``), and the producer's next AddOffsetsToTxn through this
        node tells each shard's node so (the module docstring)."""
        for shard in self.router.shards:
            shard.transaction_ended(producer_id)
        self._ended.pop(producer_id, None)
        self._ended[producer_id] = set()
        if len(self._ended) > _ENDED_REMEMBERED:
            self._ended.popitem(last=False)
