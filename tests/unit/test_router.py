"""Group → shard placement must match Kafka's partitionFor exactly (golden values computed with Java 17).

The router uses the C versions of the hash and the partition (protocol/_cdecode.c) where the
extension is built, the pure-Python ones otherwise: both are checked against the same values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcoord.coordinator.runtime.router import (
    java_string_hash,
    py_java_string_hash,
    py_shard_for_group,
    shard_for_group,
)
from kcoord.protocol.codec import c_group_partition, c_java_string_hash

# (group id, String.hashCode(), Utils.abs(hash) % 50) printed by a Java 17 program.
GOLDEN = [
    ("", 0, 0),
    ("hello", 99162322, 22),
    ("my-group", -1906497762, 12),
    ("consumer-group-1", 147483020, 20),
    ("grüppe", -1233264812, 12),
    ("😀emoji", -1233692477, 27),  # a surrogate pair hashes as two UTF-16 code units
    ("polygenelubricants", -(2**31), 0),  # Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0
    ("GydZG_", -(2**31), 0),
]


@pytest.mark.parametrize(("group", "hash_code", "partition"), GOLDEN)
def test_matches_java(group: str, hash_code: int, partition: int) -> None:
    assert java_string_hash(group) == hash_code
    assert shard_for_group(group, 50) == partition
    assert py_java_string_hash(group) == hash_code
    assert py_shard_for_group(group, 50) == partition


needs_c = pytest.mark.skipif(
    c_java_string_hash is None,
    reason="the C extension (protocol/_cdecode.c) is not built, or KCOORD_PURE_PYTHON is set",
)


@needs_c
def test_the_router_uses_the_c_versions_where_built() -> None:
    assert java_string_hash is c_java_string_hash
    assert shard_for_group is c_group_partition


@needs_c
@given(st.text(max_size=300), st.integers(min_value=1, max_value=1000))
def test_c_and_python_agree(group: str, partitions: int) -> None:
    assert c_java_string_hash is not None and c_group_partition is not None
    assert c_java_string_hash(group) == py_java_string_hash(group) == utf16_hash(group)
    assert c_group_partition(group, partitions) == py_shard_for_group(group, partitions)


@needs_c
@pytest.mark.parametrize(
    "group",
    [
        "\U0001f600" * 3 + "x",  # non-BMP only: surrogate pairs
        "a\u00e9\u4e2d\U00010348z",  # 1-, 2- and 4-byte code points in one id
        "\uffff\U00010000\U0010ffff",  # either side of the BMP's end
        "x" * 32_767 + "\u00e9",  # the longest string Kafka's protocol carries
        "\U0001f600" * 16_383,  # a long non-BMP id
    ],
)
def test_c_and_python_agree_on_wide_and_long_ids(group: str) -> None:
    assert c_java_string_hash is not None and c_group_partition is not None
    assert c_java_string_hash(group) == py_java_string_hash(group) == utf16_hash(group)
    assert c_group_partition(group, 50) == py_shard_for_group(group, 50)


@needs_c
def test_c_versions_refuse_what_is_not_a_string_or_no_partitions() -> None:
    assert c_java_string_hash is not None and c_group_partition is not None
    with pytest.raises(TypeError):
        c_java_string_hash(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        c_group_partition(None, 50)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        c_group_partition("g", 0)


def test_single_shard_takes_everything() -> None:
    assert {shard_for_group(f"g{i}", 1) for i in range(100)} == {0}


def utf16_hash(s: str) -> int:
    """String.hashCode spelled out over UTF-16 code units: the reference for every fast path."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@given(st.text(max_size=200))
def test_every_path_agrees_with_the_utf16_definition(group: str) -> None:
    assert java_string_hash(group) == utf16_hash(group)
    assert py_java_string_hash(group) == utf16_hash(group)


def test_a_longest_group_id_hashes_like_any_other() -> None:
    group = "x" * 32_767 + "é"  # the longest string Kafka's protocol carries
    assert java_string_hash(group) == utf16_hash(group)
    assert py_java_string_hash(group) == utf16_hash(group)
