"""The machinery members share: connection pools, the heartbeat wheel, commit loops and rejoins.

Two kinds of connection, for one reason — a Kafka server answers a connection's requests in
order, and many (Kafka itself, tansu) also *process* them one at a time:
- **shared** connections carry the steady traffic (Heartbeat, OffsetCommit) of many members,
  pipelined; member ``i`` uses shared connection ``i % C``;
- **lanes** carry JoinGroup/SyncGroup. A lane is held by one member until it is synced, because a
  JoinGroup parks until the rebalance completes and would hold back every request behind it.
  Groups are admitted whole (``LanePool.acquire(k)``) so a group never waits for lanes its
  own parked members hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from kcoord.client import Connection, prepare
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey

from .conn import Stats, open_connection
from .histogram import Histogram
from .member import HEARTBEAT_VERSION, JoinFailed, Member, Next, State

log = logging.getLogger("loadgen.runtime")

LEAVE_VERSION = 5


class LanePool:
    """Up to ``size`` connections, each lent to one member at a time; FIFO for multi-lane requests."""

    def __init__(self, host: str, port: int, stats: Stats, size: int, client_id: str) -> None:
        self.host, self.port, self.stats, self.size, self.client_id = host, port, stats, size, client_id
        self.free: list[Connection] = []
        self.opened = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()
        self._reserved = 0  # lanes promised to woken waiters that have not taken them yet
        self._all: list[Connection] = []

    async def _open(self) -> Connection:
        conn = await open_connection(self.host, self.port, self.stats, self.client_id, name=f"lane{len(self._all)}")
        self._all.append(conn)
        return conn

    async def warm(self, n: int, batch: int = 256) -> None:
        """Open ``n`` lanes now, so a timed phase does not pay for TCP handshakes."""
        n = min(n, self.size) - self.opened
        while n > 0:
            k = min(n, batch)
            self.opened += k
            self.free.extend(await asyncio.gather(*(self._open() for _ in range(k))))
            n -= k

    def _available(self) -> int:
        return len(self.free) + (self.size - self.opened) - self._reserved

    async def acquire(self, k: int) -> list[Connection]:
        if k > self.size:
            raise ValueError(f"{k} lanes wanted, pool has {self.size}")
        if self._waiters or self._available() < k:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append((k, fut))
            try:
                await fut
            finally:
                if fut.done() and not fut.cancelled():
                    self._reserved -= k  # _wake() set them aside for us
        out = [self.free.pop() for _ in range(min(k, len(self.free)))]
        missing = k - len(out)
        self.opened += missing
        if missing:
            try:
                out.extend(await asyncio.gather(*(self._open() for _ in range(missing))))
            except BaseException:
                self.opened -= missing
                raise
        return out

    def release(self, conn: Connection) -> None:
        if not conn.closed and conn.in_flight == 0:
            self.free.append(conn)
        else:
            self.opened -= 1
            conn.close()
        self._wake()

    def _wake(self) -> None:
        budget = self._available()
        while self._waiters and self._waiters[0][0] <= budget:
            k, fut = self._waiters.popleft()
            if fut.done():
                continue
            budget -= k
            self._reserved += k
            fut.set_result(None)

    async def close(self) -> None:
        await close_all(self._all)


class HeartbeatWheel:
    """Members spread evenly over ``interval / tick`` slots; each tick sends one slot's heartbeats.

    Why a wheel: 50k members at one heartbeat per 3 s is ~17k sends/s. One timer per member costs
    a timer handle and a callback each; a wheel wakes up every ``tick`` and the sends of one tick
    leave in one write per connection. Ticks missed because the loop was busy are caught up, and
    the lateness is recorded (``lag``) so an overloaded generator shows up in the report.
    """

    def __init__(self, interval_s: float, send: Any, tick_s: float = 0.005) -> None:
        self.slots_n = max(1, round(interval_s / tick_s))
        self.tick_s = interval_s / self.slots_n
        self.slots: list[list[Member]] = [[] for _ in range(self.slots_n)]
        self.send = send
        self.lag = Histogram()
        self._next_slot = 0

    def add(self, member: Member) -> None:
        self.slots[self._next_slot].append(member)
        self._next_slot = (self._next_slot + 1) % self.slots_n

    def remove(self, member: Member) -> None:
        for slot in self.slots:
            if member in slot:
                slot.remove(member)
                return

    async def run(self) -> None:
        start = time.perf_counter()
        k = 0
        send = self.send
        while True:
            target = start + (k + 1) * self.tick_s
            delay = target - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            now = time.perf_counter()
            due = int((now - start) / self.tick_s)
            self.lag.record(int(max(0.0, now - target) * 1_000_000))
            while k < due:
                for member in self.slots[k % self.slots_n]:
                    send(member)
                k += 1


class Runtime:
    """Shared connections, lanes, heartbeats, commits and rejoins for one run against one coordinator."""

    def __init__(
        self,
        coordinator: tuple[str, int],
        stats: Stats,
        connections: int = 16,
        lanes: int = 1000,
        heartbeat_interval_s: float = 3.0,
        client_id: str = "kcoord-loadgen",
    ) -> None:
        self.host, self.port = coordinator
        self.stats = stats
        self.connections_n = max(1, connections)
        self.client_id = client_id
        self.shared: list[Connection] = []
        self.lanes = LanePool(self.host, self.port, stats, max(1, lanes), client_id)
        self.wheel = HeartbeatWheel(heartbeat_interval_s, self.send_heartbeat)
        self.members: list[Member] = []
        self.committing = False
        self.rejoins = 0
        self.failures: list[str] = []
        self.heartbeats_skipped = 0  # due while the previous one was still in flight
        self._tasks: set[asyncio.Task[Any]] = set()
        self._wheel_task: asyncio.Task[None] | None = None

    async def start(self) -> Runtime:
        self.shared = list(
            await asyncio.gather(
                *(
                    open_connection(self.host, self.port, self.stats, self.client_id, name=f"shared{i}")
                    for i in range(self.connections_n)
                )
            )
        )
        self._wheel_task = asyncio.get_running_loop().create_task(self.wheel.run())
        return self

    async def close(self, leave: bool = True) -> None:
        self.committing = False
        if self._wheel_task is not None:
            self._wheel_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._wheel_task
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if leave:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.leave_all(), 20.0)
        await close_all(self.shared)
        await self.lanes.close()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- members --------------------------------------------------------------------------------------
    def attach(self, member: Member) -> Member:
        member.conn = self.shared[member.index % self.connections_n]
        member.hb_callback = functools.partial(self._on_heartbeat, member)
        self.members.append(member)
        self.wheel.add(member)
        return member

    async def join(self, member: Member) -> None:
        """Join one member on a lane of its own."""
        (lane,) = await self.lanes.acquire(1)
        try:
            await member.join(lane)
        finally:
            self.lanes.release(lane)
        self._after_join(member)

    async def join_group(self, members: Sequence[Member]) -> None:
        """Join a whole group at once: all its lanes are reserved before any JoinGroup goes out."""
        lanes = await self.lanes.acquire(len(members))

        async def one(member: Member, lane: Connection) -> None:
            try:
                await member.join(lane)
            finally:
                self.lanes.release(lane)
            self._after_join(member)

        await asyncio.gather(*(one(mem, lane) for mem, lane in zip(members, lanes, strict=True)))

    def _after_join(self, member: Member) -> None:
        if self.committing and member.state is State.STABLE and not member.commit_inflight:
            self._send_commit(member)

    def rejoin(self, member: Member) -> None:
        """The coordinator asked for a rejoin (heartbeat or commit said so): do it in the background."""
        if member.rejoining or member.state is State.STOPPED:
            return
        member.rejoining = True
        self.rejoins += 1
        member.revoke()
        self._spawn(self._rejoin(member))

    async def _rejoin(self, member: Member) -> None:
        try:
            await self.join(member)
        except (JoinFailed, ConnectionError) as exc:
            self.failures.append(str(exc))
            member.state = State.STOPPED
        finally:
            member.rejoining = False

    async def leave(self, member: Member) -> None:
        """Close a member as a process exit would (LeaveGroup for a dynamic member)."""
        request = member.close()
        if request is not None:
            (lane,) = await self.lanes.acquire(1)
            try:
                resp = await lane.call(request, LEAVE_VERSION)
                if resp.error_code:
                    self.stats.error(ApiKey.LEAVE_GROUP, resp.error_code)
            finally:
                self.lanes.release(lane)

    async def leave_all(self, batch: int = 500) -> None:
        """Batched LeaveGroup (v3+) for every member still in a group, so the next run starts clean.

        Without it the server would expire thousands of sessions later, in the middle of the
        next measurement.
        """
        by_group: dict[str, list[Member]] = {}
        for mem in self.members:
            if mem.member_id and mem.state is not State.STOPPED:
                by_group.setdefault(mem.group_id, []).append(mem)
        ident = m.LeaveGroupRequest.MemberIdentity
        calls = []
        for i, (group_id, mems) in enumerate(by_group.items()):
            conn = self.shared[i % self.connections_n]
            if conn.closed:
                continue
            for j in range(0, len(mems), batch):
                members = [ident(member_id=x.member_id, group_instance_id=x.instance_id, reason="loadgen done") for x in mems[j : j + batch]]
                calls.append(conn.call(m.LeaveGroupRequest(group_id=group_id, members=members), LEAVE_VERSION))
        for mem in self.members:
            mem.state = State.STOPPED
        await asyncio.gather(*calls, return_exceptions=True)

    # -- heartbeats -----------------------------------------------------------------------------------
    def send_heartbeat(self, member: Member) -> None:
        if member.state is not State.STABLE:
            return
        if member.hb_inflight:
            self.heartbeats_skipped += 1
            return
        conn = member.conn
        if conn.closed:
            return
        frame = member.hb_frame
        if frame is None:
            frame = member.hb_frame = prepare(member.heartbeat_request(), HEARTBEAT_VERSION, self.client_id)
        member.hb_inflight = True
        member.hb_sent_generation = member.generation
        conn.send_prepared(frame, m.HeartbeatRequest, HEARTBEAT_VERSION, member.hb_callback)

    def _on_heartbeat(self, member: Member, resp: Any) -> None:
        member.hb_inflight = False
        if resp is None:
            return
        ec = resp.error_code
        if ec:
            self.stats.error(ApiKey.HEARTBEAT, ec)
            if member.state is not State.STABLE or member.hb_sent_generation != member.generation:
                return  # an answer for an older generation: the member has moved on
            try:
                if member.on_heartbeat(ec) is Next.REJOIN:
                    self.rejoin(member)
            except JoinFailed as exc:
                self.failures.append(str(exc))
                member.close()

    # -- commits --------------------------------------------------------------------------------------
    def start_commits(self, members: Sequence[Member]) -> None:
        """Closed loop: each member keeps one OffsetCommit in flight until stop_commits()."""
        self.committing = True
        for member in members:
            member.committer = True
            if member.commit_callback is None:
                member.commit_callback = functools.partial(self._on_commit, member)
            if not member.commit_inflight:
                self._send_commit(member)

    def stop_commits(self) -> None:
        self.committing = False

    def _send_commit(self, member: Member) -> None:
        if not (self.committing and member.committer) or member.state is not State.STABLE or member.conn.closed:
            return
        member.commit_offset += 1
        member.commit_inflight = True
        member.conn.call_cb(member.commit_request(member.commit_offset), 9, member.commit_callback)

    def _on_commit(self, member: Member, resp: Any) -> None:
        member.commit_inflight = False
        if resp is None:
            return
        step, ec = member.on_commit(resp)
        if ec:
            self.stats.error(ApiKey.OFFSET_COMMIT, ec)
        if step is Next.REJOIN:
            self.rejoin(member)
            return
        self._send_commit(member)


async def close_all(conns: Sequence[Connection]) -> None:
    """Close ``conns`` (what was sent still goes out) and wait until each is down."""
    for conn in conns:
        conn.close()
    await asyncio.gather(*(c.wait_closed() for c in conns), return_exceptions=True)
