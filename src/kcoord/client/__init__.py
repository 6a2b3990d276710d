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

__all__ = [
    "BlockingConnection",
    "BrokerError",
    "Connection",
    "ConnectionLost",
    "CorrelationMismatch",
    "KafkaClientError",
    "Observer",
    "RequestTimedOut",
    "StreamingTarget",
    "UnsupportedVersion",
    "connect",
    "prepare",
    "response_of",
]
