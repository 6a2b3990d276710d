"""Malformed input never gets past the codec as anything but :class:`CodecError`.

The server decodes bytes from the network; whatever a client sends, decoding must either give a
message or raise ``CodecError`` (which closes the connection) — never ``IndexError``, never a
hang, never a multi-gigabyte allocation because a length prefix said so. These tests drive every
message and version the code generator produces:

- every strict prefix of a valid encoding raises ``CodecError``, through ``decode`` and through
  ``decode_from`` with an ``end`` inside a larger buffer (a message embedded in a frame);
- random garbage and randomly mutated valid encodings decode or raise ``CodecError``; what
  decodes can be encoded again;
- absurd length prefixes (2^31-1 elements, 4 GiB strings) fail fast without allocating;
- trailing bytes, invalid UTF-8, null non-nullable fields, overlong varints and tagged fields
  that do not match their declared size are rejected.
"""

from __future__ import annotations

import random
import struct
import time
import tracemalloc
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.protocol import messages
from kcoord.protocol.codec import Message, Struct
from kcoord.protocol.primitives import CodecError
from kcoord.protocol.schema import Field
from tests.unit.test_codec_roundtrip import ALL_CASES, INT_RANGES, case_id

UNKNOWN_TAG = 10_000  # far above any tag Kafka's schemas use


def _rich_scalar(f: Field, owner: type[Message], version: int, flexible: bool, salt: int) -> Any:
    t = f.type
    if t in INT_RANGES:
        value = 7 + salt
        return value if value != f.default else value + 1
    if t == "bool":
        return f.default is not True
    if t == "float64":
        return 1.5 + salt
    if t == "string":
        return f"s{salt}-✓"
    if t in ("bytes", "records"):
        return bytes([1, 2, 3, salt & 0xFF])
    if t == "uuid":
        return uuid.UUID(int=0x0123456789ABCDEF + salt)
    return rich_struct(getattr(owner, t), f.fields, owner, version, flexible)


def rich_struct(
    cls: type[Struct], fields: list[Field], owner: type[Message], version: int, flexible: bool
) -> Any:
    """An instance with every field of ``version`` set to a non-default, non-null value.

    Arrays hold two elements, tagged fields are all present and flexible structs carry one
    unknown tagged field, so the encoding exercises every branch of the decoder for that version.
    """
    kwargs: dict[str, Any] = {}
    for f in fields:
        if not f.present_in(version):
            continue
        if f.is_array:
            kwargs[f.name] = [_rich_scalar(f, owner, version, flexible, salt) for salt in (0, 1)]
        else:
            kwargs[f.name] = _rich_scalar(f, owner, version, flexible, 0)
    if flexible:
        kwargs["unknown_tagged"] = [(UNKNOWN_TAG, b"\x00\x01")]
    return cls(**kwargs)


def rich_message(cls: type[Message], version: int) -> Any:
    return rich_struct(cls, cls.SCHEMA.fields, cls, version, version in cls.SCHEMA.flexible)


def _samples(cls: type[Message], version: int) -> list[bytes]:
    return [rich_message(cls, version).encode(version), cls().encode(version)]


def _decodes_or_codec_error(cls: type[Message], data: bytes, version: int) -> Any:
    """Decode; a CodecError is fine, any other exception fails the test. Returns the message or None."""
    try:
        return cls.decode(data, version)
    except CodecError:
        return None


# -- truncation --------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_every_truncation_raises_codec_error(case: tuple[type[Message], int]) -> None:
    """Cutting a valid encoding anywhere before its end is a CodecError, never a partial message."""
    cls, version = case
    for wire in _samples(cls, version):
        assert cls.decode(wire, version).encode(version) == wire
        for cut in range(len(wire)):
            with pytest.raises(CodecError):
                cls.decode(wire[:cut], version)


@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_decode_from_respects_end_inside_a_larger_buffer(case: tuple[type[Message], int]) -> None:
    """With the message's bytes still in the buffer after ``end``, decoding must not read them.

    This is how a message sits inside a frame; before the fix in ``Message.decode_from``,
    fixed-size fields were read past ``end`` and the message "decoded" from the next bytes.
    """
    cls, version = case
    wire = rich_message(cls, version).encode(version)
    buf = b"\x00\x00" + wire + b"\x00" * 16
    for cut in range(len(wire)):
        with pytest.raises(CodecError):
            cls.decode_from(buf, 2, version, 2 + cut)
    msg, pos = cls.decode_from(buf, 2, version, 2 + len(wire))
    assert pos == 2 + len(wire)


def test_trailing_bytes_are_rejected() -> None:
    """decode() wants exactly one message: a byte left over means the framing or the version is wrong."""
    for cls, version in ALL_CASES:
        wire = cls().encode(version)
        with pytest.raises(CodecError, match="trailing"):
            cls.decode(wire + b"\x00", version)


# -- garbage and mutations ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_mutated_encodings_decode_or_raise_codec_error(case: tuple[type[Message], int]) -> None:
    """Flip, overwrite, insert and delete bytes of a rich encoding (seeded, so reproducible).

    Mutations of a valid message reach far deeper into the decoder than uniform noise does.
    Whatever still decodes must encode again: the decoder never builds an unencodable object.
    """
    cls, version = case
    rng = random.Random(f"{cls.__name__}/{version}")
    wire = rich_message(cls, version).encode(version)
    for _ in range(60):
        data = bytearray(wire)
        for _ in range(rng.randint(1, 3)):
            op = rng.randrange(4)
            i = rng.randrange(len(data) + 1)
            if op == 0 and i < len(data):
                data[i] ^= 1 << rng.randrange(8)
            elif op == 1:
                data[i : i + 4] = rng.choice(
                    [b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x80\x80\x80", b"\x00"]
                )
            elif op == 2:
                data[i:i] = bytes([rng.randrange(256)])
            else:
                del data[i : i + rng.randint(1, 4)]
        decoded = _decodes_or_codec_error(cls, bytes(data), version)
        if decoded is not None:
            decoded.encode(version)


SERVED_CASES = [
    (cls, v)
    for api_key, (lo, hi) in messages.KCOORD_VERSIONS.items()
    for cls in (messages.REQUESTS[api_key], messages.RESPONSES[api_key])
    for v in range(lo, hi + 1)
]


@pytest.mark.parametrize("case", SERVED_CASES, ids=case_id)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=96))
def test_random_bytes_decode_or_raise_codec_error(case: tuple[type[Message], int], data: bytes) -> None:
    """Uniform noise (hypothesis also tries all-zero, all-0xff and short inputs) for the APIs kcoord serves."""
    cls, version = case
    decoded = _decodes_or_codec_error(cls, data, version)
    if decoded is not None:
        decoded.encode(version)


# -- absurd lengths --------------------------------------------------------------------------------------

# Each frame declares a length far beyond its own size at its first variable-length field.
HUGE_LENGTH_FRAMES: list[tuple[str, type[Message], int, bytes]] = [
    ("classic array 2^31-1", messages.DescribeGroupsRequest, 0, b"\x7f\xff\xff\xff"),
    (
        "classic array 2^31-1 of int32",
        messages.ConsumerProtocolSubscription,
        1,
        b"\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x01\x00\x01t\x7f\xff\xff\xff",
    ),
    ("classic string 32767", messages.HeartbeatRequest, 0, b"\x7f\xff" + b"g" * 10),
    ("classic bytes 2^31-1", messages.SyncGroupResponse, 0, b"\x00\x00\x7f\xff\xff\xff" + b"a" * 10),
    ("compact array 2^32-2", messages.DescribeGroupsRequest, 5, b"\xff\xff\xff\xff\x0f\x00"),
    ("compact string 2^32-2", messages.HeartbeatRequest, 4, b"\xff\xff\xff\xff\x0f" + b"g" * 10),
    ("compact bytes 2^32-2", messages.SyncGroupResponse, 4, b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\x0f"),
    (
        "tagged field count 2^32-1",
        messages.HeartbeatResponse,
        4,
        b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\x0f",
    ),
    (
        "tagged field size 2^32-1",
        messages.HeartbeatResponse,
        4,
        b"\x00\x00\x00\x00\x00\x00\x01\x05\xff\xff\xff\xff\x0f",
    ),
    (
        "header tagged field size",
        messages.RequestHeader,
        2,
        b"\x00\x0c\x00\x04\x00\x00\x00\x01\xff\xff\x01\x07\xff\xff\xff\x7f",
    ),
]


@pytest.mark.parametrize(
    ("label", "cls", "version", "data"), HUGE_LENGTH_FRAMES, ids=[f[0] for f in HUGE_LENGTH_FRAMES]
)
def test_huge_length_prefix_fails_fast_without_allocating(
    label: str, cls: type[Message], version: int, data: bytes
) -> None:
    """A length the frame cannot hold is refused before anything of that size is allocated."""
    tracemalloc.start()
    try:
        started = time.perf_counter()
        with pytest.raises(CodecError):
            cls.decode(data, version)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 0.05, f"{label}: took {elapsed:.3f}s"
    assert peak < 256 * 1024, f"{label}: peak allocation {peak} bytes"


@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_length_bombs_at_every_offset(case: tuple[type[Message], int]) -> None:
    """Overwrite each offset of a rich encoding with a maximal int32 / 5-byte varint length.

    Wherever that lands on a length prefix (array count, string, bytes, tag count or size),
    decoding must refuse it quickly; elsewhere it is just garbage.
    """
    cls, version = case
    wire = rich_message(cls, version).encode(version)
    bombs = [b"\x7f\xff\xff\xff", b"\x7f\xff"]
    if version in cls.SCHEMA.flexible:
        bombs.append(b"\xff\xff\xff\xff\x0f")
    started = time.perf_counter()
    for i in range(len(wire)):
        for bomb in bombs:
            data = wire[:i] + bomb + wire[i + len(bomb) :]
            _decodes_or_codec_error(cls, data, version)
    assert time.perf_counter() - started < 10


# -- specific malformations ------------------------------------------------------------------------------


def test_invalid_utf8_is_a_codec_error() -> None:
    """Strings must be UTF-8; a bad byte sequence is malformed input, not a UnicodeDecodeError."""
    data = b"\x00\x02\xc3\x28" + b"\x00\x00\x00\x01" + b"\x00\x00"
    with pytest.raises(CodecError):
        messages.HeartbeatRequest.decode(data, 0)


def test_null_in_non_nullable_fields_is_a_codec_error() -> None:
    """A -1 length where the schema does not allow null: strings, bytes and arrays, classic and compact."""
    cases: list[tuple[type[Message], int, bytes]] = [
        (messages.HeartbeatRequest, 0, b"\xff\xff\x00\x00\x00\x01\x00\x00"),  # group id
        (messages.HeartbeatRequest, 4, b"\x00\x00\x00\x00\x01\x01\x00\x00"),  # compact group id
        (messages.SyncGroupResponse, 0, b"\x00\x00\xff\xff\xff\xff"),  # assignment bytes
        (messages.DescribeGroupsRequest, 0, b"\xff\xff\xff\xff"),  # groups array
        (messages.DescribeGroupsRequest, 5, b"\x00\x00\x00"),  # compact groups array
    ]
    for cls, version, data in cases:
        with pytest.raises(CodecError, match="null"):
            cls.decode(data, version)


def test_overlong_varint_is_a_codec_error() -> None:
    """Unsigned varints carry at most 32 bits (5 bytes); a sixth continuation byte is malformed."""
    data = b"\x80\x80\x80\x80\x80\x01" + b"\x00\x00\x00\x01\x01\x01\x00"
    with pytest.raises(CodecError, match="varint"):
        messages.HeartbeatRequest.decode(data, 4)


def test_known_tagged_field_must_match_its_declared_size() -> None:
    """A known tagged field that overruns or underfills its size is rejected (both mean misparse).

    ApiVersionsResponse v3: error, empty api keys, throttle time, then tag 1 (an int64) declared
    with 4 and with 9 bytes. Before the fix the decoder silently read the int64 past the tag and
    went on from the declared end.
    """
    head = b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00"
    good = head + b"\x01\x01\x08" + struct.pack(">q", 42)
    assert messages.ApiVersionsResponse.decode(good, 3).finalized_features_epoch == 42
    short = head + b"\x01\x01\x04" + struct.pack(">q", 42)
    long = head + b"\x01\x01\x09" + struct.pack(">q", 42) + b"\x00"
    for data in (short, long):
        with pytest.raises(CodecError):
            messages.ApiVersionsResponse.decode(data, 3)


def test_unknown_version_is_a_codec_error() -> None:
    with pytest.raises(CodecError):
        messages.HeartbeatRequest.decode(b"", 99)
    with pytest.raises(CodecError):
        messages.HeartbeatRequest().encode(99)


def test_unencodable_values_are_codec_errors() -> None:
    """Out-of-range integers and wrongly typed values fail the encode with CodecError."""
    with pytest.raises(CodecError):
        messages.HeartbeatRequest(generation_id=2**31).encode(0)
    with pytest.raises(CodecError):
        messages.HeartbeatRequest(group_id=5).encode(4)  # type: ignore[arg-type]
    with pytest.raises(CodecError):
        messages.HeartbeatRequest(group_id="g" * 40_000).encode(0)  # int16 string length


@pytest.mark.parametrize("backend", ["c", "python"])
def test_a_compact_string_longer_than_0x7fff_bytes_is_refused_as_kafka_refuses_it(backend: str) -> None:
    """Kafka's generated readers allow a string field at most 0x7fff UTF-8 bytes, whatever its
    encoding ("string field groupId had invalid length 32768"): a compact length can say more, and
    such a request is a parse error (the broker closes the connection). Accepting one let a client
    put a group id into kcoord that its int16-length records cannot hold."""
    cls = messages.ConsumerGroupHeartbeatRequest
    if backend == "c" and not cls._C_DECODERS:
        pytest.skip("the C extension is not built here (no compiler, or KCOORD_PURE_PYTHON=1)")
    saved = cls._DECODERS
    cls._DECODERS = cls._C_DECODERS if backend == "c" else cls._PY_DECODERS
    try:
        at_limit = cls(group_id="g" * 0x7FFF, member_id="é" * (0x7FFF // 2)).encode(1)
        decoded = cls.decode(at_limit, 1)
        assert len(decoded.group_id) == 0x7FFF and len(decoded.member_id.encode()) == 0x7FFE
        for fields, name, length in [
            ({"group_id": "g" * 0x8000}, "GroupId", 0x8000),
            ({"member_id": "é" * 0x4000}, "MemberId", 0x8000),  # 2 bytes a character
            ({"subscribed_topic_names": ["t", "t" * 100_000]}, "SubscribedTopicNames", 100_000),
        ]:
            with pytest.raises(CodecError, match=f"^string {name} had invalid length {length}$"):
                cls.decode(cls(**fields).encode(1), 1)
    finally:
        cls._DECODERS = saved
