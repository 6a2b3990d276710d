"""kcoord's one Kafka client: :class:`Connection` (asyncio) and :class:`BlockingConnection`.

It sits below ``storage`` and the coordinator's runtime and imports only :mod:`protocol`.
"""

from .blocking import BlockingConnection
from .connection import Connection, Observer, StreamingTarget, connect, prepare, response_of
from .errors import (
    BrokerError,
    ConnectionLost,
    CorrelationMismatch,
    KafkaClientError,
    RequestTimedOut,
    UnsupportedVersion,
)
from .sasl import SaslAuthenticationFailed, SaslCredentials
from .security import PLAINTEXT, UpstreamSecurity
from .tls import ClientTls, client_context

__all__ = [
    "BlockingConnection",
    "BrokerError",
    "ClientTls",
    "Connection",
    "ConnectionLost",
    "CorrelationMismatch",
    "KafkaClientError",
    "PLAINTEXT",
    "Observer",
    "RequestTimedOut",
    "SaslAuthenticationFailed",
    "SaslCredentials",
    "StreamingTarget",
    "UnsupportedVersion",
    "UpstreamSecurity",
    "client_context",
    "connect",
    "prepare",
    "response_of",
]
