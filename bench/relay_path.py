"""kcoord's own CPU per relayed request and answer, with no sockets.

    .venv/bin/python -m bench.relay_path                       # 16 connections, one in flight each
    .venv/bin/python -m bench.relay_path --profile             # cProfile, top 30
    .venv/bin/python -m bench.relay_path --version 12          # Produce v12 (answers checked for KIP-951)

bench.relay_floor measures the relay over loopback TCP, where the kernel's share (~37 µs per small
request and answer on this machine) and the machine's load swamp a few microseconds of Python. This
bench isolates kcoord's own code: ``--connections`` real ``ClientConnection``s of a real ``App``,
each paired with a real upstream ``kcoord.client.Connection`` as the relay pairs them, both on fake
transports. Each round every connection reads one small Produce (bench.relay's, acks=1, 100 B), as
the 16x1 shape's reads bring them, then every upstream connection reads its answer; the answers
are written to the clients. The figure is process CPU time per request and answer, best of
``--repeat`` passes, with the garbage collector tuned as ``kcoord serve`` tunes it.
"""

from __future__ import annotations

import argparse
import asyncio

from kcoord.client import Connection as UpstreamConnection
from kcoord.coordinator.cli import tune_gc_for_serving
from kcoord.coordinator.net.connection import ClientConnection
from kcoord.coordinator.net.server import Listener
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey
from support.in_process import FakeTransport, Harness, split_responses

from .relay import small_produce_frame
from .request_path import best_us_per_request


def produce_answer(version: int, correlation_id: int) -> bytes:
    """An upstream's answer to bench.relay's small Produce (one partition, no error), framed."""
    R = m.ProduceResponse
    response = R(
        responses=[
            R.TopicProduceResponse(
                name="small",
                partition_responses=[
                    R.PartitionProduceResponse(
                        index=0, base_offset=42, log_append_time_ms=-1, log_start_offset=0
                    )
                ],
            )
        ]
    )
    return frames.encode_response(ApiKey.PRODUCE, version, correlation_id, response)


async def run(args: argparse.Namespace) -> float:
    h = Harness(1)
    await h.start()
    h.app.cluster._advertised[ApiKey.PRODUCE] = (0, 12)
    request = small_produce_frame("small", 100)
    if args.version != 9:
        _, req = frames.decode_request(request[4:])
        request = frames.encode_request(ApiKey.PRODUCE, args.version, 1, "relay-bench", req)
    answer = produce_answer(args.version, 1)
    pairs: list[tuple[ClientConnection, FakeTransport, UpstreamConnection, FakeTransport]] = []
    for _ in range(args.connections):
        transport = FakeTransport()
        conn = ClientConnection(Listener(h.app, None))
        conn.connection_made(transport)  # type: ignore[arg-type]
        up = UpstreamConnection(("upstream", 9092))
        up_transport = FakeTransport()
        up.connection_made(up_transport)  # type: ignore[arg-type]
        up.after_read = conn.write_out  # as relay/passthrough.py's _open_upstream wires them
        up.corked = True
        conn.relay.upstream = up
        pairs.append((conn, transport, up, up_transport))
    rounds = args.requests // args.connections
    tune_gc_for_serving()

    async def one_pass() -> None:
        for _ in range(rounds):
            for conn, _, _, _ in pairs:
                conn.data_received(request)
            for _, _, up, _ in pairs:
                up.data_received(answer)
            await asyncio.sleep(0)

    def answers() -> int:  # every request went up, every answer came back
        for _, transport, _, up_transport in pairs:
            sent, answered = split_responses(up_transport.take()), split_responses(transport.take())
            assert len(sent) == len(answered) == rounds, (len(sent), len(answered), rounds)
            assert sent[0] == request[4:] and answered[0] == answer[4:]
        return rounds * len(pairs)

    return await best_us_per_request(one_pass, answers, rounds * args.connections, args.repeat, args.profile)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--requests", type=int, default=160_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--version", type=int, default=9, help="the Produce version (9: bench.relay's)")
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    us = asyncio.run(run(args))
    print(
        f"relayed Produce v{args.version}, {args.connections} connections: {us:.2f} µs of CPU per request and answer"
    )


if __name__ == "__main__":
    main()
