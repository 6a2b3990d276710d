"""Bootstrap steps before the load: ApiVersions, FindCoordinator, topic creation.

Why FindCoordinator first: the generator must work against any Kafka endpoint. For kcoord the
coordinator is kcoord's own listener (it answers FindCoordinator with itself); for tansu it is the
broker. Either way the members then talk to whatever address the bootstrap server names.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from kcoord.client import Connection
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey

from .conn import Stats, open_connection

log = logging.getLogger("loadgen.admin")

# What the members send; the target must support these versions.
REQUIRED_VERSIONS = {
    ApiKey.FIND_COORDINATOR: 4,
    ApiKey.JOIN_GROUP: 9,
    ApiKey.SYNC_GROUP: 5,
    ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 5,
    ApiKey.OFFSET_COMMIT: 9,
}
# What the KIP-848 scenarios send: consumer-steady only heartbeats (Apache Kafka 4.0 has it), and
# consumer-commit also commits with topic ids (OffsetCommit v10, newer than Kafka 4.0).
CONSUMER_REQUIRED_VERSIONS = {
    ApiKey.FIND_COORDINATOR: 4,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: 1,
    ApiKey.CONSUMER_GROUP_DESCRIBE: 0,
}
CONSUMER_COMMIT_REQUIRED_VERSIONS = {**CONSUMER_REQUIRED_VERSIONS, ApiKey.OFFSET_COMMIT: 10}


def parse_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


async def api_versions(conn: Connection) -> dict[int, tuple[int, int]]:
    await conn.negotiate("kcoord-loadgen", "0.1")
    return conn.versions


def check_versions(versions: dict[int, tuple[int, int]], required: dict[int, int] | None = None) -> None:
    missing = [
        f"{ApiKey(k).name} v{v} (server has {versions.get(k)})"
        for k, v in (REQUIRED_VERSIONS if required is None else required).items()
        if not (k in versions and versions[k][0] <= v <= versions[k][1])
    ]
    if missing:
        raise RuntimeError("target lacks " + ", ".join(missing))


async def find_coordinators(
    bootstrap: str, groups: Sequence[str], stats: Stats | None = None, required: dict[int, int] | None = None
) -> dict[str, tuple[str, int]]:
    """group -> (host, port) of its coordinator, with batched FindCoordinator v4 requests."""
    host, port = parse_address(bootstrap)
    conn = await open_connection(host, port, stats or Stats(), name="bootstrap")
    try:
        check_versions(await api_versions(conn), required)
        out: dict[str, tuple[str, int]] = {}
        unique = list(dict.fromkeys(groups))
        for i in range(0, len(unique), 500):
            batch = unique[i : i + 500]
            for _attempt in range(50):
                resp = await conn.call(m.FindCoordinatorRequest(key_type=0, coordinator_keys=batch), 4)
                retry = []
                for c in resp.coordinators:
                    if c.error_code == 0:
                        out[c.key] = (c.host, c.port)
                    elif c.error_code in (14, 15):  # loading / not available yet
                        retry.append(c.key)
                    else:
                        raise RuntimeError(f"FindCoordinator {c.key}: error {c.error_code} {c.error_message}")
                if not retry:
                    break
                batch = retry
                await asyncio.sleep(0.2)
            else:
                raise RuntimeError(f"no coordinator for {len(batch)} groups")
        return out
    finally:
        conn.close()
        await conn.wait_closed()


async def single_coordinator(
    bootstrap: str, groups: Sequence[str], required: dict[int, int] | None = None
) -> tuple[str, int]:
    """The one coordinator of all ``groups`` (kcoord and a one-broker tansu both have one)."""
    found = await find_coordinators(bootstrap, groups, required=required)
    addresses = set(found.values())
    if len(addresses) != 1:
        raise RuntimeError(f"groups are spread over {len(addresses)} coordinators; the loadgen drives one")
    return addresses.pop()


def create_topic(bootstrap: str, name: str, partitions: int) -> str:
    """Create ``name`` with kafka-python's admin client; "created", "exists" or the error text.

    Best effort: a classic coordinator does not check subscriptions against topics, but tansu
    refuses offsets of a topic it does not know, so the commit scenario needs it.
    """
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = None
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap, client_id="kcoord-loadgen-admin", request_timeout_ms=30000
        )
        admin.create_topics([NewTopic(name, partitions, 1)])
        return "created"
    except TopicAlreadyExistsError:
        return "exists"
    except Exception as exc:  # reported, not fatal: see docstring
        log.warning("could not create topic %s: %s", name, exc)
        return f"error: {exc}"
    finally:
        if admin is not None:
            with contextlib.suppress(Exception):
                admin.close()


async def await_topic_metadata(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30.0) -> float:
    """Ask ``bootstrap`` for ``topic``'s Metadata until it lists every partition; seconds it took.

    Why: a consumer asks for its subscription's metadata before it joins, and kcoord learns
    topics from the Metadata answers it relays. Without this step a group could join before
    kcoord has seen the topic just created, and the settle time would include kcoord's periodic
    topic refresh (up to 15 s) instead of the reconciliation.
    """
    host, port = parse_address(bootstrap)
    conn = await open_connection(host, port, Stats(), name="metadata")
    started = asyncio.get_running_loop().time()
    try:
        await api_versions(conn)
        req = m.MetadataRequest(
            topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
        )
        while True:
            resp = await conn.call(req, min(12, conn.versions.get(ApiKey.METADATA, (0, 12))[1]))
            found = [t for t in resp.topics if t.name == topic and t.error_code == 0]
            if found and len(found[0].partitions) >= partitions:
                return asyncio.get_running_loop().time() - started
            if asyncio.get_running_loop().time() - started > timeout_s:
                raise RuntimeError(f"topic {topic} not in the Metadata of {bootstrap} after {timeout_s:.0f}s")
            await asyncio.sleep(0.2)
    finally:
        conn.close()
        await conn.wait_closed()
