"""The event topic's cost on the heartbeat and commit paths: bench.request_path with it off and on.

    .venv/bin/python -m bench.events_cost [--requests 50000] [--rounds 3]

Same harness as ``bench.request_path`` (a real App and ClientConnection over memory storage, no
sockets). "on" attaches an EventTopicWriter to the shards' observer exactly as ``kcoord serve``
does; its background task runs on the same event loop and encodes every batch to JSON and Kafka
record batches, only the network send is replaced by a no-op. So "on" includes the writer's whole
CPU, not only the enqueue on the request path. Rounds alternate off/on; the best of each is shown.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from bench import request_path as rp
from kcoord.coordinator.ops.event_topic import EventTopicWriter
from support.in_process import Harness


class _OfflineWriter(EventTopicWriter):
    async def _ensure_topic(self) -> bool:
        return True

    async def _produce(self, by_partition: dict[int, list[tuple[bytes, bytes]]]) -> None:
        from kcoord.protocol.record_batch import encode_batch

        for pairs in by_partition.values():
            encode_batch(pairs, timestamp=0)


async def measure(scenario: str, args: argparse.Namespace, events_on: bool) -> tuple[float, int]:
    original = Harness.start
    writer: list[Any] = []

    async def start(self: Any) -> None:
        await original(self)
        if events_on:
            w = _OfflineWriter([("offline", 9092)], "__kcoord_events", registry=self.app.metrics.registry)
            await w.start()
            self.app.observer.sink = w
            writer.append(w)

    Harness.start = start  # type: ignore[method-assign]
    try:
        us = await rp.run(scenario, args, False)
    finally:
        Harness.start = original  # type: ignore[method-assign]
    written = 0
    if writer:
        await asyncio.sleep(0.5)
        written = writer[0].written
        await writer[0].close()
    return us, written


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--groups", type=int, default=10)
    p.add_argument("--group-size", type=int, default=100)
    p.add_argument("--shards", type=int, default=50)
    p.add_argument("--requests", type=int, default=50_000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--connections",
        type=int,
        default=0,
        help="as bench.request_path: N connections, one request in flight each (0: one connection, --batch per read)",
    )
    args = p.parse_args()
    import uvloop

    uvloop.install()
    print("| path | events off µs/request | events on µs/request | on/off | events written (on) |")
    print("|---|---|---|---|---|")
    for scenario in ("heartbeat", "commit"):
        off, on, written = float("inf"), float("inf"), 0
        for _ in range(args.rounds):
            off = min(off, asyncio.run(measure(scenario, args, False))[0])
            us, n = asyncio.run(measure(scenario, args, True))
            on, written = min(on, us), max(written, n)
        print(f"| {scenario} | {off:.2f} | {on:.2f} | {on / off:.3f} | {written} |", flush=True)


if __name__ == "__main__":
    main()
