"""Broker addresses in relayed answers: the audit against Kafka's specs, and the endpoint scanner.

kcoord must be every broker address its clients know. These tests read every response schema in
Apache Kafka's client-message specs (../shared/kafka-specs, trunk) and check that each one able to
hold a broker address (a struct with Host and Port) is handled by the gateway, and that kcoord,
in front of an upstream offering every API in its widest range, never offers a version of such
an API it does not rewrite. Then they check kcoord.protocol.endpoints, which decides per Produce/Fetch
answer whether it must be rewritten, against a full decode.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.coordinator.net.gateway import NOT_RELAYED, ClusterView
from kcoord.coordinator.net.relay.addresses import ADDRESS_FREE_VERSIONS, ADDRESS_HANDLING, REWRITTEN_VERSIONS
from kcoord.protocol import codegen, frames
from kcoord.protocol import messages as m
from kcoord.protocol.endpoints import NODE_ENDPOINTS_SINCE, carries_node_endpoints
from kcoord.protocol.messages import KCOORD_VERSIONS, ApiKey
from kcoord.protocol.primitives import CodecError

SPECS = Path(__file__).resolve().parents[3] / "shared" / "kafka-specs" / "client-messages"
needs_specs = pytest.mark.skipif(not SPECS.is_dir(), reason=f"Kafka's specs are not at {SPECS}")


def _load(path: Path) -> dict[str, Any]:
    return json.loads(re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.MULTILINE))


def _address_versions(fields: list[dict[str, Any]], common: dict[str, list[dict[str, Any]]]) -> set[int]:
    """Versions (up to 64) in which a struct somewhere in ``fields`` has both a Host and a Port."""
    found: set[int] = set()
    names = {f["name"]: f for f in fields}
    if "Host" in names and "Port" in names:
        found |= {v for v in range(64) if _in(names["Host"]["versions"], v)}
    for f in fields:
        sub = f.get("fields") or common.get(f["type"].removeprefix("[]"))
        if sub:
            found |= {v for v in _address_versions(sub, common) if _in(f["versions"], v)}
    return found


def _in(versions: str, v: int) -> bool:
    if versions.endswith("+"):
        return v >= int(versions[:-1])
    lo, _, hi = versions.partition("-")
    return int(lo) <= v <= int(hi or lo)


def _spec_responses() -> list[tuple[int, str, set[int], tuple[int, int]]]:
    out = []
    for path in sorted(SPECS.glob("*Response.json")):
        spec = _load(path)
        if spec["validVersions"] == "none":  # an API Kafka removed
            continue
        common = {c["name"]: c.get("fields", []) for c in spec.get("commonStructs", [])}
        lo, _, hi = spec["validVersions"].partition("-")
        out.append((spec["apiKey"], spec["name"], _address_versions(spec.get("fields", []), common),
                    (int(lo), int(hi or lo))))  # fmt: skip
    return out


@needs_specs
def test_every_api_whose_answers_can_hold_an_address_is_handled() -> None:
    carriers = {api: name for api, name, versions, _ in _spec_responses() if versions}
    assert carriers, "the spec scan found nothing: it is broken"
    missing = {api: name for api, name in carriers.items() if api not in ADDRESS_HANDLING}
    assert not missing, (
        f"answers of these APIs can name a broker; say in ADDRESS_HANDLING what kcoord does: {missing}"
    )
    assert set(ADDRESS_HANDLING) <= set(carriers) | set(KCOORD_VERSIONS)


@needs_specs
def test_kcoord_never_offers_a_version_that_could_leak_an_address() -> None:
    """In front of an upstream that offers every API in the specs at its full range, every
    offered version of an address-carrying API is one kcoord answers, rewrites or knows is free
    of addresses."""
    responses = _spec_responses()
    cluster = ClusterView([("upstream", 9092)], "kcoord", 9092, 1_000_000, _no_listener)
    cluster.upstream_versions = {api: rng for api, _, _, rng in responses}
    cluster._compute_advertised()
    offered = {api: (lo, hi) for api, lo, hi in cluster.api_versions()}
    for api, name, address_versions, _ in responses:
        if api not in offered or api in KCOORD_VERSIONS:
            continue
        lo, hi = offered[api]
        leaking = {v for v in address_versions if lo <= v <= hi}
        if api in REWRITTEN_VERSIONS:
            rlo, rhi = REWRITTEN_VERSIONS[api]
            assert rlo <= lo and hi <= rhi, name
            leaking = set()
        assert not leaking, f"{name} offered in versions {sorted(leaking)} that can hold an address"
    assert not NOT_RELAYED & set(offered)
    assert offered[55] == ADDRESS_FREE_VERSIONS[55]


async def _no_listener(broker: Any) -> int:
    raise AssertionError("no listener is opened here")


def test_a_relayed_api_is_served_exactly_in_the_versions_offered() -> None:
    cluster = ClusterView([("upstream", 9092)], "kcoord", 9092, 1_000_000, _no_listener)
    cluster.upstream_versions = {
        ApiKey.PRODUCE: (0, 99),
        ApiKey.FETCH: (0, 17),
        68: (0, 1),
        55: (0, 2),
        52: (0, 2),
    }
    cluster._compute_advertised()
    produce_hi = m.ProduceResponse.SCHEMA.valid.high
    assert cluster.supports(ApiKey.PRODUCE, produce_hi) and not cluster.supports(
        ApiKey.PRODUCE, produce_hi + 1
    )
    assert cluster.supports(ApiKey.FETCH, 17)
    assert cluster.supports(68, 1) and not cluster.supports(68, 2)  # served by kcoord, in its own versions
    assert cluster.supports(55, 1) and not cluster.supports(55, 2)
    assert not cluster.supports(52, 0)  # controller-only


def test_sasl_is_offered_only_on_sasl_listeners() -> None:
    """On a plaintext or TLS listener nobody logs in, so kcoord must not offer SASL on an
    upstream's word; a SASL listener offers the versions both kcoord and the upstream speak."""
    cluster = ClusterView([("upstream", 9092)], "kcoord", 9092, 1_000_000, _no_listener)
    cluster.upstream_versions = {ApiKey.PRODUCE: (3, 11), 17: (0, 1), 36: (0, 2)}
    cluster._compute_advertised()
    offered = {api for api, _, _ in cluster.api_versions()}
    assert ApiKey.PRODUCE in offered
    assert not {17, 36} & offered
    assert not cluster.supports(17, 1) and not cluster.supports(36, 2)
    assert {17, 36} <= NOT_RELAYED
    on_sasl = {api: (lo, hi) for api, lo, hi in cluster.api_versions(sasl=True)}
    assert on_sasl[17] == (0, 1) and on_sasl[36] == (0, 2) and ApiKey.PRODUCE in on_sasl
    cluster.upstream_versions = {ApiKey.PRODUCE: (3, 11), 17: (1, 1), 36: (0, 1)}
    cluster._compute_advertised()
    on_sasl = {api: (lo, hi) for api, lo, hi in cluster.api_versions(sasl=True)}
    assert on_sasl[17] == (1, 1) and on_sasl[36] == (0, 1)


# -- kcoord.protocol.endpoints ------------------------------------------------------------------------------


def _endpoint_list(cls: Any) -> st.SearchStrategy[list[Any]]:
    return st.lists(st.builds(lambda n: cls.NodeEndpoint(node_id=n, host=f"h{n}", port=n, rack=None),
                              st.integers(0, 5)), max_size=3)  # fmt: skip


@st.composite
def produce_or_fetch(draw: st.DrawFn) -> tuple[int, int, Any]:
    api_key = draw(st.sampled_from([ApiKey.PRODUCE, ApiKey.FETCH]))
    cls = m.RESPONSES[api_key]
    valid = cls.SCHEMA.valid
    version = draw(st.integers(valid.low, valid.high))
    records = st.binary(max_size=40)
    if api_key == ApiKey.PRODUCE:
        R = m.ProduceResponse
        parts = st.builds(lambda i, e: R.PartitionProduceResponse(index=i, error_code=e), st.integers(0, 9),
                          st.sampled_from([0, 6]))  # fmt: skip
        topics = st.lists(st.builds(lambda ps: R.TopicProduceResponse(name="t", topic_id=uuid.UUID(int=3),
                                                                      partition_responses=ps), st.lists(parts, max_size=3)),
                          max_size=3)  # fmt: skip
        resp = R(responses=draw(topics))
    else:
        R = m.FetchResponse
        parts = st.builds(
            lambda i, r: R.PartitionData(partition_index=i, records=r), st.integers(0, 9), records
        )
        topics = st.lists(st.builds(lambda ps: R.FetchableTopicResponse(topic="t", topic_id=uuid.UUID(int=3),
                                                                        partitions=ps), st.lists(parts, max_size=3)),
                          max_size=3)  # fmt: skip
        resp = R(responses=draw(topics))
    if version >= NODE_ENDPOINTS_SINCE[api_key]:
        resp.node_endpoints = draw(_endpoint_list(cls))
        if draw(st.booleans()):
            resp.unknown_tagged = [(7, b"\x01\x02")]  # a tag from the future is stepped over
    return api_key, version, resp


@settings(max_examples=300, deadline=None)
@given(case=produce_or_fetch(), correlation_id=st.integers(0, 2**31 - 1))
def test_endpoint_scan_agrees_with_a_full_decode(case: tuple[int, int, Any], correlation_id: int) -> None:
    api_key, version, resp = case
    raw = frames.encode_response(api_key, version, correlation_id, resp)[4:]
    _, decoded = frames.decode_response(api_key, version, raw)
    expected = (
        bool(getattr(decoded, "node_endpoints", None)) if version >= NODE_ENDPOINTS_SINCE[api_key] else False
    )
    assert carries_node_endpoints(api_key, version, raw) is expected


@settings(max_examples=100, deadline=None)
@given(case=produce_or_fetch())
def test_endpoint_scan_refuses_every_truncation(case: tuple[int, int, Any]) -> None:
    api_key, version, resp = case
    if version < NODE_ENDPOINTS_SINCE[api_key]:
        return
    raw = frames.encode_response(api_key, version, 1, resp)[4:]
    for cut in range(len(raw)):
        try:
            carries_node_endpoints(api_key, version, raw[:cut])
        except CodecError:
            continue
        # A prefix can only pass if it still holds everything up to a NodeEndpoints tag header.
        assert resp.node_endpoints, cut


needs_c = pytest.mark.skipif(
    codegen.DECODER_BACKEND != "c", reason="the C decoder is not built (KCOORD_PURE_PYTHON)"
)


@needs_c
@pytest.mark.parametrize("table", ["requests", "responses"])
def test_tag_section_is_where_every_message_ends_without_tags(table: str) -> None:
    """For every message and version kcoord knows: an encoded default message has its root
    tagged fields (none: one 0 byte) at the very end, or, not flexible, ends there."""
    classes = m.REQUESTS if table == "requests" else m.RESPONSES
    for cls in classes.values():
        valid = cls.SCHEMA.valid
        for version in range(valid.low, (valid.high or valid.low) + 1):
            data = cls().encode(version)
            expected = len(data) - 1 if version in cls.SCHEMA.flexible else len(data)
            assert cls.tag_section(data, 0, version) == expected, (cls.__name__, version)


@needs_c
@settings(max_examples=300, deadline=None)
@given(garbage=st.binary(max_size=200), version=st.integers(12, 18))
def test_tag_section_never_reads_past_the_frame(garbage: bytes, version: int) -> None:
    try:
        end = m.FetchResponse.tag_section(garbage, 0, version)
    except CodecError:
        return
    assert end is not None and 0 <= end <= len(garbage)


@pytest.mark.parametrize("api_key,version", [(ApiKey.FETCH, 16), (ApiKey.FETCH, 17), (ApiKey.PRODUCE, 10)])
def test_an_empty_node_endpoints_field_needs_no_rewrite(api_key: int, version: int) -> None:
    """tansu sends NodeEndpoints on every Fetch v16+ answer, usually empty: relayed as it came."""
    resp = m.FetchResponse(responses=[]) if api_key == ApiKey.FETCH else m.ProduceResponse(responses=[])
    raw = frames.encode_response(api_key, version, 5, resp)[4:]
    assert raw.endswith(b"\x00")  # no tagged fields
    with_empty = raw[:-1] + b"\x01\x00\x01\x01"  # one tag: 0 (NodeEndpoints), 1 byte, an empty array
    assert frames.decode_response(api_key, version, with_empty)[1].node_endpoints == []
    assert carries_node_endpoints(api_key, version, with_empty) is False
    with_one = frames.encode_response(api_key, version, 5, _with_one_endpoint(resp))[4:]
    assert carries_node_endpoints(api_key, version, with_one) is True


def _with_one_endpoint(resp: Any) -> Any:
    cls = type(resp)
    E = cls.NodeEndpoint
    resp.node_endpoints = [E(node_id=1, host="h", port=9092, rack=None)]
    return resp
