"""``kcoord groups``: list and describe consumer groups over the Kafka protocol.

A quick look for operators without Grafana, shaped like ``kafka-consumer-groups.sh``. It speaks the
wire protocol through kcoord's own client, so it works against kcoord (and against a plain Kafka
cluster): ListGroups on every node in Metadata; per group FindCoordinator, DescribeGroups and
OffsetFetch on its coordinator; log-end offsets by ListOffsets(LATEST) sent to each partition's
leader found through Metadata, exactly the path a client takes. It is blocking on purpose
(:class:`client.BlockingConnection`): one short-lived process, a handful of round trips.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kcoord.client import BlockingConnection, BrokerError, KafkaClientError, UnsupportedVersion
from kcoord.coordinator.ops.settings import parse_host_port
from kcoord.coordinator.runtime.router import shard_for_group
from kcoord.protocol import messages as m
from kcoord.protocol import storage_messages as sm
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode

CLIENT_ID = "kcoord-groups"
LIST_GROUPS_TYPES_SINCE = 5  # ListGroups answers each group's type from v5 (KIP-848)
_RETRIABLE = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
}
_LATEST = -1
_MAX_ASSIGNMENT_VERSION = 3


class AdminError(Exception):
    """A request kcoord groups could not complete; the message is for the operator."""


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


# -- one broker connection ------------------------------------------------------------------------------
class Connection:
    """kcoord's client (:class:`client.BlockingConnection`) with its errors as :class:`AdminError`."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.address = f"{host}:{port}"
        try:
            self.conn = BlockingConnection(
                (host, port), timeout, client_id=CLIENT_ID, software_name=CLIENT_ID
            )
        except BrokerError as exc:
            raise AdminError(
                f"{self.address}: ApiVersions failed with {_error_name(exc.error_code)}"
            ) from None
        except (OSError, KafkaClientError) as exc:
            raise AdminError(f"cannot connect to {self.address}: {exc}") from None

    def version(self, cls: type[Message], highest: int) -> int:
        """The highest version both we (up to ``highest``) and the server speak."""
        try:
            return self.conn.version_for(cls, highest)
        except UnsupportedVersion:
            raise AdminError(
                f"{self.address} does not support {cls.__name__[:-7]} in a version we speak"
            ) from None

    def call(self, request: Message, version: int) -> Any:
        try:
            return self.conn.request(request, version)
        except (OSError, KafkaClientError) as exc:
            raise AdminError(f"{self.address}: {exc}") from None

    def close(self) -> None:
        self.conn.close()


# -- results --------------------------------------------------------------------------------------------
@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: dict[str, list[int]] = field(default_factory=dict)
    # In a consumer group: the protocol the member speaks, "consumer" or "classic" (a classic
    # member kept through an online migration); None in a classic group.
    protocol: str | None = None


@dataclass
class PartitionOffsets:
    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    lag: int | None
    member_id: str | None = None
    host: str | None = None
    client_id: str | None = None


@dataclass
class GroupDescription:
    group: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: str
    members: list[Member]
    offsets: list[PartitionOffsets]
    error: str | None = None


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """ConsumerProtocolAssignment (int16 version prefix) → {topic: partitions}; {} if unreadable."""
    if len(data) < 2:
        return {}
    (version,) = struct.unpack_from(">h", data, 0)
    try:
        body, _ = m.ConsumerProtocolAssignment.decode_from(
            data, 2, min(max(version, 0), _MAX_ASSIGNMENT_VERSION)
        )
    except Exception:  # a custom protocol that only claims to be "consumer": show no assignment
        return {}
    return {tp.topic: sorted(tp.partitions) for tp in body.assigned_partitions}


# -- the admin client -----------------------------------------------------------------------------------
class GroupsAdmin:
    def __init__(self, bootstrap: Sequence[tuple[str, int]], timeout: float = 10.0) -> None:
        if not bootstrap:
            raise AdminError("no bootstrap server")
        self.bootstrap = list(bootstrap)
        self.timeout = timeout
        self._conns: dict[tuple[str, int], Connection] = {}

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def __enter__(self) -> GroupsAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _conn(self, address: tuple[str, int]) -> Connection:
        conn = self._conns.get(address)
        if conn is None:
            conn = self._conns[address] = Connection(address[0], address[1], self.timeout)
        return conn

    def _any(self) -> Connection:
        errors = []
        for address in self.bootstrap:
            try:
                return self._conn(address)
            except AdminError as exc:
                errors.append(str(exc))
        raise AdminError("; ".join(errors))

    def _metadata(self, topics: Iterable[str] | None) -> Any:
        conn = self._any()
        version = conn.version(m.MetadataRequest, 12)
        names = (
            None
            if topics is None
            else [m.MetadataRequest.MetadataRequestTopic(name=t) for t in sorted(topics)]
        )
        if names is None and version == 0:
            names = []  # v0: an empty list means every topic
        return conn.call(m.MetadataRequest(topics=names, allow_auto_topic_creation=False), version)

    # list ------------------------------------------------------------------------------------------------
    def list_groups(self, states: Sequence[str] = ()) -> list[dict[str, str]]:
        """Every group of every node in the cluster's Metadata (kcoord answers for all of them).

        ``type`` is the group's type as ``kafka-groups.sh`` shows it (Classic, Consumer: ListGroups
        v5+; "" from an older server), ``protocol_type`` what its members run ("consumer" for both
        a classic consumer group and a KIP-848 one, "connect", ...)."""
        metadata = self._metadata([])
        nodes = {(b.host, b.port) for b in metadata.brokers} or set(self.bootstrap)
        found: dict[str, dict[str, str]] = {}
        for address in sorted(nodes):
            conn = self._conn(address)
            version = conn.version(m.ListGroupsRequest, LIST_GROUPS_TYPES_SINCE)
            req = m.ListGroupsRequest(states_filter=list(states) if version >= 4 else [], types_filter=[])
            resp = conn.call(req, version)
            if resp.error_code:
                raise AdminError(f"ListGroups on {conn.address}: {_error_name(resp.error_code)}")
            for g in resp.groups:
                state = g.group_state if version >= 4 else ""
                if states and version < 4 and state not in states:
                    continue
                group_type = g.group_type if version >= LIST_GROUPS_TYPES_SINCE else ""
                found[g.group_id] = {
                    "group": g.group_id,
                    "type": group_type.capitalize(),  # Kafka's GroupType names: Classic, Consumer, Share
                    "protocol_type": g.protocol_type,
                    "state": state,
                }
        return [found[k] for k in sorted(found)]

    # shards ----------------------------------------------------------------------------------------------
    def shard_owners(self, internal_topic: str) -> list[dict[str, Any]]:
        """Which kcoord node serves each shard: FindCoordinator for a group id that lands on it
        (the shard count is the internal topic's partition count)."""
        metadata = self._metadata([internal_topic])
        topic = next((t for t in metadata.topics if t.name == internal_topic), None)
        if topic is None or topic.error_code or not topic.partitions:
            raise AdminError(
                f"internal topic {internal_topic!r} not found (error {getattr(topic, 'error_code', '?')})"
            )
        shards = len(topic.partitions)
        probes: dict[int, str] = {}
        n = 0
        while len(probes) < shards:
            name = f"kcoord-shard-probe-{n}"
            probes.setdefault(shard_for_group(name, shards), name)
            n += 1
        conn = self._any()
        version = conn.version(m.FindCoordinatorRequest, 3)
        rows = []
        for shard in range(shards):
            resp = conn.call(m.FindCoordinatorRequest(key=probes[shard], key_type=0), version)
            if resp.error_code:
                rows.append(
                    {"shard": shard, "node": None, "address": None, "error": _error_name(resp.error_code)}
                )
            else:
                rows.append(
                    {
                        "shard": shard,
                        "node": resp.node_id,
                        "address": f"{resp.host}:{resp.port}",
                        "error": None,
                    }
                )
        return rows

    # describe --------------------------------------------------------------------------------------------
    def _coordinator(self, group: str) -> tuple[tuple[str, int], str]:
        conn = self._any()
        version = conn.version(m.FindCoordinatorRequest, 3)
        deadline = time.monotonic() + self.timeout
        while True:
            resp = conn.call(m.FindCoordinatorRequest(key=group, key_type=0), version)
            if resp.error_code == 0:
                return (resp.host, resp.port), f"{resp.host}:{resp.port} ({resp.node_id})"
            if resp.error_code not in _RETRIABLE or time.monotonic() > deadline:
                raise AdminError(f"FindCoordinator({group}): {_error_name(resp.error_code)}")
            time.sleep(0.2)

    def _retrying(self, what: str, send: Any, error_of: Any) -> Any:
        deadline = time.monotonic() + self.timeout
        while True:
            resp = send()
            code = error_of(resp)
            if code == 0 or code not in _RETRIABLE:
                return resp
            if time.monotonic() > deadline:
                raise AdminError(f"{what}: {_error_name(code)}")
            time.sleep(0.2)

    def describe(self, group: str) -> GroupDescription:
        address, coordinator = self._coordinator(group)
        conn = self._conn(address)
        modern = self._describe_consumer_group(conn, group, coordinator)
        if modern is not None:
            return modern
        dv = conn.version(m.DescribeGroupsRequest, 5)
        described = self._retrying(
            f"DescribeGroups({group})",
            lambda: conn.call(
                m.DescribeGroupsRequest(groups=[group], include_authorized_operations=False), dv
            ),
            lambda r: r.groups[0].error_code,
        ).groups[0]
        if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND or (
            described.error_code == 0 and described.group_state == "Dead"
        ):
            return GroupDescription(group, "Dead", "", "", coordinator, [], [], error="group does not exist")
        if described.error_code:
            return GroupDescription(
                group, "", "", "", coordinator, [], [], error=_error_name(described.error_code)
            )
        consumer = described.protocol_type == "consumer"
        members = [
            Member(
                mem.member_id,
                mem.group_instance_id,
                mem.client_id,
                mem.client_host,
                decode_assignment(mem.member_assignment) if consumer else {},
            )
            for mem in described.members
        ]
        offsets = self._offsets(conn, group, members)
        return GroupDescription(
            group,
            described.group_state,
            described.protocol_type,
            described.protocol_data,
            coordinator,
            members,
            offsets,
        )

    def _describe_consumer_group(
        self, conn: Connection, group: str, coordinator: str
    ) -> GroupDescription | None:
        """A KIP-848 consumer group through ConsumerGroupDescribe, as Kafka's admin client asks
        first; None when the group is not one (or the server does not serve the API): the caller
        asks DescribeGroups then."""
        try:
            version = conn.version(m.ConsumerGroupDescribeRequest, 1)
        except AdminError:
            return None
        described = self._retrying(
            f"ConsumerGroupDescribe({group})",
            lambda: conn.call(m.ConsumerGroupDescribeRequest(group_ids=[group]), version),
            lambda r: r.groups[0].error_code,
        ).groups[0]
        if described.error_code:
            return None  # GROUP_ID_NOT_FOUND: unknown, or a classic group
        members = [
            Member(
                mem.member_id,
                mem.instance_id,
                mem.client_id,
                mem.client_host,
                {t.topic_name: sorted(t.partitions) for t in mem.assignment.topic_partitions},
                _MEMBER_TYPES.get(mem.member_type),
            )
            for mem in described.members
        ]
        offsets = self._offsets(conn, group, members)
        return GroupDescription(
            group,
            described.group_state,
            "consumer",
            described.assignor_name,
            coordinator,
            members,
            offsets,
        )

    def _offsets(self, conn: Connection, group: str, members: list[Member]) -> list[PartitionOffsets]:
        ov = conn.version(m.OffsetFetchRequest, 7)
        fetched = self._retrying(
            f"OffsetFetch({group})",
            lambda: conn.call(m.OffsetFetchRequest(group_id=group, topics=None, require_stable=False), ov),
            lambda r: r.error_code,
        )
        if fetched.error_code:
            raise AdminError(f"OffsetFetch({group}): {_error_name(fetched.error_code)}")
        committed: dict[tuple[str, int], int | None] = {}
        for topic in fetched.topics:
            for p in topic.partitions:
                if p.error_code == 0:
                    committed[(topic.name, p.partition_index)] = (
                        p.committed_offset if p.committed_offset >= 0 else None
                    )
        owner: dict[tuple[str, int], Member] = {}
        for member in members:
            for topic_name, partitions in member.assignment.items():
                for partition in partitions:
                    owner[(topic_name, partition)] = member
                    committed.setdefault((topic_name, partition), None)
        log_end = self._log_end_offsets(committed)
        rows = []
        for tp in sorted(committed):
            current, end = committed[tp], log_end.get(tp)
            lag = end - current if current is not None and end is not None else None
            who = owner.get(tp)
            rows.append(
                PartitionOffsets(
                    tp[0],
                    tp[1],
                    current,
                    end,
                    lag,
                    who.member_id if who else None,
                    who.host if who else None,
                    who.client_id if who else None,
                )
            )
        return rows

    def _log_end_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        wanted = set(partitions)
        if not wanted:
            return {}
        metadata = self._metadata({t for t, _ in wanted})
        brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
        by_leader: dict[int, dict[str, list[int]]] = {}
        for topic in metadata.topics:
            for p in topic.partitions:
                if (topic.name, p.partition_index) in wanted and p.leader_id in brokers:
                    by_leader.setdefault(p.leader_id, {}).setdefault(topic.name, []).append(p.partition_index)
        out: dict[tuple[str, int], int] = {}
        for leader, topics in by_leader.items():
            conn = self._conn(brokers[leader])
            version = conn.version(sm.ListOffsetsRequest, 7)
            req = sm.ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                topics=[
                    sm.ListOffsetsRequest.ListOffsetsTopic(
                        name=name,
                        partitions=[
                            sm.ListOffsetsRequest.ListOffsetsPartition(
                                partition_index=i, timestamp=_LATEST, current_leader_epoch=-1
                            )
                            for i in sorted(parts)
                        ],
                    )
                    for name, parts in sorted(topics.items())
                ],
            )
            resp = conn.call(req, version)
            for topic in resp.topics:
                for p in topic.partitions:
                    if p.error_code == 0:
                        out[(topic.name, p.partition_index)] = p.offset
        return out


# -- rendering ------------------------------------------------------------------------------------------
def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def _assignment_text(assignment: dict[str, list[int]]) -> str:
    return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(assignment.items())) or "-"


# ConsumerGroupDescribe v1's MemberType (Kafka's MemberType: -1 unknown, 0 classic, 1 consumer).
_MEMBER_TYPES = {0: "classic", 1: "consumer"}


def render_description(d: GroupDescription) -> str:
    if d.error:
        return f"Consumer group '{d.group}': {d.error}."
    # Which protocol each member speaks, for a consumer group (classic members kept through an
    # online migration speak the classic one), as ConsumerGroupDescribe v1 tells.
    with_protocol = any(mem.protocol is not None for mem in d.members)
    parts = [
        _table(
            ["GROUP", "COORDINATOR (ID)", "PROTOCOL-TYPE", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
            [[d.group, d.coordinator, d.protocol_type or "-", d.protocol or "-", d.state, len(d.members)]],
        ),
        _table(
            ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
            + (["PROTOCOL"] if with_protocol else []),
            [
                [
                    d.group,
                    mem.member_id,
                    mem.group_instance_id,
                    mem.host,
                    mem.client_id,
                    sum(len(p) for p in mem.assignment.values()),
                    _assignment_text(mem.assignment),
                ]
                + ([mem.protocol or "-"] if with_protocol else [])
                for mem in d.members
            ],
        )
        if d.members
        else f"Consumer group '{d.group}' has no active members.",
    ]
    if d.offsets:
        parts.append(
            _table(
                [
                    "GROUP",
                    "TOPIC",
                    "PARTITION",
                    "CURRENT-OFFSET",
                    "LOG-END-OFFSET",
                    "LAG",
                    "CONSUMER-ID",
                    "HOST",
                    "CLIENT-ID",
                ],
                [
                    [
                        d.group,
                        o.topic,
                        o.partition,
                        o.committed,
                        o.log_end,
                        o.lag,
                        o.member_id,
                        o.host,
                        o.client_id,
                    ]
                    for o in d.offsets
                ],
            )
        )
    return "\n\n".join(parts)


# -- command line ---------------------------------------------------------------------------------------
def add_groups_parser(sub: Any) -> None:
    groups = sub.add_parser(
        "groups",
        help="list or describe the groups of a running kcoord",
        description="List or describe consumer groups over the Kafka protocol, like kafka-consumer-groups.sh.",
    )
    groups.add_argument(
        "--bootstrap-server", required=True, metavar="HOST:PORT[,...]", help="kcoord (or any Kafka) listener"
    )
    groups.add_argument("--timeout", type=float, default=10.0, help="seconds per request and for retries")
    groups.add_argument("--json", action="store_true", help="print JSON instead of tables")
    actions = groups.add_subparsers(dest="groups_command", required=True)
    lister = actions.add_parser("list", help="list groups")
    lister.add_argument(
        "--state",
        action="append",
        default=[],
        help="only groups in this state (Empty, Stable, PreparingRebalance, ...); repeatable",
    )
    shards = actions.add_parser("shards", help="which kcoord node serves each shard (a kcoord cluster)")
    shards.add_argument("--internal-topic", default="__kcoord_offsets", help="kcoord's internal topic")
    describe = actions.add_parser("describe", help="state, members, assignments, committed offsets and lag")
    describe.add_argument("group", nargs="+", metavar="GROUP")


def run_groups(args: argparse.Namespace, out: Any = None) -> int:
    out = out or sys.stdout
    try:
        bootstrap = [parse_host_port(x) for x in args.bootstrap_server.split(",") if x.strip()]
    except ValueError:
        print(f"kcoord groups: error: invalid --bootstrap-server {args.bootstrap_server!r}", file=sys.stderr)
        return 2
    try:
        with GroupsAdmin(bootstrap, args.timeout) as admin:
            if args.groups_command == "list":
                listed = admin.list_groups(args.state)
                if args.json:
                    print(json.dumps(listed, indent=2), file=out)
                else:
                    print(
                        _table(
                            ["GROUP", "TYPE", "PROTOCOL", "STATE"],
                            [
                                [g["group"], g["type"] or "-", g["protocol_type"] or "-", g["state"] or "-"]
                                for g in listed
                            ],
                        ),
                        file=out,
                    )
                return 0
            if args.groups_command == "shards":
                owners = admin.shard_owners(args.internal_topic)
                if args.json:
                    print(json.dumps(owners, indent=2), file=out)
                else:
                    print(
                        _table(
                            ["SHARD", "NODE", "ADDRESS"],
                            [
                                [
                                    o["shard"],
                                    o["node"] if o["error"] is None else o["error"],
                                    o["address"] or "-",
                                ]
                                for o in owners
                            ],
                        ),
                        file=out,
                    )
                    per_node: dict[str, int] = {}
                    for o in owners:
                        key = f"{o['node']} ({o['address']})" if o["error"] is None else str(o["error"])
                        per_node[key] = per_node.get(key, 0) + 1
                    print("\n" + _table(["NODE", "SHARDS"], sorted(per_node.items())), file=out)
                return 1 if any(o["error"] for o in owners) else 0
            descriptions = [admin.describe(g) for g in args.group]
    except AdminError as exc:
        print(f"kcoord groups: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([asdict(d) for d in descriptions], indent=2), file=out)
    else:
        print("\n\n".join(render_description(d) for d in descriptions), file=out)
    return 1 if any(d.error for d in descriptions) else 0
