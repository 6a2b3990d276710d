"""Large reads of many connections are processed one per event-loop iteration, in arrival order.

Through real connections and an App over memory storage (support/in_process.py), no sockets: each
connection is fed reads the way uvloop hands them over, several in one loop iteration.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kcoord.coordinator.net.connection import LARGE_READ, ClientConnection
from kcoord.coordinator.net.server import Listener
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey
from support.hostile_clients import DESCRIBE_VERSION, describe_groups_frame
from support.in_process import FakeTransport, Harness, split_responses

IDS = 5_000  # a frame of ~80 KB: its first read is a large one, and so is its rest (a large frame's)


class Iterations:
    """Counts the loop's iterations: a callback that schedules itself for the next one."""

    def __init__(self) -> None:
        self.count = 0
        self.running = True
        asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self.count += 1
        if self.running:
            asyncio.get_running_loop().call_soon(self._tick)


async def connections(n: int) -> tuple[Harness, list[tuple[ClientConnection, FakeTransport]]]:
    h = Harness(4)
    await h.start()
    conns = [(h.conn, h.transport)]
    for _ in range(n - 1):
        transport = FakeTransport()
        conn = ClientConnection(Listener(h.app, None))
        conn.connection_made(transport)  # type: ignore[arg-type]
        conns.append((conn, transport))
    return h, conns


def traced(conns: list[tuple[ClientConnection, FakeTransport]], ticks: Iterations) -> list[tuple[int, int]]:
    """(connection index, loop iteration) of every read a connection processed, in order."""
    processed: list[tuple[int, int]] = []
    for i, (conn, _) in enumerate(conns):
        inner = conn._received

        def received(data: bytes, i: int = i, inner: Callable[[bytes], None] = inner) -> None:
            processed.append((i, ticks.count))
            inner(data)

        conn._received = received  # type: ignore[method-assign]
    return processed


async def large_reads_together(
    n: int,
) -> tuple[Harness, list[tuple[ClientConnection, FakeTransport]], Iterations, list[tuple[int, int]]]:
    """``n`` connections, each handed the first (large) read of a DescribeGroups frame in one loop
    iteration; with the iteration counter and the trace of the reads processed."""
    h, conns = await connections(n)
    first = describe_groups_frame(IDS, "hostile")[: LARGE_READ + 1000]
    ticks = Iterations()
    processed = traced(conns, ticks)
    for conn, _ in conns:
        conn.data_received(first)
    return h, conns, ticks, processed


async def answers(transport: FakeTransport) -> list[m.DescribeGroupsResponse]:
    out: list[bytes] = []
    for _ in range(400):
        await asyncio.sleep(0.005)
        out += split_responses(transport.take())
        if out:
            break
    return [frames.decode_response(ApiKey.DESCRIBE_GROUPS, DESCRIBE_VERSION, raw)[1] for raw in out]


async def test_large_reads_arriving_together_are_processed_one_per_iteration_in_order() -> None:
    h, conns = await connections(4)
    frame = describe_groups_frame(IDS, "hostile")
    first, rest = frame[: LARGE_READ + 1000], frame[LARGE_READ + 1000 :]
    ticks = Iterations()
    processed = traced(conns, ticks)
    # One iteration's reads: the first connection's is processed at once, the others wait with
    # reading paused, their reads kept.
    for conn, _ in conns:
        conn.data_received(first)
    assert processed == [(0, 0)]
    assert [t.reading for _, t in conns] == [True, False, False, False]
    while len(processed) < 4:
        await asyncio.sleep(0)
    assert [i for i, _ in processed] == [0, 1, 2, 3]  # in arrival order
    iterations = [at for _, at in processed]
    assert len(set(iterations)) == 4  # one per iteration
    assert all(t.reading for _, t in conns)  # each resumed once its read was processed
    # The frames' rest: small reads, but of a large frame (its join and dispatch), so they take turns too.
    for conn, _ in conns:
        conn.data_received(rest)
    while len(processed) < 8:
        await asyncio.sleep(0)
    assert len({at for _, at in processed[4:]}) == 4
    for _, transport in conns:
        (answer,) = await answers(transport)
        assert len(answer.groups) == IDS
        assert answer.groups[0].group_id == "hostile-0000000"
    ticks.running = False
    await h.app.stop(grace=0)


async def test_small_reads_never_wait_for_a_turn() -> None:
    h, conns = await connections(2)
    frame = describe_groups_frame(IDS, "hostile")
    ticks = Iterations()
    processed = traced(conns, ticks)
    big, heartbeat_sized = conns
    big[0].data_received(frame[: LARGE_READ + 1000])  # takes this iteration's turn
    small = frames.encode_request(ApiKey.API_VERSIONS, 0, 7, "probe", m.ApiVersionsRequest())
    heartbeat_sized[0].data_received(small)
    assert processed == [(0, 0), (1, 0)]
    assert heartbeat_sized[1].reading
    (response,) = split_responses(heartbeat_sized[1].take())
    assert frames.decode_response(ApiKey.API_VERSIONS, 0, response)[1].error_code == 0
    ticks.running = False
    await h.app.stop(grace=0)


async def test_a_connection_closed_while_its_read_waits_is_skipped() -> None:
    h, conns, ticks, processed = await large_reads_together(3)
    conns[1][0].connection_lost(None)  # its kept read is dropped, its turn passed on
    while len(processed) < 2:
        await asyncio.sleep(0)
    for _ in range(5):
        await asyncio.sleep(0)
    assert [i for i, _ in processed] == [0, 2]
    ticks.running = False
    await h.app.stop(grace=0)


async def test_a_read_waiting_while_paused_for_another_reason_waits_for_that_too() -> None:
    h, conns, ticks, processed = await large_reads_together(2)
    waiting, transport = conns[1]
    waiting.pause_for_total()  # all connections' unsent output over queued.max.response.bytes
    for _ in range(5):
        await asyncio.sleep(0)
    assert [i for i, _ in processed] == [0]  # its turn came and went: still paused for the total
    assert not transport.reading
    waiting.resume_for_total()
    assert not transport.reading  # its read still waits for a turn, in a later iteration
    while len(processed) < 2:
        await asyncio.sleep(0)
    assert [i for i, _ in processed] == [0, 1]
    assert transport.reading
    ticks.running = False
    await h.app.stop(grace=0)
