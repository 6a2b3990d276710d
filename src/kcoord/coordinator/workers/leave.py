"""A dead worker removed from the cluster's group at once, instead of after a session timeout.

The supervisor sends the group's coordinator a LeaveGroup (v3+: members by id, Kafka's batched
leave of KIP-345) naming the dead worker's member id and, when the workers are static members, its
``group.instance.id``: the group rebalances now and the live workers take the dead one's shards.
Nothing of the dead worker's can be served twice: it is dead, and a shard's next owner fences its
transactional id before loading (storage/ownership.py).
"""

from __future__ import annotations

import logging

from kcoord.client import KafkaClientError, UpstreamSecurity
from kcoord.coordinator.runtime.membership import CoordinatorNotFound, connect_group_coordinator
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

log = logging.getLogger("kcoord.workers")

TIMEOUT = 5.0  # seconds for each step: connect, FindCoordinator, LeaveGroup


async def remove_member(
    bootstrap: list[tuple[str, int]],
    group_id: str,
    member_id: str,
    instance_id: str | None,
    reason: str,
    security: UpstreamSecurity,
) -> str:
    """Ask the group's coordinator to remove one member now; returns what happened, for the log
    line (never raises for the upstream's answers: the session timeout removes it otherwise)."""
    try:
        conn, _ = await connect_group_coordinator(
            bootstrap,
            group_id,
            security,
            connect_timeout=TIMEOUT,
            find_timeout=TIMEOUT,
            request_timeout=TIMEOUT,
        )
    except (CoordinatorNotFound, KafkaClientError, OSError, TimeoutError) as exc:
        return f"not removed ({exc}): its session times out instead"
    try:
        identity = m.LeaveGroupRequest.MemberIdentity(
            member_id=member_id, group_instance_id=instance_id, reason=reason
        )
        resp = await conn.request(m.LeaveGroupRequest(group_id=group_id, members=[identity]), timeout=TIMEOUT)
    except (KafkaClientError, OSError, TimeoutError) as exc:
        return f"not removed ({exc}): its session times out instead"
    finally:
        conn.close()
    errors = [resp.error_code, *(member.error_code for member in resp.members)]
    failed = [e for e in errors if e != ErrorCode.NONE]
    if failed:
        return f"not removed (LeaveGroup answered error {failed[0]}): its session times out instead"
    return "removed from the cluster's group"
