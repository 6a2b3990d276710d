"""What a relay costs before it does any of kcoord's work, next to kcoord, side by side.

    .venv/bin/python -m bench.relay_floor --shapes 16x1,1x1,8x16 --rounds 2

Three relays between the same closed-loop clients (bench/relay.py's small Produce v9 requests,
acks=1, one 100-byte record) and one tansu, each measured by its own CPU per answer:

- ``kcoord``: a kcoord broker port (framing, the header check, the slot FIFO, metrics);
- ``python``: a uvloop byte pump, each client connection paired with an upstream connection,
  ``data_received`` -> ``transport.write`` and nothing else: the floor of any relay written with
  Python's event loop, whatever it does per frame;
- ``c``: the same pump in C (``bench/relay_floor.c``, one thread, epoll; compiled here with ``cc``):
  the floor of a native relay — what moving kcoord's relay into C could reach at best.

``direct`` is tansu's own CPU per answer, for scale. The order of the targets reverses each round,
so the ratios of one round share the machine's load. The relays run on CPU 0, tansu and the clients
on CPU 1 (as bench/relay.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.relay import _start_kcoord, small_produce_frame, small_shapes
from support import procs
from support.broker import pinned_tansu
from support.ports import free_port_block
from support.throughput_clients import create_one_partition_topic

HERE = Path(__file__).resolve().parent


class _Pump(asyncio.Protocol):
    """One side of a byte pump: what it reads goes to ``other`` as it came."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.other: _Pump | None = None
        self.early: list[bytes] = []  # client bytes that came before the upstream connection opened

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        other = self.other
        if other is not None and other.transport is not None:
            other.transport.write(data)
        else:
            self.early.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.close()


async def python_pump(listen_port: int, upstream: str) -> None:
    import uvloop  # noqa: F401  (the runner below installs it)

    host, port = upstream.rsplit(":", 1)
    loop = asyncio.get_running_loop()

    class Client(_Pump):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            loop.create_task(self.pair())

        async def pair(self) -> None:
            _, up = await loop.create_connection(_Pump, host, int(port))
            up.other, self.other = self, up
            assert up.transport is not None
            for data in self.early:
                up.transport.write(data)
            self.early.clear()

    server = await loop.create_server(Client, "127.0.0.1", listen_port)
    print("serving", flush=True)
    async with server:
        await server.serve_forever()


def _c_pump_binary() -> str | None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    out = Path(tempfile.gettempdir()) / "kcoord-relay-floor"
    subprocess.run([cc, "-O2", "-o", str(out), str(HERE / "relay_floor.c")], check=True)
    return str(out)


PUMPS = ("python", "c", "c-splice")


def start_pump(kind: str, upstream: str, c_binary: str | None) -> tuple[procs.Child, str]:
    """A byte pump of ``kind`` (one of PUMPS; the C ones need ``c_binary``) in front of ``upstream``,
    on CPU 0, serving: (its process, the address clients connect to)."""
    port = free_port_block(1)
    if kind == "python":
        cmd = [sys.executable, "-m", "bench.relay_floor", "--serve-python-pump", str(port), upstream]
    else:
        assert c_binary is not None, "a C pump needs the compiled binary"
        cmd = [c_binary, str(port), *upstream.rsplit(":", 1), *(["splice"] if kind == "c-splice" else [])]
    child = procs.Child(f"pump-{kind}", cmd, cpu=0).start()
    child.wait_for_log("serving", 30)
    return child, f"127.0.0.1:{port}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="16x1,1x1,8x16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument(
        "--kcoord",
        action="append",
        default=[],
        metavar="NAME=PYTHON",
        help="a kcoord to measure: a name and the python of the venv whose tree it runs"
        " (default: kcoord=this python)",
    )
    ap.add_argument("--serve-python-pump", nargs=2, metavar=("PORT", "UPSTREAM"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve_python_pump:
        import uvloop

        uvloop.run(python_pump(int(args.serve_python_pump[0]), args.serve_python_pump[1]))
        return
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})
    c_binary = _c_pump_binary()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    tansu, upstream = pinned_tansu("tansu-floor", cpu=1)
    results: dict[tuple[str, str], list[float]] = {}
    try:
        create_one_partition_topic(upstream, "small")
        frame = small_produce_frame("small", 100)
        kcoords = dict(spec.partition("=")[::2] for spec in args.kcoord) or {"kcoord": sys.executable}
        targets = ["direct", *kcoords, "python"] + (["c"] if c_binary else [])
        for r in range(args.rounds):
            order = targets if r % 2 == 0 else list(reversed(targets))
            for target in order:
                child: procs.Child | None = None
                if target == "direct":
                    address, pid = upstream, tansu.pid
                elif target in kcoords:
                    child, _, address = _start_kcoord(str(Path(kcoords[target]).absolute()), upstream)
                    pid = child.pid
                else:
                    child, address = start_pump(target, upstream, c_binary)
                    pid = child.pid
                try:
                    for shape, rate, cpu, system in small_shapes(address, frame, pid, args):
                        results.setdefault((shape, target), []).append(cpu)
                        print(
                            f"round {r + 1} {shape:6s} {target:8s} {rate:9.0f} answers/s  CPU {cpu:6.1f} µs/answer"
                            f" (system {system:5.1f})  load {os.getloadavg()[0]:.1f}",
                            flush=True,
                        )
                finally:
                    if child is not None:
                        child.stop()
    finally:
        tansu.stop()
    print(f"load average at end: {os.getloadavg()}")
    for shape in args.shapes.split(","):
        row = {t: v for (s, t), v in results.items() if s == shape}
        print(
            f"{shape:6s} µs/answer, median (best): "
            + ", ".join(f"{t} {statistics.median(v):.1f} ({min(v):.1f})" for t, v in row.items())
        )


if __name__ == "__main__":
    sys.exit(main())
