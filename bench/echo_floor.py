"""The I/O floor under a commit storm: an echo server with kcoord's loop and connection shape.

    .venv/bin/python -m bench.echo_floor --connections 1000 --duration 10

What one connection per committer costs before any Kafka work: a uvloop server (CPU 0) that
answers each size-prefixed frame with the same bytes, and N clients (CPU 1, one process) each with
one frame of about an OffsetCommit v9's size in flight. Reported: round trips per second and the
server's CPU per round trip (a read and a write syscall, the loop's wake-ups, ``data_received``
and ``transport.write``). kcoord's µs per commit minus this is what its own work costs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import sys
import time

from support import procs
from support.loadgen.procstat import cpu_seconds
from support.ports import free_port_block

_SIZE = struct.Struct(">i")
REQUEST_BYTES = 110  # an OffsetCommit v9 of one partition from the load generator, about
RESPONSE_BYTES = 40


class Echo(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data
        out = []
        while len(buf) >= 4:
            (n,) = _SIZE.unpack_from(buf)
            if len(buf) < 4 + n:
                break
            out.append(_SIZE.pack(RESPONSE_BYTES) + bytes(RESPONSE_BYTES))
            buf = buf[4 + n :]
        self.buf = buf
        if out:
            self.transport.write(b"".join(out))


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Echo, "127.0.0.1", port)
    print("serving", flush=True)
    async with server:
        await server.serve_forever()


async def clients(port: int, connections: int, duration: float) -> int:
    frame = _SIZE.pack(REQUEST_BYTES) + bytes(REQUEST_BYTES)
    done = 0
    stop = False

    async def one() -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while not stop:
            writer.write(frame)
            head = await reader.readexactly(4)
            await reader.readexactly(_SIZE.unpack(head)[0])
            done += 1
        writer.close()

    tasks = [asyncio.ensure_future(one()) for _ in range(connections)]
    await asyncio.sleep(2)  # warm-up
    start = done
    await asyncio.sleep(duration)
    stop = True
    count = done - start
    await asyncio.gather(*tasks, return_exceptions=True)
    return count


def main() -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.echo_floor",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    import uvloop

    if args.serve:
        uvloop.run(serve(args.serve))
        return 0
    port = free_port_block(1)
    server = procs.Child("echo", [sys.executable, "-m", "bench.echo_floor", "--serve", str(port)], 0).start()
    try:
        server.wait_for_port(port, 20)
        if (os.cpu_count() or 1) > 1:
            os.sched_setaffinity(0, {1})  # the clients on CPU 1, as the load generator is
        before = cpu_seconds(server.pid)
        started = time.monotonic()
        count = uvloop.run(clients(port, args.connections, args.duration))
        # CPU over warm-up + window; the rate over the window only: close enough for a floor.
        used = cpu_seconds(server.pid) - before
        elapsed = time.monotonic() - started
        rate = count / args.duration
        cores = used / elapsed
        print(
            f"echo, {args.connections} connections: {rate:,.0f} round trips/s, server {cores:.3f} cores, "
            f"{cores / rate * 1e6:.1f} µs CPU per round trip (load {os.getloadavg()[0]:.2f})"
        )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
