"""kcoord in process, no sockets: frames go straight into a real ClientConnection.

A ``ClientConnection`` wired to a real ``App`` (router, shards, group state, metrics, the codec)
over in-memory storage, fed pipelined frames the way a socket read delivers them; its writes are
collected by a fake transport. The benchmarks of kcoord's own CPU per request (bench/request_path.py,
bench/consumer_groups.py, bench/member_memory.py, bench/events_cost.py) drive it, and so do unit
tests that need the whole request path without a broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.net.connection import ClientConnection
from kcoord.coordinator.net.gateway import ClusterView
from kcoord.coordinator.net.server import App, Listener
from kcoord.coordinator.ops.settings import Settings
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey
from kcoord.storage.memory import MemoryStorage

CONSUMER_METADATA = b"\x00\x01" + m.ConsumerProtocolSubscription(topics=["t"]).encode(1)


class FakeTransport:
    """Collects what the connection writes; the caller parses responses out of it."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.reading = True  # pause_reading / resume_reading

    def write(self, data: bytes) -> None:
        self.chunks.append(data)

    def writelines(self, pieces: Iterable[bytes]) -> None:
        self.chunks.append(b"".join(pieces))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        pass

    def take(self) -> bytes:
        data = b"".join(self.chunks)
        self.chunks.clear()
        return data


async def _no_listener(broker: Any) -> int:
    raise AssertionError("the in-process harness has no upstream brokers")


def split_responses(data: bytes) -> list[bytes]:
    dec = frames.FrameDecoder()
    return dec.feed(data)


class Harness:
    """A real App over memory storage with one ClientConnection on a fake transport."""

    def __init__(self, shards: int) -> None:
        group = GroupConfig(initial_rebalance_delay_ms=0)
        self.app = App(Settings(shards=shards, storage="memory", group=group), storage=MemoryStorage())
        self.correlation = 0

    async def start(self) -> None:
        app = self.app
        assert app.storage is not None
        await app.storage.open(app.settings.shards)
        app._make_shards()
        await asyncio.gather(*(s.load() for s in app.shards))
        # No upstream: a cluster view that knows the commits' topic, as after its first lookup.
        app.cluster = ClusterView([("upstream", 9092)], "127.0.0.1", 0, 1_000_000, _no_listener)
        app.cluster.topics.partitions["t"] = 1000
        self.transport = FakeTransport()
        self.conn = ClientConnection(Listener(app, None))
        self.conn.connection_made(self.transport)  # type: ignore[arg-type]

    def frame(self, api_key: int, version: int, request: Any) -> bytes:
        self.correlation += 1
        return frames.encode_request(api_key, version, self.correlation, "bench", request)

    async def roundtrip(self, api_key: int, version: int, requests: list[Any]) -> list[Any]:
        self.conn.data_received(b"".join(self.frame(api_key, version, r) for r in requests))
        out: list[bytes] = []
        for _ in range(200):
            await asyncio.sleep(0.005)
            out += split_responses(self.transport.take())
            if len(out) >= len(requests):
                break
        return [frames.decode_response(api_key, version, raw)[1] for raw in out]

    async def join_group(self, group_id: str, size: int) -> list[tuple[str, int]]:
        """Static members join and sync; returns (member id, generation) per member."""
        joins = [
            m.JoinGroupRequest(
                group_id=group_id,
                session_timeout_ms=60_000,
                rebalance_timeout_ms=60_000,
                member_id="",
                group_instance_id=f"{group_id}-i{i}",
                protocol_type="consumer",
                protocols=[
                    m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=CONSUMER_METADATA)
                ],
            )
            for i in range(size)
        ]
        answers = await self.roundtrip(ApiKey.JOIN_GROUP, 9, joins)
        assert all(a.error_code == 0 for a in answers), [a.error_code for a in answers]
        members = [(a.member_id, a.generation_id) for a in answers]
        leader = answers[0].leader
        syncs = []
        for (member_id, generation), join in zip(members, joins, strict=True):
            assignments = []
            if member_id == leader:
                assignments = [
                    m.SyncGroupRequest.SyncGroupRequestAssignment(member_id=mid, assignment=b"")
                    for mid, _ in members
                ]
            syncs.append(
                m.SyncGroupRequest(
                    group_id=group_id,
                    generation_id=generation,
                    member_id=member_id,
                    group_instance_id=join.group_instance_id,
                    protocol_type="consumer",
                    protocol_name="range",
                    assignments=assignments,
                )
            )
        # The leader's sync goes last so the followers' are parked first, as with real clients.
        synced = await self.roundtrip(ApiKey.SYNC_GROUP, 5, syncs)
        assert all(s.error_code == 0 for s in synced), [s.error_code for s in synced]
        return members
