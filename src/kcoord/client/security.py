"""How kcoord's client connections secure themselves: one value, TLS context and SASL login together.

Kafka names four security protocols (``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``); a
connection needs both halves to open one of them, and every owner of connections (storage, the
cluster view, cluster membership, the event topic, the relay) needs the same pair. Passing it as
one frozen value keeps the two from drifting apart between call sites.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, replace

from .sasl import SaslCredentials


@dataclass(frozen=True, slots=True)
class UpstreamSecurity:
    """The TLS context (None: plaintext) and kcoord's own SASL login (None: none) of a connection."""

    ssl: ssl.SSLContext | None = None  # kcoord.client.tls.client_context
    sasl: SaslCredentials | None = None  # logged in before anything else is sent

    @property
    def protocol(self) -> str:
        """Kafka's name of this security protocol (``security.protocol``)."""
        transport = "SSL" if self.ssl is not None else "PLAINTEXT"
        return transport if self.sasl is None else f"SASL_{transport}"

    def without_login(self) -> UpstreamSecurity:
        """The same transport with no login of kcoord's: a connection someone else logs in on
        (a client relaying its own SASL exchange through a SASL listener)."""
        return self if self.sasl is None else replace(self, sasl=None)


PLAINTEXT = UpstreamSecurity()
