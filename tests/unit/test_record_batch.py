"""RecordBatch v2 codec: round trips, golden bytes cross-checked with kafka-python, CRC, control batches."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kcoord.protocol import record_batch as rb
from kcoord.protocol.codec import c_encode_records
from kcoord.protocol.primitives import CodecError

TS = 1_767_225_600_000  # 2026-01-01T00:00:00Z

# Two records, producer id 1000 epoch 3 base sequence 7, partition leader epoch 0, no compression.
GOLDEN = bytes.fromhex(
    "0000000000000000"  # base offset
    "0000004f"  # batch length
    "00000000"  # partition leader epoch
    "02"  # magic
    "dceea405"  # crc32c
    "0000"  # attributes
    "00000001"  # last offset delta
    "0000019b76daa800"  # base timestamp
    "0000019b76daa800"  # max timestamp
    "00000000000003e8"  # producer id
    "0003"  # producer epoch
    "00000007"  # base sequence
    "00000002"  # record count
    "24"
    "00"
    "00"
    "00"
    "0a"
    "00016b6579"
    "0e"
    "000376616c7565"
    "00"  # record 0: key, value
    "14"
    "00"
    "00"
    "02"
    "08"
    "00016b32"
    "01"
    "00"  # record 1: key, null value (tombstone)
)
GOLDEN_RECORDS = [(b"\x00\x01key", b"\x00\x03value"), (b"\x00\x01k2", None)]


def encode_golden(**overrides: int) -> bytes:
    kw = dict(timestamp=TS, producer_id=1000, producer_epoch=3, base_sequence=7, partition_leader_epoch=0)
    kw.update(overrides)
    return rb.encode_batch(GOLDEN_RECORDS, **kw)


def test_golden_bytes() -> None:
    assert encode_golden() == GOLDEN


def test_golden_matches_kafka_python_builder() -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=1000,
        producer_epoch=3,
        base_sequence=7,
        batch_size=1 << 20,
    )
    for i, (k, v) in enumerate(GOLDEN_RECORDS):
        builder.append(i, TS, k, v, [])
    assert bytes(builder.build()) == GOLDEN


def test_kafka_python_decodes_ours() -> None:
    batch = DefaultRecordBatch(encode_golden(partition_leader_epoch=-1))
    assert batch.validate_crc()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1000, 3, 7)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in batch] == [
        (0, TS, b"\x00\x01key", b"\x00\x03value"),
        (1, TS, b"\x00\x01k2", None),
    ]


def test_round_trip() -> None:
    records = [(os.urandom(i % 7 + 2), None if i % 5 == 0 else os.urandom(i * 13 % 300)) for i in range(200)]
    data = rb.encode_batch(
        records, timestamp=TS, base_offset=42, producer_id=9, producer_epoch=1, base_sequence=100
    )
    (batch,) = rb.decode_batches(data)
    assert batch.base_offset == 42 and batch.last_offset == 241 and batch.next_offset == 242
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 1, 100)
    assert not batch.is_control and not batch.is_transactional
    assert [(r.key, r.value) for r in batch.records] == records
    assert [r.offset for r in batch.records] == list(range(42, 242))


def test_gzip_round_trip_and_kafka_python_gzip() -> None:
    records = [(b"key%d" % i, b"value" * 50) for i in range(100)]
    data = rb.encode_batch(records, timestamp=TS, compression=rb.COMPRESSION_GZIP)
    (batch,) = rb.decode_batches(data)
    assert batch.compression == rb.COMPRESSION_GZIP
    assert [(r.key, r.value) for r in batch.records] == records
    assert [(r.key, r.value) for r in DefaultRecordBatch(data)] == records

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=1,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, (k, v) in enumerate(records):
        builder.append(i, TS + i, k, v, [("h", b"x")])
    (theirs,) = rb.decode_batches(bytes(builder.build()))
    assert theirs.compression == rb.COMPRESSION_GZIP
    assert [(r.key, r.value, r.timestamp, r.headers) for r in theirs.records] == [
        (k, v, TS + i, (("h", b"x"),)) for i, (k, v) in enumerate(records)
    ]


def test_corrupt_crc_is_an_error() -> None:
    data = bytearray(GOLDEN)
    data[-3] ^= 0x01  # inside record 1's key
    with pytest.raises(CodecError, match="CRC-32C"):
        rb.decode_batches(bytes(data))
    assert rb.decode_batches(bytes(data), verify_crc=False)  # the records still parse; only the check failed


def test_bad_magic_is_an_error() -> None:
    data = bytearray(GOLDEN)
    data[16] = 1
    with pytest.raises(CodecError, match="magic"):
        rb.decode_batches(bytes(data))


def test_trailing_partial_batch_is_ignored() -> None:
    second = rb.encode_batch([(b"k", b"v")], timestamp=TS, base_offset=2)
    batches = rb.decode_batches(GOLDEN + second[:-5])
    assert [b.base_offset for b in batches] == [0]
    assert [b.base_offset for b in rb.decode_batches(GOLDEN + second)] == [0, 2]


def test_control_batches_are_recognised_and_skipped() -> None:
    data = rb.encode_batch(
        [(b"k", b"v")], timestamp=TS, producer_id=5, producer_epoch=0, base_sequence=0, transactional=True
    )
    commit = rb.encode_control_batch(
        rb.CONTROL_COMMIT, timestamp=TS, producer_id=5, producer_epoch=0, base_offset=1
    )
    abort = rb.encode_control_batch(
        rb.CONTROL_ABORT, timestamp=TS, producer_id=6, producer_epoch=0, base_offset=2
    )
    batches = rb.decode_batches(data + commit + abort)
    assert [b.is_control for b in batches] == [False, True, True]
    assert all(b.is_transactional for b in batches)
    assert [b.control_type() for b in batches] == [None, rb.CONTROL_COMMIT, rb.CONTROL_ABORT]
    assert [(r.key, r.value) for r in rb.iter_records(batches)] == [(b"k", b"v")]
    # kafka-python agrees on the control flag
    assert DefaultRecordBatch(commit).is_control_batch


def test_unsupported_compression_names_the_codec() -> None:
    data = bytearray(rb.encode_batch([(b"k", b"v")], timestamp=TS))
    struct.pack_into(">h", data, 21, rb.COMPRESSION_LZ4)
    struct.pack_into(">I", data, 17, rb.crc32c(bytes(data[21:])))
    try:
        import lz4.frame  # noqa: F401
    except ImportError:
        with pytest.raises(rb.UnsupportedCompression, match="lz4"):
            rb.decode_batches(bytes(data))
    else:  # the library is there: the bytes are not lz4 frames, so decoding fails some other way
        with pytest.raises(Exception):  # noqa: B017
            rb.decode_batches(bytes(data))


def test_crc32c_known_vector_and_fallback() -> None:
    assert rb.crc32c(b"123456789") == 0xE3069283
    assert rb.crc32c_py(b"123456789") == 0xE3069283
    blob = os.urandom(1000)
    assert rb.crc32c(blob) == rb.crc32c_py(blob)


def test_empty_batch_is_refused() -> None:
    with pytest.raises(ValueError):
        rb.encode_batch([], timestamp=TS)


def test_random_batches_from_kafka_python_decode_exactly() -> None:
    """Exercise every varint width (one-byte fast paths and the general fallback) and headers."""
    import random

    rng = random.Random(4)
    for _ in range(60):
        records = [
            (
                None if rng.random() < 0.05 else os.urandom(rng.choice([0, 1, 63, 64, 200, 9000])),
                None if rng.random() < 0.1 else os.urandom(rng.choice([0, 10, 63, 64, 5000, 20000])),
            )
            for _ in range(rng.randint(1, 200))
        ]
        stamps = [TS + rng.choice([0, 1, 100, 10**6]) for _ in records]
        headers = [[] if rng.random() < 0.8 else [("h", b"v"), ("n", None)] for _ in records]
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=0,
            is_transactional=0,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 26,
        )
        for i, (k, v) in enumerate(records):
            builder.append(i, stamps[i], k, v, headers[i])
        (batch,) = rb.decode_batches(bytes(builder.build()))
        assert [(r.key, r.value, r.timestamp, r.headers) for r in batch.records] == [
            (k, v, stamps[i], tuple(headers[i])) for i, (k, v) in enumerate(records)
        ]
        (ours,) = rb.decode_batches(rb.encode_batch(records, timestamp=TS))
        assert [(r.key, r.value) for r in ours.records] == records


# -- the records section in C (_cdecode.encode_records) against the Python encoder ----------------------

needs_c_records = pytest.mark.skipif(
    c_encode_records is None,
    reason="kcoord.protocol._cdecode was not built (no C compiler at install time) or KCOORD_PURE_PYTHON is set",
)

# Lengths on both sides of the one- to two-byte (128) and two- to three-byte (16,384) varint steps.
_field = (
    st.none()
    | st.binary(max_size=200)
    | st.tuples(st.integers(16_380, 16_390), st.integers(0, 255)).map(lambda t: bytes([t[1]]) * t[0])
)


@needs_c_records
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_field, _field), max_size=40))
def test_c_records_section_is_byte_for_byte_the_python_one(
    pairs: list[tuple[bytes | None, bytes | None]],
) -> None:
    assert c_encode_records is not None
    assert c_encode_records(pairs) == rb.py_encode_records(pairs)
    assert rb.encode_records(pairs) == rb.py_encode_records(pairs)


@needs_c_records
def test_c_records_section_leaves_other_shapes_to_python() -> None:
    assert c_encode_records is not None
    pair = (b"k", b"v")
    for other in [(pair,), [[b"k", b"v"]], [(bytearray(b"k"), b"v")], [(b"k", memoryview(b"v"))], [(b"k",)]]:
        assert c_encode_records(other) is None
    # What the Python encoder takes, encode_records still takes, with the same bytes.
    assert rb.encode_records((pair,)) == rb.encode_records([pair]) == rb.py_encode_records([pair])
    assert rb.encode_records([(bytearray(b"k"), b"v")]) == rb.py_encode_records([pair])


def test_records_section_of_many_records_has_multi_byte_offset_deltas() -> None:
    pairs: list[tuple[bytes | None, bytes | None]] = [(b"k%d" % i, None) for i in range(300)]
    body = rb.encode_batch(pairs, timestamp=TS)
    assert [(r.key, r.value) for r in rb.decode_batches(body)[0].records] == pairs
