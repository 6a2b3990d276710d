"""client.Connection against a small in-process broker built on protocol/'s codec (no mocks).

The broker reads real frames off a real socket and answers with real response frames; each test
picks how it misbehaves (holds answers back, garbles correlation ids, hangs up).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kcoord.client import (
    Connection,
    ConnectionLost,
    CorrelationMismatch,
    RequestTimedOut,
    UnsupportedVersion,
    connect,
    prepare,
)
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from tests.unit.loopback_server import LoopbackServer

Answer = Callable[[frames.RequestHeader, Any], bytes | None]


class FakeBroker(LoopbackServer):
    """Answers ApiVersions with ``versions`` and FindCoordinator with host=key; the rest by ``answer``.

    Requests are collected until ``batch`` of them arrived, then answered together in order, so
    many are in flight on the client's side at once.
    """

    def __init__(self, versions: dict[int, tuple[int, int]], batch: int = 1) -> None:
        self.versions = versions
        self.batch = batch
        self.answer: Answer = self.default_answer
        self.hang_up_after: int | None = None  # close the connection after this many requests, unanswered
        self.seen: list[tuple[int, int, int]] = []  # (api key, version, correlation id)

    def default_answer(self, header: frames.RequestHeader, body: Any) -> bytes | None:
        key, version, cid = header.api_key, header.api_version, header.correlation_id
        if key == ApiKey.API_VERSIONS:
            ours = self.versions[ApiKey.API_VERSIONS]
            R = m.ApiVersionsResponse
            listed = [
                R.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in self.versions.items()
            ]
            if version > ours[1]:  # Kafka's rule: UNSUPPORTED_VERSION in a v0 body
                return frames.encode_response(
                    key, 0, cid, R(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=listed)
                )
            return frames.encode_response(key, version, cid, R(error_code=0, api_keys=listed))
        if key == ApiKey.FIND_COORDINATOR:
            resp = m.FindCoordinatorResponse(error_code=0, node_id=1, host=body.key, port=9092)
            return frames.encode_response(key, version, cid, resp)
        raise AssertionError(f"unexpected api key {key}")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = frames.FrameDecoder()
        held: list[bytes] = []
        try:
            while data := await reader.read(65536):
                for payload in decoder.feed(data):
                    header, body = frames.decode_request(payload)
                    self.seen.append((header.api_key, header.api_version, header.correlation_id))
                    if self.hang_up_after is not None and len(self.seen) >= self.hang_up_after:
                        return
                    answer = self.answer(header, body)
                    if answer is not None:
                        held.append(answer)
                    if len(held) >= self.batch or header.api_key == ApiKey.API_VERSIONS:
                        writer.write(b"".join(held))
                        held.clear()
                await writer.drain()
        finally:
            writer.close()


BROKER_VERSIONS = {ApiKey.API_VERSIONS: (0, 3), ApiKey.FIND_COORDINATOR: (0, 3), ApiKey.HEARTBEAT: (0, 2)}


def find(key: str) -> Any:
    return m.FindCoordinatorRequest(key=key, key_type=0)


@pytest.fixture
async def broker() -> AsyncIterator[FakeBroker]:
    async with FakeBroker(dict(BROKER_VERSIONS)) as b:
        yield b


async def test_pipelined_requests_are_matched_in_order(broker: FakeBroker) -> None:
    broker.batch = 50  # nothing is answered until all 50 are in flight
    conn = await Connection.open(broker.address)
    try:
        got_by_callback: list[Any] = []
        futures = [conn.call(find(f"g{i}"), 3) for i in range(40)]
        for i in range(40, 50):
            conn.call_cb(find(f"g{i}"), 3, got_by_callback.append)
        assert conn.in_flight == 50
        hosts = [r.host for r in await asyncio.gather(*futures)]
        assert hosts == [f"g{i}" for i in range(40)]
        await asyncio.sleep(0.01)
        assert [r.host for r in got_by_callback] == [f"g{i}" for i in range(40, 50)]
        ids = [cid for _, _, cid in broker.seen]
        assert len(set(ids)) == 50  # every request its own correlation id
        assert conn.in_flight == 0
    finally:
        conn.close()
        await conn.wait_closed()


async def test_prepared_frame_gets_a_fresh_correlation_id_each_time(broker: FakeBroker) -> None:
    conn = await Connection.open(broker.address)
    frame = prepare(find("same"), 3, "test")
    answers: list[Any] = []
    for _ in range(3):
        conn.send_prepared(frame, m.FindCoordinatorRequest, 3, answers.append)
    while len(answers) < 3:
        await asyncio.sleep(0.01)
    assert [a.host for a in answers] == ["same"] * 3
    assert len({cid for _, _, cid in broker.seen}) == 3
    conn.close()


async def test_correlation_id_mismatch_fails_the_request_and_closes(broker: FakeBroker) -> None:
    broker.batch = 2

    def wrong_id(header: frames.RequestHeader, body: Any) -> bytes:
        resp = m.FindCoordinatorResponse(error_code=0, node_id=1, host=body.key, port=1)
        return frames.encode_response(header.api_key, header.api_version, header.correlation_id + 1000, resp)

    broker.answer = wrong_id
    conn = await Connection.open(broker.address)
    first, second = conn.call(find("a"), 3), conn.call(find("b"), 3)
    with pytest.raises(CorrelationMismatch):
        await first
    with pytest.raises(ConnectionLost):
        await second
    assert conn.closed
    with pytest.raises(ConnectionLost):
        conn.call(find("c"), 3)
    await conn.wait_closed()
    assert not conn.closed_by_peer


async def test_negotiation_picks_the_highest_version_both_sides_speak(broker: FakeBroker) -> None:
    broker.versions[ApiKey.JOIN_GROUP] = (6, 99)
    broker.versions[ApiKey.SYNC_GROUP] = (0, 2)
    conn = await connect(broker.address, limits={m.SyncGroupRequest: (3, 5)})
    try:
        assert conn.versions[ApiKey.HEARTBEAT] == (0, 2)
        assert conn.version_for(m.HeartbeatRequest) == 2  # broker max 2 < ours (4)
        assert conn.version_for(m.HeartbeatRequest, highest=1) == 1
        assert (
            conn.version_for(m.JoinGroupRequest) == m.JoinGroupRequest.SCHEMA.valid.high
        )  # ours < broker's 99
        with pytest.raises(UnsupportedVersion):
            conn.version_for(m.SyncGroupRequest)  # we need 3+, the broker stops at 2
        with pytest.raises(UnsupportedVersion):
            conn.version_for(m.LeaveGroupRequest)  # not advertised at all
        resp = await conn.request(find("x"))  # no version given: the negotiated one
        assert resp.host == "x"
        assert broker.seen[-1][:2] == (ApiKey.FIND_COORDINATOR, 3)
    finally:
        conn.close()


async def test_negotiation_falls_back_when_the_broker_only_speaks_older_api_versions() -> None:
    async with FakeBroker({ApiKey.API_VERSIONS: (0, 2), ApiKey.HEARTBEAT: (0, 4)}) as broker:
        conn = await connect(broker.address)
        assert conn.version_for(m.HeartbeatRequest) == 4
        assert [v for key, v, _ in broker.seen if key == ApiKey.API_VERSIONS] == [3, 2]
        conn.close()


async def test_connection_loss_fails_every_request_in_flight(broker: FakeBroker) -> None:
    broker.batch = 10  # nothing is answered before the broker hangs up
    broker.hang_up_after = 3
    conn = await Connection.open(broker.address)
    futures = [conn.call(find(f"g{i}"), 3) for i in range(2)]
    by_callback: list[Any] = ["not called"]
    conn.call_cb(find("g2"), 3, by_callback.append)
    results = await asyncio.gather(*futures, return_exceptions=True)
    assert [type(r) for r in results] == [ConnectionLost, ConnectionLost]
    assert by_callback == ["not called", None]
    await conn.wait_closed()
    assert conn.closed and conn.closed_by_peer
    with pytest.raises(ConnectionLost):
        await conn.request(find("late"), 3)


async def test_a_timed_out_request_leaves_the_connection_in_step(broker: FakeBroker) -> None:
    original = broker.answer
    pending: list[bytes] = []

    def slow_then_fast(header: frames.RequestHeader, body: Any) -> bytes | None:
        if body.key == "slow":
            pending.append(original(header, body) or b"")
            return None
        late, pending[:] = b"".join(pending), []
        return late + (original(header, body) or b"")  # the late answer first, in order

    broker.answer = slow_then_fast
    conn = await Connection.open(broker.address)
    with pytest.raises(RequestTimedOut):
        await conn.request(find("slow"), 3, timeout=0.05)
    assert (await conn.request(find("fast"), 3, timeout=2.0)).host == "fast"
    assert not conn.closed
    conn.close()
