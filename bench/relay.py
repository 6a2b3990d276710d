"""The relayed data path: kcoord's CPU per small relayed request, and produce/consume
throughput through kcoord against the same client talking to the upstream directly.

Two measurements, each run for every target side by side in one invocation so the ratios share the
machine's load:

- ``small``: ``--connections`` raw connections to a kcoord broker port, each keeping ``--depth``
  Produce v9 acks=1 requests (one 100-byte record) in flight, closed loop, for ``--seconds``.
  kcoord's CPU (/proc/PID/stat, all threads) over the window divided by the answers received is
  the cost of one small relayed request+response. The generator is a bare asyncio protocol that
  re-sends a pre-encoded frame per answer, so it stays cheap next to the server.
- ``throughput``: each client of ``--clients`` produces ``N`` records of ``S`` bytes (acks=1), then
  a consumer assigned to the partition reads them back; records/s direct to tansu and through each
  kcoord, all targets of one client and size back to back. A fresh tansu (and kcoord) per client,
  target and size, so memory storage does not pile up. Clients: ``librdkafka`` (confluent-kafka, in
  this process) and ``java`` (kafka-clients 4.3, support/peers/java/ThroughputPeer.java, one JVM per
  produce and per consume; it times itself, so JVM start is outside the window).

Targets: ``direct`` (tansu itself) and one kcoord per ``--kcoord NAME=PYTHON`` (a venv's python
whose editable install is the tree to measure: compare a base worktree with yours in one run).
Pinning as bench/run_all.py: kcoord on CPU 0, tansu and the clients on CPU 1.

    .venv/bin/python -m bench.relay --kcoord base=../wt-relay-base/.venv/bin/python \\
        --kcoord new=.venv/bin/python --clients librdkafka,java
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.record_batch import encode_batch
from support import procs
from support.broker import pinned_tansu
from support.kcoord_process import SERVING_LINE, serve_command
from support.ports import free_port_block
from support.throughput_clients import (
    CLIENTS,
    RUNS,
    create_one_partition_topic,
    java_unavailable,
    select_clients,
)

_SIZE = struct.Struct(">i")
_TICK = os.sysconf("SC_CLK_TCK")


def user_system_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process, all threads (support/loadgen/procstat.py, split):
    system time is the kernel's share, the syscalls a relay cannot avoid in Python or C."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    fields = data[data.rindex(b")") + 2 :].split()
    return int(fields[11]) / _TICK, int(fields[12]) / _TICK


PRODUCE_VERSION = 9  # flexible, below NodeEndpoints (v10): the plain relay path


def small_produce_frame(topic: str, value_size: int) -> bytes:
    batch = encode_batch([(None, b"x" * value_size)], timestamp=int(time.time() * 1000))
    P = m.ProduceRequest
    request = P(
        acks=1,
        timeout_ms=30000,
        topic_data=[
            P.TopicProduceData(name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])
        ],
    )
    return frames.encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, 1, "relay-bench", request)


class _Pipelined(asyncio.Protocol):
    """Keeps ``depth`` copies of one frame in flight; one new copy per answer."""

    def __init__(self, frame: bytes, depth: int, counter: list[int]) -> None:
        self.frame = frame
        self.depth = depth
        self.counter = counter
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.write(self.frame * self.depth)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, end, answers = 0, len(buf), 0
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if end - pos - 4 < size:
                break
            pos += 4 + size
            answers += 1
        if pos:
            del buf[:pos]
        if answers:
            self.counter[0] += answers
            assert self.transport is not None
            self.transport.write(self.frame * answers)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)


async def _small_load(
    address: str, frame: bytes, connections: int, depth: int, warmup: float, seconds: float, pid: int
) -> tuple[float, float, float]:
    """(answers per second, server CPU µs per answer, of which system) over the measured window."""
    host, port = address.rsplit(":", 1)
    counter = [0]
    loop = asyncio.get_running_loop()
    conns = [
        (await loop.create_connection(lambda: _Pipelined(frame, depth, counter), host, int(port)))[1]
        for _ in range(connections)
    ]
    await asyncio.sleep(warmup)
    n0, (u0, s0), t0 = counter[0], user_system_seconds(pid), time.perf_counter()
    await asyncio.sleep(seconds)
    n1, (u1, s1), t1 = counter[0], user_system_seconds(pid), time.perf_counter()
    for c in conns:
        assert c.transport is not None
        c.transport.close()
    answers = max(n1 - n0, 1)
    return answers / (t1 - t0), (u1 - u0 + s1 - s0) * 1e6 / answers, (s1 - s0) * 1e6 / answers


@dataclass
class Target:
    name: str
    python: str | None  # None: direct to tansu
    # shape -> (answers/s, µs per answer, of which system)
    small: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    # (client, size label) -> (produce s, consume s)
    # (client, size label) -> (produce s, consume s) per round
    throughput: dict[tuple[str, str], list[tuple[float, float]]] = field(default_factory=dict)


def _start_kcoord(python: str, upstream: str) -> tuple[procs.Child, str, str]:
    """kcoord under ``python`` (its venv's editable tree); (child, coordinator address, broker-port address)."""
    port = free_port_block(4)
    listen = f"127.0.0.1:{port}"
    child = procs.Child("kcoord-relay", serve_command(listen, upstream, [], python), cpu=0).start()
    child.wait_for_log(SERVING_LINE, 60)
    from confluent_kafka.admin import AdminClient

    brokers = AdminClient({"bootstrap.servers": listen}).list_topics(timeout=30).brokers
    relayed = [b for b in brokers.values() if b.id != 1000000]  # not kcoord's own coordinator node
    return child, listen, f"{relayed[0].host}:{relayed[0].port}"


def small_shapes(
    address: str, frame: bytes, pid: int, args: argparse.Namespace
) -> Iterator[tuple[str, float, float, float]]:
    """Each of ``args.shapes`` against one relay in turn: (shape, answers/s, CPU µs per answer of
    process ``pid``, of which system)."""
    for shape in args.shapes.split(","):
        connections, depth = (int(x) for x in shape.split("x"))
        yield (
            shape,
            *asyncio.run(_small_load(address, frame, connections, depth, args.warmup, args.seconds, pid)),
        )


def run_small(targets: list[Target], args: argparse.Namespace) -> None:
    tansu, upstream = pinned_tansu("tansu-relay", cpu=1)
    try:
        create_one_partition_topic(upstream, "small")
        frame = small_produce_frame("small", 100)
        for t in targets:
            child = None
            if t.python is None:
                address, pid = upstream, tansu.pid
            else:
                child, _listen, address = _start_kcoord(t.python, upstream)
                pid = child.pid
            try:
                for shape, rate, cpu, system in small_shapes(address, frame, pid, args):
                    t.small[shape] = (rate, cpu, system)
                    who = "tansu" if t.python is None else "kcoord"
                    print(
                        f"small {shape:6s} {t.name:8s} {rate:10.0f} answers/s  {who} CPU {cpu:6.1f} µs/answer"
                        f" (system {system:5.1f})",
                        flush=True,
                    )
            finally:
                if child is not None:
                    child.stop()
    finally:
        tansu.stop()


def run_throughput(
    targets: list[Target], clients: list[str], label: str, count: int, size: int, rounds: int = 1
) -> None:
    """Each round runs every target once per client, the order reversed every other round, so
    the ratios of one round share the machine's load (this one is shared and noisy)."""
    for r in range(rounds):
        for client in clients:
            for t in targets if r % 2 == 0 else targets[::-1]:
                _throughput_once(t, client, label, count, size)


def _throughput_once(t: Target, client: str, label: str, count: int, size: int) -> None:
    produce, consume = RUNS[client]
    tansu, upstream = pinned_tansu("tansu-relay", cpu=1)
    child = None
    try:
        create_one_partition_topic(upstream, "tp")
        bootstrap = upstream
        if t.python is not None:
            child, bootstrap, _ = _start_kcoord(t.python, upstream)
        pid = child.pid if child is not None else tansu.pid
        c0 = sum(user_system_seconds(pid))
        produce_s = produce(bootstrap, "tp", count, size)
        c1 = sum(user_system_seconds(pid))
        consume_s = consume(bootstrap, "tp", count)
        c2 = sum(user_system_seconds(pid))
        t.throughput.setdefault((client, label), []).append((produce_s, consume_s))
        who = "tansu" if t.python is None else "kcoord"
        print(
            f"{client:10s} {label} {t.name:8s} produce {count / produce_s:10.0f} rec/s"
            f" ({who} CPU {(c1 - c0) / produce_s:.2f} s/s)"
            f"  consume {count / consume_s:10.0f} rec/s ({who} CPU {(c2 - c1) / consume_s:.2f} s/s)",
            flush=True,
        )
    finally:
        if child is not None:
            child.stop()
        tansu.stop()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--kcoord",
        action="append",
        default=[],
        metavar="NAME=PYTHON",
        help="a kcoord to measure: a name and the python of the venv whose tree it runs",
    )
    ap.add_argument(
        "--shapes",
        default="16x1,8x16",
        help="small-request load shapes, CONNECTIONSxDEPTH (requests in flight per connection)",
    )
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--small-records", type=int, default=1_000_000, help="records of 100 B (0: skip)")
    ap.add_argument("--large-records", type=int, default=1_000_000, help="records of 10 KB (0: skip)")
    ap.add_argument("--skip-small", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of the small-request measurement")
    ap.add_argument(
        "--rounds", type=int, default=1, help="rounds of the throughput measurement (ratios: median)"
    )
    ap.add_argument(
        "--clients",
        default=None,
        metavar="NAMES",
        help=f"throughput clients, comma-separated from {','.join(CLIENTS)} (default: all;"
        " java is skipped, with the reason printed, where it cannot run)",
    )
    args = ap.parse_args(argv)
    wants_java = args.clients is None or "java" in (n.strip() for n in args.clients.split(","))
    try:
        clients, notes = select_clients(args.clients, java_unavailable() if wants_java else None)
    except ValueError as e:
        ap.error(str(e))
    for note in notes:
        print(note, flush=True)
    if "java" in clients and (args.small_records or args.large_records):
        from support.java import compile_peers

        compile_peers()  # once, before any window
    if shutil_taskset():
        os.sched_setaffinity(0, {1})  # the clients share CPU 1 with tansu; kcoord has CPU 0
    targets = [Target("direct", None)]
    for spec in args.kcoord:
        name, _, python = spec.partition("=")
        targets.append(Target(name, str(Path(python).absolute())))
    print(f"load average at start: {os.getloadavg()}", flush=True)
    if not args.skip_small:
        for _ in range(args.repeat):
            run_small(targets, args)
    if args.small_records:
        run_throughput(targets, clients, "100B", args.small_records, 100, args.rounds)
    if args.large_records:
        run_throughput(targets, clients, "10KB", args.large_records, 10_240, args.rounds)
    print(f"load average at end: {os.getloadavg()}")
    direct = targets[0]
    for t in targets[1:]:
        for (client, label), runs in t.throughput.items():
            # Ratio per round (seconds direct / seconds through kcoord), then their median.
            pairs = list(zip(direct.throughput[client, label], runs, strict=True))
            produce = sorted(dp / p for (dp, _), (p, _) in pairs)
            consume = sorted(dc / c for (_, dc), (_, c) in pairs)
            each = (
                ""
                if len(pairs) == 1
                else (
                    f"  (rounds: produce {' '.join(f'{x:.2f}' for x in produce)};"
                    f" consume {' '.join(f'{x:.2f}' for x in consume)})"
                )
            )
            print(
                f"{t.name:8s} {client:10s} {label}: produce {statistics.median(produce):.2f}x of direct,"
                f" consume {statistics.median(consume):.2f}x of direct{each}"
            )


def shutil_taskset() -> bool:
    return (os.cpu_count() or 1) > 1 and hasattr(os, "sched_setaffinity")


if __name__ == "__main__":
    sys.exit(main())
