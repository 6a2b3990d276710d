"""One callback per loop iteration writes every connection's answers; ``write_now`` writes them at
once (kcoord.coordinator.net.writes)."""

from __future__ import annotations

import asyncio

from kcoord.coordinator.net.writes import WriteCoalescer


class Recorder:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    def write_out(self) -> None:
        self.log.append(self.name)


async def test_writes_wait_for_the_next_iteration_together() -> None:
    written: list[str] = []
    writes = WriteCoalescer()
    writes.write_soon(Recorder("a", written))
    writes.write_soon(Recorder("b", written))
    assert written == []
    await asyncio.sleep(0)
    assert written == ["a", "b"]


async def test_write_now_writes_at_once_and_the_scheduled_callback_finds_nothing() -> None:
    written: list[str] = []
    writes = WriteCoalescer()
    writes.write_soon(Recorder("a", written))
    writes.write_now()
    assert written == ["a"]
    await asyncio.sleep(0)
    assert written == ["a"]  # not twice
    writes.write_now()  # nothing pending: nothing happens
    writes.write_soon(Recorder("b", written))  # and a later one is still written
    await asyncio.sleep(0)
    assert written == ["a", "b"]
