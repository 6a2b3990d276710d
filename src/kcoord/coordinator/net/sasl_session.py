"""The SASL state of one client connection on a SASL listener: pure, with an injected clock.

Kafka's SaslServerAuthenticator, as seen from kcoord, which relays each step to the upstream and
reads the answers (sasl.py does the I/O):

    HANDSHAKE ──SaslHandshake v1──► AUTHENTICATE ──SaslAuthenticate…──► AUTHENTICATED
        │        (ApiVersions ok)          (only SaslAuthenticate)         │  every API; SaslHandshake
        └─SaslHandshake v0──► RAW_TOKENS (size-prefixed tokens, no        │  starts a re-authentication
                               Kafka header: the pre-KIP-152 flow)         ◄─┘  (KIP-368), the old
                                                                              principal kept meanwhile
Invariants:
- Before authentication only ApiVersions and SaslHandshake are accepted (then only the
  mechanism's tokens); anything else closes the connection, as Kafka does.
- One step is with the upstream at a time (``waiting``): the connection reads nothing meanwhile,
  so a request sent right behind the last token is judged once the answer says who the client is.
- A re-authentication the upstream refuses at the handshake (it answers ILLEGAL_SASL_STATE when
  its ``connections.max.reauth.ms`` is off) is relayed and the session goes on, as on Kafka.
- A mechanism kcoord cannot name a principal for (GSSAPI, custom ones) or not in
  ``sasl.enabled.mechanisms`` is answered UNSUPPORTED_SASL_MECHANISM with the mechanisms both the
  upstream and kcoord enable, and the connection closes; so is an upstream refusal.
- A refused token (the upstream's SASL_AUTHENTICATION_FAILED or a token kcoord cannot read) ends
  with the connection closed after the answer.
- ``principal`` changes only when the upstream said the exchange succeeded; a re-authentication
  must keep it (Kafka refuses a change of principal; so does kcoord, closing the connection).
- With a session lifetime (SaslAuthenticate v1+), a request other than a re-authentication
  arriving after it ran out closes the connection, as Kafka's server does.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kcoord.protocol.errors import ErrorCode

from .sasl_tokens import Exchange, SaslTokenError, exchange_for

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
HANDSHAKE_WITH_AUTHENTICATE_SINCE = 1  # SaslHandshake v0: raw tokens follow, not SaslAuthenticate


class State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    RAW_TOKENS = "raw tokens"
    AUTHENTICATED = "authenticated"
    CLOSING = "closing"


class Action(enum.Enum):
    PASS = "pass"  # the ordinary dispatch: ApiVersions before authentication, everything after
    HANDSHAKE = "handshake"  # relay this SaslHandshake
    AUTHENTICATE = "authenticate"  # relay this SaslAuthenticate
    ILLEGAL_STATE = "illegal state"  # answer ILLEGAL_SASL_STATE (Kafka's KafkaApis after authentication)
    CLOSE = "close"


@dataclass(frozen=True, slots=True)
class Verdict:
    action: Action
    reason: str = ""


@dataclass(frozen=True, slots=True)
class HandshakeAnswer:
    error_code: int
    mechanisms: list[str]
    close: bool


@dataclass(frozen=True, slots=True)
class TokenAnswer:
    """What to do with the upstream's answer to a token: relay it (kcoord's ``error_code`` and
    ``message`` when it refuses the exchange itself), then close if ``close``."""

    error_code: int
    message: str | None
    close: bool
    authenticated: bool = False


class SaslSession:
    def __init__(
        self, enabled: Sequence[str], oauthbearer_claim: str = "sub", now: Callable[[], float] | None = None
    ) -> None:
        self.enabled = tuple(enabled)
        self.oauthbearer_claim = oauthbearer_claim
        self._now = now or (lambda: 0.0)
        self.state = State.HANDSHAKE
        self.principal: str | None = None  # set once the upstream said the exchange succeeded
        self.mechanism = ""
        self.waiting = False  # a step is with the upstream
        self.reauthenticating = False
        self._exchange: Exchange | None = None
        self._handshake_version = HANDSHAKE_WITH_AUTHENTICATE_SINCE
        self._expires_at: float | None = None  # seconds on the injected clock (session lifetime)

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    @property
    def tried_principal(self) -> str | None:
        """Who the exchange in progress (or the one that just failed) says the client is."""
        return self._exchange.principal if self._exchange is not None else None

    @property
    def expects_raw_token(self) -> bool:
        return self.state is State.RAW_TOKENS

    # -- requests -----------------------------------------------------------------------------------
    def classify(self, api_key: int, version: int) -> Verdict:
        """What to do with a request of ``api_key`` arriving now."""
        state = self.state
        if state is State.CLOSING:
            return Verdict(Action.CLOSE, "a request after a failed SASL exchange")
        if self.waiting:
            return Verdict(Action.CLOSE, "a request while a SASL step is in flight")
        if state is State.AUTHENTICATED or self.reauthenticating:
            if api_key == SASL_HANDSHAKE:
                if state is not State.AUTHENTICATED:
                    return Verdict(Action.CLOSE, "SaslHandshake during a re-authentication")
                if version < HANDSHAKE_WITH_AUTHENTICATE_SINCE:
                    return Verdict(Action.CLOSE, "re-authentication needs SaslHandshake v1 or later")
                return Verdict(Action.HANDSHAKE)
            if api_key == SASL_AUTHENTICATE:
                if state is State.AUTHENTICATE:
                    return Verdict(Action.AUTHENTICATE)
                return Verdict(
                    Action.ILLEGAL_STATE, "SaslAuthenticate request received after successful authentication"
                )
            if self._expired():
                return Verdict(
                    Action.CLOSE, "the SASL session expired and the client did not re-authenticate"
                )
            return Verdict(Action.PASS)
        if state is State.HANDSHAKE:
            if api_key == API_VERSIONS:
                return Verdict(Action.PASS)
            if api_key == SASL_HANDSHAKE:
                return Verdict(Action.HANDSHAKE)
            return Verdict(Action.CLOSE, f"api {api_key} before SASL authentication (expected SaslHandshake)")
        if state is State.AUTHENTICATE and api_key == SASL_AUTHENTICATE:
            return Verdict(Action.AUTHENTICATE)
        return Verdict(Action.CLOSE, f"api {api_key} during the SASL exchange (expected SaslAuthenticate)")

    def _expired(self) -> bool:
        return self._expires_at is not None and self._now() >= self._expires_at

    # -- SaslHandshake ------------------------------------------------------------------------------
    def handshake_sent(self, mechanism: str, version: int) -> None:
        self.waiting = True
        self.mechanism = mechanism
        self._handshake_version = version
        self.reauthenticating = self.state is State.AUTHENTICATED

    def handshake_answered(self, error_code: int, upstream_mechanisms: Sequence[str]) -> HandshakeAnswer:
        """The upstream's answer to the handshake, as the client gets it (mechanisms both enable)."""
        self.waiting = False
        offered = [name for name in upstream_mechanisms if name in self.enabled]
        exchange = exchange_for(self.mechanism, self.oauthbearer_claim)
        if self.reauthenticating and error_code != ErrorCode.NONE:
            # The upstream does not re-authenticate this connection (no connections.max.reauth.ms, say):
            # as Kafka, an answer with its error and the session goes on as it was.
            self.reauthenticating = False
            return HandshakeAnswer(error_code, offered, close=False)
        if error_code == ErrorCode.NONE and (exchange is None or self.mechanism not in self.enabled):
            error_code = ErrorCode.UNSUPPORTED_SASL_MECHANISM
        if error_code != ErrorCode.NONE:
            self.state = State.CLOSING
            return HandshakeAnswer(error_code, offered, close=True)
        self._exchange = exchange
        raw = self._handshake_version < HANDSHAKE_WITH_AUTHENTICATE_SINCE
        self.state = State.RAW_TOKENS if raw else State.AUTHENTICATE
        return HandshakeAnswer(ErrorCode.NONE, offered, close=False)

    # -- tokens (SaslAuthenticate, or raw after a v0 handshake) ----------------------------------------
    def token_sent(self, token: bytes) -> str | None:
        """A client token on its way upstream; the reason to refuse it (then the connection closes)."""
        assert self._exchange is not None
        try:
            self._exchange.client_token(token)
        except SaslTokenError as exc:
            self.state = State.CLOSING
            return str(exc)
        self.waiting = True
        return None

    def token_answered(self, error_code: int, token: bytes, session_lifetime_ms: int = 0) -> TokenAnswer:
        """The upstream's answer to a token (a raw token's answer has no error code: NONE)."""
        self.waiting = False
        exchange = self._exchange
        assert exchange is not None
        if error_code != ErrorCode.NONE:
            self.state = State.CLOSING
            return TokenAnswer(error_code, None, close=True)
        try:
            done = exchange.server_token(token)
        except SaslTokenError as exc:
            self.state = State.CLOSING
            return TokenAnswer(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc), close=True)
        if not done:
            return TokenAnswer(ErrorCode.NONE, None, close=False)
        principal = exchange.principal
        assert principal is not None  # the first client token named it
        if self.principal is not None and principal != self.principal:
            self.state = State.CLOSING
            return TokenAnswer(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                f"Cannot change principals during re-authentication from {self.principal}: {principal}",
                close=True,
            )
        self.principal = principal
        self.state = State.AUTHENTICATED
        self.reauthenticating = False
        self._exchange = None
        self._expires_at = self._now() + session_lifetime_ms / 1000 if session_lifetime_ms > 0 else None
        return TokenAnswer(ErrorCode.NONE, None, close=False, authenticated=True)
