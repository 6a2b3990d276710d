"""Who a TLS client is: the principal Kafka's default principal builder gives it.

Kafka names an SSL client ``User:`` + its certificate's subject as Java's
``X500Principal.getName()`` writes it (RFC 2253): the relative names last to first, joined by
``,``; an attribute with an RFC 2253 keyword (CN, C, L, ST, O, OU, STREET, DC, UID) as
``KEYWORD=value`` with ``,=+<>#;"\\`` escaped by a backslash, NUL as ``\\00`` and leading or trailing
spaces escaped; any other attribute (emailAddress, serialNumber, ...) as its dotted OID and ``#``
followed by the hex of its DER value. A client without a certificate is ``User:ANONYMOUS``.
(Kafka's ``ssl.principal.mapping.rules`` at its default.)

Pure: certificate bytes (DER) in, a string out. The subject is read with a small DER reader of
its own, so no X.509 library is needed for it.
"""

from __future__ import annotations

ANONYMOUS = "User:ANONYMOUS"

# The attributes RFC 2253 names by keyword (Java's list), by OID.
RFC2253_KEYWORDS: dict[str, str] = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.9": "STREET",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string types Java writes as text (PrintableString, T61String, IA5String, GeneralString,
# BMPString, UTF8String); it reads their bytes as UTF-8 whatever the type.
STRING_TAGS = frozenset({0x13, 0x14, 0x16, 0x1B, 0x1E, 0x0C})
ESCAPED = frozenset(',=+<>#;"\\')

_SEQUENCE = 0x30
_SET = 0x31
_OID = 0x06
_VERSION = 0xA0  # [0] EXPLICIT, TBSCertificate's optional version


class CertificateError(ValueError):
    """The bytes are not a certificate this reader understands."""


def _tlv(data: bytes, at: int) -> tuple[int, int, int]:
    """(tag, start of content, end of content) of the DER element at ``at``."""
    if at + 2 > len(data):
        raise CertificateError("truncated DER element")
    tag, length = data[at], data[at + 1]
    at += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or at + count > len(data):
            raise CertificateError("bad DER length")
        length = int.from_bytes(data[at : at + count], "big")
        at += count
    end = at + length
    if end > len(data):
        raise CertificateError("truncated DER element")
    return tag, at, end


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, element start, content start, content end) of each element in ``data[start:end]``."""
    found = []
    at = start
    while at < end:
        tag, content, stop = _tlv(data, at)
        found.append((tag, at, content, stop))
        at = stop
    return found


def _oid(content: bytes) -> str:
    if not content:
        raise CertificateError("empty OID")
    first = content[0]
    if first < 0x80:
        head = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
        rest = content[1:]
    else:  # a first arc of 2 with a large second one
        head, rest = [], content
    arcs: list[int] = []
    value = 0
    for byte in rest:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    if not head:
        head, arcs = [2, arcs[0] - 80], arcs[1:]
    return ".".join(str(a) for a in head + arcs)


def subject_of(certificate: bytes) -> bytes:
    """The DER bytes of a certificate's subject Name."""
    tag, start, end = _tlv(certificate, 0)
    if tag != _SEQUENCE:
        raise CertificateError("not a certificate")
    tag, start, end = _tlv(certificate, start)  # TBSCertificate
    if tag != _SEQUENCE:
        raise CertificateError("not a certificate")
    fields = _children(certificate, start, end)
    if fields and fields[0][0] == _VERSION:
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    if len(fields) < 5 or fields[4][0] != _SEQUENCE:
        raise CertificateError("certificate without a subject")
    _, element, _, stop = fields[4]
    return certificate[element:stop]


def _escape(value: str) -> str:
    text = "".join("\\00" if c == "\0" else "\\" + c if c in ESCAPED else c for c in value)
    lead = len(text) - len(text.lstrip(" \r"))
    trail = len(text.rstrip(" \r"))
    if lead == len(text):  # only spaces: every one is leading
        trail = len(text)
    escaped_lead = "".join("\\" + c for c in text[:lead])
    escaped_trail = "".join("\\" + c for c in text[trail:])
    return escaped_lead + text[lead:trail] + escaped_trail


def _attribute(data: bytes, start: int, end: int) -> str:
    parts = _children(data, start, end)
    if len(parts) != 2 or parts[0][0] != _OID:
        raise CertificateError("bad AttributeTypeAndValue")
    _, _, oid_start, oid_end = parts[0]
    oid = _oid(data[oid_start:oid_end])
    tag, element, content, stop = parts[1]
    keyword = RFC2253_KEYWORDS.get(oid)
    if keyword is not None and tag in STRING_TAGS:
        return f"{keyword}={_escape(data[content:stop].decode('utf-8', 'replace'))}"
    return f"{keyword or oid}=#{data[element:stop].hex()}"


def rfc2253(name: bytes) -> str:
    """A DER Name as Java's ``X500Principal.getName()`` (RFC 2253) writes it."""
    tag, start, end = _tlv(name, 0)
    if tag != _SEQUENCE:
        raise CertificateError("not a Name")
    rdns = []
    for rdn_tag, _, rdn_start, rdn_end in _children(name, start, end):
        if rdn_tag != _SET:
            raise CertificateError("bad RelativeDistinguishedName")
        rdns.append(
            "+".join(
                _attribute(name, a_start, a_end)
                for _, _, a_start, a_end in _children(name, rdn_start, rdn_end)
            )
        )
    return ",".join(reversed(rdns))


def principal_of(certificate: bytes | None) -> str:
    """The principal of a client presenting ``certificate`` (DER; None: no certificate)."""
    if certificate is None:
        return ANONYMOUS
    return "User:" + rfc2253(subject_of(certificate))
