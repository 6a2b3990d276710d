"""What one relay hop costs a large Fetch answer: kcoord next to byte pumps, side by side.

    .venv/bin/python -m bench.fetch_hop --kcoord kcoord-debian=/work/venv-deb/bin/python --rounds 6

#30 asks the relay for >= 95% of direct consume throughput with the Java client and 10 KB records.
That client fetches one partition's next answer only once it has taken the last one, so every
millisecond a relay adds to one Fetch round trip is lost from every cycle of fetching and
processing. This bench measures that millisecond in isolation: one Kafka 4.0 broker holding
``--records`` records of ``--size`` bytes on one partition, and a client (kcoord's own connection,
one request in flight) sending ``--fetches`` Fetch v12 requests for up to ``--answer-mb`` MB from
offset 0 (the page cache serves every one) to each target in turn, the order reversed each round:

- ``direct``: the broker itself;
- each ``--kcoord`` (default: this python): kcoord's relayed broker port (cut-through streaming of
  large answers, the last 64 KB held back for KIP-951's NodeEndpoints: relay/passthrough.py);
- ``python``: a uvloop byte pump (bench/relay_floor.py's), no framing, nothing checked;
- ``c``: the same pump in C (bench/relay_floor.c: read and write, a 256 KiB buffer);
- ``c-splice``: the C pump moving bytes through a pipe with splice(2), never into the process:
  the zero-copy floor of a relay.

Reported per target: the median round trip, what it adds to direct's, and the relay process's CPU
per MB relayed. The relays run on CPU 0, the client and every thread of the broker on CPU 1 (as
bench/relay_floor.py pins tansu). The pumps pair each client connection with an upstream connection and rewrite
nothing, so only this bench's client (which sends its Fetches to the address it is given) can use
them: a stock client would follow the broker's Metadata past them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.relay import _start_kcoord
from bench.relay_floor import PUMPS, _c_pump_binary, start_pump
from kcoord.client.connection import connect
from kcoord.protocol import frames
from kcoord.protocol import storage_messages as sm
from kcoord.protocol.messages import ApiKey
from support import procs
from support.kafka_broker import KafkaBroker
from support.loadgen import procstat
from support.throughput_clients import create_one_partition_topic, librdkafka_produce

TOPIC = "fetch-hop"
FETCH_VERSION = 12  # topics by name; every relay here and Kafka 4.0 speak it


def fetch_frame(correlation_id: int, max_bytes: int) -> bytes:
    F = sm.FetchRequest
    request = F(
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        topics=[
            F.FetchTopic(
                topic=TOPIC,
                partitions=[F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=max_bytes)],
            )
        ],
    )
    return frames.encode_request(ApiKey.FETCH, FETCH_VERSION, correlation_id, "fetch-hop", request)


async def round_trips(address: str, fetches: int, max_bytes: int) -> tuple[list[float], int]:
    """Seconds per Fetch round trip (one in flight) and the answer's size."""
    host, port = address.rsplit(":", 1)
    conn = await connect((host, int(port)), max_frame_size=max_bytes + (1 << 20))
    times: list[float] = []
    size = 0
    try:
        for i in range(fetches):
            started = time.perf_counter()
            answer = await conn.send(fetch_frame(100 + i, max_bytes))  # type: ignore[misc]
            times.append(time.perf_counter() - started)
            size = len(answer)
    finally:
        conn.close()
    return times, size


def pin_threads(pid: int, cpu: int) -> None:
    """Every thread of ``pid`` on ``cpu`` (a JVM's threads are tasks of their own; new ones inherit)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(task), {cpu})


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kcoord", action="append", default=[], metavar="NAME=PYTHON")
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=10_240)
    ap.add_argument("--answer-mb", type=float, default=10.0, help="Fetch max_bytes (the answer's size), MB")
    ap.add_argument("--fetches", type=int, default=40, help="per target per round (the first 2 not counted)")
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args(argv)
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})
    max_bytes = int(args.answer_mb * 1024 * 1024)
    kcoords = dict(spec.partition("=")[::2] for spec in args.kcoord) or {"kcoord": sys.executable}
    print(f"load average at start: {os.getloadavg()}", flush=True)
    children: list[procs.Child] = []
    with KafkaBroker(Path(tempfile.mkdtemp(prefix="bench-fetch-hop-")) / "kafka") as broker:
        assert broker.process is not None
        if (os.cpu_count() or 1) > 1:
            pin_threads(broker.process.pid, 1)
        upstream = broker.bootstrap
        create_one_partition_topic(upstream, TOPIC)
        librdkafka_produce(upstream, TOPIC, args.records, args.size)
        targets: dict[str, tuple[str, int]] = {"direct": (upstream, broker.process.pid)}
        try:
            for name, python in kcoords.items():
                child, _, address = _start_kcoord(str(Path(python).absolute()), upstream)
                children.append(child)
                targets[name] = (address, child.pid)
            c_binary = _c_pump_binary()
            for kind in PUMPS if c_binary is not None else ("python",):
                child, address = start_pump(kind, upstream, c_binary)
                children.append(child)
                targets[kind] = (address, child.pid)
            rtts: dict[str, list[float]] = {t: [] for t in targets}
            cpu_per_mb: dict[str, list[float]] = {t: [] for t in targets}
            order = list(targets)
            for r in range(args.rounds):
                for name in order if r % 2 == 0 else order[::-1]:
                    address, pid = targets[name]
                    cpu_before = procstat.cpu_seconds(pid)
                    times, size = asyncio.run(round_trips(address, args.fetches, max_bytes))
                    cpu = procstat.cpu_seconds(pid) - cpu_before
                    rtts[name] += times[2:]
                    cpu_per_mb[name].append(cpu * 1e3 / (args.fetches * size / 1e6))
                    print(
                        f"round {r + 1} {name:14s} {size / 1e6:5.1f} MB answers: median round trip"
                        f" {statistics.median(times[2:]) * 1e3:6.2f} ms, CPU {cpu_per_mb[name][-1]:.3f} ms/MB"
                        f"  load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
        finally:
            for child in children:
                child.stop()
    print(f"load average at end: {os.getloadavg()}")
    direct = statistics.median(rtts["direct"])
    print("| target | round trip, median (p10-p90) | added to direct | CPU per MB (median of rounds) |")
    print("|---|---|---|---|")
    for name, values in rtts.items():
        ordered = sorted(values)
        median = statistics.median(values)
        print(
            f"| {name} | {median * 1e3:.2f} ms ({ordered[len(ordered) // 10] * 1e3:.2f}-"
            f"{ordered[len(ordered) * 9 // 10] * 1e3:.2f}) | "
            + ("-" if name == "direct" else f"+{(median - direct) * 1e3:.2f} ms")
            + f" | {statistics.median(cpu_per_mb[name]):.3f} ms"
            + (" (the broker)" if name == "direct" else "")
            + " |"
        )


if __name__ == "__main__":
    main()
