"""A kcoord cluster for integration tests: N ``kcoord serve --cluster-enabled true`` processes on one
upstream, and what their logs say about who served which shard when."""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass
from datetime import datetime

from kcoord.client import BlockingConnection
from kcoord.protocol import messages as m

from .kcoord_process import KcoordProcess
from .workload import unique

BASE_NODE_ID = 1_000_000
_GENERATION = re.compile(
    r"^ts=(\S+) .*cluster: generation (-?\d+): this node \(id (\d+)\) serves (\d+) shards"
    r"(?:, gains \[([\d, ]*)\])?(?:, loses \[([\d, ]*)\])?; nodes \[([\d, ]*)\]"
)
_RELEASE_ALL = re.compile(
    r"^ts=(\S+) .*cluster: (?:no answer from the group coordinator|.*releases every shard)"
)


def _ints(text: str | None) -> list[int]:
    return [int(x) for x in text.split(",")] if text else []


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass
class ShardEvent:
    at: float  # wall clock seconds
    node: int
    shard: int
    gained: bool


class KcoordCluster:
    """``size`` kcoord nodes sharing ``shards`` shards of a fresh internal topic on ``upstream``."""

    def __init__(
        self,
        upstream: str,
        size: int = 3,
        shards: int = 6,
        session_timeout_ms: int = 6000,
        extra: tuple[str, ...] = (),
        upstreams: dict[int, str] | None = None,
        static_membership: bool = False,
    ) -> None:
        self.upstream = upstream
        # kcoord's default is static; tansu 0.6's coordinator mishandles static members (docs/tansu.md).
        self.static_membership = static_membership
        self.upstreams = upstreams or {}  # node id -> its own upstream address (a proxy a test controls)
        self.shards = shards
        self.topic = unique("__kcoord_cluster")
        self.session_timeout_ms = session_timeout_ms
        self.extra = extra
        self.nodes: dict[int, KcoordProcess] = {}
        self.dead: list[KcoordProcess] = []  # killed or stopped incarnations (their logs still count)
        self.kill_times: dict[int, float] = {}  # node id -> wall clock of its last kill -9
        for i in range(size):
            self.nodes[BASE_NODE_ID + i] = self._process(BASE_NODE_ID + i)

    def _process(self, node_id: int, port: int | None = None) -> KcoordProcess:
        return KcoordProcess(
            "--shards",
            str(self.shards),
            "--internal-topic",
            self.topic,
            "--coordinator-node-id",
            str(node_id),
            "--cluster-enabled",
            "true",
            "--cluster-static-membership",
            str(self.static_membership).lower(),
            "--cluster-session-timeout-ms",
            str(self.session_timeout_ms),
            "--cluster-heartbeat-interval-ms",
            "500",
            *self.extra,
            bootstrap=self.upstreams.get(node_id, self.upstream),
            port=port,
        )

    @property
    def bootstrap(self) -> str:
        return ",".join(p.bootstrap for p in self.nodes.values() if p.alive)

    def start(self, timeout: float = 60.0) -> KcoordCluster:
        """Start every node and wait until they share the shards; stops them all if that fails
        (a fixture whose start raises never reaches its teardown)."""
        try:
            for proc in self.nodes.values():
                proc.start()
            self.wait_for_members(set(self.nodes), timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for proc in self.nodes.values():
            if proc.alive:
                try:
                    proc.stop()
                finally:
                    proc.kill()

    def kill(self, node_id: int) -> None:
        self.kill_times[node_id] = time.time()
        self.nodes[node_id].kill()

    def restart(self, node_id: int, graceful: bool = True) -> None:
        old = self.nodes[node_id]
        if graceful:
            assert old.stop() == 0, old.log_tail()
        else:
            self.kill(node_id)
        self.dead.append(old)
        self.nodes[node_id] = self._process(node_id, port=old.port).start()

    # -- what the logs say ----------------------------------------------------------------------------
    def _logs(self) -> list[str]:
        texts = []
        for proc in [*self.dead, *self.nodes.values()]:
            with contextlib.suppress(OSError):
                texts.append(proc.log_path.read_text(errors="replace"))
        return texts

    def latest_view(self) -> dict[int, tuple[int, set[int], set[int]]]:
        """node id -> (generation, shards it serves, nodes it sees), from each live node's last line."""
        view: dict[int, tuple[int, set[int], set[int]]] = {}
        for node_id, proc in self.nodes.items():
            if not proc.alive:
                continue
            serving: set[int] = set()
            for line in proc.log_path.read_text(errors="replace").splitlines():
                found = _GENERATION.match(line)
                if found:
                    serving = (serving | set(_ints(found[5]))) - set(_ints(found[6]))
                    view[node_id] = (int(found[2]), set(serving), set(_ints(found[7])))
                elif _RELEASE_ALL.match(line):
                    serving = set()
        return view

    def wait_for_members(self, members: set[int], timeout: float = 60.0) -> dict[int, set[int]]:
        """Wait until every live node sees exactly ``members`` and every shard is served once."""
        deadline = time.monotonic() + timeout
        view: dict[int, tuple[int, set[int], set[int]]] = {}
        while time.monotonic() < deadline:
            view = self.latest_view()
            if set(view) == members and all(v[2] == members for v in view.values()):
                owned = [s for v in view.values() for s in v[1]]
                if sorted(owned) == list(range(self.shards)):
                    return {n: v[1] for n, v in view.items()}
            time.sleep(0.2)
        raise AssertionError(
            f"cluster did not settle on {sorted(members)} within {timeout}s: {view}\n"
            + "\n".join(p.log_tail(15) for p in self.nodes.values())
        )

    def shard_events(self) -> list[ShardEvent]:
        """Every gain and loss of a shard by a node, with kills as losses at the moment of the kill."""
        events: list[ShardEvent] = []
        for text in self._logs():
            serving: dict[int, set[int]] = {}
            for line in text.splitlines():
                found = _GENERATION.match(line)
                if found:
                    at, node = _ts(found[1]), int(found[3])
                    mine = serving.setdefault(node, set())
                    for s in _ints(found[5]):
                        events.append(ShardEvent(at, node, s, True))
                        mine.add(s)
                    for s in _ints(found[6]):
                        events.append(ShardEvent(at, node, s, False))
                        mine.discard(s)
                    continue
                released = _RELEASE_ALL.match(line)
                if released:
                    for node, mine in serving.items():
                        events.extend(ShardEvent(_ts(released[1]), node, s, False) for s in mine)
                        mine.clear()
        for node, at in self.kill_times.items():
            held: set[int] = set()
            for e in sorted((e for e in events if e.node == node and e.at <= at), key=lambda e: e.at):
                (held.add if e.gained else held.discard)(e.shard)
            events.extend(ShardEvent(at, node, s, False) for s in held)
        return sorted(events, key=lambda e: (e.at, not e.gained))

    def overlapping_owners(self) -> list[str]:
        """Moments at which two nodes held the same shard according to their logs."""
        holders: dict[int, set[int]] = {}
        problems = []
        for e in self.shard_events():
            held = holders.setdefault(e.shard, set())
            if e.gained:
                if held - {e.node}:
                    problems.append(
                        f"shard {e.shard} gained by {e.node} at {e.at:.3f} while {sorted(held)} held it"
                    )
                held.add(e.node)
            else:
                held.discard(e.node)
        return problems


def coordinator_of(bootstrap: str, group: str) -> tuple[int, int]:
    """(node id, port) FindCoordinator names for ``group``, asked at the first address of ``bootstrap``."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with BlockingConnection((host, int(port))) as conn:
        resp = conn.request(m.FindCoordinatorRequest(key=group, key_type=0), 3)
    assert resp.error_code == 0, resp
    return resp.node_id, resp.port


def committed_offsets(bootstrap: str, group: str, timeout: float = 30.0) -> dict[int, int]:
    """partition -> committed offset of ``group`` (every topic), from the node FindCoordinator names."""
    deadline = time.monotonic() + timeout
    while True:
        node, port = coordinator_of(bootstrap, group)
        host = bootstrap.split(",")[0].rsplit(":", 1)[0]
        with BlockingConnection((host, port)) as conn:
            resp = conn.request(m.OffsetFetchRequest(group_id=group, topics=None), 7)
        if resp.error_code == 0:
            return {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}
        if time.monotonic() > deadline:
            raise AssertionError(f"OffsetFetch of {group} on node {node}: error {resp.error_code}")
        time.sleep(0.5)
