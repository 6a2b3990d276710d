"""The errors of kcoord's Kafka client (:mod:`kcoord.client.connection`).

Every error the client raises is a :class:`KafkaClientError`. The subclasses also derive from
the builtin a caller would naturally catch (a lost connection is a ``ConnectionError``, a timeout
a ``TimeoutError``, a response stream out of step a :class:`~kcoord.protocol.primitives.CodecError`), so
code written against sockets and the codec keeps working.
"""

from __future__ import annotations

from kcoord.protocol.primitives import CodecError


class KafkaClientError(Exception):
    """Base of everything :mod:`client` raises about the connection or the broker's answers."""


class ConnectionLost(KafkaClientError, ConnectionError):
    """The connection is closed, or closed with this request in flight: no response will come."""


class RequestTimedOut(KafkaClientError, TimeoutError):
    """No response within the request's timeout. The connection stays usable: a late response
    is read and dropped, so later responses still match their requests."""


class CorrelationMismatch(KafkaClientError, CodecError):
    """A response carried another correlation id than the oldest request in flight.

    A broker answers a connection's requests in order, so the stream is out of step: this request
    fails with this error, the connection closes, and every other in-flight request fails with
    :class:`ConnectionLost`.
    """


class UnsupportedVersion(KafkaClientError):
    """The broker does not support the API at any version both sides speak."""


class BrokerError(KafkaClientError):
    """The broker answered the client's own handshake (ApiVersions) with an error code."""

    def __init__(self, message: str, error_code: int) -> None:
        super().__init__(message)
        self.error_code = error_code
