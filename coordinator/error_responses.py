"""Build the response a request gets when it fails as a whole with one error code.

Used when a shard cannot serve a request at all: while it loads (COORDINATOR_LOAD_IN_PROGRESS),
after a failed append (NOT_COORDINATOR, so clients rediscover and retry), or for a request it
must not see. Mirrors Kafka's ``AbstractRequest.getErrorResponse``: the error goes where each
API's clients look for it — the top level, each group, or each partition.
"""

from __future__ import annotations

from typing import Any

from protocol import messages as m
from protocol.errors import ErrorCode
from protocol.messages import ApiKey


def error_response(api_key: int, version: int, request: Any, error: int) -> Any:
    builder = _BUILDERS.get(api_key)
    if builder is None:
        raise ValueError(f"no error response for api key {api_key}")
    return builder(version, request, error)


def _join(version: int, req: Any, error: int) -> Any:
    return m.JoinGroupResponse(
        error_code=error,
        generation_id=-1,
        protocol_type=None,
        protocol_name=None if version >= 7 else "",
        leader="",
        member_id=req.member_id or "",
        members=[],
    )


def _sync(version: int, req: Any, error: int) -> Any:
    return m.SyncGroupResponse(error_code=error, protocol_type=None, protocol_name=None, assignment=b"")


def _heartbeat(version: int, req: Any, error: int) -> Any:
    return m.HeartbeatResponse(error_code=error)


def _leave(version: int, req: Any, error: int) -> Any:
    return m.LeaveGroupResponse(error_code=error, members=[])


def _per_partition(response_cls: Any, topic_cls: Any, partition_cls: Any, req: Any, error: int) -> Any:
    """A response with ``error`` on every partition of the request (OffsetCommit, TxnOffsetCommit)."""
    return response_cls(
        topics=[
            topic_cls(
                name=t.name,
                partitions=[partition_cls(partition_index=p.partition_index, error_code=error) for p in t.partitions],
            )
            for t in req.topics
        ]
    )


def _offset_commit(version: int, req: Any, error: int) -> Any:
    R = m.OffsetCommitResponse
    return _per_partition(R, R.OffsetCommitResponseTopic, R.OffsetCommitResponsePartition, req, error)


def _txn_offset_commit(version: int, req: Any, error: int) -> Any:
    R = m.TxnOffsetCommitResponse
    return _per_partition(R, R.TxnOffsetCommitResponseTopic, R.TxnOffsetCommitResponsePartition, req, error)


def _offset_fetch(version: int, req: Any, error: int) -> Any:
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


def _describe_groups(version: int, req: Any, error: int) -> Any:
    R = m.DescribeGroupsResponse
    return R(
        groups=[
            R.DescribedGroup(error_code=error, group_id=g, group_state="", protocol_type="", protocol_data="")
            for g in req.groups
        ]
    )


def _list_groups(version: int, req: Any, error: int) -> Any:
    return m.ListGroupsResponse(error_code=error, groups=[])


def _delete_groups(version: int, req: Any, error: int) -> Any:
    R = m.DeleteGroupsResponse
    return R(results=[R.DeletableGroupResult(group_id=g, error_code=error) for g in req.groups_names])


def _offset_delete(version: int, req: Any, error: int) -> Any:
    return m.OffsetDeleteResponse(error_code=error, topics=[])


def _find_coordinator(version: int, req: Any, error: int) -> Any:
    R = m.FindCoordinatorResponse
    if version >= 4:
        return R(
            coordinators=[
                R.Coordinator(key=k, node_id=-1, host="", port=-1, error_code=error) for k in req.coordinator_keys
            ]
        )
    return R(error_code=error, node_id=-1, host="", port=-1)


# Kafka's message for UNSUPPORTED_VERSION, which the KIP-848 refusals below carry like Kafka's do.
_UNSUPPORTED_VERSION_MESSAGE = "The version of API is not supported."


def _consumer_group_heartbeat(version: int, req: Any, error: int) -> Any:
    message = _UNSUPPORTED_VERSION_MESSAGE if error == ErrorCode.UNSUPPORTED_VERSION else None
    return m.ConsumerGroupHeartbeatResponse(error_code=error, error_message=message)


def _consumer_group_describe(version: int, req: Any, error: int) -> Any:
    R = m.ConsumerGroupDescribeResponse
    message = _UNSUPPORTED_VERSION_MESSAGE if error == ErrorCode.UNSUPPORTED_VERSION else None
    return R(groups=[R.DescribedGroup(group_id=g, error_code=error, error_message=message) for g in req.group_ids])


_BUILDERS = {
    ApiKey.JOIN_GROUP: _join,
    ApiKey.SYNC_GROUP: _sync,
    ApiKey.HEARTBEAT: _heartbeat,
    ApiKey.LEAVE_GROUP: _leave,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: _consumer_group_describe,
}
