"""One client connection, the transport: frames in, answers out, strictly in request order.

Each request gets a slot in arrival order, filled with the response bytes once its answer is
known; a response is written only when every earlier slot has been written, so a parked JoinGroup
holds back the responses behind it on that connection, as Kafka's clients expect. What each
request is for is not this module's business: its header is peeked and the frame handed to the
dispatcher (dispatch.py), which answers it, routes it to a shard or relays it upstream (relay/),
each through :meth:`ClientConnection.new_slot` and :meth:`ClientConnection.fill`. Answers go out in
one write per read or per loop iteration (writes.py), or per upstream read for relayed ones.

Bad input never reaches past this class: an oversized or malformed frame, an unknown API key or
an unsupported version closes this connection with a log line; other clients are unaffected.

Limits. Reading from a connection pauses, and requests already read wait undispatched
(``_backlog``), while any of these holds; it resumes when none does:
- ``max.inflight`` requests are in flight (resumes at half);
- its unsent output passes ``connection.output.pause.bytes`` (resumes at half). Unsent output is
  the answers filled but not yet handed to the transport (``_queued``: slots behind a parked one,
  ``_out``) plus what the transport holds; the transport's write-buffer limits are 0, so
  pause_writing/resume_writing say exactly when it holds any;
- the unsent output of all connections passes ``queued.max.response.bytes`` (App; it holds some);
- a large request waits for ``queued.max.request.bytes`` memory (protocol.frames.FrameBudget);
- a costly request waits for its loop iteration: one is dispatched per iteration across all
  connections (dispatch_turns.py);
- a large read waits for its loop iteration: one is processed per iteration across all
  connections (``LARGE_READ``, the App's ``read_turns``; the read is kept meanwhile);
- a costly request waits while the socket does not take the connection's earlier answers (the
  transport holds some), as Kafka's broker reads no request from a connection until its last
  response went out. The kernel's share of the unsent output is capped (``UNSENT_IN_KERNEL``; more
  while a large relayed answer streams), so the transport holds some as soon as the client stops
  reading. (Answers waiting behind a parked request do not count: the client is not the reason
  they wait.)
A connection whose unsent output passes ``connection.output.max.bytes`` is closed. The App's sweep
closes connections idle for ``connections.max.idle.ms`` (no complete request, no answer written,
nothing in flight) and those whose frame has been arriving for ``request.receive.timeout.ms``
(not while we are the ones not reading). Closing drops every buffer at once (slots, output,
undispatched frames, the partial frame and its reserved memory) and the App's accounting with it.
The hot path pays a few integer compares per request: no timers, no allocations.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from kcoord.protocol import frames
from kcoord.protocol.primitives import CodecError

from .dispatch import ApiDispatcher, UnsupportedApi
from .relay import UpstreamRelay
from .request_cost import request_cost
from .sasl import SaslGate
from .slot import Slot
from .tls import looks_like_tls, principal_of_transport

if TYPE_CHECKING:
    from .server import Listener

log = logging.getLogger("kcoord.connection")

# Why reading is paused (bits of ClientConnection._pause_reasons); _CLOSED never clears.
_INFLIGHT = 1  # max.inflight requests in flight
_OUTPUT = 2  # unsent output over connection.output.pause.bytes
_TOTAL = 4  # all connections' unsent output over queued.max.response.bytes
_MEMORY = 8  # a large request waits for queued.max.request.bytes
_REQUEST_MEMORY = 16  # a costly request waits for queued.max.request.bytes before its dispatch
_INFLIGHT_BYTES = 32  # its requests in flight cost over connection.inflight.max.bytes
_SASL = 64  # a SASL step is with the upstream (sasl.py)
_CLOSED = 128
_TURN = 256  # a costly request waits for its loop iteration (dispatch_turns.py)
_DECODING = 512  # a large request is decoded in steps (dispatch.py): the frames behind it wait
_READ_TURN = 1024  # a large read waits for its loop iteration's turn (read_turns, _stash)
_DRAIN = 2048  # a costly request waits until the socket took every earlier answer

# Unsent bytes the kernel keeps for a client socket (TCP_NOTSENT_LOWAT): above it the socket takes
# no more, so the rest stays in the transport, where it is counted and pauses the client. Without
# it Linux grows a loopback socket's send buffer to ~4 MB: a client that never reads had ~8 answers
# of 0.5 MB computed for it before anything showed, each 10-20 ms of the loop (bench/RESULTS.md,
# hostile clients). Only unsent bytes count, not those in flight, so a reading client's throughput
# is not limited; the socket wakes us to write again below half of it.
UNSENT_IN_KERNEL = 128 * 1024
# While a large relayed answer streams to the client (start_streaming: bytes the upstream computed,
# only copied here), the kernel may keep this much of it unsent instead: the socket's largest send
# buffer by default (tcp_wmem). At 128 KiB the socket woke kcoord for every 64-128 KiB a client
# took: a stock Java consumer (10 KB records, 10 MB answers) consumed at 0.86x of its direct rate
# through kcoord, which spent 0.28-0.30 cores on it; at 512 KiB 0.87x; at 4 MiB 0.91x and 0.21-0.23
# cores (interleaved rounds with Kafka 4.0, bench/RESULTS.md, relay, 2026-11-29).
STREAMING_UNSENT_IN_KERNEL = 4 * 1024 * 1024

# Linux TCP states (tcp_states.h) in which the peer has closed: a paused connection never reads its EOF.
_TCP_CLOSE, _TCP_CLOSE_WAIT = 7, 8

# A read of more than this many bytes, or any read of a large frame's rest, is processed one
# connection per loop iteration (read_turns): see data_received.
LARGE_READ = frames.LARGE_FRAME

# Requests estimated to cost more than this reserve their cost from queued.max.request.bytes before
# they are dispatched (and wait for it); cheaper ones are only counted, so a heartbeat never waits
# behind a costly request for memory (connection.inflight.max.bytes bounds them per connection).
RESERVE_ABOVE = frames.LARGE_FRAME


class DeferredFrame(NamedTuple):
    """What the frame being dispatched carries while its request is decoded in steps."""

    api_key: int
    received: float
    cost: int
    reserved: int


class ClientConnection(asyncio.Protocol):
    """One client connection: frames in, answers out in request order, within its limits."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.app = listener.app
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        # Who the client is (Kafka's KafkaPrincipal as text): User:ANONYMOUS but on TLS with a client
        # certificate (tls.py) or once SASL authenticated it (sasl.py). Kept for authorization.
        self.principal = "User:ANONYMOUS"
        self.ip = ""
        self.client_host = ""
        settings = self.app.settings
        self._decoder = frames.FrameDecoder(settings.max_frame_size, self.app.frame_budget)
        self._decoder.on_ready = self._memory_granted
        self._max_inflight = settings.max_inflight
        self._output_pause = settings.connection_output_pause_bytes
        self._output_max = settings.connection_output_max_bytes
        # Requests in flight: their estimated cost (request_cost.py), per connection and in the
        # App's FrameBudget; the cost of the request being dispatched and what it reserved of the
        # budget, and a reservation granted to the first frame of _backlog while reading paused.
        self._budget = self.app.frame_budget
        self._inflight_max = settings.connection_inflight_max_bytes
        self._inflight_bytes = 0
        self._frame_cost = 0
        self._frame_reserved = 0
        self._granted = 0
        self._memory_waiter = frames.MemoryWaiter()
        self._memory_waiter.on_ready = self._request_memory_granted
        # Costly requests are dispatched one per loop iteration across connections (dispatch_turns.py).
        self._turns = self.app.dispatch_turns
        self._has_turn = False
        # Large reads: one connection's is processed per loop iteration (see data_received).
        self._read_turns = self.app.read_turns
        self._stash: bytes | None = None  # a large read waiting for its turn (reading paused meanwhile)
        self._slots: deque[Slot] = deque()
        self._frame_api = -1
        self._frame_received = 0.0
        self._pause_reasons = 0
        self._backlog: list[bytes] | None = None  # frames read but not dispatched while paused
        self._continue_scheduled = False
        self.closed = False
        self._closed_at = 0.0
        # The level of the "closing connection" line: lowered where the reason was logged already
        # (a failed SASL login is logged, rate-limited, by sasl.py).
        self.close_log_level = logging.WARNING
        # Unsent output: answers filled but not handed to the transport yet (``_queued``), and what
        # the App last counted for this connection (``_held``: that plus the transport's backlog).
        self._queued = 0
        self._held = 0
        self._transport_backlog = False  # between pause_writing and resume_writing
        # perf_counter of the last complete request or answer written (connections.max.idle.ms), and
        # of the first byte of a frame not complete yet (request.receive.timeout.ms; 0: none).
        self._active = time.perf_counter()
        self._partial_since = 0.0
        # Responses ready to write. They go out in one write per read (at the end of data_received)
        # or per loop iteration (answers that waited for the log arrive many per tick): a write
        # is a syscall, and one per response was a tenth of kcoord's CPU in a commit storm.
        self._out: list[bytes] = []
        self._out_large = False  # _out holds a large answer's payload (see Slot.body)
        # One write callback per loop iteration for all connections (writes.py).
        self._writes = self.app.writes
        self._dispatching = False
        self._write_scheduled = False
        self._streaming: Slot | None = None  # the answer start_streaming began, until it is written
        # What to do with each request (dispatch.py) and the paired upstream connection (relay/).
        self.relay = UpstreamRelay(self)
        self._dispatch = ApiDispatcher(self, self.relay).dispatch
        # On a SASL listener the SASL exchange comes first (sasl.py), in front of the dispatcher.
        self.sasl: SaslGate | None = None
        if listener.sasl:
            self.sasl = SaslGate(self, self.relay, self._dispatch)
            self._dispatch = self.sasl.dispatch

    # -- asyncio.Protocol -----------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = f"{peer[0]}:{peer[1]}"
            self.ip = str(peer[0])
            self.client_host = "/" + self.ip
        if self.sasl is None:
            self.principal = principal_of_transport(transport)  # on SASL_SSL, SASL names the client
        log.debug("connection from %s: principal %s", self.peer, self.principal)
        if not self.app.connection_opened(self):  # over max.connections(.per.ip): logged and counted there
            self.closed = True
            self._pause_reasons = _CLOSED
            self._decoder.close()
            transport.close()
            return
        # No write buffering in the transport before it tells us: pause_writing as soon as the socket
        # does not take everything, resume_writing once all of it went (see _account).
        set_limits = getattr(transport, "set_write_buffer_limits", None)
        if set_limits is not None:
            set_limits(0)
        limit_unsent_in_kernel(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._pause_reasons |= _CLOSED
        self.relay.client_closed()  # what the client sent is still delivered and processed
        self._release()  # answers still owed are dropped when they come (see fill)
        self._transport_backlog = False
        self._account()
        self.app.connection_closed(self)
        # A connection's parts refer to each other (relay, dispatcher, SASL gate: a reference cycle),
        # and the collector runs its oldest generation rarely (cli.GC_THRESHOLDS): a TLS transport
        # (~25 KiB of SSL buffers) kept from here lived until then. Measured: RSS grew 26 KiB per
        # failed SASL_SSL login (bench/auth_storm.py); dropped here, it is freed at once.
        self.transport = None

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        if self._stash is not None:  # not expected: reading is paused while a read waits
            self._stash += data
            return
        if (len(data) > LARGE_READ or self._decoder.receiving_large) and not self._read_turns.take(
            self._read_turn_came
        ):
            # Processing a large read is 0.1-0.5 ms (its frames cut out and joined, page faults
            # included, and dispatched), and when many connections read at once (64 clients
            # starting together, or resuming together) one loop iteration processed 15-55 of them:
            # 5-8 ms of CPU while every other client's request waited (bench/RESULTS.md, hostile
            # clients). The read is kept as it is, reading pauses, and a later iteration's turn
            # processes it: one large read per iteration across connections, in arrival order.
            self._stash = data
            self._pause(_READ_TURN)
            return
        self._received(data)

    def _received(self, data: bytes) -> None:
        decoder = self._decoder
        try:
            payloads = decoder.feed(data)
        except frames.FrameTooLarge as exc:
            first = not self._frame_received and looks_like_tls(data)
            self.close_with("TLS handshake on a plaintext listener" if first else f"oversized frame: {exc}")
            return
        now = self._frame_received = time.perf_counter()
        if decoder.buffered:  # a frame has begun: request.receive.timeout.ms runs from its first byte
            if payloads or not self._partial_since:
                self._partial_since = now
        else:
            self._partial_since = 0.0
        if decoder.waiting:  # a large frame waits for queued.max.request.bytes: read no more of it
            self._pause(_MEMORY)
        if payloads:
            self._active = now
            if self._backlog is not None:  # not expected: reading was paused
                payloads = self._backlog + payloads
                self._backlog = None
            self._run(payloads)

    def _run(self, payloads: list[bytes]) -> None:
        """Dispatch frames in order until reading pauses (the rest waits in ``_backlog``)."""
        rest = None
        dispatch = self._dispatch
        self._dispatching = True
        try:
            frames_left = iter(payloads)
            for payload in frames_left:
                try:
                    if self.sasl is not None and self.sasl.expects_raw_token:  # no request header
                        self.sasl.raw_token(payload)
                    else:
                        api_key, version, correlation_id = frames.peek_header(payload)
                        cost = self._frame_cost = request_cost(payload, api_key, version)
                        if cost > RESERVE_ABOVE and not self._admit(cost):
                            rest = [payload, *frames_left]  # it waits for memory, and the rest behind it
                            break
                        self._frame_api = api_key
                        dispatch(payload, api_key, version, correlation_id)
                except UnsupportedApi as exc:
                    self.close_with(str(exc))
                    return
                except CodecError as exc:
                    self.close_with(f"malformed request: {exc}")
                    return
                finally:
                    if self._frame_reserved:  # no slot took it (no answer due, or bad input)
                        self._unreserve(self._frame_reserved)
                    self._frame_cost = self._frame_reserved = 0
                if self._pause_reasons:
                    if not self.closed:
                        rest = list(frames_left)
                    break
        finally:
            self._dispatching = False
            if self._out:
                self.write_out()
            upstream = self.relay.upstream
            if upstream is not None:
                upstream.flush()  # the frames of this read go upstream in one write, now
        if rest and not self.closed:  # (that write may have closed it: over connection.output.max.bytes)
            self._backlog = rest
            if not self._pause_reasons:  # resumed by that write
                self._schedule_continue()

    def _admit(self, cost: int) -> bool:
        """Whether a frame costing ``cost`` (more than RESERVE_ABOVE) may be dispatched now: it waits
        (reading pauses) until the socket took the connection's earlier answers, then for its loop
        iteration's turn, then until it reserved its cost from queued.max.request.bytes."""
        if self._not_taking_answers():
            # Its answer would only wait behind the earlier ones: computing answers faster than the
            # client takes them cost every other client the loop (10-20 ms each for 20,000 groups),
            # and a client that never reads would have them all computed for nothing.
            self._frame_cost = 0
            self._has_turn = False
            self._pause(_DRAIN)
            return False
        if self._has_turn:
            self._has_turn = False
        elif not self._turns.take(self._turn_came):
            self._frame_cost = 0
            self._pause(_TURN)
            return False
        budget = self._budget
        if budget is None:
            return True
        if self._granted:  # reserved while it waited
            self._frame_reserved, self._granted = self._granted, 0
            return True
        reserved = min(cost, budget.capacity)
        if budget.reserve(self._memory_waiter, reserved):
            self._frame_reserved = reserved
            return True
        self._frame_cost = 0
        self._pause(_REQUEST_MEMORY)
        return False

    def _not_taking_answers(self) -> bool:
        """Whether the socket did not take all the answers written to it (after handing the
        transport those ready to go)."""
        if self._out:
            self.write_out()
        return self._transport_backlog

    def _turn_came(self) -> bool:
        """This connection's costly request may be dispatched now (DispatchTurns)."""
        if self.closed:
            return False
        if self._pause_reasons & ~_TURN:  # paused for more than its turn: it asks again once resumed
            self._pause_reasons &= ~_TURN
            return False
        self._has_turn = True
        self._resume(_TURN)
        self._continue()  # in this iteration, which is its turn
        return True

    def _read_turn_came(self) -> bool:
        """This connection's large read may be processed now, in this iteration (read_turns)."""
        stash = self._stash
        if self.closed or stash is None:
            return False
        if self._pause_reasons & ~_READ_TURN:
            # Paused for something else meanwhile: the read waits for that too, and asks for a
            # turn again once it cleared (_resume).
            self._pause_reasons &= ~_READ_TURN
            return False
        self._stash = None
        self._pause_reasons = 0  # the transport stays paused until the read is processed
        self._received(stash)
        if not self._pause_reasons:
            self._reading_again()
        return True

    def _request_memory_granted(self) -> None:
        """The FrameBudget reserved what the first frame of _backlog waits for."""
        if self.closed:
            return
        self._granted = self._memory_waiter.granted
        self._resume(_REQUEST_MEMORY)

    def _unreserve(self, size: int) -> None:
        if self._budget is not None:
            self._budget.unreserve(size)

    def _schedule_continue(self) -> None:
        if not self._continue_scheduled:
            self._continue_scheduled = True
            asyncio.get_running_loop().call_soon(self._continue)

    def _continue(self) -> None:
        self._continue_scheduled = False
        backlog = self._backlog
        if backlog is not None and not self._pause_reasons:
            self._backlog = None
            self._run(backlog)

    # -- pausing ------------------------------------------------------------------------------------
    def defer_dispatch(self) -> DeferredFrame:
        """The frame being dispatched is dispatched again later (its request is decoded in steps):
        the frames behind it wait, and it keeps its cost and reservation until
        :meth:`resume_dispatch`, which must follow."""
        deferred = DeferredFrame(
            self._frame_api, self._frame_received, self._frame_cost, self._frame_reserved
        )
        self._frame_cost = self._frame_reserved = 0
        self._pause(_DECODING)
        return deferred

    def resume_dispatch(
        self, deferred: DeferredFrame, serve: Callable[[], None] | None, failed: Exception | None = None
    ) -> None:
        """Finish a deferred frame: ``serve()`` dispatches its request (it may take a slot, as
        dispatching does); ``failed``: the request could not be decoded, so the connection closes.
        Then the frames behind it go on."""
        if self.closed or serve is None:
            if failed is not None and not self.closed:
                self.close_with(f"malformed request: {failed}")
            if deferred.reserved:
                self._unreserve(deferred.reserved)
            return
        self._frame_api, self._frame_received = deferred.api_key, deferred.received
        self._frame_cost, self._frame_reserved = deferred.cost, deferred.reserved
        try:
            serve()
        except CodecError as exc:
            self.close_with(f"malformed request: {exc}")
        finally:
            if self._frame_reserved:  # no slot took it
                self._unreserve(self._frame_reserved)
            self._frame_cost = self._frame_reserved = 0
        if not self.closed:
            self._resume(_DECODING)
            self.write_out()

    def _pause(self, reason: int) -> None:
        if not self._pause_reasons and self.transport is not None:
            self.transport.pause_reading()
        self._pause_reasons |= reason

    def _resume(self, reason: int) -> None:
        reasons = self._pause_reasons
        if not reasons & reason:
            return
        reasons &= ~reason
        self._pause_reasons = reasons
        if reasons or self.transport is None:
            return
        if self._stash is not None:  # a large read still waits for its turn: reading stays paused
            self._pause_reasons = _READ_TURN
            self._read_turns.wait(self._read_turn_came)
            return
        self._reading_again()

    def _reading_again(self) -> None:
        """Nothing pauses reading any more: resume it, and dispatch the frames read meanwhile."""
        assert self.transport is not None
        self.transport.resume_reading()
        if self._partial_since:  # the client could not send while we did not read
            self._partial_since = time.perf_counter()
        if self._backlog is not None and not self._dispatching:
            self._schedule_continue()

    def _memory_granted(self) -> None:
        """The FrameBudget reserved the memory our large partial frame waited for."""
        self._resume(_MEMORY)

    def pause_writing(self) -> None:
        # Called inside transport.write(): _write_out accounts for it once the write returns.
        self._transport_backlog = True

    def resume_writing(self) -> None:
        self._transport_backlog = False
        self._active = time.perf_counter()  # the client took all we sent
        self._account()

    def _account(self) -> None:
        """Update this connection's share of the App's unsent-output total, then apply the
        per-connection limits: pause above connection.output.pause.bytes (resume at half), close
        above connection.output.max.bytes."""
        held = self._queued
        if self._transport_backlog and self.transport is not None:
            held += self.transport.get_write_buffer_size()
        old = self._held
        if held != old:
            self._held = held
            self.app.output_changed(self, old, held)
        if self.closed:
            return
        if held > self._output_max:
            self.close_for_limit(
                "output_cap",
                f"{held} bytes of responses unsent (connection.output.max.bytes={self._output_max})",
            )
        elif held > self._output_pause:
            if not self._pause_reasons & _OUTPUT:
                self._pause(_OUTPUT)
        elif self._pause_reasons & _OUTPUT and held <= self._output_pause // 2:
            self._resume(_OUTPUT)
        if self._pause_reasons & _DRAIN and not self._transport_backlog:
            self._resume(_DRAIN)

    # -- slots: what dispatch.py and relay/ answer through -----------------------------------------------
    def new_slot(self, kind: type[Slot] = Slot) -> Slot:
        """The slot of the request being dispatched: its answer is written after every earlier one.
        The request's estimated cost is charged until the slot is filled. ``kind``: a subclass of
        Slot that also carries what the answer needs (the relay's, one object per request)."""
        slot = kind(self._frame_api, self._frame_received)
        slots = self._slots
        slots.append(slot)
        if len(slots) >= self._max_inflight:
            self._pause(_INFLIGHT)
        cost = self._frame_cost
        if cost:
            self._frame_cost = 0
            slot.cost = cost
            if self._budget is not None:
                self._budget.charge(cost, self._frame_reserved)
            self._frame_reserved = 0
            inflight = self._inflight_bytes = self._inflight_bytes + cost
            if inflight > self._inflight_max:
                self._pause(_INFLIGHT_BYTES)
        return slot

    def fill(self, slot: Slot, data: bytes, body: bytes | list[bytes] | None = None) -> None:
        """Answer ``slot`` (``b""``: nothing to write); written once every earlier slot is.
        ``body``: a large answer's payload (or its pieces), written after ``data`` rather than
        copied into it."""
        cost = slot.cost
        if cost:  # also once closed: the request's memory was held until now (_discharge, inlined)
            slot.cost = 0
            if self._budget is not None:
                self._budget.discharge(cost)
            inflight = self._inflight_bytes = self._inflight_bytes - cost
            if self._pause_reasons & _INFLIGHT_BYTES and inflight <= self._inflight_max // 2:
                self._resume(_INFLIGHT_BYTES)
        if slot.data is not None or self.closed:
            return
        slot.data = data
        size = len(data)
        if body is not None:
            slot.body = body
            size += len(body) if isinstance(body, bytes) else sum(map(len, body))
        queued = self._queued = self._queued + size
        slots = self._slots
        if slots and slots[0] is slot:  # only the head can unblock writes
            self._flush()
        if queued > self._output_pause:
            if self._out:
                self.write_out()  # now, not at the end of the read: the transport says if the client keeps up
            else:
                self._account()  # answers waiting behind an unanswered request

    def fail(self, slot: Slot, reason: str, upstream: bool = False) -> None:
        """The connection closes when ``slot`` comes up, after the answers before it are written.
        ``upstream``: the upstream failed it (see :meth:`close_with`)."""
        if slot.data is None:
            slot.failure = reason
            slot.upstream_failure = upstream
        self.fill(slot, b"")

    def _flush(self) -> None:
        slots = self._slots
        transport = self.transport
        if transport is None or self.closed:
            return
        metrics = self.app.metrics
        out = self._out
        pending = len(out)
        now = 0.0
        streaming = self._streaming
        while slots and slots[0].data is not None:
            slot = slots.popleft()
            if slot is streaming:  # its end is written now: the kernel keeps less again
                self._streaming = streaming = None
                limit_unsent_in_kernel(transport)
            if slot.failure is not None:
                self.close_with(slot.failure, upstream=slot.upstream_failure)
                return
            data = slot.data
            if data:
                out.append(data)
                body = slot.body
                if body is not None:
                    if isinstance(body, bytes):
                        out.append(body)
                    else:
                        out.extend(body)
                    self._out_large = True
                if not now:
                    now = time.perf_counter()
                metrics.request_done(slot.api_key, now - slot.received)
        if len(out) > pending:
            self._active = now
            up = self.relay.upstream
            if up is not None and up.reading:
                pass  # answers of an upstream read: its after_read writes them (relay/passthrough.py)
            elif not self._dispatching and not self._write_scheduled:
                self._write_scheduled = True
                self._writes.write_soon(self)
        if self._pause_reasons & _INFLIGHT and len(slots) <= self._max_inflight // 2:
            self._resume(_INFLIGHT)

    def write_out(self) -> None:
        """Hand every answer ready to the transport, in one write."""
        self._write_scheduled = False
        out = self._out
        if not out:
            return
        self._out = []
        transport = self.transport
        if transport is None or self.closed:
            return
        if self._out_large:  # large relayed answers among them: handed over as they are (writev), not joined
            self._out_large = False
            self._queued -= sum(map(len, out))
            transport.writelines(out)
        else:
            data = b"".join(out) if len(out) > 1 else out[0]
            self._queued -= len(data)
            transport.write(data)
        if self._transport_backlog or self._queued or self._held or self._pause_reasons & _DRAIN:
            self._account()

    def start_streaming(self, slot: Slot, size: int) -> bool:
        """Begin writing ``slot``'s answer of ``size`` bytes before it is whole (the relay's large
        answers): only when it is the next to be written and nothing of it is known yet. Writes the
        answers before it and its size prefix."""
        transport = self.transport
        if not self._slots or self._slots[0] is not slot or transport is None or self.closed:
            return False
        if slot.data is not None:
            return False
        self.write_out()  # answers before this one, already filled, go first
        transport.write(frames.size_prefix(size))
        if self._streaming is None:
            limit_unsent_in_kernel(transport, STREAMING_UNSENT_IN_KERNEL)
        self._streaming = slot
        return True

    def write_streamed(self, pieces: list[bytes]) -> None:
        """More of the answer :meth:`start_streaming` began."""
        assert self.transport is not None
        write = self.transport.write
        for piece in pieces:
            write(piece)
        self._active = time.perf_counter()
        if self._transport_backlog:
            self._account()

    @property
    def has_slots(self) -> bool:
        """Whether answers are still owed to the client."""
        return bool(self._slots)

    # -- closing --------------------------------------------------------------------------------------
    def close_with(self, reason: str, upstream: bool = False) -> None:
        """Close after the answers already written (bad input, a failed request).

        ``upstream``: the upstream failed, not the client. While kcoord's probe finds the upstream
        failing or silent, that outage has its own log line (ops/upstream_health.py) and this
        connection's goes to DEBUG: with the upstream gone every client reconnects and fails
        several times a second, and a line each buried the one that said why."""
        if self.closed:
            return
        level = self.close_log_level
        if upstream and self.app.upstream_health.suspect:
            level = logging.DEBUG
        log.log(level, "closing connection from %s: %s", self.peer, reason)
        out = self._out
        self._closing()
        if self.transport is not None:
            if out:  # answers to the requests before the bad one still go out
                self.transport.write(b"".join(out))
            self.transport.close()
        self._account()  # the transport's backlog stays counted until it is gone (App.sweep bounds it)

    def close_for_limit(self, reason: str, message: str) -> None:
        """Close for one of the limits (``reason``: metrics.CLOSE_REASONS), dropping unsent output."""
        if self.closed:
            return
        # Idle connections are closed in the ordinary course of things (clients reconnect): not a warning.
        level = logging.INFO if reason == "idle" else logging.WARNING
        log.log(level, "closing connection from %s: %s", self.peer, message)
        self.app.metrics.connection_limited(reason)
        self._closing()
        transport = self.transport
        if transport is not None:
            if self._transport_backlog:
                transport.abort()  # a client that does not read would keep a graceful close waiting
                self._transport_backlog = False
            else:
                transport.close()
        self._account()

    def _closing(self) -> None:
        self.closed = True
        self._pause_reasons |= _CLOSED
        self._closed_at = time.perf_counter()
        self._release()

    def _release(self) -> None:
        """Drop every buffer: slots and their answers, unsent output, frames not dispatched, the
        partial frame and the memory it reserved."""
        self._slots.clear()
        self._out = []
        self._backlog = None
        self._stash = None
        self._queued = 0
        self._decoder.close()
        if self._budget is not None:
            self._budget.cancel(self._memory_waiter)
        if self._granted:
            self._unreserve(self._granted)
            self._granted = 0

    def expire(self, now: float, idle_after: float, slow_after: float) -> None:
        """The App's periodic sweep: the idle and receive timeouts (seconds; inf: off)."""
        if self.closed:
            # Closed after its last answers, which a client that does not read never takes.
            if self._closed_at and now - self._closed_at > min(idle_after, slow_after) and self.transport:
                self.transport.abort()
            return
        reasons = self._pause_reasons
        if reasons and self._peer_closed():
            # Reading is paused, so the client's FIN or RST is never read: without this its requests
            # waiting for memory would still be served (and hold memory) long after it left.
            self.close_with("the client closed its connection while reading from it was paused")
            if self.transport is not None:
                self.transport.abort()
            return
        if self._partial_since and not reasons and now - self._partial_since > slow_after:
            self.close_for_limit(
                "slow_frame",
                (
                    f"a request has been arriving for {now - self._partial_since:.1f}s "
                    f"(request.receive.timeout.ms={slow_after * 1000:.0f}), {self._decoder.buffered} bytes so far"
                ),
            )
        elif (
            not self._slots and not reasons & (_MEMORY | _REQUEST_MEMORY) and now - self._active > idle_after
        ):
            self.close_for_limit(
                "idle",
                (f"idle for {now - self._active:.1f}s (connections.max.idle.ms={idle_after * 1000:.0f})"),
            )
        elif self._held:
            self._account()  # the transport may have sent some without telling (it only says when all went)

    def _peer_closed(self) -> bool:
        """Whether the client closed its end (Linux's TCP_INFO state; False where unknown)."""
        transport = self.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is None or not hasattr(socket, "TCP_INFO"):
            return False
        try:
            state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
        except (OSError, IndexError):
            return False
        return state in (_TCP_CLOSE, _TCP_CLOSE_WAIT)

    @property
    def idle(self) -> bool:
        return not self._slots

    @property
    def held(self) -> int:
        return self._held

    def pause_for_sasl(self) -> None:
        self._pause(_SASL)

    def resume_for_sasl(self) -> None:
        self._resume(_SASL)

    def limit_frames(self, size: int | None) -> None:
        """Accept frames of at most ``size`` bytes (None: max.frame.size again): SASL's limit before
        authentication."""
        self._decoder.max_frame_size = self.app.settings.max_frame_size if size is None else size

    def pause_for_total(self) -> None:
        self._pause(_TOTAL)

    def resume_for_total(self) -> None:
        self._resume(_TOTAL)


def limit_unsent_in_kernel(transport: asyncio.BaseTransport, limit: int = UNSENT_IN_KERNEL) -> None:
    """Cap the kernel's unsent bytes of a client socket at ``limit`` (where TCP has the option)."""
    sock = transport.get_extra_info("socket")
    option = getattr(socket, "TCP_NOTSENT_LOWAT", None)
    if sock is None or option is None:
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, option, limit)
    except OSError as exc:  # not TCP (a Unix socket in a test) or an old kernel: the kernel keeps more
        log.debug("TCP_NOTSENT_LOWAT not set: %s", exc)
