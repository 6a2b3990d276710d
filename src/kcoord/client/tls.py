"""TLS for kcoord's client connections: the :class:`ssl.SSLContext` a :class:`Connection` opens with.

Kafka's client settings, in PEM form: a CA bundle (``ssl.truststore.location``; empty: the system's
CAs), an optional client certificate chain with its key in one file (``ssl.keystore.location``,
Kafka's PEM keystore) and the key's password, and hostname verification
(``ssl.endpoint.identification.algorithm``: ``https``, Kafka's default, checks the broker's
certificate names the host kcoord connects to; empty checks only that a trusted CA signed it).
TLS 1.2 is the lowest version offered, as Kafka's ``ssl.enabled.protocols`` default.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

HOSTNAME_VERIFICATION = "https"  # Kafka's one value of ssl.endpoint.identification.algorithm


@dataclass(frozen=True, slots=True)
class ClientTls:
    """Where a TLS client's PEM files are and whether it checks the server's name."""

    truststore: str = ""  # CA certificates (PEM); empty: the system's default CAs
    keystore: str = ""  # the client's private key and certificate chain (PEM); empty: no client certificate
    key_password: str = ""
    endpoint_identification: str = HOSTNAME_VERIFICATION  # "https" or "" (off)


def client_context(tls: ClientTls) -> ssl.SSLContext:
    """A context that verifies the server's certificate (and its name unless told not to).

    Raises :class:`OSError` (``ssl.SSLError`` included) when a file cannot be read or holds no
    usable certificate or key: settings that cannot work stop kcoord at start-up.
    """
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=tls.truststore or None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = tls.endpoint_identification == HOSTNAME_VERIFICATION
    context.verify_mode = ssl.CERT_REQUIRED
    if tls.keystore:
        context.load_cert_chain(tls.keystore, password=tls.key_password or None)
    return context
