"""A ClientConnection's limits with no sockets: a fake transport that takes output only when told.

Covers the reasons reading pauses (requests in flight, the connection's unsent output, all
connections' unsent output, memory for a large frame) and that each resumes independently, the
per-connection output cap, the App's accounting returning to zero when connections close, the
idle and receive timeouts of the App's sweep, and max.connections / max.connections.per.ip.
"""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

import pytest

from kcoord.coordinator.net import connection as c
from kcoord.coordinator.net.connection import ClientConnection
from kcoord.coordinator.net.server import App, Listener
from kcoord.coordinator.ops.settings import Settings
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey
from kcoord.storage.memory import MemoryStorage

ANSWER = 4 + 4 + 2 + 4 + 100 * 6  # an ApiVersions v0 answer of the stub cluster below


class StubCluster:
    def api_versions_response(self, error: int = 0, *, sasl: bool = False) -> Any:
        R = m.ApiVersionsResponse
        return R(
            error_code=error,
            api_keys=[R.ApiVersion(api_key=k, min_version=0, max_version=1) for k in range(100)],
        )


class FakeTransport:
    """Takes writes into a buffer; ``accepting`` says whether the 'socket' sends them at once."""

    def __init__(self, protocol: ClientConnection, ip: str = "10.0.0.1", accepting: bool = True) -> None:
        self.protocol = protocol
        self.ip = ip
        self.accepting = accepting
        self.buffer = bytearray()
        self.sent = bytearray()
        self.reading = True
        self.writing_paused = False
        self.closed = self.aborted = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return (self.ip, 40000) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        assert high == 0

    def write(self, data: bytes) -> None:
        if self.accepting and not self.buffer:
            self.sent += data
            return
        self.buffer += data
        if not self.writing_paused:
            self.writing_paused = True
            self.protocol.pause_writing()

    def drain(self) -> None:
        self.sent += self.buffer
        self.buffer.clear()
        if self.writing_paused:
            self.writing_paused = False
            self.protocol.resume_writing()

    def get_write_buffer_size(self) -> int:
        return len(self.buffer)

    def pause_reading(self) -> None:
        assert self.reading, "paused twice"
        self.reading = False

    def resume_reading(self) -> None:
        assert not self.reading, "resumed twice"
        self.reading = True

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True
        self.buffer.clear()


def app_with(**limits: Any) -> App:
    app = App(Settings(storage="memory", **limits), storage=MemoryStorage())
    app.cluster = StubCluster()  # type: ignore[assignment]
    return app


def connect(app: App, ip: str = "10.0.0.1", accepting: bool = True) -> tuple[ClientConnection, FakeTransport]:
    conn = ClientConnection(Listener(app, None))
    transport = FakeTransport(conn, ip, accepting)
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


def requests(n: int, start: int = 0) -> bytes:
    return b"".join(
        frames.frame(struct.pack(">hhih", ApiKey.API_VERSIONS, 0, start + i, -1)) for i in range(n)
    )


def answers(transport: FakeTransport) -> int:
    return len(frames.FrameDecoder().feed(bytes(transport.sent)))


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


# -- back-pressure --------------------------------------------------------------------------------------------
async def test_reading_pauses_while_unsent_output_is_over_the_mark_and_resumes_when_it_drains() -> None:
    app = app_with(connection_output_pause_bytes=3 * ANSWER)
    conn, t = connect(app, accepting=False)
    conn.data_received(requests(10))
    # Dispatch stops once the answers not sent pass the mark: the other 6 requests wait, read.
    assert not t.reading
    assert app.output_bytes == len(t.buffer) == 4 * ANSWER
    assert conn._backlog is not None and len(conn._backlog) == 6
    t.drain()  # the socket took it all: reading resumes, the 6 go at the next loop iteration
    assert t.reading and app.output_bytes == 0 and answers(t) == 4
    await settle()
    assert not t.reading and len(t.buffer) == 4 * ANSWER and len(conn._backlog) == 2
    t.accepting = True
    t.drain()
    await settle()
    assert t.reading and answers(t) == 10 and app.output_bytes == 0 and conn._backlog is None
    # A client that reads is never paused, however much it pipelines.
    conn.data_received(requests(500, 100))
    assert t.reading and answers(t) == 510 and app.output_bytes == 0


async def test_in_flight_and_output_pause_independently() -> None:
    app = app_with(max_inflight=4)
    conn, t = connect(app)
    conn._pause(c._INFLIGHT)
    conn._pause(c._OUTPUT)
    assert not t.reading
    conn._resume(c._INFLIGHT)
    assert not t.reading, "resumed while output still held it"
    conn._pause(c._INFLIGHT)
    conn._resume(c._OUTPUT)
    assert not t.reading
    conn._resume(c._INFLIGHT)
    assert t.reading

    # max.inflight: the request that reaches it stops dispatch; the rest waits, read, in order.
    parked = [conn.new_slot() for _ in range(3)]  # as if three requests waited for their answers
    conn.data_received(requests(5))
    assert not t.reading and answers(t) == 0 and conn._backlog is not None and len(conn._backlog) == 4
    for slot in parked:
        conn.fill(slot, b"")
    await settle()
    assert t.reading and answers(t) == 5 and conn._backlog is None


async def test_max_inflight_of_one_still_resumes() -> None:
    app = app_with(max_inflight=1)
    conn, t = connect(app)
    conn.data_received(requests(5))
    await settle()
    assert t.reading and answers(t) == 5


async def test_a_connection_over_the_output_cap_is_closed_and_its_accounting_dropped() -> None:
    app = app_with(connection_output_pause_bytes=4 * ANSWER, connection_output_max_bytes=6 * ANSWER)
    conn, t = connect(app, accepting=False)
    conn.data_received(requests(5))
    assert not t.reading and app.output_bytes == 5 * ANSWER
    # Answers to requests in flight before the pause keep coming: past the cap the connection goes.
    conn.fill(conn.new_slot(), b"x" * 2 * ANSWER)
    await settle()
    assert t.aborted  # the transport held output: dropped, not flushed to a client that does not read
    assert app.output_bytes == 0 and app._output_holders == set()
    assert (
        app.metrics.registry.get_sample_value("kcoord_connections_closed_total", {"reason": "output_cap"})
        == 1
    )
    conn.connection_lost(None)
    assert app.output_bytes == 0 and app.connections == set()


async def test_the_total_over_queued_max_response_bytes_pauses_every_holder_until_half() -> None:
    app = app_with(queued_max_response_bytes=10 * ANSWER, connection_output_pause_bytes=100 * ANSWER)
    (a, ta), (b, tb), (_, ti) = connect(app, accepting=False), connect(app, accepting=False), connect(app)
    a.data_received(requests(6))
    assert ta.reading and app.output_bytes == 6 * ANSWER
    b.data_received(requests(6))
    assert app.output_bytes == 12 * ANSWER
    assert not ta.reading and not tb.reading and ti.reading  # only connections holding output
    ta.drain()  # 6 * ANSWER left, over half the cap: b stays paused, a holds none and is not
    assert ta.reading and not tb.reading
    ta.accepting = False
    a.data_received(requests(1))  # holding again while the total is over: paused again
    assert not ta.reading and app.output_bytes == 7 * ANSWER
    ta.accepting = True
    ta.drain()
    tb.accepting = True
    tb.drain()
    assert ta.reading and tb.reading and app.output_bytes == 0
    assert (
        app.metrics.registry.get_sample_value("kcoord_buffered_bytes", {"kind": "output"}) is None
    )  # not started


# -- closing releases everything --------------------------------------------------------------------------------
async def test_closing_drops_slots_output_backlog_and_the_partial_frame() -> None:
    app = app_with(
        connection_output_pause_bytes=ANSWER, queued_max_request_bytes=1 << 20, max_frame_size=1 << 20
    )
    assert app.frame_budget is not None
    conn, t = connect(app, accepting=False)
    conn.data_received(requests(5))
    big = frames.frame(b"\0" * 200_000)
    waiting, tw = connect(app)
    waiting.data_received(big[:1000])
    assert app.frame_budget.used == 200_000
    other, to = connect(app)
    other.data_received(frames.frame(b"\0" * 900_000)[:1000])  # 200k + 900k > 1 MiB: waits
    assert not to.reading and app.frame_budget.waiters == 1
    assert app.output_bytes > 0 and not t.reading
    conn.connection_lost(None)
    assert app.output_bytes == 0 and app._output_holders == set()
    assert conn._backlog is None and not conn._slots and not conn._out and conn._decoder.buffered == 0
    waiting.connection_lost(None)  # its reservation goes to the one waiting
    assert app.frame_budget.used == 900_000 and to.reading
    other.connection_lost(None)
    assert app.frame_budget.used == 0 and app.connections == set()


# -- the sweep: idle and slow connections ---------------------------------------------------------------------
async def test_the_sweep_closes_idle_connections_and_slow_frames_only() -> None:
    app = app_with(connections_max_idle_ms=10_000, request_receive_timeout_ms=1_000)
    busy, tb = connect(app)
    idle, ti = connect(app)
    slow, ts = connect(app)
    now = time.perf_counter()
    slow.data_received(requests(1)[:3])
    app.sweep(now + 0.5)
    assert not (tb.closed or ti.closed or ts.closed)
    app.sweep(now + 2)
    assert ts.closed and not ti.closed
    busy.data_received(requests(1))
    busy._active = now + 5  # as if that request came 5 s on
    app.sweep(now + 10.5)
    assert ti.closed and not tb.closed
    get = app.metrics.registry.get_sample_value
    assert get("kcoord_connections_closed_total", {"reason": "slow_frame"}) == 1
    assert get("kcoord_connections_closed_total", {"reason": "idle"}) == 1


async def test_the_sweep_goes_in_slices_and_skips_connections_gone_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kcoord.coordinator.net import server

    monkeypatch.setattr(server, "SWEEP_SLICE", 2)
    app = app_with(connections_max_idle_ms=10_000)
    conns = [connect(app) for _ in range(5)]
    steps = app.sweep_in_steps(time.perf_counter() + 11)
    next(steps)  # the first slice looked at: two closed, the loop may run now
    assert sum(t.closed for _, t in conns) == 2
    gone = next(conn for conn, t in conns if not t.closed)
    gone.connection_lost(None)  # released while the sweep waits
    assert sum(1 for _ in steps) == 1  # two more slices, one more yield between them
    closed = app.metrics.registry.get_sample_value("kcoord_connections_closed_total", {"reason": "idle"})
    assert closed == 4 and gone not in app.connections


async def test_a_paused_connection_is_not_blamed_for_its_half_sent_frame() -> None:
    app = app_with(request_receive_timeout_ms=1_000, connection_output_pause_bytes=ANSWER)
    conn, t = connect(app, accepting=False)
    conn.data_received(requests(2) + requests(1)[:5])
    assert not t.reading
    app.sweep(time.perf_counter() + 5)
    assert not t.closed
    t.drain()
    assert t.reading
    app.sweep(time.perf_counter() + 0.5)  # the timeout starts over once we read again
    assert not t.closed


# -- max.connections, max.connections.per.ip ----------------------------------------------------------------------
async def test_connections_over_the_limits_are_closed_at_once() -> None:
    app = app_with(
        max_connections=3, max_connections_per_ip=1, max_connections_per_ip_overrides={"10.0.0.2": 2}
    )
    a1, ta1 = connect(app, "10.0.0.1")
    _, ta2 = connect(app, "10.0.0.1")
    b1, tb1 = connect(app, "10.0.0.2")
    _, tb2 = connect(app, "10.0.0.2")
    _, tc1 = connect(app, "10.0.0.3")
    assert not ta1.closed and ta2.closed and not tb1.closed and not tb2.closed and tc1.closed
    assert len(app.connections) == 3
    a1.connection_lost(None)
    assert app._per_ip == {"10.0.0.2": 2}
    _, tc2 = connect(app, "10.0.0.3")
    assert not tc2.closed
    get = app.metrics.registry.get_sample_value
    assert get("kcoord_connections_closed_total", {"reason": "limit"}) == 2
    assert get("kcoord_connections") == 3


@pytest.mark.parametrize("budget", [True, False])
async def test_small_requests_never_touch_the_frame_budget(budget: bool) -> None:
    app = app_with(queued_max_request_bytes=(1 << 30) if budget else -1)
    assert (app.frame_budget is not None) == budget
    conn, t = connect(app)
    data = requests(50)
    for i in range(0, len(data), 7):
        conn.data_received(data[i : i + 7])
    assert answers(t) == 50
    assert app.frame_budget is None or app.frame_budget.used == 0


# -- requests in flight: connection.inflight.max.bytes and queued.max.request.bytes ------------------------------
def in_flight(conn: ClientConnection, cost: int) -> Any:
    """A slot as if a request estimated at ``cost`` bytes were dispatched and waited for its answer."""
    conn._frame_cost = cost
    return conn.new_slot()


def padded_api_versions(correlation_id: int, padding: int) -> bytes:
    """An ApiVersions v0 request whose frame is ``padding`` bytes longer (kcoord ignores the rest):
    answered at once, and estimated to cost about 8 x its frame (request_cost.py)."""
    return frames.frame(struct.pack(">hhih", ApiKey.API_VERSIONS, 0, correlation_id, -1) + b"\0" * padding)


async def test_requests_in_flight_over_connection_inflight_max_bytes_pause_reading_until_half() -> None:
    app = app_with(connection_inflight_max_bytes=10_000)
    conn, t = connect(app)
    a, b = in_flight(conn, 4_000), in_flight(conn, 4_000)
    assert t.reading
    c3 = in_flight(conn, 4_000)
    assert not t.reading and conn._inflight_bytes == 12_000
    assert app.frame_budget is not None and app.frame_budget.inflight == 12_000
    conn.data_received(requests(3))  # read before the pause took effect: they wait, read
    assert answers(t) == 0 and conn._backlog is not None
    conn.fill(a, b"")
    assert not t.reading, "8,000 bytes in flight is still over half the limit"
    conn.fill(b, b"")
    await settle()
    assert t.reading and conn._backlog is None
    conn.fill(c3, b"")
    await settle()
    assert answers(t) == 3 and conn._inflight_bytes == 0 and app.frame_budget.inflight == 0


async def test_a_costly_request_waits_for_queued_max_request_bytes_and_a_cheap_one_never_does() -> None:
    MiB = 1 << 20
    app = app_with(queued_max_request_bytes=MiB, max_frame_size=MiB, connection_inflight_max_bytes=4 * MiB)
    budget = app.frame_budget
    assert budget is not None
    holder, _ = connect(app)
    held = in_flight(holder, 900 * 1024)  # most of the budget, in flight on another connection
    conn, t = connect(app)
    conn.data_received(padded_api_versions(1, 40 * 1024) + requests(1, 2))
    # ~330 KB estimated: it waits for memory, and the cheap request behind it waits in order.
    assert not t.reading and answers(t) == 0 and conn._backlog is not None and len(conn._backlog) == 2
    assert budget.waiters == 1
    cheap, ct = connect(app)
    cheap.data_received(requests(3))  # a cheap request on another connection is served meanwhile
    assert ct.reading and answers(ct) == 3
    holder.fill(held, b"")  # its memory comes back: the waiting request gets it, then the rest
    await settle()
    assert t.reading and answers(t) == 2 and conn._backlog is None
    assert (budget.used, budget.inflight, budget.waiters) == (0, 0, 0)


async def test_closing_a_connection_waiting_for_request_memory_gives_everything_back() -> None:
    MiB = 1 << 20
    app = app_with(queued_max_request_bytes=MiB, max_frame_size=MiB)
    budget = app.frame_budget
    assert budget is not None
    holder, _ = connect(app)
    held = in_flight(holder, MiB)
    first, _ = connect(app)
    second, _ = connect(app)
    first.data_received(padded_api_versions(1, 40 * 1024))
    await settle()  # costly requests are dispatched one per loop iteration (dispatch_turns.py)
    second.data_received(padded_api_versions(1, 40 * 1024))
    assert budget.waiters == 2
    first.connection_lost(None)  # waiting: leaves the queue
    assert budget.waiters == 1
    holder.fill(held, b"")  # granted to the second, which closes before it runs: given back
    assert second._granted and budget.waiters == 0
    second.connection_lost(None)
    await settle()
    assert (budget.used, budget.inflight) == (0, 0)


async def test_a_request_answered_after_its_connection_closed_stays_counted_until_then() -> None:
    app = app_with()
    conn, _ = connect(app)
    slot = in_flight(conn, 300_000)
    conn.connection_lost(None)
    assert app.frame_budget is not None and app.frame_budget.inflight == 300_000  # still being worked on
    conn.fill(slot, b"answer nobody reads")
    assert app.frame_budget.inflight == 0 and app.frame_budget.used == 0


async def test_a_group_request_answered_after_its_connection_closed_gives_its_cost_back() -> None:
    """Through the dispatcher: the answer's callback still runs once the connection is gone."""
    app = app_with()
    conn, _ = connect(app)
    replies: list[Any] = []

    class LaterRouting:
        def route(self, api_key: int, ctx: Any, request: Any, reply: Any) -> None:
            replies.append(reply)  # answered later, as a multi-group request is

    conn._dispatch.__self__._groups = LaterRouting()  # type: ignore[attr-defined]
    ids = [f"g{i}" for i in range(1000)]
    conn.data_received(
        frames.encode_request(ApiKey.DESCRIBE_GROUPS, 5, 1, "c", m.DescribeGroupsRequest(groups=ids))
    )
    budget = app.frame_budget
    assert budget is not None and budget.inflight > 1000 * 300 and len(replies) == 1
    conn.connection_lost(None)
    replies[0](m.DescribeGroupsResponse(groups=[]))
    assert (budget.inflight, budget.used) == (0, 0)


# -- after the close ------------------------------------------------------------------------------------------
async def test_a_closed_connection_lets_its_transport_go_without_the_cycle_collector() -> None:
    """A connection's parts refer to each other (a cycle the collector frees only when its young
    generation runs); a TLS transport holds ~25 KiB of buffers, so the connection drops it on close
    and reference counting frees it at once."""
    import gc
    import weakref

    app = app_with()
    conn, transport = connect(app)
    conn.data_received(requests(2))
    gone = weakref.ref(transport)
    gc.disable()
    try:
        conn.connection_lost(None)
        del transport
        assert gone() is None
        assert conn.closed and conn.transport is None
    finally:
        gc.enable()


async def test_the_pieces_of_large_frames_are_read_one_connection_per_loop_iteration() -> None:
    """Connections in the middle of large frames read their next piece in turn: one a loop iteration
    after the first, in arrival order; a connection with a small request is never held back."""
    app = app_with()
    big = padded_api_versions(1, 200 * 1024)
    first, rest = big[: 64 * 1024 + 100], big[64 * 1024 + 100 :]
    piece, last = rest[: 32 * 1024], rest[32 * 1024 :]
    (c0, t0), (c1, t1), (c2, t2) = senders = [connect(app) for _ in range(3)]
    for conn, _ in senders:
        conn.data_received(first)  # each has begun a large frame
    assert [t.reading for _, t in senders] == [True, False, False], "c0 took this iteration's read"
    small, st = connect(app)
    small.data_received(requests(2))
    assert st.reading and answers(st) == 2, "small requests are not held back"

    await asyncio.sleep(0)  # the next iteration: c1's turn (c0 keeps reading until it waits too)
    assert [t.reading for _, t in senders] == [True, True, False]
    c0.data_received(piece)
    c1.data_received(piece)
    assert [t.reading for _, t in senders] == [False, False, False], "both wait behind c2"
    done: list[ClientConnection] = []
    for expected in (c2, c0, c1):
        await asyncio.sleep(0)
        assert [conn for conn, t in senders if t.reading and conn not in done] == [expected]
        expected.data_received(last if expected is not c2 else piece)
        if expected is not c2:
            done.append(expected)
    # Those reads came in their own turn's iteration: each waits for a later one, in arrival order.
    assert [t.reading for _, t in senders] == [False, False, False]
    order = [c2, c0, c1]
    for i in range(3):
        await asyncio.sleep(0)
        assert {conn for conn, t in senders if t.reading} == set(order[: i + 1])
    for conn, t in senders:
        if conn is not c2:
            assert t.reading and answers(t) == 1, "a complete frame reads on freely"
    await asyncio.sleep(0)
    assert t2.reading
    c2.data_received(last)
    assert answers(t2) == 1 and t2.reading


# -- costly requests wait until the client took the answers before them --------------------------------------
async def test_a_costly_request_waits_until_the_client_took_the_earlier_answers() -> None:
    """As Kafka's broker reads nothing more from a connection until its last response went out: a
    client that does not read gets no costly answer computed beyond the one it is not taking, and
    cheap requests (on its connection before that, and on every other) are served meanwhile."""
    app = app_with()
    conn, t = connect(app, accepting=False)
    conn.data_received(requests(1) + padded_api_versions(2, 40 * 1024) + requests(1, 3))
    # The first answer is not taken: the costly request waits, and the cheap one behind it, in order.
    assert not t.reading and t.writing_paused and answers(t) == 0
    assert conn._backlog is not None and len(conn._backlog) == 2
    await settle()
    assert not t.reading and conn._backlog is not None and len(conn._backlog) == 2, "it still waits"
    other, ot = connect(app)
    other.data_received(requests(2))
    assert answers(ot) == 2
    t.accepting = True
    t.drain()  # the client took the first answer: the costly request goes, then the cheap one
    assert t.reading and answers(t) == 1
    await settle()
    assert t.reading and answers(t) == 3 and conn._backlog is None and app.output_bytes == 0


async def test_a_reading_client_pipelining_costly_requests_is_not_held_back() -> None:
    app = app_with()
    conn, t = connect(app)
    conn.data_received(b"".join(padded_api_versions(i, 40 * 1024) for i in range(5)))
    for _ in range(5):  # one costly dispatch per loop iteration across connections (dispatch_turns.py)
        await settle()
    assert t.reading and answers(t) == 5 and conn._backlog is None


def test_the_kernel_keeps_at_most_unsent_in_kernel_bytes_of_a_client_socket() -> None:
    import socket

    class SocketTransport:
        def __init__(self, sock: socket.socket) -> None:
            self.sock = sock

        def get_extra_info(self, name: str, default: Any = None) -> Any:
            return self.sock if name == "socket" else default

    with socket.socket() as sock:
        c.limit_unsent_in_kernel(SocketTransport(sock))  # type: ignore[arg-type]
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT) == c.UNSENT_IN_KERNEL
    with socket.socket(socket.AF_UNIX) as unix:  # no such option: left as it is, no error
        c.limit_unsent_in_kernel(SocketTransport(unix))  # type: ignore[arg-type]


async def test_the_kernel_keeps_more_of_a_streamed_answer_until_its_end_is_written() -> None:
    import socket

    class SocketBackedTransport(FakeTransport):
        """Writes as FakeTransport; its socket is a real (unconnected) TCP socket, for its options."""

        def __init__(self, protocol: ClientConnection, sock: socket.socket) -> None:
            super().__init__(protocol)
            self.sock = sock

        def get_extra_info(self, name: str, default: Any = None) -> Any:
            return self.sock if name == "socket" else super().get_extra_info(name, default)

    def unsent_limit(sock: socket.socket) -> int:
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT)

    app = app_with()
    with socket.socket() as sock:
        conn = ClientConnection(Listener(app, None))
        t = SocketBackedTransport(conn, sock)
        conn.connection_made(t)  # type: ignore[arg-type]
        assert unsent_limit(sock) == c.UNSENT_IN_KERNEL
        streamed, behind = conn.new_slot(), conn.new_slot()
        payload = b"p" * 1000
        assert conn.start_streaming(streamed, len(payload))
        assert unsent_limit(sock) == c.STREAMING_UNSENT_IN_KERNEL
        conn.write_streamed([payload[:600]])
        conn.fill(behind, frames.frame(b"next"))  # waits behind the streamed one: nothing changes
        assert unsent_limit(sock) == c.STREAMING_UNSENT_IN_KERNEL
        conn.fill(streamed, payload[600:])
        assert unsent_limit(sock) == c.UNSENT_IN_KERNEL, "back to the small limit once its end is written"
        conn.write_out()
        assert bytes(t.sent) == frames.frame(payload) + frames.frame(b"next")
