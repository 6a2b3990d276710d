"""The analytics reader's read-committed rule on hand-made batches: a transaction's records are
given out at its commit marker and dropped at its abort marker, wherever the fetches split the log
(Kafka's group coordinator replays ``__consumer_offsets`` so: an aborted TxnOffsetCommit is no commit)."""

from __future__ import annotations

from kcoord.analytics.kafka_io import Row, take_committed
from kcoord.protocol.record_batch import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    decode_batches,
    encode_batch,
    encode_control_batch,
)


def log() -> bytes:
    """offset 0: plain; 1-2: txn of producer 7; 3: txn of producer 8; 4: plain; 5: commit 7;
    6: abort 8; 7: txn of producer 8, never ended."""
    return b"".join([
        encode_batch([(b"k0", b"plain")], timestamp=1, base_offset=0),
        encode_batch([(b"k1", b"a"), (b"k2", b"b")], timestamp=2, base_offset=1, producer_id=7, producer_epoch=0,
                     transactional=True),
        encode_batch([(b"k3", b"aborted")], timestamp=3, base_offset=3, producer_id=8, producer_epoch=0,
                     transactional=True),
        encode_batch([(b"k4", b"plain")], timestamp=4, base_offset=4),
        encode_control_batch(CONTROL_COMMIT, timestamp=5, producer_id=7, producer_epoch=0, base_offset=5),
        encode_control_batch(CONTROL_ABORT, timestamp=6, producer_id=8, producer_epoch=0, base_offset=6),
        encode_batch([(b"k7", b"open")], timestamp=7, base_offset=7, producer_id=8, producer_epoch=0,
                     transactional=True),
    ])  # fmt: skip


def test_committed_given_out_at_the_marker_aborted_and_open_left_out() -> None:
    queue: list[Row] = []
    open_txns: dict[int, list[Row]] = {}
    assert take_committed(decode_batches(log()), 0, None, queue, open_txns) == 8
    assert [(o, k) for o, _, k, _ in queue] == [(0, b"k0"), (4, b"k4"), (1, b"k1"), (2, b"k2")]
    assert list(open_txns) == [8]  # still open at the end of the read


def test_the_same_across_fetches_that_split_the_log() -> None:
    batches = decode_batches(log())
    queue: list[Row] = []
    open_txns: dict[int, list[Row]] = {}
    offset = 0
    for i in range(len(batches)):  # one batch per fetch
        offset = take_committed(batches[i : i + 1], offset, None, queue, open_txns)
    assert offset == 8
    assert sorted(k for _, _, k, _ in queue) == [b"k0", b"k1", b"k2", b"k4"]
