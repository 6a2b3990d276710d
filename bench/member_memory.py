"""Memory per group member, in process: classic members against KIP-848 consumer-protocol members.

    .venv/bin/python -m bench.member_memory                          # the table: 10k and 50k, both protocols
    .venv/bin/python -m bench.member_memory --members 50000 --only consumer-static
    .venv/bin/python -m bench.member_memory --top 25 --only consumer-dynamic --members 10000

Each configuration (protocol x static/dynamic x member count) runs in a fresh subprocess, twice:

1. **tracemalloc**: the bytes the Python allocator holds for the groups' state, divided by the
   members. Traced from before the ``App`` exists; the baseline is taken once the shards are
   loaded and the topic catalog knows the topic, the figure once every group has settled and the
   bench has dropped its own client-side objects (member lists, frames, answers), after a full
   collection. ``--top N`` prints the N lines that allocated most of it (tracemalloc by line).
2. **RSS**: the growth of the process's resident set (``VmRSS``) over the same interval, without
   tracemalloc (which adds its own per-block overhead): what the operating system sees.

The path is the server's: the harness of ``bench/request_path.py`` and ``bench/consumer_groups.py``
(a real ``App`` with its router, shards, group state machines and codec, over memory storage, fed
encoded frames through a real ``ClientConnection``). Groups of ``--group-size`` members subscribe to
one topic of ``--partitions-per-member`` x group size partitions, so every member owns some:

- **classic**: JoinGroup v9 + SyncGroup v5 (range protocol, a ConsumerProtocolSubscription of the
  topic); the leader sends every member a ConsumerProtocolAssignment of its partitions. Static
  members join with an instance id; dynamic ones take MEMBER_ID_REQUIRED and join again.
- **consumer** (KIP-848): ConsumerGroupHeartbeat v1 joins (client-generated member ids, the
  server's uniform assignor, assignment interval 0), then rounds of heartbeats reporting the owned
  partitions until every member is STABLE at its group's epoch. Static members send an instance id.

The memory storage's log is not part of the figure: with ``--storage kafka`` the records live on
the cluster, so the bench empties the log after every exchange (its bytes are printed apart).

Not included: one connection per member (the harness has one connection; its buffers are per
connection, not per member), sockets, the client side.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc
from dataclasses import replace
from typing import Any

from kcoord.coordinator.core.consumer.member import MemberState
from kcoord.coordinator.net.server import App
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from kcoord.storage.memory import MemoryStorage

from .consumer_groups import ConsumerHarness
from .consumer_groups import Member as ConsumerBenchMember

HB = m.ConsumerGroupHeartbeatRequest
CHUNK = 5_000  # requests per exchange: bounds the bench's own frames and answers in memory
CONFIGS = ("classic-static", "classic-dynamic", "consumer-static", "consumer-dynamic")


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


class MemoryBench(ConsumerHarness):
    """The consumer harness, with a log the bench empties as it goes (the records are the cluster's)."""

    log_bytes = 0

    def __init__(self, shards: int) -> None:
        super().__init__(shards, assignment_interval_ms=0)
        # The settle of 50,000 members under tracemalloc takes minutes of real time: no member may
        # time out meanwhile (a KIP-848 session is the group's, 45 s by default).
        group = replace(self.app.settings.group, consumer_session_timeout_ms=1_800_000)
        self.app = App(replace(self.app.settings, group=group), storage=MemoryStorage())

    def drop_log(self) -> None:
        assert self.app.storage is not None
        for log in self.app.storage.logs.values():  # type: ignore[attr-defined]
            for entry in log.entries:
                key, value = entry
                self.log_bytes += len(key) + len(value or b"")
            log.entries.clear()
            log.followed = 0

    async def chunked(self, api_key: int, version: int, requests: list[Any]) -> list[Any]:
        out: list[Any] = []
        for i in range(0, len(requests), CHUNK):
            out += await self.exchange(api_key, version, requests[i : i + CHUNK], timeout_s=300.0)
            self.drop_log()
        return out


# -- classic --------------------------------------------------------------------------------------
def subscription(topic: str) -> bytes:
    return b"\x00\x01" + m.ConsumerProtocolSubscription(topics=[topic]).encode(1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    A = m.ConsumerProtocolAssignment
    return b"\x00\x01" + A(assigned_partitions=[A.TopicPartition(topic=topic, partitions=partitions)]).encode(
        1
    )


async def settle_classic(
    h: MemoryBench, groups: int, size: int, static: bool, topic: str, per_member: int
) -> None:
    P = m.JoinGroupRequest.JoinGroupRequestProtocol
    meta = subscription(topic)

    def join(g: int, i: int, member_id: str) -> m.JoinGroupRequest:
        return m.JoinGroupRequest(
            group_id=f"group-{g}", session_timeout_ms=1_800_000, rebalance_timeout_ms=60_000, member_id=member_id,
            group_instance_id=f"group-{g}-i{i}" if static else None, protocol_type="consumer",
            protocols=[P(name="range", metadata=meta)],
        )  # fmt: skip

    # A group at a time, all its joins in one read: a group's rebalance completes once all its
    # members joined, so its joins must not be split across exchanges.
    for g in range(groups):
        joins = [join(g, i, "") for i in range(size)]
        answers = await h.chunked(ApiKey.JOIN_GROUP, 9, joins)
        if not static:
            assert all(a.error_code == ErrorCode.MEMBER_ID_REQUIRED for a in answers), {
                a.error_code for a in answers
            }
            joins = [join(g, i, a.member_id) for i, a in enumerate(answers)]
            answers = await h.chunked(ApiKey.JOIN_GROUP, 9, joins)
        assert all(a.error_code == 0 for a in answers), {a.error_code for a in answers}
        leader = answers[0].leader
        generation = answers[0].generation_id
        ids = [a.member_id for a in answers]
        A = m.SyncGroupRequest.SyncGroupRequestAssignment
        plan = [A(member_id=mid, assignment=assignment(topic, list(range(i * per_member, (i + 1) * per_member))))
                for i, mid in enumerate(ids)]  # fmt: skip
        syncs = [
            m.SyncGroupRequest(
                group_id=f"group-{g}", generation_id=generation, member_id=mid,
                group_instance_id=join_.group_instance_id, protocol_type="consumer", protocol_name="range",
                assignments=plan if mid == leader else [],
            )
            for mid, join_ in zip(ids, joins, strict=True)
        ]  # fmt: skip
        syncs.sort(key=lambda s: s.member_id == leader)  # the leader last: the followers are parked first
        synced = await h.chunked(ApiKey.SYNC_GROUP, 5, syncs)
        assert all(s.error_code == 0 and s.assignment for s in synced), {s.error_code for s in synced}


# -- consumer (KIP-848) -----------------------------------------------------------------------------
class Member(ConsumerBenchMember):
    """A bench member that also knows its group and, when static, its instance id."""

    __slots__ = ("group_id", "instance_id")

    def __init__(self, group_id: str, instance_id: str | None) -> None:
        super().__init__()
        self.group_id = group_id
        self.instance_id = instance_id


async def settle_consumer(h: MemoryBench, groups: int, size: int, static: bool, topic: str) -> int:
    members = [
        Member(f"group-{g}", f"group-{g}-i{i}" if static else None)
        for g in range(groups)
        for i in range(size)
    ]
    joins = [
        HB(group_id=mb.group_id, member_id=mb.member_id, member_epoch=0, instance_id=mb.instance_id,
           rebalance_timeout_ms=60_000, subscribed_topic_names=[topic], topic_partitions=[])
        for mb in members
    ]  # fmt: skip
    for mb, r in zip(members, await h.chunked(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, joins), strict=True):
        mb.take(r)
    del joins
    rounds = 0
    while pending := [mb for mb in members if not stable(h, mb)]:
        rounds += 1
        if rounds > 50:
            raise RuntimeError(f"{len(pending)} members not STABLE after 50 rounds")
        reqs = [
            HB(group_id=mb.group_id, member_id=mb.member_id, member_epoch=mb.epoch, instance_id=mb.instance_id,
               topic_partitions=[HB.TopicPartitions(topic_id=t, partitions=ps) for t, ps in mb.owned.items()])
            for mb in pending
        ]  # fmt: skip
        for mb, r in zip(pending, await h.chunked(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, reqs), strict=True):
            mb.take(r)
    owned = sum(len(ps) for mb in members for ps in mb.owned.values())
    assert all(mb.owned for mb in members), "a member owns nothing"
    return owned


def stable(h: MemoryBench, mb: Member) -> bool:
    g = h.group(mb.group_id)
    s = g.members.get(mb.member_id)
    return (
        s is not None and s.state is MemberState.STABLE
        and s.member_epoch == g.group_epoch == g.target_assignment_epoch and mb.epoch == g.group_epoch
    )  # fmt: skip


# -- one configuration, in this process -------------------------------------------------------------
async def measure(
    config: str, members: int, group_size: int, per_member: int, shards: int, top: int, trace: bool
) -> dict[str, Any]:
    protocol, membership = config.split("-")
    static = membership == "static"
    groups = members // group_size
    if trace:
        tracemalloc.start(1)
    h = MemoryBench(shards)
    await h.start_with_topics(1, group_size * per_member)
    topic = "t0"
    gc.collect()
    base_traced = tracemalloc.get_traced_memory()[0] if trace else 0
    base_snapshot = tracemalloc.take_snapshot() if trace and top else None
    base_rss = rss_bytes()
    started = time.perf_counter()
    if protocol == "classic":
        await settle_classic(h, groups, group_size, static, topic, per_member)
    else:
        await settle_consumer(h, groups, group_size, static, topic)
    settle_s = time.perf_counter() - started
    h.transport.take()
    h.drop_log()
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - base_traced if trace else 0
    rss = rss_bytes() - base_rss
    out: dict[str, Any] = {
        "config": config, "members": groups * group_size, "groups": groups, "group_size": group_size,
        "settle_s": round(settle_s, 1), "log_bytes_per_member": h.log_bytes / (groups * group_size),
    }  # fmt: skip
    if trace:
        out["traced_bytes_per_member"] = traced / (groups * group_size)
    else:
        out["rss_bytes_per_member"] = rss / (groups * group_size)
        out["rss_growth_mb"] = rss / 2**20
    if base_snapshot is not None:
        stats = tracemalloc.take_snapshot().compare_to(base_snapshot, "lineno")
        out["top"] = [
            f"{s.size_diff / (groups * group_size):8.1f} B/member {s.count_diff:+9d} blocks  {s.traceback[0]}"
            for s in stats[:top]
        ]
    return out


def run_config(config: str, args: argparse.Namespace, trace: bool) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.member_memory", "--child", config, "--members", str(args.members[0]),
           "--group-size", str(args.group_size), "--partitions-per-member", str(args.partitions_per_member),
           "--shards", str(args.shards), "--top", str(args.top)] + (["--trace"] if trace else [])  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=os.getcwd())
    if done.returncode != 0:
        raise RuntimeError(f"{config}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", type=int, nargs="+", default=[10_000, 50_000])
    p.add_argument("--group-size", type=int, default=50)
    p.add_argument("--partitions-per-member", type=int, default=4)
    p.add_argument("--shards", type=int, default=50)
    p.add_argument("--only", choices=CONFIGS, nargs="+", default=None)
    p.add_argument(
        "--top", type=int, default=0, help="print the N lines that allocated the most (tracemalloc)"
    )
    p.add_argument("--no-rss", action="store_true", help="only the tracemalloc run")
    p.add_argument(
        "--no-trace", action="store_true", help="only the RSS run (a traced 50k settle takes minutes)"
    )
    p.add_argument("--json", default=None, help="write the rows here")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        try:
            import uvloop

            uvloop.install()
        except ImportError:
            pass
        row = asyncio.run(measure(args.child, args.members[0], args.group_size, args.partitions_per_member,
                                  args.shards, args.top, args.trace))  # fmt: skip
        print(json.dumps(row))
        return
    rows: list[dict[str, Any]] = []
    print(
        f"groups of {args.group_size}, {args.partitions_per_member} partitions per member, {args.shards} shards"
    )
    print(
        f"{'configuration':18s} {'members':>8s} {'traced B/member':>16s} {'RSS B/member':>13s} {'RSS growth':>11s} {'log B/member':>13s} {'settle':>8s}"
    )
    for members in args.members:
        for config in args.only or CONFIGS:
            one = argparse.Namespace(**{**vars(args), "members": [members]})
            if args.no_trace:
                row = run_config(config, argparse.Namespace(**{**vars(one), "top": 0}), trace=False)
            else:
                row = run_config(config, one, trace=True)
                if not args.no_rss:
                    rss = run_config(config, argparse.Namespace(**{**vars(one), "top": 0}), trace=False)
                    row.update(
                        rss_bytes_per_member=rss["rss_bytes_per_member"], rss_growth_mb=rss["rss_growth_mb"]
                    )
            rows.append(row)
            rss_cols = (f"{row['rss_bytes_per_member']:13,.0f} {row['rss_growth_mb']:8.1f} MB"
                        if "rss_bytes_per_member" in row else f"{'-':>13s} {'-':>11s}")  # fmt: skip
            print(f"{config:18s} {row['members']:8,d} {row.get('traced_bytes_per_member', float('nan')):16,.0f} {rss_cols} "
                  f"{row['log_bytes_per_member']:13,.0f} {row['settle_s']:6.1f} s", flush=True)  # fmt: skip
            for line in row.get("top", []):
                print("    " + line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
