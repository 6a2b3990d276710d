"""kcoord's own SASL login on its client connections: PLAIN and SCRAM-SHA-256/512.

After a connection opens (and its TLS handshake, on SASL_SSL) and before any other request,
:func:`authenticate` runs SaslHandshake v1 and the SaslAuthenticate exchange of the mechanism
(Kafka's KIP-152 framing), so every request after it runs as kcoord's principal. PLAIN sends one
token; SCRAM (RFC 5802/7677) takes two rounds and checks the server's signature, so a broker that
does not know the password cannot pass for one that does. A refusal raises
:class:`SaslAuthenticationFailed` with the broker's error code and message; the password never
appears in an error or a log line.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kcoord.protocol import storage_messages as sm
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode

from .errors import KafkaClientError

if TYPE_CHECKING:
    from .connection import Connection

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
_SCRAM_HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
HANDSHAKE_VERSION = 1  # v1: the tokens travel in SaslAuthenticate requests (KIP-152)
AUTHENTICATE_VERSION = 1


class SaslAuthenticationFailed(KafkaClientError):
    """The broker refused kcoord's SASL login (or the exchange broke off)."""

    def __init__(self, message: str, error_code: int = ErrorCode.SASL_AUTHENTICATION_FAILED) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    """Who kcoord is on the upstream: a mechanism, a user name and its password."""

    mechanism: str
    username: str
    password: str = field(repr=False)  # never in a repr, so never in a log line by accident

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(
                f"unsupported SASL mechanism {self.mechanism!r} (one of {', '.join(MECHANISMS)})"
            )

    @property
    def principal(self) -> str:
        return f"User:{self.username}"


class SaslRequest(Protocol):
    """How a login sends its requests: :meth:`Connection.request`'s shape (re-authentication sends
    them ahead of the requests it holds back, :meth:`Connection.reauthenticate`)."""

    def __call__(
        self, request: Message, version: int | None = None, *, timeout: float | None = None
    ) -> Awaitable[Any]: ...


async def authenticate(
    conn: Connection,
    credentials: SaslCredentials,
    timeout: float | None = None,
    *,
    send: SaslRequest | None = None,
) -> int:
    """Log ``conn`` in as ``credentials``; raises :class:`SaslAuthenticationFailed` if refused.

    Returns the session lifetime the broker gave the login (``session_lifetime_ms`` of the last
    SaslAuthenticate answer, KIP-368; 0: none). ``send``: how to send each request (default
    ``conn.request``).
    """
    request = send or conn.request
    handshake = await request(
        sm.SaslHandshakeRequest(mechanism=credentials.mechanism), HANDSHAKE_VERSION, timeout=timeout
    )
    if handshake.error_code != ErrorCode.NONE:
        offered = ", ".join(handshake.mechanisms or []) or "none"
        raise SaslAuthenticationFailed(
            f"{conn.name} refused SASL mechanism {credentials.mechanism} "
            f"(error {handshake.error_code}; it offers {offered})",
            handshake.error_code,
        )
    if credentials.mechanism == PLAIN:
        _, lifetime_ms = await _exchange(
            conn, request, plain_token(credentials.username, credentials.password), timeout
        )
        return lifetime_ms
    scram = ScramClient(credentials.mechanism, credentials.username, credentials.password)
    server_first, _ = await _exchange(conn, request, scram.client_first(), timeout)
    server_final, lifetime_ms = await _exchange(conn, request, scram.client_final(server_first), timeout)
    scram.verify_server_final(server_final)
    return lifetime_ms


async def _exchange(
    conn: Connection, request: SaslRequest, token: bytes, timeout: float | None
) -> tuple[bytes, int]:
    response = await request(
        sm.SaslAuthenticateRequest(auth_bytes=token), AUTHENTICATE_VERSION, timeout=timeout
    )
    if response.error_code != ErrorCode.NONE:
        raise SaslAuthenticationFailed(
            f"{conn.name} refused kcoord's SASL login (error {response.error_code}: "
            f"{response.error_message or 'no message'})",
            response.error_code,
        )
    return bytes(response.auth_bytes or b""), int(response.session_lifetime_ms or 0)


def plain_token(username: str, password: str) -> bytes:
    """RFC 4616: authorization id (empty: the same), user, password, NUL-separated."""
    return b"\0" + username.encode() + b"\0" + password.encode()


def scram_escape(username: str) -> str:
    """RFC 5802's saslname: ``=`` and ``,`` escaped."""
    return username.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """One SCRAM login, client side (no channel binding: the ``n,,`` GS2 header)."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        self.hash_name = _SCRAM_HASHES[mechanism]
        self.username = username
        self._password = password.encode()
        self.nonce = nonce or base64.b64encode(os.urandom(24)).decode()
        self._client_first_bare = f"n={scram_escape(username)},r={self.nonce}"
        self._auth_message = b""
        self._salted = b""

    def client_first(self) -> bytes:
        return ("n,," + self._client_first_bare).encode()

    def client_final(self, server_first: bytes) -> bytes:
        fields = _scram_fields(server_first)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s", ""), fields.get("i", "")
        if not nonce.startswith(self.nonce) or not salt or not iterations.isdigit():
            raise SaslAuthenticationFailed(f"unexpected SCRAM server-first message {server_first!r}")
        self._salted = hashlib.pbkdf2_hmac(
            self.hash_name, self._password, base64.b64decode(salt), int(iterations)
        )
        without_proof = f"c=biws,r={nonce}"
        self._auth_message = f"{self._client_first_bare},{server_first.decode()},{without_proof}".encode()
        client_key = self._hmac(self._salted, b"Client Key")
        stored_key = hashlib.new(self.hash_name, client_key).digest()
        signature = self._hmac(stored_key, self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        fields = _scram_fields(server_final)
        if "e" in fields:
            raise SaslAuthenticationFailed(f"SCRAM login refused: {fields['e']}")
        server_key = self._hmac(self._salted, b"Server Key")
        expected = base64.b64encode(self._hmac(server_key, self._auth_message)).decode()
        if not hmac.compare_digest(fields.get("v", ""), expected):
            raise SaslAuthenticationFailed("SCRAM server signature does not match: not the broker we know")

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()


def _scram_fields(message: bytes) -> dict[str, str]:
    try:
        text = message.decode()
    except UnicodeDecodeError:
        raise SaslAuthenticationFailed("SCRAM message is not UTF-8") from None
    return {part[0]: part[2:] for part in text.split(",") if len(part) >= 2 and part[1] == "="}
