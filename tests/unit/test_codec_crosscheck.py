"""Cross-implementation tests: our generated codec against kafka-python 3.x's generic one.

Both read the same Kafka JSON specs (kafka-python ships identical copies), but the codecs are
written independently: kafka-python walks a field tree (``kafka.protocol.schemas.fields``) and
compiles its own encoders. For every (message, version) both implement, random messages are

1. encoded by us and decoded by kafka-python, then compared field by field (unknown tagged
   fields included: kafka-python keeps them in ``unknown_tags`` as ``{"_<tag>": bytes}``);
2. converted to kafka-python objects, encoded by kafka-python and decoded by us, and the two
   encodings compared byte for byte.

Fields are matched by position in the spec (both keep the spec's order), which also covers the
fields kafka-python renames. Representation differences mapped here, none of them wire
disagreements:

- kafka-python patches ``*AuthorizedOperations`` int32 fields into a ``bitfield`` (a set of bit
  numbers, ``None`` for the ``INT32_MIN`` "not requested" sentinel);
- its default for a tagged struct is ``None`` and for a tagged uuid ``None``; ours are the
  empty struct and the zero uuid (as in Kafka's Java classes). Either way the field is omitted;
- ``bytes`` may come back as ``memoryview``.

Known kafka-python limitations, kept out of the generated inputs with the reason:

- it decodes the value of a tagged field with "tagged=None", i.e. it asserts that a struct
  *inside* a tagged field has no tagged fields of its own (``TaggedFields.decode_empty``), so
  unknown tags are not generated inside tagged fields for the kafka-python direction;
- its encoder drops ``unknown_tags``, so byte equality is checked on messages without them;
- ``ApiVersionsResponse.decode`` re-reads the body as v0 whenever ``error_code != 0`` (Kafka's
  UNSUPPORTED_VERSION fallback), so error responses are compared at v0 only.

No disagreement about the wire format itself was found for any API/version.
"""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import cluster as kp_cluster
from kafka.protocol.admin import configs as kp_configs
from kafka.protocol.admin import groups as kp_groups
from kafka.protocol.admin import topics as kp_topics
from kafka.protocol.api_data import ApiData
from kafka.protocol.api_header import RequestHeader as KpRequestHeader
from kafka.protocol.api_header import ResponseHeader as KpResponseHeader
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import fetch as kp_fetch
from kafka.protocol.consumer import group as kp_group
from kafka.protocol.consumer import metadata as kp_consumer_metadata
from kafka.protocol.consumer import offsets as kp_offsets
from kafka.protocol.metadata import api_versions as kp_api_versions
from kafka.protocol.metadata import find_coordinator as kp_find_coordinator
from kafka.protocol.metadata import metadata as kp_metadata
from kafka.protocol.producer import produce as kp_produce
from kafka.protocol.producer import transaction as kp_transaction

from kcoord.protocol import frames, messages
from kcoord.protocol.codec import ZERO_UUID, Message
from kcoord.protocol.schema import Field
from tests.unit.test_codec_roundtrip import ALL_CASES, case_id, message_strategy

INT32_MIN = -(2**31)


def _kafka_python_classes() -> dict[str, type]:
    found: dict[str, type] = {}
    for mod in (
        kp_group,
        kp_fetch,
        kp_offsets,
        kp_consumer_metadata,
        kp_api_versions,
        kp_find_coordinator,
        kp_metadata,
        kp_groups,
        kp_cluster,
        kp_topics,
        kp_configs,
        kp_produce,
        kp_transaction,
    ):
        for name in dir(mod):
            obj = getattr(mod, name)
            if (
                isinstance(obj, type)
                and issubclass(obj, (ApiMessage, ApiData))
                and obj not in (ApiMessage, ApiData)
            ):
                found[name] = obj
    return found


KP_CLASSES = _kafka_python_classes()
CROSS_CASES = [
    (cls, v)
    for cls, v in ALL_CASES
    if cls.__name__ in KP_CLASSES and v <= KP_CLASSES[cls.__name__].max_version
]


# kafka-python has no KIP-848 messages. Their codec is covered by the round trips
# (test_codec_roundtrip.py) and end to end by librdkafka and the Java consumer (test_kip848_clients.py).
NOT_IN_KAFKA_PYTHON = frozenset(
    {messages.ApiKey.CONSUMER_GROUP_HEARTBEAT, messages.ApiKey.CONSUMER_GROUP_DESCRIBE}
)


def test_kafka_python_covers_every_served_api() -> None:
    """The cross-check is only as good as its coverage: every API/version kcoord serves is in it."""
    covered = {(cls.__name__, v) for cls, v in CROSS_CASES}
    for api_key, (lo, hi) in messages.KCOORD_VERSIONS.items():
        if api_key in NOT_IN_KAFKA_PYTHON:
            assert not any(name.startswith(messages.REQUESTS[api_key].__name__) for name, _ in covered)
            continue
        for cls in (messages.REQUESTS[api_key], messages.RESPONSES[api_key]):
            for v in range(lo, hi + 1):
                assert (cls.__name__, v) in covered


# -- conversions -------------------------------------------------------------------------------------


def _is_bitfield(kf: Any) -> bool:
    return getattr(kf, "_type_str", None) == "bitfield"


def _kp_kwargs(kp_class: type) -> dict[str, Any]:
    # ApiData (the consumer protocol) prefixes an int16 version unless told not to.
    return {"header": False} if issubclass(kp_class, ApiData) else {}


def to_kp(obj: Any, fields: list[Field], kstruct: Any, version: int, data_class: Any) -> Any:
    """Our message → the equivalent kafka-python object (fields absent in ``version`` left out)."""
    kwargs = {
        kf.name: _value_to_kp(getattr(obj, f.name), f, kf, version)
        for f, kf in paired(fields, kstruct, version)
    }
    return data_class(version=version, **kwargs)


def paired(fields: list[Field], kstruct: Any, version: int) -> list[tuple[Field, Any]]:
    """Our fields and kafka-python's, matched by position among those present in ``version``.

    kcoord's specs are newer than kafka-python's: fields were added in versions kafka-python lacks
    (those cases are not generated) and fields of versions neither side serves any more were
    dropped (OffsetCommit's v1 CommitTimestamp, ListOffsets' v0 MaxNumOffsets). Restricted to one
    version both implement, the two lists are the same fields in the same order.
    """
    theirs = [kf for kf in kstruct._fields if kf.min_version <= version <= kf.max_version]
    return list(zip([f for f in fields if f.present_in(version)], theirs, strict=True))


def _value_to_kp(value: Any, f: Field, kf: Any, version: int) -> Any:
    if value is None:
        return None
    if f.is_array:
        if f.is_struct:
            return [to_kp(x, f.fields, kf.array_of, version, kf.data_class) for x in value]
        return list(value)
    if f.is_struct:
        if f.tagged_in(version) and value == type(value)() and not value.unknown_tagged:
            return None  # kafka-python's "absent" for a tagged struct
        return to_kp(value, f.fields, kf, version, kf.data_class)
    if _is_bitfield(kf):
        bits = {i for i in range(32) if (value & 0xFFFFFFFF) >> i & 1}
        return None if bits == {31} else bits
    if f.type == "uuid" and f.tagged_in(version) and value == ZERO_UUID:
        return None  # kafka-python's default; it would write an explicit zero uuid otherwise
    return value


def view(obj: Any, fields: list[Field], version: int) -> tuple[tuple[tuple[str, Any], ...], tuple[Any, ...]]:
    """Our message as ((field, value), ...), (unknown tags)) over the fields present in ``version``."""
    items = tuple(
        (f.name, _view_value(getattr(obj, f.name), f, version)) for f in fields if f.present_in(version)
    )
    unknown = tuple((t, bytes(b)) for t, b in (obj.unknown_tagged or ()))
    return items, unknown


def _view_value(value: Any, f: Field, version: int) -> Any:
    if value is None:
        return None
    if f.is_array:
        return [view(x, f.fields, version) for x in value] if f.is_struct else list(value)
    if f.is_struct:
        if f.tagged_in(version) and value == type(value)() and not value.unknown_tagged:
            return "<absent tagged struct>"
        return view(value, f.fields, version)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def kp_view(
    kobj: Any, fields: list[Field], kstruct: Any, version: int
) -> tuple[tuple[tuple[str, Any], ...], tuple[Any, ...]]:
    """A kafka-python object in the shape :func:`view` gives ours (our field names, our value types)."""
    items = tuple(
        (f.name, _kp_view_value(getattr(kobj, kf.name), f, kf, version))
        for f, kf in paired(fields, kstruct, version)
    )
    unknown = getattr(kobj, "unknown_tags", None) or {}
    return items, tuple(sorted((int(k[1:]), bytes(v)) for k, v in unknown.items()))


def _kp_view_value(value: Any, f: Field, kf: Any, version: int) -> Any:
    if value is None:
        if f.is_struct and not f.is_array and f.tagged_in(version) and version not in f.nullable:
            return "<absent tagged struct>"
        if f.type == "uuid":
            return ZERO_UUID
        if _is_bitfield(kf):
            return INT32_MIN
        return None
    if f.is_array:
        if f.is_struct:
            return [kp_view(x, f.fields, kf.array_of, version) for x in value]
        return [bytes(x) if isinstance(x, memoryview) else x for x in value]
    if f.is_struct:
        return kp_view(value, f.fields, kf, version)
    if _is_bitfield(kf):
        n = sum(1 << b for b in value)
        return n - 2**32 if n >= 2**31 else n
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def strip_unknown_tags(
    obj: Any, fields: list[Field], version: int, everywhere: bool, inside_tagged: bool = False
) -> None:
    """Drop unknown tagged fields inside tagged fields (or everywhere) — see the module docstring."""
    if everywhere or inside_tagged:
        obj.unknown_tagged = None
    for f in fields:
        if not (f.is_struct and f.present_in(version)):
            continue
        value = getattr(obj, f.name)
        if value is None:
            continue
        for item in value if f.is_array else [value]:
            strip_unknown_tags(item, f.fields, version, everywhere, inside_tagged or f.tagged_in(version))


# -- property tests ------------------------------------------------------------------------------------

CROSS_SETTINGS = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("case", CROSS_CASES, ids=case_id)
@CROSS_SETTINGS
@given(data=st.data())
def test_kafka_python_decodes_what_we_encode(case: tuple[type[Message], int], data: st.DataObject) -> None:
    """Our encoding, read by kafka-python, gives the same field values and unknown tags."""
    cls, version = case
    kp_class = KP_CLASSES[cls.__name__]
    msg = data.draw(message_strategy(cls, version))
    strip_unknown_tags(msg, cls.SCHEMA.fields, version, everywhere=False)
    if cls is messages.ApiVersionsResponse and version > 0:
        msg.error_code = 0  # kafka-python reads error responses as v0 (see the module docstring)
    kobj = kp_class.decode(msg.encode(version), version=version, **_kp_kwargs(kp_class))
    assert kp_view(kobj, cls.SCHEMA.fields, kp_class._struct, version) == view(
        msg, cls.SCHEMA.fields, version
    )


@pytest.mark.parametrize("case", CROSS_CASES, ids=case_id)
@CROSS_SETTINGS
@given(data=st.data())
def test_we_decode_what_kafka_python_encodes(case: tuple[type[Message], int], data: st.DataObject) -> None:
    """kafka-python's encoding of the same message is byte-identical to ours and decodes back to it."""
    cls, version = case
    kp_class = KP_CLASSES[cls.__name__]
    msg = data.draw(message_strategy(cls, version, unknown_tags=False))
    kobj = to_kp(msg, cls.SCHEMA.fields, kp_class._struct, version, kp_class)
    theirs = bytes(kobj.encode(version=version, **_kp_kwargs(kp_class)))
    assert theirs == msg.encode(version)
    assert view(cls.decode(theirs, version), cls.SCHEMA.fields, version) == view(
        msg, cls.SCHEMA.fields, version
    )


# -- headers and frames ------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    api_key=st.integers(0, 2**15 - 1),
    api_version=st.integers(0, 2**15 - 1),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    client_id=st.none() | st.text(max_size=20),
    flexible=st.booleans(),
)
def test_request_header_matches_kafka_python(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, flexible: bool
) -> None:
    """Request header v1 (classic) and v2 (flexible, but ClientId keeps its int16 length) agree both ways."""
    version = 2 if flexible else 1
    ours = messages.RequestHeader(
        request_api_key=api_key,
        request_api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    theirs = KpRequestHeader(
        request_api_key=api_key,
        request_api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    wire = ours.encode(version)
    assert bytes(theirs.encode(flexible=flexible)) == wire
    back = KpRequestHeader.decode(io.BytesIO(wire), flexible=flexible)
    assert (back.request_api_key, back.request_api_version, back.correlation_id, back.client_id) == (
        api_key,
        api_version,
        correlation_id,
        client_id,
    )


def test_request_header_v2_unknown_tags_reach_kafka_python() -> None:
    wire = messages.RequestHeader(
        request_api_key=12, correlation_id=3, client_id="c", unknown_tagged=[(4, b"xy")]
    ).encode(2)
    assert KpRequestHeader.decode(io.BytesIO(wire), flexible=True).unknown_tags == {"_4": b"xy"}


@pytest.mark.parametrize("flexible", [False, True])
def test_response_header_matches_kafka_python(flexible: bool) -> None:
    wire = messages.ResponseHeader(correlation_id=-7).encode(1 if flexible else 0)
    assert bytes(KpResponseHeader(correlation_id=-7).encode(flexible=flexible)) == wire
    assert KpResponseHeader.decode(io.BytesIO(wire), flexible=flexible).correlation_id == -7


# Representative group-API requests, built by hand in kafka-python, framed with a header by it.
def _kp_requests() -> list[tuple[Any, int]]:
    protocols = [
        kp_group.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01" * 50),
        kp_group.JoinGroupRequest.JoinGroupRequestProtocol(name="cooperative-sticky", metadata=b"\x02" * 100),
    ]
    return [
        (
            kp_group.HeartbeatRequest(
                group_id="g", generation_id=3, member_id="m", group_instance_id="i", version=4
            ),
            4,
        ),
        (kp_group.HeartbeatRequest(group_id="g", generation_id=3, member_id="m", version=0), 0),
        (
            kp_group.JoinGroupRequest(
                group_id="grp-é",
                session_timeout_ms=45000,
                rebalance_timeout_ms=300000,
                member_id="",
                group_instance_id=None,
                protocol_type="consumer",
                protocols=protocols,
                reason="rejoin",
                version=9,
            ),
            9,
        ),
        (
            kp_group.JoinGroupRequest(
                group_id="g",
                session_timeout_ms=10000,
                member_id="",
                protocol_type="consumer",
                protocols=protocols,
                version=0,
            ),
            0,
        ),
        (kp_group.LeaveGroupRequest(group_id="g", member_id="m", version=0), 0),
        (
            kp_api_versions.ApiVersionsRequest(
                client_software_name="kafka-python", client_software_version="3", version=3
            ),
            3,
        ),
    ]


@pytest.mark.parametrize(
    "request_and_version", _kp_requests(), ids=lambda rv: f"{type(rv[0]).__name__}-v{rv[1]}"
)
def test_kafka_python_request_frames_parse_with_our_frames(request_and_version: tuple[Any, int]) -> None:
    """A whole request frame as kafka-python sends it (size, header, body) parses with kcoord.protocol.frames."""
    kreq, version = request_and_version
    kreq.with_header(correlation_id=42, client_id="kafka-python-3")
    frame = bytes(kreq.encode(header=True, framed=True))
    header, body = frames.decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        kreq.API_KEY,
        version,
        42,
        "kafka-python-3",
    )
    cls = messages.REQUESTS[kreq.API_KEY]
    assert view(body, cls.SCHEMA.fields, version) == kp_view(
        kreq, cls.SCHEMA.fields, type(kreq)._struct, version
    )


@pytest.mark.parametrize("version", [0, 3, 4])
def test_our_response_frames_parse_with_kafka_python(version: int) -> None:
    """A response frame from kcoord.protocol.frames (header v1 when flexible) is read by kafka-python with its header."""
    resp = messages.HeartbeatResponse(throttle_time_ms=5, error_code=27)
    frame = frames.encode_response(messages.ApiKey.HEARTBEAT, version, 99, resp)
    got = kp_group.HeartbeatResponse.decode(frame, version=version, header=True, framed=True)
    assert got.header.correlation_id == 99
    assert got.error_code == 27
    assert got.throttle_time_ms == (5 if version >= 1 else 0)


def test_api_versions_error_response_is_read_as_v0_by_kafka_python() -> None:
    """The one behavioural difference: kafka-python (like Kafka's Java client) reads an ApiVersions
    error response as v0, whatever version was asked for — what a broker sends for
    UNSUPPORTED_VERSION. Our decoder is version-exact; the server must answer that case in v0."""
    v0 = messages.ApiVersionsResponse(
        error_code=35, api_keys=[messages.ApiVersionsResponse.ApiVersion(api_key=18, max_version=4)]
    )
    got = kp_api_versions.ApiVersionsResponse.decode(v0.encode(0), version=3)
    assert got.error_code == 35 and got.api_keys[0].max_version == 4


def test_uuid_fields_agree() -> None:
    """uuid fields are 16 raw bytes in both; the zero uuid is Kafka's "unset"."""
    topic_id = uuid.UUID("8f6a1f3c-1b2d-4c5e-9f00-0123456789ab")
    ours = messages.MetadataResponse(
        topics=[messages.MetadataResponse.MetadataResponseTopic(name="t", topic_id=topic_id)]
    )
    got = kp_metadata.MetadataResponse.decode(ours.encode(12), version=12)
    assert got.topics[0].topic_id == topic_id
