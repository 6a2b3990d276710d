"""The consumer embedded protocol: ConsumerProtocolSubscription / ConsumerProtocolAssignment v0-v3.

These are the opaque ``metadata`` (JoinGroup) and ``assignment`` (SyncGroup) bytes of the
"consumer" protocol type. kcoord reads them (range/uniform assignors, describe, admin tools) and
stores them verbatim in GroupMetadataValue. On the wire each is an int16 version followed by the
struct; a reader that meets a newer version parses it with its newest layout and ignores what
follows (Kafka's ``ConsumerProtocol.deserialize*``), which is why the structs only ever grow at
the end. Checked here: round trips per version, hand-written golden bytes, and agreement with
kafka-python 3.x's ``kafka.protocol.consumer.metadata`` classes (and its legacy v0 structs).
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription
from kafka.protocol.old.consumer_protocol import (
    ConsumerProtocolMemberAssignment_v0,
    ConsumerProtocolMemberMetadata_v0,
)

from kcoord.protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kcoord.protocol.primitives import CodecError
from tests.unit.test_codec_crosscheck import kp_view, to_kp, view
from tests.unit.test_codec_roundtrip import canon, message_strategy

Subscription = ConsumerProtocolSubscription
Assignment = ConsumerProtocolAssignment
SubTP = ConsumerProtocolSubscription.TopicPartition  # type: ignore[attr-defined]
AsgTP = ConsumerProtocolAssignment.TopicPartition  # type: ignore[attr-defined]
VERSIONS = [0, 1, 2, 3]


def with_version(version: int, body: bytes) -> bytes:
    """The bytes a client puts in JoinGroup metadata / SyncGroup assignment."""
    return struct.pack(">h", version) + body


def read_prefixed(cls: type, data: bytes) -> tuple[int, object]:
    """Read a version-prefixed blob the way Kafka does: newer versions with our newest layout."""
    (version,) = struct.unpack_from(">h", data, 0)
    if version < 0:
        raise CodecError("negative consumer protocol version")
    top = cls.SCHEMA.valid.high
    obj, _ = cls.decode_from(data, 2, min(version, top))
    return version, obj


def _sub(version: int) -> Subscription:
    return Subscription(
        topics=["orders", "payments-ü"],
        user_data=b"\x01\x02" if version % 2 else None,
        owned_partitions=[SubTP(topic="orders", partitions=[0, 3])] if version >= 1 else [],
        generation_id=9 if version >= 2 else -1,
        rack_id="rack-a" if version >= 3 else None,
    )


def _asg() -> Assignment:
    return Assignment(
        assigned_partitions=[
            AsgTP(topic="orders", partitions=[0, 1, 2]),
            AsgTP(topic="payments-ü", partitions=[]),
        ],
        user_data=None,
    )


def _s(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


# -- round trips ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_subscription_roundtrip(version: int, data: st.DataObject) -> None:
    sub = data.draw(message_strategy(Subscription, version))
    assert canon(Subscription.decode(sub.encode(version), version)) == canon(sub)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_assignment_roundtrip(version: int, data: st.DataObject) -> None:
    asg = data.draw(message_strategy(Assignment, version))
    assert canon(Assignment.decode(asg.encode(version), version)) == canon(asg)


# -- golden bytes ------------------------------------------------------------------------------------------


def test_subscription_golden_per_version() -> None:
    """Fields are appended version by version: owned partitions (v1), generation (v2), rack (v3)."""
    topics = b"\x00\x00\x00\x02" + _s("orders") + _s("payments-ü")
    owned = b"\x00\x00\x00\x01" + _s("orders") + b"\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x03"
    expected = {
        0: topics + b"\xff\xff\xff\xff",
        1: topics + b"\x00\x00\x00\x02\x01\x02" + owned,
        2: topics + b"\xff\xff\xff\xff" + owned + b"\x00\x00\x00\x09",
        3: topics + b"\x00\x00\x00\x02\x01\x02" + owned + b"\x00\x00\x00\x09" + _s("rack-a"),
    }
    for version, body in expected.items():
        assert _sub(version).encode(version) == body, version
        assert Subscription.decode(body, version) == _sub(version)


def test_assignment_golden() -> None:
    """Assignment has the same layout in v0-v3 (v2/v3 only bumped with the subscription)."""
    body = (
        b"\x00\x00\x00\x02"
        + _s("orders")
        + b"\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x02"
        + _s("payments-ü")
        + b"\x00\x00\x00\x00"
        + b"\xff\xff\xff\xff"
    )
    for version in VERSIONS:
        assert _asg().encode(version) == body
        assert Assignment.decode(body, version) == _asg()


def test_newer_subscription_version_is_read_with_newest_layout() -> None:
    """A v4 subscription (fields appended after rack id) is read as v3; the extra bytes are ignored."""
    future = with_version(4, _sub(3).encode(3) + b"\x00\x00\x00\x2a")
    version, sub = read_prefixed(Subscription, future)
    assert version == 4 and sub == _sub(3)
    # kafka-python does the same: min(decoded version, max version).
    assert KpSubscription.decode(future).rack_id == "rack-a"


# -- kafka-python ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_subscription_matches_kafka_python(version: int, data: st.DataObject) -> None:
    """Version-prefixed bytes are identical both ways and decode to the same fields."""
    sub = data.draw(message_strategy(Subscription, version))
    ours = with_version(version, sub.encode(version))
    kp = to_kp(sub, Subscription.SCHEMA.fields, KpSubscription._struct, version, KpSubscription)
    assert bytes(kp.encode(version=version)) == ours
    fields = Subscription.SCHEMA.fields
    assert kp_view(KpSubscription.decode(ours), fields, KpSubscription._struct, version) == view(
        sub, fields, version
    )
    assert canon(read_prefixed(Subscription, ours)[1]) == canon(sub)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_assignment_matches_kafka_python(version: int, data: st.DataObject) -> None:
    asg = data.draw(message_strategy(Assignment, version))
    ours = with_version(version, asg.encode(version))
    kp = to_kp(asg, Assignment.SCHEMA.fields, KpAssignment._struct, version, KpAssignment)
    assert bytes(kp.encode(version=version)) == ours
    fields = Assignment.SCHEMA.fields
    assert kp_view(KpAssignment.decode(ours), fields, KpAssignment._struct, version) == view(
        asg, fields, version
    )


def test_legacy_kafka_python_v0_structs_agree() -> None:
    """kafka-python's hand-written v0 structs (``kafka.protocol.old``), an independent third codec."""
    meta = ConsumerProtocolMemberMetadata_v0(0, ["orders", "payments-ü"], b"ud")
    sub = Subscription(topics=["orders", "payments-ü"], user_data=b"ud")
    assert meta.encode() == with_version(0, sub.encode(0))
    assert read_prefixed(Subscription, meta.encode())[1] == sub

    legacy = ConsumerProtocolMemberAssignment_v0(0, [("orders", [0, 1, 2]), ("payments-ü", [])], b"")
    asg = _asg()
    asg.user_data = b""
    assert legacy.encode() == with_version(0, asg.encode(0))
    decoded = ConsumerProtocolMemberAssignment_v0.decode(with_version(0, asg.encode(0)))
    assert [(t, list(p)) for t, p in decoded.assigned_partitions] == [
        ("orders", [0, 1, 2]),
        ("payments-ü", []),
    ]


def test_truncated_consumer_protocol_blobs_are_codec_errors() -> None:
    wire = _sub(3).encode(3)
    for cut in range(len(wire)):
        with pytest.raises(CodecError):
            Subscription.decode(wire[:cut], 3)
    with pytest.raises(CodecError):
        read_prefixed(Subscription, b"\xff\xff" + wire)
