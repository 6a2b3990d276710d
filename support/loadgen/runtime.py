"""The machinery members share: connections, the heartbeat wheel, commit loops and rejoins.

Two connection shapes. Why it matters: a Kafka server answers a connection's requests
in order, and many (Kafka itself, tansu) also *process* them one at a time, so the number of
connections decides how much a server may overlap; a shape real clients do not have flatters
whichever server pipelines best.

- **per member** (the default, ``connections=None``): as a real consumer does, each member has one
  coordinator connection of its own and sends everything on it — JoinGroup/SyncGroup,
  Heartbeat, OffsetCommit, LeaveGroup. The connections are opened in batches before anything is
  timed (:meth:`Runtime.open_member_connections`); a member whose connection was closed (a
  restart in the rolling bounce) opens a new one when it joins again, as a restarted process
  would. ``lanes`` then only bounds how many members join at once (groups admitted whole).
- **shared** (``connections=C``, the old shape, kept for comparison): the steady traffic
  (Heartbeat, OffsetCommit) of many members is pipelined over C connections, member ``i`` on
  connection ``i % C``, and JoinGroup/SyncGroup go over **lanes**: a lane is held by one member
  until it is synced, because a JoinGroup parks until the rebalance completes and would hold
  back every request behind it. Groups are admitted whole (``LanePool.acquire(k)``) so a group
  never waits for lanes its own parked members hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import resource
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
OPEN_BATCH = 256  # connections opened at once: thousands of simultaneous connects overflow a listen backlog


def shape(connections: int | None) -> str | int:
    """What a report's params say about the connection shape: "per-member" or the shared count."""
    return "per-member" if connections is None else connections


def check_descriptor_budget(connections: int) -> None:
    """Refuse a run that would open more connections than this process may hold descriptors.

    Why up front: past the limit connects fail one by one in the middle of the setup, which reads
    as a server failing. ``raise_fd_limit`` (``__main__``) has already lifted the soft limit.
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if connections + 100 > soft:
        raise SystemExit(
            f"{connections:,} connections (one per member) need more file descriptors than this process may open "
            f"({soft:,}): raise the limit (ulimit -n) or share connections with --connections N"
        )


async def open_in_batches(count: int, open_one: Any, batch: int = OPEN_BATCH) -> list[Connection]:
    """``count`` connections from ``open_one(i)``, ``batch`` connects at a time."""
    out: list[Connection] = []
    for start in range(0, count, batch):
        out.extend(await asyncio.gather(*(open_one(i) for i in range(start, min(count, start + batch)))))
    return out


Address = tuple[str, int]


def shares(total: int, group_coordinators: dict[str, Address], default: Address) -> dict[Address, int]:
    """``total`` connections (or lanes) split among the groups' coordinators in proportion to how
    many groups each one has, at least one each (all of them to ``default`` when no group names one).

    Why: in the shared shape a connection carries the traffic of many members, and a coordinator
    answers only for its own groups (the workers of ``kcoord serve --workers N``, a kcoord cluster,
    NOT_COORDINATOR elsewhere), so each coordinator needs connections of its own."""
    groups: dict[Address, int] = {}
    for address in group_coordinators.values():
        groups[address] = groups.get(address, 0) + 1
    if not groups:
        return {default: total}
    count = sum(groups.values())
    return {address: max(1, total * n // count) for address, n in groups.items()}


class SharedConnections:
    """The shared shape's connections, each coordinator's own (see :func:`shares`); a member of
    group G uses connection ``i % C_G`` of G's coordinator."""

    def __init__(self, total: int, group_coordinators: dict[str, Address], default: Address) -> None:
        self.group_coordinators = group_coordinators
        self.default = default
        self.counts = shares(total, group_coordinators, default) if total else {}
        self.by_address: dict[Address, list[Connection]] = {}

    async def open(self, stats: Stats, client_id: str, prefix: str) -> None:
        for address, count in self.counts.items():
            self.by_address[address] = await open_in_batches(
                count, functools.partial(self._open_one, address, stats, client_id, prefix)
            )

    @staticmethod
    async def _open_one(address: Address, stats: Stats, client_id: str, prefix: str, i: int) -> Connection:
        return await open_connection(*address, stats, client_id, name=f"{prefix}{address[1]}-{i}")

    def of(self, address: Address) -> list[Connection]:
        return self.by_address.get(address, [])

    def for_member(self, group_id: str, index: int) -> Connection:
        conns = self.by_address[self.group_coordinators.get(group_id, self.default)]
        return conns[index % len(conns)]

    def all(self) -> list[Connection]:
        return [conn for conns in self.by_address.values() for conn in conns]


class Admission:
    """At most ``size`` members joining at once, admitted k at a time in FIFO order (per-member shape).

    The per-member shape needs no lanes, but the setup still admits groups whole and bounded, like
    :class:`LanePool`, so both shapes set up the same way.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.free = size
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    async def acquire(self, k: int) -> None:
        if k > self.size:
            raise ValueError(f"{k} joins at once wanted, admission allows {self.size}")
        if not self._waiters and self.free >= k:
            self.free -= k
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((k, fut))
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release(k)  # granted, then cancelled: give it back
            raise

    def release(self, k: int = 1) -> None:
        self.free += k
        while self._waiters and self._waiters[0][0] <= self.free:
            n, fut = self._waiters.popleft()
            if fut.done():
                continue
            self.free -= n
            fut.set_result(None)


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
        conn = await open_connection(
            self.host, self.port, self.stats, self.client_id, name=f"lane{len(self._all)}"
        )
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
    """Connections, heartbeats, commits and rejoins for one run against one coordinator.

    ``connections=None``: one connection per member, used for everything (the default, as real
    clients); ``connections=C``: the old shape, C shared connections plus up to ``lanes`` lanes.
    """

    def __init__(
        self,
        coordinator: tuple[str, int],
        stats: Stats,
        connections: int | None = None,
        lanes: int = 1000,
        heartbeat_interval_s: float = 3.0,
        client_id: str = "kcoord-loadgen",
        group_coordinators: dict[str, tuple[str, int]] | None = None,
    ) -> None:
        self.host, self.port = coordinator
        # Per-member shape: a member whose group's coordinator is elsewhere (the workers of
        # `kcoord serve --workers N`, a kcoord cluster) opens its connection there.
        self.group_coordinators = group_coordinators or {}
        self.stats = stats
        self.per_member = connections is None
        self.client_id = client_id
        self.shared = SharedConnections(
            0 if connections is None else max(1, connections), self.group_coordinators, coordinator
        )
        # Lanes per coordinator, in the same proportions (shared shape; groups join on their own
        # coordinator's lanes).
        self.lane_pools = {
            address: LanePool(*address, stats, size, client_id)
            for address, size in shares(max(1, lanes), self.group_coordinators, coordinator).items()
        }
        self.admission = Admission(max(1, lanes))
        self.wheel = HeartbeatWheel(heartbeat_interval_s, self.send_heartbeat)
        self.members: list[Member] = []
        self.committing = False
        self.rejoins = 0
        self.failures: list[str] = []
        self.heartbeats_skipped = 0  # due while the previous one was still in flight
        self._tasks: set[asyncio.Task[Any]] = set()
        self._wheel_task: asyncio.Task[None] | None = None

    async def start(self) -> Runtime:
        await self.shared.open(self.stats, self.client_id, "shared")
        self._wheel_task = asyncio.get_running_loop().create_task(self.wheel.run())
        return self

    async def open_member_connections(self) -> None:
        """Per-member shape: open every attached member's connection now, in batches, so no timed
        phase (and no join) pays for TCP handshakes. A no-op in the shared shape."""
        if not self.per_member:
            return
        todo = [mem for mem in self.members if mem.conn is None or mem.conn.closed]
        check_descriptor_budget(len(self.members))
        conns = await open_in_batches(
            len(todo),
            lambda i: open_connection(
                *self.coordinator_of(todo[i]), self.stats, self.client_id, name=f"member{todo[i].index}"
            ),
        )
        for mem, conn in zip(todo, conns, strict=True):
            mem.conn = conn

    async def _own_connection(self, member: Member) -> Connection:
        """The member's connection; a new one if it has none or it was closed (a restarted member)."""
        conn: Connection | None = member.conn
        if conn is None or conn.closed:
            conn = member.conn = await open_connection(
                *self.coordinator_of(member), self.stats, self.client_id, name=f"member{member.index}"
            )
        return conn

    def coordinator_of(self, member: Member) -> tuple[str, int]:
        return self.group_coordinators.get(member.group_id, (self.host, self.port))

    def lanes_of(self, member: Member) -> LanePool:
        """The lanes of the member's coordinator (shared shape)."""
        pools = self.lane_pools
        return pools.get(self.coordinator_of(member)) or next(iter(pools.values()))

    async def warm_lanes(self, n: int) -> None:
        """Open up to ``n`` lanes now, each coordinator's pool its share of them."""
        for pool in self.lane_pools.values():
            await pool.warm(n)

    def connections(self) -> list[Connection]:
        """Every connection the members use for heartbeats and commits (each once)."""
        if not self.per_member:
            return self.shared.all()
        return [mem.conn for mem in self.members if mem.conn is not None]

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
        await close_all(self.connections())
        for pool in self.lane_pools.values():
            await pool.close()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- members --------------------------------------------------------------------------------------
    def attach(self, member: Member) -> Member:
        """Take the member in; in the per-member shape its connection is opened later
        (:meth:`open_member_connections`, or its first join)."""
        member.conn = None if self.per_member else self.shared.for_member(member.group_id, member.index)
        member.hb_callback = functools.partial(self._on_heartbeat, member)
        self.members.append(member)
        self.wheel.add(member)
        return member

    async def join(self, member: Member) -> None:
        """Join one member: on its own connection (per member) or on a lane of its own (shared)."""
        if self.per_member:
            await self.admission.acquire(1)
            try:
                await member.join(await self._own_connection(member))
            finally:
                self.admission.release(1)
            self._after_join(member)
            return
        lanes = self.lanes_of(member)
        (lane,) = await lanes.acquire(1)
        try:
            await member.join(lane)
        finally:
            lanes.release(lane)
        self._after_join(member)

    async def join_group(self, members: Sequence[Member]) -> None:
        """Join a whole group at once: admitted (per member) or all its lanes reserved (shared)
        before any JoinGroup goes out."""
        if self.per_member:
            await self.admission.acquire(len(members))

            async def own(member: Member) -> None:
                try:
                    await member.join(await self._own_connection(member))
                finally:
                    self.admission.release(1)
                self._after_join(member)

            await asyncio.gather(*(own(mem) for mem in members))
            return
        pool = self.lanes_of(members[0])  # a group's members share its coordinator
        lanes = await pool.acquire(len(members))

        async def one(member: Member, lane: Connection) -> None:
            try:
                await member.join(lane)
            finally:
                pool.release(lane)
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
        """Close a member as a process exit would (LeaveGroup for a dynamic member); per member,
        the LeaveGroup goes on the member's own connection, which is then closed."""
        request = member.close()
        if self.per_member:
            conn = member.conn
            if conn is None or conn.closed:
                return
            try:
                if request is not None:
                    resp = await conn.call(request, LEAVE_VERSION)
                    if resp.error_code:
                        self.stats.error(ApiKey.LEAVE_GROUP, resp.error_code)
            finally:
                conn.close()
            return
        if request is not None:
            pool = self.lanes_of(member)
            (lane,) = await pool.acquire(1)
            try:
                resp = await lane.call(request, LEAVE_VERSION)
                if resp.error_code:
                    self.stats.error(ApiKey.LEAVE_GROUP, resp.error_code)
            finally:
                pool.release(lane)

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
            if self.per_member:  # cleanup, not measured: one batched LeaveGroup on any member's connection
                conn = next((x.conn for x in mems if x.conn is not None and not x.conn.closed), None)
                if conn is None:
                    continue
            else:
                conn = self.shared.for_member(group_id, i)
            if conn.closed:
                continue
            for j in range(0, len(mems), batch):
                members = [
                    ident(member_id=x.member_id, group_instance_id=x.instance_id, reason="loadgen done")
                    for x in mems[j : j + batch]
                ]
                calls.append(
                    conn.call(m.LeaveGroupRequest(group_id=group_id, members=members), LEAVE_VERSION)
                )
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
        if conn is None or conn.closed:
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
        if (
            not (self.committing and member.committer)
            or member.state is not State.STABLE
            or member.conn is None
            or member.conn.closed
        ):
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
