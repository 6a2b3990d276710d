"""A Metadata v12+ request that asks for a topic by id with the name "" reaches the upstream with a
null name (Kafka ignores the name then; tansu refuses ""): relay.requests.metadata_asked_by_id."""

from __future__ import annotations

import uuid

from kcoord.coordinator.net.relay.requests import metadata_asked_by_id
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey

T = m.MetadataRequest.MetadataRequestTopic


def payload(version: int, topics: list[T]) -> bytes:
    request = m.MetadataRequest(topics=topics, allow_auto_topic_creation=False)
    return frames.encode_request(ApiKey.METADATA, version, 7, "java-consumer", request)[4:]


def test_a_topic_asked_for_by_id_gets_a_null_name() -> None:
    tid = uuid.uuid4()
    out = metadata_asked_by_id(payload(12, [T(topic_id=tid, name=""), T(name="by-name")]), 12, 7)
    client_id, request = frames.decode_request_body(out, ApiKey.METADATA, 12)
    assert client_id == "java-consumer" and frames.peek_header(out) == (ApiKey.METADATA, 12, 7)
    assert [(t.topic_id, t.name) for t in request.topics] == [(tid, None), (uuid.UUID(int=0), "by-name")]


def test_other_requests_are_relayed_byte_for_byte() -> None:
    for topics in ([T(name="a")], [T(topic_id=uuid.uuid4(), name=None)], []):
        original = payload(12, topics)
        assert metadata_asked_by_id(original, 12, 7) is original
