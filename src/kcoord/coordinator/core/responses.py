"""Response objects the shard builds, shaped for the version that asked: the one place for them.

- The membership APIs' responses (``join_response`` …), used by the handlers for answers and errors.
- ``error_response``: the answer to a request that fails as a whole with one error code — while a
  shard loads (COORDINATOR_LOAD_IN_PROGRESS), after a failed append (NOT_COORDINATOR, so clients
  rediscover and retry), for a request a shard must not see. Mirrors Kafka's
  ``AbstractRequest.getErrorResponse``: the error goes where each API's clients look for it — the
  top level, each group, or each partition.
- ``unexpected_failure``: the one mapping of a bug (an exception nobody expected) to an answer: it
  logs the exception and answers UNKNOWN_SERVER_ERROR, so a bug costs one request, never the shard
  or the connection.

The codec ignores fields a version lacks, but it cannot write ``None`` into a field that is not
nullable in that version: JoinGroup's ProtocolName only became nullable in v7, so older versions
get ``""`` there (Kafka's ``JoinGroupResponse`` does the same).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kcoord.protocol import messages as m
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey


def join_response(
    version: int,
    error: int = ErrorCode.NONE,
    *,
    member_id: str = "",
    generation_id: int = -1,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    leader: str | None = "",
    members: list[m.JoinGroupResponse.JoinGroupResponseMember] | None = None,
    skip_assignment: bool = False,
) -> m.JoinGroupResponse:
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
) -> m.SyncGroupResponse:
    return m.SyncGroupResponse(
        error_code=int(error),
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignment=assignment,
    )


def heartbeat_response(error: int = ErrorCode.NONE) -> m.HeartbeatResponse:
    return m.HeartbeatResponse(error_code=int(error))


def leave_response(
    version: int, error: int, member_responses: list[m.LeaveGroupResponse.MemberResponse]
) -> m.LeaveGroupResponse:
    """Below v3 there is one member and no member list: its error becomes the top-level error
    (Kafka's ``LeaveGroupResponse`` constructor)."""
    if version <= 2:
        if error == ErrorCode.NONE:
            error = next((r.error_code for r in member_responses if r.error_code), ErrorCode.NONE)
        return m.LeaveGroupResponse(error_code=int(error), members=[])
    return m.LeaveGroupResponse(error_code=int(error), members=member_responses)


def leave_member_response(
    member_id: str, group_instance_id: str | None, error: int = ErrorCode.NONE
) -> m.LeaveGroupResponse.MemberResponse:
    return m.LeaveGroupResponse.MemberResponse(
        member_id=member_id, group_instance_id=group_instance_id, error_code=int(error)
    )


# -- a request that fails as a whole ------------------------------------------------------------------
def error_response(api_key: int, version: int, request: Any, error: int) -> Message:
    builder = _BUILDERS.get(api_key)
    if builder is None:
        raise ValueError(f"no error response for api key {api_key}")
    return builder(version, request, error)


def loading_response(api_key: int, version: int, request: Any) -> Message:
    """The answer while the group's shard is loading: COORDINATOR_LOAD_IN_PROGRESS, except Heartbeat.

    A classic Heartbeat is answered NONE, as Kafka's group coordinator answers it while it loads
    ("the group is still loading, so respond just blindly"): clients do not expect the loading
    error there (aiokafka's heartbeat task fails its consumer on it), and the member's session is
    timed afresh once the shard has loaded.
    """
    error = ErrorCode.NONE if api_key == ApiKey.HEARTBEAT else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return error_response(api_key, version, request, error)


def _join(version: int, req: m.JoinGroupRequest, error: int) -> m.JoinGroupResponse:
    return join_response(version, error, member_id=req.member_id or "")


def _sync(version: int, req: m.SyncGroupRequest, error: int) -> m.SyncGroupResponse:
    return sync_response(error)


def _heartbeat(version: int, req: m.HeartbeatRequest, error: int) -> m.HeartbeatResponse:
    return heartbeat_response(error)


def _leave(version: int, req: m.LeaveGroupRequest, error: int) -> m.LeaveGroupResponse:
    return leave_response(version, error, [])


def _offset_commit(version: int, req: m.OffsetCommitRequest, error: int) -> m.OffsetCommitResponse:
    """``error`` on every partition of the request."""
    R = m.OffsetCommitResponse
    return R(topics=[
        R.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
            R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=error) for p in t.partitions])
        for t in req.topics])  # fmt: skip


def _txn_offset_commit(version: int, req: m.TxnOffsetCommitRequest, error: int) -> m.TxnOffsetCommitResponse:
    """``error`` on every partition of the request."""
    R = m.TxnOffsetCommitResponse
    return R(topics=[
        R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            R.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=error) for p in t.partitions])
        for t in req.topics])  # fmt: skip


def _add_offsets_to_txn(version: int, req: m.AddOffsetsToTxnRequest, error: int) -> m.AddOffsetsToTxnResponse:
    return m.AddOffsetsToTxnResponse(error_code=error)


def _offset_fetch(version: int, req: m.OffsetFetchRequest, error: int) -> m.OffsetFetchResponse:
    R = m.OffsetFetchResponse
    if version >= 8:
        groups = []
        for g in req.groups or []:
            groups.append(R.OffsetFetchResponseGroup(group_id=g.group_id, topics=[], error_code=error))
        return R(groups=groups)
    topics = []
    for t in req.topics or []:
        topics.append(
            R.OffsetFetchResponseTopic(
                name=t.name,
                partitions=[
                    R.OffsetFetchResponsePartition(
                        partition_index=p, committed_offset=-1, metadata="", error_code=error
                    )
                    for p in t.partition_indexes
                ],
            )
        )
    return R(topics=topics, error_code=error)


def _describe_groups(version: int, req: m.DescribeGroupsRequest, error: int) -> m.DescribeGroupsResponse:
    R = m.DescribeGroupsResponse
    return R(
        groups=[
            R.DescribedGroup(error_code=error, group_id=g, group_state="", protocol_type="", protocol_data="")
            for g in req.groups
        ]
    )


def _list_groups(version: int, req: m.ListGroupsRequest, error: int) -> m.ListGroupsResponse:
    return m.ListGroupsResponse(error_code=error, groups=[])


def _delete_groups(version: int, req: m.DeleteGroupsRequest, error: int) -> m.DeleteGroupsResponse:
    R = m.DeleteGroupsResponse
    return R(results=[R.DeletableGroupResult(group_id=g, error_code=error) for g in req.groups_names])


def _offset_delete(version: int, req: m.OffsetDeleteRequest, error: int) -> m.OffsetDeleteResponse:
    return m.OffsetDeleteResponse(error_code=error, topics=[])


def _find_coordinator(version: int, req: m.FindCoordinatorRequest, error: int) -> m.FindCoordinatorResponse:
    R = m.FindCoordinatorResponse
    if version >= 4:
        return R(
            coordinators=[
                R.Coordinator(key=k, node_id=-1, host="", port=-1, error_code=error)
                for k in req.coordinator_keys
            ]
        )
    return R(error_code=error, node_id=-1, host="", port=-1)


# Kafka's message for UNSUPPORTED_VERSION, which the KIP-848 refusals below carry like Kafka's do.
_UNSUPPORTED_VERSION_MESSAGE = "The version of API is not supported."


def _consumer_group_heartbeat(
    version: int, req: m.ConsumerGroupHeartbeatRequest, error: int
) -> m.ConsumerGroupHeartbeatResponse:
    message = _UNSUPPORTED_VERSION_MESSAGE if error == ErrorCode.UNSUPPORTED_VERSION else None
    return m.ConsumerGroupHeartbeatResponse(error_code=error, error_message=message, assignment=None)


def _consumer_group_describe(
    version: int, req: m.ConsumerGroupDescribeRequest, error: int
) -> m.ConsumerGroupDescribeResponse:
    R = m.ConsumerGroupDescribeResponse
    message = _UNSUPPORTED_VERSION_MESSAGE if error == ErrorCode.UNSUPPORTED_VERSION else None
    return R(
        groups=[R.DescribedGroup(group_id=g, error_code=error, error_message=message) for g in req.group_ids]
    )


# Each builder takes its own API's request; the table is keyed by API, so its values are loosely typed.
_BUILDERS: dict[int, Callable[[int, Any, int], Message]] = {
    ApiKey.JOIN_GROUP: _join,
    ApiKey.SYNC_GROUP: _sync,
    ApiKey.HEARTBEAT: _heartbeat,
    ApiKey.LEAVE_GROUP: _leave,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: _consumer_group_describe,
}


def unexpected_failure(
    log: logging.Logger, what: str, api_key: int, version: int, request: Any, exc: BaseException | None = None
) -> Any:
    """Log a bug (``exc``, or the exception being handled) and return UNKNOWN_SERVER_ERROR where the
    API's clients look for errors; if even that cannot be built from this request, an empty
    response of the right class with a top-level error if it has one."""
    log.error("%s: api %d v%d failed", what, api_key, version, exc_info=exc if exc is not None else True)
    try:
        return error_response(api_key, version, request, ErrorCode.UNKNOWN_SERVER_ERROR)
    except Exception:
        response = m.RESPONSES[api_key]() if api_key in m.RESPONSES else None
        if response is not None and "error_code" in response.FIELDS:
            setattr(response, "error_code", int(ErrorCode.UNKNOWN_SERVER_ERROR))  # noqa: B010 - which field exists is known only at run time
        return response
