"""The principal of a TLS client, as Kafka's default principal builder names it (pure).

``User:`` + the certificate subject as Java's ``X500Principal.getName()`` (RFC 2253) writes it.
Names are built here as DER by a tiny encoder, so each case states its exact input; one case reads
a real certificate made by openssl and compares with openssl's own RFC 2253 rendering.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kcoord.coordinator.net.principal import (
    ANONYMOUS,
    CertificateError,
    principal_of,
    rfc2253,
    subject_of,
)
from kcoord.coordinator.net.tls import looks_like_tls
from support.certs import make_pki

CN, OU, ORG, C, DC, UID = "2.5.4.3", "2.5.4.11", "2.5.4.10", "2.5.4.6", "0.9.2342.19200300.100.1.25", "0.9.2342.19200300.100.1.1"  # fmt: skip
EMAIL = "1.2.840.113549.1.9.1"
UTF8, PRINTABLE, IA5 = 0x0C, 0x13, 0x16


def der(tag: int, content: bytes) -> bytes:
    n = len(content)
    if n < 0x80:
        return bytes([tag, n]) + content
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + content


def oid(dotted: str) -> bytes:
    arcs = [int(a) for a in dotted.split(".")]
    body = bytearray([40 * arcs[0] + arcs[1]])
    for arc in arcs[2:]:
        chunk = [arc & 0x7F]
        arc >>= 7
        while arc:
            chunk.append(0x80 | (arc & 0x7F))
            arc >>= 7
        body += bytes(reversed(chunk))
    return der(0x06, bytes(body))


def attribute(attr: str, value: str, tag: int = UTF8) -> bytes:
    return der(0x30, oid(attr) + der(tag, value.encode()))


def name(*rdns: bytes | tuple[bytes, ...]) -> bytes:
    """A Name from its RDNs in encoding order (most significant first); a tuple is a multi-valued RDN."""
    sets = b"".join(der(0x31, b"".join(r) if isinstance(r, tuple) else r) for r in rdns)
    return der(0x30, sets)


def test_keywords_in_reverse_order() -> None:
    subject = name(attribute(ORG, "acme"), attribute(OU, "eng"), attribute(CN, "alice"))
    assert rfc2253(subject) == "CN=alice,OU=eng,O=acme"


def test_every_rfc2253_keyword_and_string_types() -> None:
    subject = name(
        attribute(DC, "com", IA5),
        attribute(C, "DE", PRINTABLE),
        attribute(UID, "u1"),
        attribute(CN, "bob", PRINTABLE),
    )
    assert rfc2253(subject) == "CN=bob,UID=u1,C=DE,DC=com"


def test_other_attributes_are_dotted_oids_with_hex_der_values() -> None:
    # Java writes emailAddress (no RFC 2253 keyword) as its OID and "#" + the hex of the DER value.
    subject = name(attribute(CN, "alice"), attribute(EMAIL, "a@x.io", IA5))
    assert rfc2253(subject) == "1.2.840.113549.1.9.1=#16066140782e696f,CN=alice"


def test_special_characters_are_escaped() -> None:
    subject = name(attribute(CN, 'a,b+c=d<e>f#g;h"i\\j'))
    assert rfc2253(subject) == 'CN=a\\,b\\+c\\=d\\<e\\>f\\#g\\;h\\"i\\\\j'


def test_leading_and_trailing_spaces_are_escaped() -> None:
    assert rfc2253(name(attribute(CN, "  two  "))) == "CN=\\ \\ two\\ \\ "
    assert rfc2253(name(attribute(CN, " "))) == "CN=\\ "


def test_nul_and_utf8() -> None:
    assert rfc2253(name(attribute(CN, "a\0b"))) == "CN=a\\00b"
    assert rfc2253(name(attribute(CN, "Zoë"))) == "CN=Zoë"


def test_multi_valued_rdn_joined_by_plus() -> None:
    subject = name(attribute(ORG, "acme"), (attribute(CN, "alice"), attribute(UID, "42")))
    assert rfc2253(subject) == "CN=alice+UID=42,O=acme"


def test_no_certificate_is_anonymous() -> None:
    assert principal_of(None) == ANONYMOUS == "User:ANONYMOUS"


def test_garbage_is_a_certificate_error() -> None:
    for data in (b"", b"\x30", b"\x30\x05\x02\x01", b"\x04\x00", b"\x30\x84\xff\xff\xff\xff"):
        with pytest.raises(CertificateError):
            principal_of(data)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="making a certificate needs the openssl command")
def test_a_real_certificate_matches_openssl_rfc2253(tmp_path: Path) -> None:
    pki = make_pki(tmp_path, {"carol": "/DC=io/DC=example/O=Acme, Inc./OU=data eng/CN=carol"})
    pem = pki.cert("carol").read_text()
    import ssl

    certificate = ssl.PEM_cert_to_DER_cert(pem)
    expected = subprocess.run(
        ["openssl", "x509", "-in", str(pki.cert("carol")), "-noout", "-subject", "-nameopt", "RFC2253"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert expected.startswith("subject=")
    assert principal_of(certificate) == "User:" + expected.removeprefix("subject=")
    assert principal_of(certificate) == "User:CN=carol,OU=data eng,O=Acme\\, Inc.,DC=example,DC=io"
    assert subject_of(certificate).startswith(b"\x30")


def test_tls_client_hello_is_recognised() -> None:
    assert looks_like_tls(b"\x16\x03\x01\x02\x00\x01")
    assert not looks_like_tls(b"\x00\x00\x00\x15\x00\x12")  # a Kafka frame's size prefix
    assert not looks_like_tls(b"\x16")
