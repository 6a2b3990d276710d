"""AddOffsetsToTxn, answered by kcoord: the group's shard partition joins the client's transaction.

A client sends AddOffsetsToTxn to its transaction coordinator (a kcoord broker port: transaction
FindCoordinator answers are rewritten to them). Kafka's transaction coordinator would add the
group's ``__consumer_offsets`` partition to the transaction; kcoord's offsets live in its own
internal topic, so kcoord adds *that* partition instead, with the client's transactional id,
producer id and epoch (AddPartitionsToTxn v3 to the upstream transaction coordinator), then opens
the transaction in the shard (:meth:`ShardRuntime.add_offsets_to_txn`). The client's EndTxn then
has the transaction coordinator write its marker into kcoord's partition, where the shard follows
it. docs/transactions.md has the whole flow.
"""

from __future__ import annotations

from typing import Protocol

from kcoord.coordinator.core.responses import error_response
from kcoord.coordinator.core.result import RequestContext
from kcoord.protocol import messages as m
from kcoord.protocol.codegen import Message
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey

from .router import Router

# AddOffsetsToTxn v2 added PRODUCER_FENCED; older clients get INVALID_PRODUCER_EPOCH for it, as
# Kafka's transaction coordinator answers them.
PRODUCER_FENCED_SINCE = 2


class TransactionPartitionAdder(Protocol):
    async def add_partition_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, shard: int) -> int: ...


class TransactionOffsets:
    def __init__(self, router: Router, storage: TransactionPartitionAdder) -> None:
        self.router = router
        self.storage = storage

    async def add_offsets_to_txn(self, ctx: RequestContext, request: m.AddOffsetsToTxnRequest) -> Message:
        shard = self.router.shard_of(request.group_id)
        if not self.router.serves(shard.index):  # cluster mode: the shard is another node's
            return await self.router.forward(shard.index, ApiKey.ADD_OFFSETS_TO_TXN, ctx, request)
        if not shard.loaded:
            error = ErrorCode.NOT_COORDINATOR if shard.fenced else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            return error_response(ApiKey.ADD_OFFSETS_TO_TXN, ctx.api_version, request, error)
        error = await self.storage.add_partition_to_txn(
            request.transactional_id, request.producer_id, request.producer_epoch, shard.index
        )
        if error != ErrorCode.NONE:
            if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < PRODUCER_FENCED_SINCE:
                error = ErrorCode.INVALID_PRODUCER_EPOCH
            return m.AddOffsetsToTxnResponse(error_code=error)
        return await shard.add_offsets_to_txn(ctx, request)

    def transaction_ended(self, producer_id: int) -> None:
        """A client's EndTxn for ``producer_id`` was answered NONE (seen as kcoord relays it): every
        shard holding its transaction open expects the marker (``ShardRuntime.transaction_ended``)."""
        for shard in self.router.shards:
            shard.transaction_ended(producer_id)
