"""Response objects for the classic membership APIs, shaped for the version that asked.

The codec ignores fields a version lacks, but it cannot write ``None`` into a field that is not
nullable in that version: JoinGroup's ProtocolName only became nullable in v7, so older versions
get ``""`` there (Kafka's ``JoinGroupResponse`` does the same).
"""

from __future__ import annotations

from typing import Any

from protocol import messages as m
from protocol.errors import ErrorCode


def join_response(
    version: int,
    error: int = ErrorCode.NONE,
    *,
    member_id: str = "",
    generation_id: int = -1,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    leader: str | None = "",
    members: list[Any] | None = None,
    skip_assignment: bool = False,
) -> Any:
    return m.JoinGroupResponse(
        error_code=int(error),
        generation_id=generation_id,
        protocol_type=protocol_type,
        protocol_name=protocol_name if (protocol_name is not None or version >= 7) else "",
        leader=leader or "",
        skip_assignment=skip_assignment,
        member_id=member_id,
        members=members or [],
    )


def sync_response(
    error: int = ErrorCode.NONE,
    *,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    assignment: bytes = b"",
) -> Any:
    return m.SyncGroupResponse(
        error_code=int(error),
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignment=assignment,
    )


def heartbeat_response(error: int = ErrorCode.NONE) -> Any:
    return m.HeartbeatResponse(error_code=int(error))


def leave_response(version: int, error: int, member_responses: list[Any]) -> Any:
    """Below v3 there is one member and no member list: its error becomes the top-level error
    (Kafka's ``LeaveGroupResponse`` constructor)."""
    if version <= 2:
        if error == ErrorCode.NONE:
            error = next((r.error_code for r in member_responses if r.error_code), ErrorCode.NONE)
        return m.LeaveGroupResponse(error_code=int(error), members=[])
    return m.LeaveGroupResponse(error_code=int(error), members=member_responses)


def leave_member_response(member_id: str, group_instance_id: str | None, error: int = ErrorCode.NONE) -> Any:
    return m.LeaveGroupResponse.MemberResponse(
        member_id=member_id, group_instance_id=group_instance_id, error_code=int(error)
    )
