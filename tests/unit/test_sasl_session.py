"""SASL, pure parts: principals from PLAIN, SCRAM and OAUTHBEARER tokens, the listener's
handshake state machine (injected clock), and kcoord's own SCRAM client against RFC 7677's vector."""

from __future__ import annotations

import base64
import json

import pytest

from kcoord.client.sasl import ScramClient, plain_token, scram_escape
from kcoord.coordinator.net.sasl_session import Action, SaslSession, State
from kcoord.coordinator.net.sasl_tokens import (
    SaslTokenError,
    oauthbearer_principal,
    plain_principal,
    scram_principal,
    scram_unescape,
)
from kcoord.protocol.errors import ErrorCode

ENABLED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def jwt(claims: dict[str, object]) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}."


def oauth_initial(token: str, authzid: str = "") -> bytes:
    header = f"n,a={authzid}," if authzid else "n,,"
    return f"{header}\x01auth=Bearer {token}\x01\x01".encode()


# -- principals ---------------------------------------------------------------------------------------------
def test_plain_principal_is_the_authentication_id() -> None:
    assert plain_principal(b"\0alice\0secret") == "User:alice"
    assert plain_principal(b"alice\0alice\0secret") == "User:alice"
    assert plain_principal(plain_token("bob", "pw")) == "User:bob"


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (b"alice\0secret", "expected 3 tokens"),
        (b"\0\0secret", "username not specified"),
        (b"\0alice\0", "password not specified"),
        (b"mallory\0alice\0secret", "different from username"),
        (b"\0\xff\0secret", "not UTF-8"),
        (b"a\0b\0c\0d", "expected 3 tokens"),
    ],
)
def test_plain_tokens_kafka_refuses_are_refused(token: bytes, why: str) -> None:
    with pytest.raises(SaslTokenError, match=why):
        plain_principal(token)


def test_scram_principal_is_the_unescaped_user_name() -> None:
    assert scram_principal(b"n,,n=alice,r=abc") == "User:alice"
    assert scram_principal(b"n,,n=a=2Cb=3Dc,r=abc,ext=1") == "User:a,b=c"
    assert scram_principal(b"n,a=alice,n=alice,r=abc") == "User:alice"
    assert scram_unescape(scram_escape("x=,y")) == "x=,y"


@pytest.mark.parametrize(
    "message",
    [b"y,,n=alice,r=abc", b"n,,r=abc", b"n,,n=,r=abc", b"n,,n=alice", b"n,,n=a=ZZ,r=abc", b"\xff", b""],
)
def test_scram_client_first_messages_kcoord_cannot_read_are_refused(message: bytes) -> None:
    with pytest.raises(SaslTokenError):
        scram_principal(message)


def test_scram_delegation_tokens_and_foreign_authorization_ids_are_refused() -> None:
    with pytest.raises(SaslTokenError, match="delegation-token"):
        scram_principal(b"n,,n=tokenid,r=abc,tokenauth=true")
    with pytest.raises(SaslTokenError, match="authorization id"):
        scram_principal(b"n,a=root,n=alice,r=abc")


def test_oauthbearer_principal_is_the_sub_claim_or_the_configured_one() -> None:
    assert oauthbearer_principal(oauth_initial(jwt({"sub": "alice"}))) == "User:alice"
    assert oauthbearer_principal(oauth_initial(jwt({"sub": "alice"}), "alice")) == "User:alice"
    token = jwt({"sub": "svc-123", "preferred_username": "carol"})
    assert oauthbearer_principal(oauth_initial(token), "preferred_username") == "User:carol"


@pytest.mark.parametrize(
    "response",
    [
        oauth_initial("not-a-jwt"),
        oauth_initial("a.!!!.c"),
        oauth_initial(jwt({"iss": "x"})),  # no sub
        oauth_initial(jwt({"sub": 42})),
        oauth_initial(jwt({"sub": "alice"}), "bob"),
        b"n,,\x01auth=Basic abc\x01\x01",
        b"n,,\x01\x01",
        b"garbage",
    ],
)
def test_oauthbearer_responses_naming_no_principal_are_refused(response: bytes) -> None:
    with pytest.raises(SaslTokenError):
        oauthbearer_principal(response)


# -- the handshake state machine ----------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def authenticated(
    mechanism: str = "PLAIN", token: bytes = b"\0alice\0pw", lifetime_ms: int = 0
) -> SaslSession:
    session = SaslSession(ENABLED, now=Clock())
    session.handshake_sent(mechanism, 1)
    assert not session.handshake_answered(ErrorCode.NONE, list(ENABLED)).close
    assert session.token_sent(token) is None
    assert session.token_answered(ErrorCode.NONE, b"", lifetime_ms).authenticated
    return session


def test_only_api_versions_and_handshake_before_authentication() -> None:
    session = SaslSession(ENABLED)
    assert session.classify(18, 3).action is Action.PASS
    assert session.classify(3, 12).action is Action.CLOSE
    assert session.classify(36, 1).action is Action.CLOSE
    assert session.classify(17, 1).action is Action.HANDSHAKE
    session.handshake_sent("PLAIN", 1)
    assert session.classify(36, 1).action is Action.CLOSE  # one step in flight at a time
    session.handshake_answered(ErrorCode.NONE, ["PLAIN"])
    assert session.classify(18, 3).action is Action.CLOSE  # only tokens once the mechanism is chosen
    assert session.classify(36, 2).action is Action.AUTHENTICATE


def test_plain_succeeds_on_the_upstreams_first_answer() -> None:
    session = authenticated()
    assert session.principal == "User:alice" and session.state is State.AUTHENTICATED
    assert session.classify(0, 9).action is Action.PASS
    assert session.classify(36, 1).action is Action.ILLEGAL_STATE  # as Kafka's KafkaApis


def test_scram_succeeds_only_on_the_server_final_message() -> None:
    session = SaslSession(ENABLED)
    session.handshake_sent("SCRAM-SHA-256", 1)
    session.handshake_answered(ErrorCode.NONE, list(ENABLED))
    assert session.token_sent(b"n,,n=alice,r=nonce") is None
    first = session.token_answered(ErrorCode.NONE, b"r=nonceXYZ,s=c2FsdA==,i=4096")
    assert not first.authenticated and not first.close and session.principal is None
    assert session.classify(3, 12).action is Action.CLOSE  # not yet
    assert session.token_sent(b"c=biws,r=nonceXYZ,p=proof") is None
    assert session.token_answered(ErrorCode.NONE, b"v=signature").authenticated
    assert session.principal == "User:alice"


def test_a_refused_token_closes_and_names_nobody() -> None:
    session = SaslSession(ENABLED)
    session.handshake_sent("SCRAM-SHA-512", 1)
    session.handshake_answered(ErrorCode.NONE, list(ENABLED))
    session.token_sent(b"n,,n=alice,r=nonce")
    answer = session.token_answered(ErrorCode.SASL_AUTHENTICATION_FAILED, b"")
    assert answer.close and answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert session.principal is None and session.classify(18, 0).action is Action.CLOSE
    assert session.tried_principal == "User:alice"  # who the failed login claimed to be: for its log line


def test_a_garbage_token_is_refused_before_it_goes_upstream() -> None:
    session = SaslSession(ENABLED)
    session.handshake_sent("PLAIN", 1)
    session.handshake_answered(ErrorCode.NONE, list(ENABLED))
    assert session.token_sent(b"garbage") == "Invalid SASL/PLAIN response: expected 3 tokens"
    assert session.state is State.CLOSING and not session.waiting
    assert session.tried_principal is None


def test_oauthbearer_error_challenge_then_failure() -> None:
    session = SaslSession(ENABLED)
    session.handshake_sent("OAUTHBEARER", 1)
    session.handshake_answered(ErrorCode.NONE, list(ENABLED))
    assert session.token_sent(oauth_initial(jwt({"sub": "alice"}))) is None
    challenge = session.token_answered(ErrorCode.NONE, b'{"status":"invalid_token"}')
    assert not challenge.authenticated and not challenge.close
    assert session.token_sent(b"\x01") is None
    assert session.token_answered(ErrorCode.SASL_AUTHENTICATION_FAILED, b"").close
    assert session.principal is None


@pytest.mark.parametrize(
    ("mechanism", "upstream_error"),
    [
        ("GSSAPI", ErrorCode.NONE),
        ("PLAIN", ErrorCode.UNSUPPORTED_SASL_MECHANISM),
        ("X-CUSTOM", ErrorCode.NONE),
    ],
)
def test_mechanisms_kcoord_cannot_name_are_refused_with_the_enabled_list(
    mechanism: str, upstream_error: int
) -> None:
    session = SaslSession(("PLAIN", "SCRAM-SHA-256"))
    session.handshake_sent(mechanism, 1)
    answer = session.handshake_answered(upstream_error, ["GSSAPI", "SCRAM-SHA-256", "OAUTHBEARER"])
    assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM and answer.close
    assert answer.mechanisms == ["SCRAM-SHA-256"]  # offered by both


def test_handshake_v0_is_followed_by_raw_tokens() -> None:
    session = SaslSession(ENABLED)
    session.handshake_sent("PLAIN", 0)
    session.handshake_answered(ErrorCode.NONE, list(ENABLED))
    assert session.expects_raw_token
    assert session.token_sent(b"\0alice\0pw") is None
    assert session.token_answered(ErrorCode.NONE, b"").authenticated
    assert not session.expects_raw_token and session.classify(17, 0).action is Action.CLOSE  # no v0 re-auth


def test_reauthentication_keeps_serving_and_may_not_change_the_principal() -> None:
    session = authenticated()
    assert session.classify(17, 1).action is Action.HANDSHAKE
    session.handshake_sent("PLAIN", 1)
    session.handshake_answered(ErrorCode.NONE, list(ENABLED))
    assert session.classify(1, 12).action is Action.PASS  # the old principal serves meanwhile
    assert session.classify(17, 1).action is Action.CLOSE
    assert session.token_sent(b"\0alice\0pw") is None
    assert session.token_answered(ErrorCode.NONE, b"").authenticated
    session.handshake_sent("PLAIN", 1)
    session.handshake_answered(ErrorCode.NONE, list(ENABLED))
    session.token_sent(b"\0bob\0pw")
    answer = session.token_answered(ErrorCode.NONE, b"")
    assert answer.close and "Cannot change principals" in (answer.message or "")
    assert session.principal == "User:alice"


def test_an_expired_session_closes_on_the_next_request_but_may_reauthenticate() -> None:
    session = authenticated(lifetime_ms=5000)
    clock = session._now
    assert isinstance(clock, Clock)
    clock.now += 4.9
    assert session.classify(1, 12).action is Action.PASS
    clock.now += 0.2
    assert session.classify(1, 12).action is Action.CLOSE
    assert session.classify(17, 1).action is Action.HANDSHAKE


# -- kcoord's own SCRAM client --------------------------------------------------------------------------------
def test_scram_sha_256_client_matches_rfc_7677() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.client_first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = client.client_final(server_first)
    assert (
        final
        == b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    client.verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_a_reauthentication_the_upstream_refuses_leaves_the_session_as_it_was() -> None:
    session = authenticated()
    session.handshake_sent("PLAIN", 1)
    answer = session.handshake_answered(ErrorCode.ILLEGAL_SASL_STATE, [])
    assert answer.error_code == ErrorCode.ILLEGAL_SASL_STATE and not answer.close
    assert session.principal == "User:alice" and session.classify(3, 12).action is Action.PASS
