"""The offset commit record's own encoder writes exactly what the generic encoders write."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.coordinator.core.records import offset_commit_record, offset_tombstone
from kcoord.protocol.primitives import CodecError
from kcoord.protocol.records import (
    OffsetCommitKey,
    Record,
    decode_record,
    encode_key,
    encode_record,
    encode_value,
)


def generic(record: Record) -> tuple[bytes, bytes | None]:
    return encode_key(record.key), encode_value(record.value)


CASES = [
    offset_commit_record("g", "t", 0, offset=0, leader_epoch=-1, metadata="", commit_timestamp=0),
    offset_commit_record(
        "group-1",
        "topic-a",
        7,
        offset=2**63 - 1,
        leader_epoch=2**31 - 1,
        metadata="m" * 4096,
        commit_timestamp=1_700_000_000_123,
    ),
    offset_commit_record(
        "grüppe-é", "tøpic-日本", 2**31 - 1, offset=-1, leader_epoch=-1, metadata="mëta", commit_timestamp=-1
    ),
    offset_commit_record(
        "g", "t", 1, offset=5, leader_epoch=3, metadata="x", commit_timestamp=9, expire_timestamp=99
    ),
    offset_tombstone("g", "t", 3),
    offset_tombstone("grüppe", "t" * 300, 0),
    Record(OffsetCommitKey(group="", topic="", partition=0), None),
]


@pytest.mark.parametrize("record", CASES, ids=range(len(CASES)))
def test_same_bytes_as_the_generic_encoders(record: Record) -> None:
    assert encode_record(record) == generic(record)
    if record.value is None or record.value.expire_timestamp == -1:  # v1 has no leader epoch
        key, value = encode_record(record)
        assert decode_record(key, value) == record


def test_out_of_range_numbers_are_refused_as_by_the_generic_encoder() -> None:
    record = offset_commit_record("g", "t", 2**31, offset=0, leader_epoch=-1, metadata="", commit_timestamp=0)
    with pytest.raises(CodecError):
        encode_record(record)
    record = offset_commit_record("g", "t", 0, offset=2**63, leader_epoch=-1, metadata="", commit_timestamp=0)
    with pytest.raises(CodecError):
        encode_record(record)


def test_too_long_strings_are_refused_as_by_the_generic_encoder() -> None:
    record = offset_commit_record(
        "g" * 40_000, "t", 0, offset=0, leader_epoch=-1, metadata="", commit_timestamp=0
    )
    with pytest.raises(CodecError):
        generic(record)
    with pytest.raises(CodecError):
        encode_record(record)


_text = st.text(max_size=40) | st.text(alphabet=st.characters(max_codepoint=127), max_size=40)
_int32 = st.integers(-(2**31), 2**31 - 1) | st.integers(2**31, 2**32)
_int64 = st.integers(-(2**63), 2**63 - 1) | st.just(2**63)


@settings(max_examples=400, deadline=None)
@given(
    group=_text,
    topic=_text,
    partition=_int32,
    offset=_int64,
    leader_epoch=_int32,
    metadata=_text | st.integers(32_760, 32_775).map(lambda n: "m" * n),
    commit_timestamp=_int64,
    tombstone=st.booleans(),
)
def test_any_offset_commit_record_encodes_as_the_generic_encoders_do(
    group: str,
    topic: str,
    partition: int,
    offset: int,
    leader_epoch: int,
    metadata: str,
    commit_timestamp: int,
    tombstone: bool,
) -> None:
    """In C where the extension is built (ASCII strings), else in Python: the same bytes, or the same
    refusal, as the generic encoders."""
    if tombstone:
        record = offset_tombstone(group, topic, partition)
    else:
        record = offset_commit_record(
            group, topic, partition, offset=offset, leader_epoch=leader_epoch, metadata=metadata,
            commit_timestamp=commit_timestamp,
        )  # fmt: skip
    try:
        expected = generic(record)
    except CodecError:
        with pytest.raises(CodecError):
            encode_record(record)
        return
    assert encode_record(record) == expected
