"""TLS on kcoord's listeners: the server context, and accepting a TLS connection.

A listener with ``listener.security.protocol=SSL`` accepts TCP connections itself (not through
``loop.create_server``) so that it can look at what a client sends before the handshake: a client
speaking plaintext Kafka to a TLS port is closed with a log line naming the mistake, not an
obscure handshake error. Then the TLS handshake runs (``ssl.handshake.timeout.ms`` bounds it, so
half-open connections do not pile up); a failed one (unknown CA, a required client certificate
missing, a client that does not trust kcoord's certificate) closes the connection with one log
line, never a traceback. Only a connection whose handshake succeeded becomes a
:class:`~kcoord.coordinator.net.connection.ClientConnection`, with the client's principal from its
certificate (:mod:`kcoord.coordinator.net.principal`).

The reverse mistake, a TLS client on a plaintext port, is spotted by the connection itself
(:func:`looks_like_tls`): a ClientHello read as a Kafka size prefix is a frame of ~370 MB.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

from kcoord.coordinator.ops.settings import Settings

from .principal import ANONYMOUS, CertificateError, principal_of

log = logging.getLogger("kcoord.connection")

# A TLS record of type handshake (0x16) of TLS major version 3 (SSL 3.0 to TLS 1.3): how every
# ClientHello begins. Read as a Kafka frame, it is a size prefix of at least 0x16030000 bytes.
TLS_HANDSHAKE_RECORD = b"\x16\x03"
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def looks_like_tls(data: bytes) -> bool:
    """Whether the first bytes a client sent are a TLS handshake record (a ClientHello)."""
    return data[:2] == TLS_HANDSHAKE_RECORD


def server_context(settings: Settings) -> ssl.SSLContext:
    """The listeners' context: their key and certificate, and client certificates per ``ssl.client.auth``.

    Raises OSError (``ssl.SSLError`` included) on files that hold no usable key, certificate or CA.
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(settings.ssl_keystore_location, password=settings.ssl_key_password or None)
    if settings.ssl_truststore_location:
        context.load_verify_locations(cafile=settings.ssl_truststore_location)
    context.verify_mode = CLIENT_AUTH[settings.ssl_client_auth]
    return context


def principal_of_transport(transport: Any) -> str:
    """The principal of a connection's client: from its certificate on TLS, else ``User:ANONYMOUS``."""
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return ANONYMOUS
    try:
        return principal_of(ssl_object.getpeercert(binary_form=True))
    except CertificateError as exc:  # the handshake verified it, so not expected: still no crash
        log.warning("cannot read the subject of the client certificate: %s", exc)
        return ANONYMOUS


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or exc.strerror or str(exc)
    return str(exc) or type(exc).__name__


class TlsAcceptor:
    """Accepts on one listening socket and hands each client whose handshake succeeded to ``protocol()``."""

    def __init__(
        self,
        sock: socket.socket,
        context: ssl.SSLContext,
        handshake_timeout: float,
        protocol: Callable[[], asyncio.Protocol],
        on_failure: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self.sock = sock
        self.on_failure = on_failure  # a failed handshake, by reason (metrics.TLS_FAILURE_REASONS)
        self.context = context
        self.handshake_timeout = handshake_timeout
        self.protocol = protocol
        self._accepting: asyncio.Task[None] | None = None
        self._handshakes: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        if self._accepting is None:
            self._accepting = asyncio.ensure_future(self._accept_forever())

    def close(self) -> None:
        """Stop accepting and abandon the handshakes in progress."""
        if self._accepting is not None:
            self._accepting.cancel()
        for task in list(self._handshakes):
            task.cancel()
        self.sock.close()

    async def _accept_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                client, address = await loop.sock_accept(self.sock)
            except OSError as exc:  # out of file descriptors, say: the next accept may work
                log.warning("accepting a connection failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            task = asyncio.ensure_future(self._handshake(client, address))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, client: socket.socket, address: Any) -> None:
        peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)
        loop = asyncio.get_running_loop()
        try:
            first = await asyncio.wait_for(self._first_bytes(client), self.handshake_timeout)
            if not first:
                client.close()  # connected and left: a port check, nothing to say
                return
            if first[:1] != TLS_HANDSHAKE_RECORD[:1]:
                log.warning(
                    "closing connection from %s: plaintext on a TLS listener (expected a TLS handshake)", peer
                )
                self.on_failure("plaintext")
                client.close()
                return
            await loop.connect_accepted_socket(
                self.protocol, client, ssl=self.context, ssl_handshake_timeout=self.handshake_timeout
            )
        except asyncio.CancelledError:
            client.close()
            raise
        except (TimeoutError, ConnectionAbortedError):  # ours, or the handshake's (asyncio/uvloop abort it)
            log.warning(
                "closing connection from %s: no TLS handshake within %.0f ms (ssl.handshake.timeout.ms)",
                peer,
                self.handshake_timeout * 1000,
            )
            self.on_failure("timeout")
            client.close()
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            log.warning("closing connection from %s: TLS handshake failed: %s", peer, _describe(exc))
            # A refusal by TLS (unknown CA, no client certificate, no common cipher) is "handshake";
            # a client that hung up or reset mid-handshake (librdkafka closing a client does) "aborted".
            self.on_failure("handshake" if isinstance(exc, ssl.SSLError) else "aborted")
            client.close()

    async def _first_bytes(self, client: socket.socket) -> bytes:
        """The first bytes the client sent, left in the socket for the TLS handshake to read."""
        loop = asyncio.get_running_loop()
        client.setblocking(False)
        fd = client.fileno()
        while True:
            try:
                return client.recv(2, socket.MSG_PEEK)
            except BlockingIOError:
                pass
            readable: asyncio.Future[None] = loop.create_future()
            loop.add_reader(fd, _wake, readable)
            try:
                await readable
            finally:
                with contextlib.suppress(Exception):
                    loop.remove_reader(fd)


def _wake(readable: asyncio.Future[None]) -> None:
    if not readable.done():
        readable.set_result(None)
