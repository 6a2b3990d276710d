"""SASL on kcoord's listeners: the client logs in to the upstream, through kcoord.

On a SASL_PLAINTEXT or SASL_SSL listener each client connection has a :class:`SaslGate` in front
of its dispatcher. The upstream is the only credential store: the client's SaslHandshake and
SaslAuthenticate requests are relayed on the client's own upstream connection (relay/), opened
without kcoord's identity, so the upstream checks the credentials and that connection is then
authenticated as the client: every request the client relays afterwards (Produce, Fetch,
CreateTopics...) reaches the brokers as the client's principal, under the cluster's ACLs and
quotas. kcoord reads the tokens and answers on their way through (sasl_tokens.py) to learn the
principal for its own group APIs, and keeps it on the connection (``principal``).

What is allowed when is :class:`~kcoord.coordinator.net.sasl_session.SaslSession`'s business; this
module decodes, relays, rewrites and pauses. While a step is with the upstream the connection
reads nothing more (a request pipelined behind the last token is judged once the answer says who
sent it), and until authentication succeeds a frame may be at most ``sasl.server.max.receive.size``
(Kafka's 512 KiB): an unauthenticated client cannot make kcoord buffer a 100 MB frame. The
session's clock is :func:`time.monotonic`.

Every login is counted (``kcoord_sasl_authentications_total`` and
``kcoord_sasl_authentication_failures_total``, by mechanism). A failed one is logged with the peer,
the mechanism and the principal tried, at most once per peer host a minute (failed_logins.py): a
storm of wrong passwords is counted, not written out line by line; its connection then closes
without a line of its own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kcoord.protocol import frames
from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.primitives import CodecError

from .failed_logins import Unlogged
from .sasl_session import Action, SaslSession
from .slot import Slot

if TYPE_CHECKING:
    from .connection import ClientConnection
    from .relay import UpstreamRelay

log = logging.getLogger("kcoord.connection")

# Kafka's sasl.server.max.receive.size default: the largest frame before authentication.
SASL_MAX_RECEIVE_SIZE = 512 * 1024

Dispatch = Callable[[bytes, int, int, int], None]


class SaslGate:
    """The SASL half of one client connection (``conn``) on a SASL listener."""

    __slots__ = ("conn", "relay", "session", "_dispatch")

    def __init__(self, conn: ClientConnection, relay: UpstreamRelay, dispatch: Dispatch) -> None:
        settings = conn.app.settings
        self.conn = conn
        self.relay = relay
        self.session = SaslSession(
            settings.sasl_enabled_mechanisms, settings.sasl_oauthbearer_sub_claim_name, time.monotonic
        )
        self._dispatch = dispatch
        conn.limit_frames(SASL_MAX_RECEIVE_SIZE)

    @property
    def expects_raw_token(self) -> bool:
        """After a SaslHandshake v0 the client's frames are bare tokens, without a request header."""
        return self.session.expects_raw_token

    def dispatch(self, payload: bytes, api_key: int, version: int, correlation_id: int) -> None:
        verdict = self.session.classify(api_key, version)
        action = verdict.action
        if action is Action.PASS:
            self._dispatch(payload, api_key, version, correlation_id)
        elif action is Action.HANDSHAKE:
            self._handshake(payload, version, correlation_id)
        elif action is Action.AUTHENTICATE:
            self._authenticate(payload, version, correlation_id)
        elif action is Action.ILLEGAL_STATE:
            response = sm.SaslAuthenticateResponse(
                error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message=verdict.reason, auth_bytes=b""
            )
            self.conn.fill(self.conn.new_slot(), sm.encode_response(version, correlation_id, response))
        else:
            self.conn.close_with(verdict.reason)

    # -- SaslHandshake --------------------------------------------------------------------------------
    def _handshake(self, payload: bytes, version: int, correlation_id: int) -> None:
        request = sm.decode_request(sm.SaslHandshakeRequest, version, payload)  # CodecError: closes
        self.session.handshake_sent(request.mechanism, version)
        slot = self.conn.new_slot()

        def answered(raw: bytes) -> None:
            _, upstream = sm.decode_response(sm.SaslHandshakeResponse, version, raw)
            answer = self.session.handshake_answered(upstream.error_code, upstream.mechanisms or [])
            refused = None
            if answer.close:
                refused = self._login_failed(
                    f"SASL mechanism {request.mechanism!r} refused (error {answer.error_code}; "
                    f"enabled: {','.join(answer.mechanisms) or 'none'})"
                )
            response = sm.SaslHandshakeResponse(error_code=answer.error_code, mechanisms=answer.mechanisms)
            self._reply(slot, sm.encode_response(version, correlation_id, response), refused)

        self._relay(payload, slot, answered)

    # -- SaslAuthenticate ------------------------------------------------------------------------------
    def _authenticate(self, payload: bytes, version: int, correlation_id: int) -> None:
        request = sm.decode_request(sm.SaslAuthenticateRequest, version, payload)  # CodecError: closes
        refused = self.session.token_sent(bytes(request.auth_bytes or b""))
        slot = self.conn.new_slot()
        if refused is not None:
            self._refuse(slot, version, correlation_id, refused)
            return

        def answered(raw: bytes) -> None:
            _, upstream = sm.decode_response(sm.SaslAuthenticateResponse, version, raw)
            token = bytes(upstream.auth_bytes or b"")
            lifetime = upstream.session_lifetime_ms if version >= 1 else 0
            answer = self.session.token_answered(upstream.error_code, token, lifetime)
            if answer.message is not None:  # kcoord refuses what the upstream accepted: say why
                upstream = sm.SaslAuthenticateResponse(
                    error_code=answer.error_code, error_message=answer.message, auth_bytes=b""
                )
                raw_answer = sm.encode_response(version, correlation_id, upstream)
            else:
                raw_answer = frames.frame(raw)
            reason = self._outcome(answer.authenticated, answer.close, upstream.error_message)
            self._reply(slot, raw_answer, reason)

        self._relay(payload, slot, answered)

    def raw_token(self, payload: bytes) -> None:
        """A bare token after a SaslHandshake v0 (no Kafka header): relayed; the answer is bare too,
        and a refusal is the upstream closing the connection."""
        slot = self.conn.new_slot()
        refused = self.session.token_sent(payload)
        if refused is not None:  # no error code to answer with in the v0 flow: close
            self.conn.fail(slot, self._login_failed(refused))
            return

        def answered(raw: bytes) -> None:
            answer = self.session.token_answered(ErrorCode.NONE, raw)
            self._reply(
                slot, frames.frame(raw), self._outcome(answer.authenticated, answer.close, answer.message)
            )

        self._relay(payload, slot, answered)

    def _refuse(self, slot: Slot, version: int, correlation_id: int, reason: str) -> None:
        """Answer SASL_AUTHENTICATION_FAILED without asking the upstream (a token kcoord cannot read)."""
        response = sm.SaslAuthenticateResponse(
            error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=reason, auth_bytes=b""
        )
        self._reply(slot, sm.encode_response(version, correlation_id, response), self._login_failed(reason))

    def _outcome(self, authenticated: bool, close: bool, message: str | None) -> str | None:
        """Take in an exchange's result: the principal once it succeeded; the reason to close if not."""
        conn = self.conn
        if authenticated:
            conn.principal = self.session.principal or conn.principal
            conn.limit_frames(None)
            conn.app.metrics.sasl_authentication(self.session.mechanism, succeeded=True)
            log.debug("%s: authenticated as %s (%s)", conn.peer, conn.principal, self.session.mechanism)
        if not close:
            return None
        return self._login_failed(message or "refused by the upstream")

    def _login_failed(self, reason: str) -> str:
        """Count a failed login and log it (once per peer host a minute); the reason to close with,
        which the connection then logs only at DEBUG."""
        conn = self.conn
        app = conn.app
        mechanism = self.session.mechanism
        app.metrics.sasl_authentication(mechanism, succeeded=False)
        tried = f"{mechanism or 'no mechanism'} as {self.session.tried_principal or 'an unknown principal'}"
        host = conn.ip or conn.peer
        failed_logins = app.failed_logins
        unlogged = failed_logins.failed(host, tried, time.perf_counter())
        if unlogged is not None:
            earlier = f" ({_counted(unlogged)} before this one)" if unlogged.count else ""
            log.warning(
                "failed SASL login from %s (%s): %s%s; further failures from %s within %.0f s are counted, "
                "not logged",
                conn.peer,
                tried,
                reason,
                earlier,
                host,
                failed_logins.window_s,
            )
        conn.close_log_level = logging.DEBUG
        return f"SASL authentication failed ({mechanism}): {reason}"

    # -- relaying ------------------------------------------------------------------------------------
    def _relay(self, payload: bytes, slot: Slot, answered: Callable[[bytes], None]) -> None:
        """Send a SASL step upstream and read nothing more until its answer (``answered`` turns it
        into the client's answer; a broken or missing one closes the connection)."""
        conn = self.conn
        fut = self.relay.exchange(payload)
        if fut is None:  # the upstream connection is gone: the connection closed
            return
        conn.pause_for_sasl()

        def done(f: asyncio.Future[bytes]) -> None:
            if conn.closed:
                if not f.cancelled():
                    f.exception()  # retrieved, so asyncio does not warn
                return
            failed = None if f.cancelled() else f.exception()
            if f.cancelled() or failed is not None:
                conn.fail(slot, f"SASL step failed upstream: {failed!r}")
                conn.resume_for_sasl()
                return
            try:
                answered(f.result())
            except CodecError as exc:
                conn.fail(slot, f"the upstream's SASL answer is malformed: {exc}")
            conn.resume_for_sasl()

        fut.add_done_callback(done)

    def _reply(self, slot: Slot, data: bytes, close_reason: str | None) -> None:
        """Answer ``slot``; with a ``close_reason``, close after that answer (one log line: the reason)."""
        conn = self.conn
        conn.fill(slot, data)
        if close_reason is not None:
            conn.fail(conn.new_slot(), close_reason)


def _counted(unlogged: Unlogged) -> str:
    return f"{unlogged.count} more failed SASL logins from {unlogged.host} (the last: {unlogged.last})"


def log_unlogged_failures(ended: list[Unlogged]) -> None:
    """The failed logins a host's window counted beyond its logged one, once it ended (the App's sweep)."""
    for unlogged in ended:
        log.warning("%s in the minute after the last line about that host", _counted(unlogged))
