"""Who a SASL client is, read from its own tokens: pure, no I/O.

kcoord does not check credentials: the upstream does, on the client's own upstream connection
(sasl.py). What kcoord needs is the principal the upstream authenticated, for its own group APIs,
and to know when the exchange is over. Both come from the tokens passing through:

- PLAIN (RFC 4616): ``authzid NUL authcid NUL password``; the principal is ``User:<authcid>``.
  As Kafka's PlainSaslServer: exactly three parts, a user and a password, and an authorization
  id, if any, equal to the user. One round: the upstream's first answer without error is success.
- SCRAM-SHA-256/512 (RFC 5802): the client-first message ``n,[a=authzid],n=<saslname>,r=<nonce>``
  names the user (``=2C``/``=3D`` unescaped); two rounds, success being a server-final message
  with ``v=``. A delegation-token login (``tokenauth=true``) is authenticated as the token's
  owner, whom only the upstream knows: refused.
- OAUTHBEARER (RFC 7628): the initial response ``n,[a=authzid],^Aauth=Bearer <JWT>^A...^A^A``;
  the principal is the JWT's ``sub`` claim (or the claim ``sasl.oauthbearer.sub.claim.name``
  names), read without checking the signature: the upstream checks it and answers with an empty
  token on success, or with an error challenge the client acknowledges with ``^A`` before the
  upstream fails the exchange.

A token that is not what its mechanism expects raises :class:`SaslTokenError` with Kafka's wording
where Kafka has one; the caller answers SASL_AUTHENTICATION_FAILED and closes the connection.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Protocol

PRINCIPAL_TYPE = "User:"
OAUTHBEARER_SEPARATOR = b"\x01"
_PLAIN = "PLAIN"
_OAUTHBEARER = "OAUTHBEARER"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


class SaslTokenError(ValueError):
    """A client's SASL token kcoord cannot read, or one naming no principal kcoord can know."""


def _text(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslTokenError(f"{what} is not UTF-8") from None


def plain_principal(token: bytes) -> str:
    """The principal of a SASL/PLAIN client's token."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        raise SaslTokenError("Invalid SASL/PLAIN response: expected 3 tokens")
    authzid, username, password = (_text(p, "SASL/PLAIN response") for p in parts)
    if not username:
        raise SaslTokenError("Authentication failed: username not specified")
    if not password:
        raise SaslTokenError("Authentication failed: password not specified")
    if authzid and authzid != username:
        raise SaslTokenError(
            "Authentication failed: Client requested an authorization id that is different from username"
        )
    return PRINCIPAL_TYPE + username


def scram_unescape(saslname: str) -> str:
    """RFC 5802's saslname: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other ``=`` is invalid."""
    out = []
    i = 0
    while i < len(saslname):
        ch = saslname[i]
        if ch == "=":
            code = saslname[i + 1 : i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise SaslTokenError(f"Invalid SCRAM user name {saslname!r}")
            i += 3
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def scram_principal(client_first: bytes) -> str:
    """The principal of a SCRAM client-first message."""
    text = _text(client_first, "SCRAM client-first message")
    parts = text.split(",")
    # gs2-cbind-flag, authzid (may be empty), n=saslname, r=nonce, extensions...
    if len(parts) < 4 or parts[0] != "n":
        raise SaslTokenError(f"Invalid SCRAM client first message {text!r}")
    authzid_part, name_part, nonce_part = parts[1], parts[2], parts[3]
    if authzid_part and not authzid_part.startswith("a="):
        raise SaslTokenError(f"Invalid SCRAM client first message {text!r}")
    if not name_part.startswith("n=") or len(name_part) == 2 or not nonce_part.startswith("r="):
        raise SaslTokenError(f"Invalid SCRAM client first message {text!r}")
    username = scram_unescape(name_part[2:])
    for extension in parts[4:]:
        key, _, value = extension.partition("=")
        if key == "tokenauth" and value.lower() == "true":
            raise SaslTokenError(
                "delegation-token logins are not supported through kcoord (the token's owner is its principal)"
            )
    if authzid_part and scram_unescape(authzid_part[2:]) != username:
        raise SaslTokenError("Authentication failed: authorization id is not the user name")
    return PRINCIPAL_TYPE + username


def oauthbearer_principal(initial_response: bytes, claim: str = "sub") -> str:
    """The principal of an OAUTHBEARER client's initial response: its token's ``claim``."""
    gs2_header, sep, rest = initial_response.partition(OAUTHBEARER_SEPARATOR)
    if not sep or not rest.endswith(OAUTHBEARER_SEPARATOR * 2) or not gs2_header.startswith(b"n,"):
        raise SaslTokenError("Invalid OAUTHBEARER client first message")
    token = ""
    for pair in rest[: -len(OAUTHBEARER_SEPARATOR) * 2].split(OAUTHBEARER_SEPARATOR):
        key, _, value = _text(pair, "OAUTHBEARER client first message").partition("=")
        if key == "auth":
            scheme, _, token = value.partition(" ")
            if scheme.lower() != "bearer":
                raise SaslTokenError("Invalid OAUTHBEARER client first message: not a bearer token")
    if not token:
        raise SaslTokenError("Invalid OAUTHBEARER client first message: no token")
    subject = _jwt_claim(token.strip(), claim)
    authzid = _text(gs2_header, "OAUTHBEARER GS2 header")[2:].rstrip(",")
    if authzid.startswith("a=") and authzid[2:] != subject:
        raise SaslTokenError("Authentication failed: authorization id is not the token's principal")
    return PRINCIPAL_TYPE + subject


def _jwt_claim(token: str, claim: str) -> str:
    parts = token.split(".")
    if len(parts) != 3:
        raise SaslTokenError("OAUTHBEARER token is not a JWT (header.payload.signature)")
    payload = parts[1]
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (binascii.Error, ValueError):
        raise SaslTokenError("OAUTHBEARER token's payload is not base64url JSON") from None
    value = claims.get(claim) if isinstance(claims, dict) else None
    if not isinstance(value, str) or not value:
        raise SaslTokenError(f"OAUTHBEARER token has no {claim!r} claim naming its principal")
    return value


class Exchange(Protocol):
    """One mechanism's exchange, followed from both sides' tokens."""

    principal: str | None

    def client_token(self, token: bytes) -> None:
        """A token the client sends; raises :class:`SaslTokenError` if kcoord cannot read it."""

    def server_token(self, token: bytes) -> bool:
        """A token the upstream answered with no error: whether the exchange succeeded with it."""


class PlainExchange:
    def __init__(self) -> None:
        self.principal: str | None = None
        self._sent = False

    def client_token(self, token: bytes) -> None:
        if self._sent:
            raise SaslTokenError("SASL/PLAIN takes one token")
        self._sent = True
        self.principal = plain_principal(token)

    def server_token(self, token: bytes) -> bool:
        return self._sent


class ScramExchange:
    def __init__(self) -> None:
        self.principal: str | None = None
        self._client_tokens = 0
        self._server_tokens = 0

    def client_token(self, token: bytes) -> None:
        if self._client_tokens == 0:
            self.principal = scram_principal(token)
        elif self._client_tokens > 1:
            raise SaslTokenError("SCRAM takes two client messages")
        self._client_tokens += 1  # the client-final message carries a proof only the upstream can check

    def server_token(self, token: bytes) -> bool:
        self._server_tokens += 1
        if self._server_tokens < 2:
            return False
        if not token.startswith(b"v="):
            raise SaslTokenError("SCRAM server-final message without a verifier")
        return True


class OAuthBearerExchange:
    def __init__(self, claim: str) -> None:
        self.claim = claim
        self.principal: str | None = None
        self._client_tokens = 0

    def client_token(self, token: bytes) -> None:
        if self._client_tokens == 0:
            self.principal = oauthbearer_principal(token, self.claim)
        elif token != OAUTHBEARER_SEPARATOR:
            raise SaslTokenError("OAUTHBEARER: unexpected client message after the error challenge")
        self._client_tokens += 1

    def server_token(self, token: bytes) -> bool:
        # Success is an empty answer to the initial response; anything else is the error challenge
        # (JSON), which the client acknowledges before the upstream fails the exchange.
        return self._client_tokens == 1 and not token


def exchange_for(mechanism: str, oauthbearer_claim: str = "sub") -> Exchange | None:
    """The exchange of ``mechanism``; None for one kcoord cannot name a principal for."""
    if mechanism == _PLAIN:
        return PlainExchange()
    if mechanism in SCRAM_MECHANISMS:
        return ScramExchange()
    if mechanism == _OAUTHBEARER:
        return OAuthBearerExchange(oauthbearer_claim)
    return None
