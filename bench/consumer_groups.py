"""KIP-848 consumer groups in process: settle time, steady heartbeat CPU, OffsetCommit CPU per fencing mode.

    .venv/bin/python -m bench.consumer_groups                 # all three, the table (< 2 min on 2 cores)
    .venv/bin/python -m bench.consumer_groups --only settle --members 1000 --repeat 3

Same harness as ``bench/request_path.py``: one real ``App`` (router, shards, consumer-group state,
metrics, codec) over in-memory storage, a ``ClientConnection`` fed pipelined frames, its writes
collected by a fake transport. The topic catalog learns ``--topics`` topics of ``--partitions``
partitions each through its ordinary entry point (``TopicCatalog.learn``, as from a Metadata
answer), so the shards' ``topic_image`` is the real one.

1. **settle**: ``--members`` ConsumerGroupHeartbeat joins (epoch 0, all topics, the default server
   assignor) sent at once, then rounds in which every member heartbeats at the epoch it was given
   and reports the partitions it owns (the last assignment it was sent: what a client owns after
   revoking what it was asked to), a round every ``--round-ms`` (100) at most, until every member
   is STABLE at the group's epoch. Wall and CPU time from the first join to the end of the last
   round, and the number of rounds. ``--assignment-interval-ms`` is
   ``group.consumer.assignment.interval.ms`` (KIP-1263; Kafka 4.3's default 1000): with it, the
   joins share one assignor run and the wall time includes waiting for the interval.
2. **heartbeat**: steady-state heartbeats (member epoch, no fields changed, owned partitions null
   as the Java client sends them) of the settled members; CPU per request.
3. **commit**: OffsetCommit v9 of one owned partition per request from a consumer-group member,
   for each ``group.consumer.offset.commit.fencing`` mode, at the member's current epoch and one
   epoch behind after a bump that kept its partitions (a member joining on a side topic nobody else
   subscribes to). The error code the commits got is printed (``strict`` refuses the stale epoch).

Not included: sockets and the event loop's I/O, the storage log's round trip (memory storage
appends at once), the client's side.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from typing import Any

from kcoord.coordinator.cli import tune_gc_for_serving
from kcoord.coordinator.core.consumer.member import MemberState
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.net.server import App
from kcoord.coordinator.ops.settings import Settings
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from kcoord.storage.memory import MemoryStorage
from support.in_process import Harness, split_responses

HB = m.ConsumerGroupHeartbeatRequest
HB_VERSION = 1  # KIP-1082: the client generates its member id
OC = m.OffsetCommitRequest
OC_VERSION = 9
FENCING_MODES = ("strict", "revocation-epoch", "assignment-epoch")


class ConsumerHarness(Harness):
    def __init__(
        self, shards: int, fencing: str = "assignment-epoch", assignment_interval_ms: int = 1000
    ) -> None:
        group = GroupConfig(
            initial_rebalance_delay_ms=0, consumer_offset_commit_fencing=fencing,
            consumer_assignment_interval_ms=assignment_interval_ms,
        )  # fmt: skip
        self.app = App(Settings(shards=shards, storage="memory", group=group), storage=MemoryStorage())
        self.correlation = 0

    async def start_with_topics(self, topics: int, partitions: int) -> list[str]:
        await self.start()
        names = [f"t{i}" for i in range(topics)] + ["side"]
        P = m.MetadataResponse.MetadataResponsePartition
        assert self.app.cluster is not None
        self.app.cluster.topics.learn(
            m.MetadataResponse.MetadataResponseTopic(
                name=name, topic_id=uuid.uuid4(), partitions=[P(partition_index=p) for p in range(partitions)]
            )
            for name in names
        )
        self.names = dict((v, k) for k, v in self.app.cluster.topics.ids.items())
        return names[:-1]

    async def exchange(
        self, api_key: int, version: int, requests: list[Any], timeout_s: float = 60.0
    ) -> list[Any]:
        """Send the requests as one read; answers in order (the connection answers in order)."""
        self.conn.data_received(b"".join(self.frame(api_key, version, r) for r in requests))
        out: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < len(requests):
            await asyncio.sleep(0)
            out += split_responses(self.transport.take())
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(out)} of {len(requests)} answers")
        return [frames.decode_response(api_key, version, raw)[1] for raw in out]

    def group(self, group_id: str) -> Any:
        for shard in self.app.shards:
            g = shard.state.consumer.get(group_id)
            if g is not None:
                return g
        raise KeyError(group_id)


class Member:
    __slots__ = ("member_id", "epoch", "owned")

    def __init__(self) -> None:
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: dict[uuid.UUID, list[int]] = {}

    def take(self, r: m.ConsumerGroupHeartbeatResponse) -> None:
        assert r.error_code == 0, (r.error_code, r.error_message)
        self.epoch = r.member_epoch
        if r.assignment is not None:
            self.owned = {tp.topic_id: list(tp.partitions) for tp in r.assignment.topic_partitions}

    def owned_field(self) -> list[HB.TopicPartitions]:
        return [HB.TopicPartitions(topic_id=t, partitions=ps) for t, ps in self.owned.items()]


def join(group_id: str, member: Member, topics: list[str]) -> HB:
    return HB(
        group_id=group_id, member_id=member.member_id, member_epoch=0, rebalance_timeout_ms=60_000,
        subscribed_topic_names=topics, topic_partitions=[],
    )  # fmt: skip


def all_stable(h: ConsumerHarness, group_id: str, members: list[Member]) -> bool:
    g = h.group(group_id)
    return all(
        (s := g.members.get(mb.member_id)) is not None and s.state is MemberState.STABLE
        and s.member_epoch == g.group_epoch == g.target_assignment_epoch and mb.epoch == g.group_epoch
        for mb in members
    )  # fmt: skip


async def settle(
    h: ConsumerHarness, group_id: str, members: list[Member], topics: list[str], round_ms: float = 0.0
) -> int:
    """Joins, then rounds of heartbeats reporting owned partitions until all are STABLE, a round
    every ``round_ms`` at most; the rounds."""
    for mb, r in zip(
        members,
        await h.exchange(
            ApiKey.CONSUMER_GROUP_HEARTBEAT, HB_VERSION, [join(group_id, mb, topics) for mb in members]
        ),
        strict=True,
    ):
        mb.take(r)
    rounds = 0
    deadline = time.monotonic() + 60
    while not all_stable(h, group_id, members):
        rounds += 1
        if time.monotonic() > deadline:
            raise RuntimeError(f"the group did not settle in 60 s ({rounds} rounds)")
        if round_ms:
            await asyncio.sleep(round_ms / 1000)
        reqs = [
            HB(
                group_id=group_id,
                member_id=mb.member_id,
                member_epoch=mb.epoch,
                topic_partitions=mb.owned_field(),
            )
            for mb in members
        ]
        for mb, r in zip(
            members, await h.exchange(ApiKey.CONSUMER_GROUP_HEARTBEAT, HB_VERSION, reqs), strict=True
        ):
            mb.take(r)
    return rounds


async def bench_settle(args: argparse.Namespace) -> tuple[float, float, int, list[float]]:
    best_wall, best_cpu, rounds, walls = float("inf"), float("inf"), 0, []
    for _ in range(args.repeat):
        h = ConsumerHarness(args.shards, assignment_interval_ms=args.assignment_interval_ms)
        topics = await h.start_with_topics(args.topics, args.partitions)
        tune_gc_for_serving()
        members = [Member() for _ in range(args.members)]
        w0, c0 = time.perf_counter(), time.process_time()
        rounds = await settle(h, "settle-group", members, topics, args.round_ms)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        walls.append(wall)
        best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
        g = h.group("settle-group")
        assert sum(len(ps) for mb in members for ps in mb.owned.values()) == args.topics * args.partitions
        print(
            f"  settle run: {wall:.2f} s wall, {cpu:.2f} s CPU, {rounds} rounds, group epoch {g.group_epoch}, "
            f"target assignment epoch {g.target_assignment_epoch}"
        )
    return best_wall, best_cpu, rounds, walls


async def timed(
    h: ConsumerHarness, batch_frames: list[bytes], batch: int, repeat: int, flush: bool
) -> tuple[float, list[Any]]:
    reads = [b"".join(batch_frames[i : i + batch]) for i in range(0, len(batch_frames), batch)]
    h.transport.take()
    best = float("inf")
    answers: list[bytes] = []
    for _ in range(repeat):
        started = time.process_time()
        for data in reads:
            h.conn.data_received(data)
            if flush:
                await asyncio.sleep(0)  # the shards' group-commit flushes, as the loop would run them
                await asyncio.sleep(0)
        while h.conn._slots:
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        best = min(best, time.process_time() - started)
        answers = split_responses(h.transport.take())
        assert len(answers) == len(batch_frames), (len(answers), len(batch_frames))
    return best / len(batch_frames) * 1e6, answers


async def bench_heartbeat(args: argparse.Namespace) -> float:
    h = ConsumerHarness(
        args.shards, assignment_interval_ms=0
    )  # settles at once; the steady state is measured
    topics = await h.start_with_topics(args.topics, args.partitions)
    members = [Member() for _ in range(args.members)]
    await settle(h, "hb-group", members, topics)
    tune_gc_for_serving()
    out = [
        h.frame(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            HB_VERSION,
            HB(group_id="hb-group", member_id=mb.member_id, member_epoch=mb.epoch),
        )
        for _, mb in zip(
            range(args.requests), (members[i % len(members)] for i in range(args.requests)), strict=False
        )
    ]
    us, answers = await timed(h, out, args.batch, args.repeat, flush=False)
    for raw in answers[:: max(1, len(answers) // 100)]:
        r = frames.decode_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, HB_VERSION, raw)[1]
        assert r.error_code == 0 and r.assignment is None, r
    return us


async def bench_commit(args: argparse.Namespace, fencing: str) -> dict[str, tuple[float, str]]:
    h = ConsumerHarness(
        args.shards, fencing, assignment_interval_ms=0
    )  # the bump below must reach everyone at once
    topics = await h.start_with_topics(args.topics, args.partitions)
    members = [Member() for _ in range(args.commit_members)]
    await settle(h, "commit-group", members, topics)
    old_epoch = members[0].epoch
    before = {mb.member_id: dict(mb.owned) for mb in members}
    # A bump that keeps everyone's partitions: a newcomer on a topic nobody else subscribes to.
    newcomer = Member()
    newcomer.take(
        (
            await h.exchange(
                ApiKey.CONSUMER_GROUP_HEARTBEAT, HB_VERSION, [join("commit-group", newcomer, ["side"])]
            )
        )[0]
    )
    reqs = [HB(group_id="commit-group", member_id=mb.member_id, member_epoch=mb.epoch) for mb in members]
    for mb, r in zip(
        members, await h.exchange(ApiKey.CONSUMER_GROUP_HEARTBEAT, HB_VERSION, reqs), strict=True
    ):
        mb.take(r)
    assert all(mb.epoch == old_epoch + 1 and mb.owned == before[mb.member_id] for mb in members), (
        "the bump moved partitions"
    )
    tune_gc_for_serving()
    results: dict[str, tuple[float, str]] = {}
    for label, delta in (("current", 0), ("behind", -1)):
        out: list[bytes] = []
        for i in range(args.requests):
            mb = members[i % len(members)]
            topic_id, parts = next(iter(mb.owned.items()))
            req = OC(
                group_id="commit-group", generation_id_or_member_epoch=mb.epoch + delta, member_id=mb.member_id,
                topics=[OC.OffsetCommitRequestTopic(
                    name=h.names[topic_id],
                    partitions=[OC.OffsetCommitRequestPartition(partition_index=parts[i % len(parts)], committed_offset=i)],
                )],
            )  # fmt: skip
            out.append(h.frame(ApiKey.OFFSET_COMMIT, OC_VERSION, req))
        us, answers = await timed(h, out, args.batch, args.repeat, flush=True)
        codes = {
            p.error_code
            for raw in answers[:: max(1, len(answers) // 100)]
            for t in frames.decode_response(ApiKey.OFFSET_COMMIT, OC_VERSION, raw)[1].topics
            for p in t.partitions
        }
        results[label] = (us, ",".join(ErrorCode(c).name for c in sorted(codes)))
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topics", type=int, default=10)
    p.add_argument("--partitions", type=int, default=1000, help="per topic")
    p.add_argument("--members", type=int, default=1000, help="members of the settle and heartbeat group")
    p.add_argument("--commit-members", type=int, default=100, help="members of the commit group")
    p.add_argument("--shards", type=int, default=50)
    p.add_argument("--requests", type=int, default=20_000, help="per timed heartbeat / commit run")
    p.add_argument("--batch", type=int, default=32, help="frames per data_received call")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", choices=["settle", "heartbeat", "commit"], default=None)
    p.add_argument(
        "--assignment-interval-ms",
        type=int,
        default=1000,
        help="group.consumer.assignment.interval.ms (KIP-1263; Kafka 4.3's default 1000; 0: every bump)",
    )
    p.add_argument(
        "--round-ms",
        type=float,
        default=100.0,
        help="settle: the members heartbeat at most this often while reconciling (0: back to back)",
    )
    args = p.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    shape = f"{args.topics} topics x {args.partitions} partitions"
    rows: list[tuple[str, str]] = []
    if args.only in (None, "settle"):
        wall, cpu, rounds, walls = asyncio.run(bench_settle(args))
        rows.append((f"settle: {args.members} members join at once ({shape}), assignment interval {args.assignment_interval_ms} ms, "
                     f"a round every {args.round_ms:g} ms",
                     f"{wall:.2f} s wall, {cpu:.2f} s CPU, {rounds} heartbeat rounds after the joins (best of {args.repeat})"))  # fmt: skip
    if args.only in (None, "heartbeat"):
        us = asyncio.run(bench_heartbeat(args))
        rows.append((f"steady heartbeat, {args.members} STABLE members",
                     f"{us:.2f} µs CPU/request = {1e6 / us:,.0f} hb/s on one core"))  # fmt: skip
    if args.only in (None, "commit"):
        for mode in FENCING_MODES:
            for label, (us, codes) in asyncio.run(bench_commit(args, mode)).items():
                rows.append(
                    (f"OffsetCommit v9, fencing {mode}, epoch {label}", f"{us:.2f} µs CPU/request  [{codes}]")
                )
    width = max(len(r[0]) for r in rows)
    print(
        f"\nkcoord consumer groups in process ({args.requests} requests per timed run, {args.batch} per read, best of {args.repeat})"
    )
    for name, value in rows:
        print(f"{name:{width}s}  {value}")


if __name__ == "__main__":
    main()
