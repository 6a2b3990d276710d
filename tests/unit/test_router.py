"""Group → shard placement must match Kafka's partitionFor exactly (golden values computed with Java 17)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcoord.coordinator.runtime.router import java_string_hash, shard_for_group

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


def test_a_longest_group_id_hashes_like_any_other() -> None:
    group = "x" * 32_767 + "é"  # the longest string Kafka's protocol carries
    assert java_string_hash(group) == utf16_hash(group)
