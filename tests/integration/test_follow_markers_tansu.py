"""``KafkaShardLog.follow()`` must return every transaction marker written into kcoord's partition,
on tansu 0.6 (a kcoord bug found by bench/eos_scaling.py, fixed in 1e55453: follow() now reads on,
with a longer wait, while it is below the high watermark its first answer gave).

tansu 0.6 answers a Fetch with ``max_wait_ms=1`` with an *empty* record set about half of the time
once the partition holds a few thousand batches, even when it holds data far past the fetch offset
(the high watermark in the same answer says so; with ``max_wait_ms=100`` every answer has the data;
on a partition of a few batches the 1 ms answers are fine). ``follow()`` fetches with
``max_wait_ms=1`` and takes an answer with no batches for "nothing more", so it misses markers that
are there:

- AddOffsetsToTxn's catch-up misses the producer's previous COMMIT marker (before ebadcea the next
  transaction was then taken for the previous one; since ebadcea AddOffsetsToTxn waits up to 3 s for
  the marker, then answers CONCURRENT_TRANSACTIONS, which does not help while follow() cannot see it);
- the follow loop can stay at one offset for good (a diagnostic run: every follow at 2966 answered
  0 bytes for 15 s with the high watermark at 3154+): no later marker of that shard is ever
  replayed, their offsets stay pending, OffsetFetch(RequireStable) answers UNSTABLE_OFFSET_COMMIT
  forever, and the Java consumers of the group time out in ``committed()``/``position()``.
"""

from __future__ import annotations

import pytest

from kcoord.protocol import storage_messages as sm
from kcoord.protocol.records import EndTxnMarker
from support.broker import TansuBroker
from tests.integration.test_storage_kafka import begin_transaction, make_storage, new_topic, offset, request

pytestmark = pytest.mark.integration

BATCHES = 3000  # written one by one before the transactions


async def test_follow_returns_each_marker_once_it_is_written(tansu: TansuBroker) -> None:
    topic = new_topic()
    storage = make_storage(tansu, topic)
    await storage.open(1)
    log = storage.shard_log(0)
    try:
        # a partition of some size (a few minutes of a busy shard): tansu's empty answers come with it
        for n in range(BATCHES):
            await log.append([offset("g", 1, n)])
        assert [r for entry in [e async for e in log.read()] for r in entry][-1:] == [
            offset("g", 1, BATCHES - 1)
        ]
        missed = []
        for n in range(30):
            txn_id = f"{topic}-{n}"
            pid, epoch = await begin_transaction(storage, topic, txn_id, [offset("g", 0, n)])
            ended = await request(storage, sm.EndTxnRequest(transactional_id=txn_id, producer_id=pid,
                                                            producer_epoch=epoch, committed=True))  # fmt: skip
            assert ended.error_code == 0  # type: ignore[attr-defined]
            # EndTxn answered: the marker is in the partition (a fetch with a longer wait finds it)
            markers = await log.follow()
            if markers != [EndTxnMarker(pid, epoch, True)]:
                missed.append((n, markers))
                markers += await log.follow() + await log.follow()  # catch up before the next round
        assert not missed, (
            f"follow() missed the marker just written in {len(missed)} of 30 rounds: {missed[:5]}"
        )
    finally:
        await storage.close()
