"""A transaction marker that the shard sees only *after* the producer's next AddOffsetsToTxn.

Found with the Java consume-transform-produce bench (bench/eos_scaling.py) on tansu 0.6: the
client's EndTxn returns and the client begins its next transaction at once, but kcoord's
AddOffsetsToTxn catch-up does not see the previous transaction's COMMIT marker. On tansu the cause
is ``KafkaShardLog.follow()`` taking an empty 1 ms Fetch answer for the end of the partition
(tests/integration/test_follow_markers_tansu.py); a marker written late (Kafka writes markers after
answering EndTxn, though its coordinator answers the next AddPartitionsToTxn CONCURRENT_TRANSACTIONS
until they are in) looks the same to the shard. The shard still has the producer's transaction open
at the same epoch, so AddOffsetsToTxn writes nothing (it takes the request for a retry), and the
marker, replayed later, ends *both* transactions:

- when it is replayed before the next TxnOffsetCommit, that commit is refused INVALID_TXN_STATE
  (the Java producer then fails fatally: "Unexpected error in TxnOffsetCommitResponse");
- when it is replayed after it, the next transaction's offsets become visible at the previous
  transaction's COMMIT, before the client committed them; if the client then aborts, the aborted
  offsets stay visible: input records skipped, exactly-once broken.

In the internal topic of a bench run this shows as transactions with no opening batch (offsets
batch, then COMMIT) and ABORT markers with nothing open before them. Kafka's semantics, which
these tests hold kcoord to: a transaction's offsets are visible at *its own* COMMIT marker only,
and a TxnOffsetCommit inside a transaction whose AddOffsetsToTxn succeeded is accepted. kcoord may
instead answer the AddOffsetsToTxn CONCURRENT_TRANSACTIONS (retriable) until the previous marker is
in, as Kafka's transaction coordinator does; the tests accept that too.
"""

from __future__ import annotations

from typing import Any

import pytest

from kcoord.protocol.errors import ErrorCode as E
from tests.unit.test_txn_runtime import PID, T0, Cluster

LATE_MARKER_BUG = pytest.mark.xfail(
    strict=True,
    reason="kcoord bug (eos-java report): AddOffsetsToTxn takes the producer's still-open previous "
    "transaction for the current one, and that transaction's late marker ends both",
)


@pytest.fixture
async def txn_cluster() -> Any:
    c = Cluster()
    await c.start()
    yield c
    c.rt.close()


async def next_transaction_opens(c: Cluster) -> bool:
    """The producer's next AddOffsetsToTxn, sent while its previous transaction's marker is not in
    the log yet. False if kcoord told it to retry (CONCURRENT_TRANSACTIONS): the scenario cannot
    happen then."""
    code = await c.add_offsets()
    assert code in (E.NONE, E.CONCURRENT_TRANSACTIONS), code
    return code == E.NONE


@LATE_MARKER_BUG
async def test_the_previous_marker_landing_late_does_not_end_the_next_transaction(txn_cluster: Cluster) -> None:
    c = txn_cluster
    assert await c.add_offsets() == E.NONE
    assert await c.txn_commit({T0: 10}) == {T0: 0}
    # the client's EndTxn(COMMIT) returned; its marker is not readable in the partition yet
    if not await next_transaction_opens(c):
        c.log.write_marker(PID, 0, committed=True)
        await c.rt.catch_up()
        assert await c.add_offsets() == E.NONE
        assert await c.txn_commit({T0: 20}) == {T0: 0}
        return
    c.log.write_marker(PID, 0, committed=True)  # the first transaction's marker lands
    await c.rt.catch_up()
    assert await c.fetch([T0]) == {T0: (10, 0)}
    # the second transaction is still open: its TxnOffsetCommit is accepted (kcoord: INVALID_TXN_STATE)
    assert await c.txn_commit({T0: 20}) == {T0: 0}
    assert await c.fetch([T0]) == {T0: (-1, E.UNSTABLE_OFFSET_COMMIT)}
    c.log.write_marker(PID, 0, committed=True)
    await c.rt.catch_up()
    assert await c.fetch([T0]) == {T0: (20, 0)}


@LATE_MARKER_BUG
async def test_the_previous_marker_landing_late_does_not_show_the_next_transactions_offsets(txn_cluster: Cluster) -> None:
    c = txn_cluster
    assert await c.add_offsets() == E.NONE
    assert await c.txn_commit({T0: 10}) == {T0: 0}
    if not await next_transaction_opens(c):
        return  # kcoord made the client wait for the marker: the race cannot happen
    assert await c.txn_commit({T0: 20}) == {T0: 0}
    c.log.write_marker(PID, 0, committed=True)  # the *first* transaction's marker
    await c.rt.catch_up()
    # only the first transaction committed (kcoord: 20, the open second transaction's offset)
    assert (await c.fetch([T0]))[T0][0] != 20
    c.log.write_marker(PID, 0, committed=False)  # the second transaction aborts
    await c.rt.catch_up()
    assert await c.fetch([T0]) == {T0: (10, 0)}  # kcoord: 20, an aborted transaction's offset
