"""A shard's partition joins a client's transaction: AddPartitionsToTxn in the client's name.

kcoord answers AddOffsetsToTxn itself (docs/transactions.md), so it must add the shard's partition
of the internal topic to the client's transaction at the upstream transaction coordinator, with
the client's transactional id, producer id and epoch (AddPartitionsToTxn v3 and below, the client
form), before it writes the client's transactional offset commits there.
"""

from __future__ import annotations

import logging

from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode

from .base import StorageError
from .kafka_client import KafkaCluster, request
from .retry import Retry, Verdict

log = logging.getLogger("kcoord.storage")

# AddPartitionsToTxn errors after which another attempt (after finding the coordinator again) may
# succeed soon; the rest are the client's answer.
ADD_PARTITION_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


async def add_partition_to_txn(
    cluster: KafkaCluster,
    topic: str,
    shard: int,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    timeout: float,
) -> int:
    """AddPartitionsToTxn v3 (the client form) for ``shard``'s partition of ``topic`` on kcoord's own
    connection to the id's transaction coordinator; returns the partition's error code (0 when
    added). Coordinator moves are retried until ``timeout``; any other error is the client's
    answer."""
    A = sm.AddPartitionsToTxnRequest
    req = A(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=producer_epoch,
        v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=topic, partitions=[shard])],
    )  # fmt: skip
    # A lost connection counts as COORDINATOR_NOT_AVAILABLE: the next attempt finds the coordinator anew.
    retry = Retry(timeout, max_backoff=0.5, retriable=ADD_PARTITION_RETRIABLE, leadership=frozenset())
    while True:
        try:
            conn = await cluster.transaction_coordinator(transactional_id)
            resp = await request(conn, req, timeout, min(3, conn.version_for(A)))
            error = int(ErrorCode.UNKNOWN_SERVER_ERROR)
            for result in resp.results_by_topic_v3_and_below or []:
                for part in result.results_by_partition:
                    if result.name == topic and part.partition_index == shard:
                        error = int(part.partition_error_code)
        except StorageError as exc:
            log.debug("AddPartitionsToTxn for %r: %s", transactional_id, exc)
            error = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if error == ErrorCode.NONE or await retry.failed(error, f"error {error}") is not Verdict.RETRY:
            return error
