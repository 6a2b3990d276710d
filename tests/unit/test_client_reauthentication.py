"""client.Connection re-authenticating (KIP-368) against a small in-process broker (no mocks).

The broker keeps Kafka's rules for a SASL session: it answers one request at a time, in order; a
login's SaslHandshake must be followed by its SaslAuthenticate and nothing else; a request other
than SaslHandshake after the session ran out makes it hang up (Kafka closes such a connection).
It answers FindCoordinator slowly, so requests are in flight when a re-authentication starts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from kcoord.client import Connection, ConnectionLost, SaslCredentials, UpstreamSecurity
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode
from tests.unit.loopback_server import LoopbackServer

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
LOGIN = UpstreamSecurity(sasl=SaslCredentials("PLAIN", "kcoord", "secret"))


class SessionBroker(LoopbackServer):
    """Grants sessions of ``lifetime_ms``; ``refuse_relogin``: the second login gets error 58."""

    def __init__(self, lifetime_ms: int, answer_delay: float = 0.005, refuse_relogin: bool = False) -> None:
        self.lifetime_ms = lifetime_ms
        self.answer_delay = answer_delay
        self.refuse_relogin = refuse_relogin
        self.logins = 0
        self.hung_up: list[str] = []  # why the broker closed a connection

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = frames.FrameDecoder()
        expires = -1.0  # monotonic deadline of the session (-1: not logged in)
        in_login = False  # between a SaslHandshake and its SaslAuthenticate
        try:
            while data := await reader.read(65536):
                for payload in decoder.feed(data):
                    header = frames.parse_request_header(payload)
                    key, version, cid = header.api_key, header.api_version, header.correlation_id
                    if in_login and key != SASL_AUTHENTICATE:
                        self.hung_up.append(f"api {key} in the middle of a login")
                        return
                    if key == SASL_HANDSHAKE:
                        in_login = True
                        answer = sm.SaslHandshakeResponse(error_code=0, mechanisms=["PLAIN"])
                        writer.write(sm.encode_response(version, cid, answer))
                        continue
                    if key == SASL_AUTHENTICATE:
                        in_login = False
                        self.logins += 1
                        if self.refuse_relogin and self.logins > 1:
                            refused = sm.SaslAuthenticateResponse(
                                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, auth_bytes=b""
                            )
                            writer.write(sm.encode_response(version, cid, refused))
                            continue
                        expires = time.monotonic() + self.lifetime_ms / 1000
                        answer = sm.SaslAuthenticateResponse(
                            error_code=0, auth_bytes=b"", session_lifetime_ms=self.lifetime_ms
                        )
                        writer.write(sm.encode_response(version, cid, answer))
                        continue
                    if time.monotonic() > expires:
                        self.hung_up.append(f"api {key} after the session ran out")
                        return
                    _, body = frames.decode_request(payload)
                    await asyncio.sleep(self.answer_delay)  # one at a time, as a broker does
                    found = m.FindCoordinatorResponse(error_code=0, node_id=1, host=body.key, port=9092)
                    writer.write(frames.encode_response(key, version, cid, found))
                await writer.drain()
        finally:
            writer.close()


def find(key: str) -> m.FindCoordinatorRequest:
    return m.FindCoordinatorRequest(key=key, key_type=0)


@pytest.fixture
async def broker() -> AsyncIterator[SessionBroker]:
    async with SessionBroker(lifetime_ms=300) as b:
        yield b


async def test_requests_outlive_many_sessions_without_loss(broker: SessionBroker) -> None:
    """Requests sent all the time for 2.5 session lifetimes: every one answered, in order, on
    one connection, which logged in again each time before its session ran out.

    The lifetime leaves the re-authentication's 5-15% margin (40-120 ms) well above the broker's
    backlog when it starts (6 requests of 2 ms), as seconds-long lifetimes do on a real broker."""
    broker.lifetime_ms, broker.answer_delay = 800, 0.002
    conn = await Connection.open(broker.address, security=LOGIN)
    answered: list[str] = []
    try:
        deadline = time.monotonic() + 2.0
        i = 0
        while time.monotonic() < deadline:
            batch = [conn.request(find(f"g{i + j}"), 3) for j in range(5)]
            conn.send_prepared(frames_for(f"g{i + 5}"), m.FindCoordinatorRequest, 3, lambda r: None)
            try:
                answered += [r.host for r in await asyncio.gather(*batch)]
            except ConnectionLost:
                raise AssertionError(f"the broker hung up: {broker.hung_up}") from None
            i += 6
            await asyncio.sleep(0.01)
    finally:
        conn.close()
    assert broker.hung_up == []
    assert answered == [f"g{k + j}" for k in range(0, i, 6) for j in range(5)]
    assert conn.reauthentications >= 2
    assert broker.logins == conn.reauthentications + 1


def frames_for(key: str) -> bytearray:
    from kcoord.client import prepare

    return prepare(find(key), 3, "test")


async def test_requests_sent_during_a_login_wait_for_it(broker: SessionBroker) -> None:
    """A re-authentication started with requests in flight and more sent meanwhile: the broker sees
    nothing between the login's two requests, and every request gets its own answer."""
    broker.lifetime_ms = 60_000  # no timer: this test starts the re-authentication itself
    broker.answer_delay = 0.02
    conn = await Connection.open(broker.address, security=LOGIN)
    try:
        before = [conn.request(find(f"before{i}"), 3) for i in range(3)]
        relogin = asyncio.ensure_future(conn.reauthenticate())
        await asyncio.sleep(0)
        during = [conn.request(find(f"during{i}"), 3) for i in range(3)]
        assert conn.in_flight >= 6  # held ones count
        hosts = [r.host for r in await asyncio.gather(*before, *during)]
        await relogin
    finally:
        conn.close()
    assert hosts == [f"before{i}" for i in range(3)] + [f"during{i}" for i in range(3)]
    assert broker.hung_up == [] and broker.logins == 2 and conn.reauthentications == 1


async def test_without_reauthentication_the_broker_would_hang_up(broker: SessionBroker) -> None:
    """The broker's rule bites: a connection that did not log in with a lifetime (no timer) loses
    its requests once the session ran out (what the tests above show kcoord avoids)."""
    conn = await Connection.open(broker.address, security=LOGIN)
    conn._login = None  # as a connection that never learnt its login (the behaviour before KIP-368)
    timer = conn._reauthentication
    assert isinstance(timer, asyncio.TimerHandle)
    timer.cancel()
    await asyncio.sleep(broker.lifetime_ms / 1000 + 0.05)
    with pytest.raises(ConnectionLost):
        await conn.request(find("late"), 3)
    assert broker.hung_up == ["api 10 after the session ran out"]


async def test_a_refused_relogin_closes_the_connection_and_fails_what_it_held() -> None:
    async with SessionBroker(lifetime_ms=60_000, refuse_relogin=True) as broker:
        conn = await Connection.open(broker.address, security=LOGIN)
        relogin = asyncio.ensure_future(conn.reauthenticate())
        await asyncio.sleep(0)
        held = conn.request(find("held"), 3)
        await relogin
        with pytest.raises(ConnectionLost):
            await held
        assert conn.closed
