"""kcoord's cluster group is kcoord's alone: group requests naming it are refused.

In cluster mode the kcoord nodes share the shards through a classic group on the upstream,
``kcoord-cluster.<internal topic>`` (coordinator/runtime/membership.py). No client request reaches
that group through kcoord: kcoord answers every group API itself (FindCoordinator for a group
names kcoord, and the group APIs go to kcoord's shards), and the group-coordinator APIs it does not
serve are never relayed (gateway.py). A client naming that id would still get a group of the same
name in kcoord's own shards, which `kcoord groups`, Kafka's tools and the operator would confuse
with the real one. So every group API naming it is answered GROUP_AUTHORIZATION_FAILED, as Kafka
answers a principal that may not use a group: the whole answer for the single-group APIs, that
group's entry for the multi-group ones (DescribeGroups, DeleteGroups, OffsetFetch v8+,
ConsumerGroupDescribe, FindCoordinator v4+), whose other groups are served as usual.

:func:`check` is pure: a decoded request in, a :class:`GroupRefusal` or None (serve it) out. It runs
on every group request, so its common case is one attribute read and one comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from kcoord.coordinator.core.responses import error_response
from kcoord.coordinator.runtime.router import SINGLE_GROUP_APIS as ROUTED_SINGLE_GROUP_APIS
from kcoord.protocol import messages as m
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey

# APIs whose request names one group, in ``group_id`` (OffsetFetch below v8 too): those the shards
# serve, and AddOffsetsToTxn, which kcoord answers itself.
SINGLE_GROUP_APIS = ROUTED_SINGLE_GROUP_APIS | {ApiKey.ADD_OFFSETS_TO_TXN}
OFFSET_FETCH_GROUPS_SINCE = 8
FIND_COORDINATOR_BATCHED_SINCE = 4
GROUP_KEY = 0  # FindCoordinator key type: a group (1 is a transactional id)

# Multi-group APIs: (request list field, the attribute of its entries holding the group id (None: the
# entries are the ids), response list field, its entry's group id). The check runs on every such
# request, over each of up to tens of thousands of entries, so it is a C-level ``in``, not a call per entry.
_Picker = Callable[[Any], str | None]
_MULTI: dict[int, tuple[str, str | None, str, _Picker]] = {
    ApiKey.OFFSET_FETCH: ("groups", "group_id", "groups", lambda g: g.group_id),
    ApiKey.DESCRIBE_GROUPS: ("groups", None, "groups", lambda g: g.group_id),
    ApiKey.DELETE_GROUPS: ("groups_names", None, "results", lambda r: r.group_id),
    ApiKey.CONSUMER_GROUP_DESCRIBE: ("group_ids", None, "groups", lambda g: g.group_id),
    ApiKey.FIND_COORDINATOR: ("coordinator_keys", None, "coordinators", lambda c: c.key),
}

API_NAMES: dict[int, str] = {
    ApiKey.JOIN_GROUP: "JoinGroup",
    ApiKey.SYNC_GROUP: "SyncGroup",
    ApiKey.HEARTBEAT: "Heartbeat",
    ApiKey.LEAVE_GROUP: "LeaveGroup",
    ApiKey.OFFSET_COMMIT: "OffsetCommit",
    ApiKey.TXN_OFFSET_COMMIT: "TxnOffsetCommit",
    ApiKey.OFFSET_DELETE: "OffsetDelete",
    ApiKey.CONSUMER_GROUP_HEARTBEAT: "ConsumerGroupHeartbeat",
    ApiKey.ADD_OFFSETS_TO_TXN: "AddOffsetsToTxn",
    ApiKey.OFFSET_FETCH: "OffsetFetch",
    ApiKey.DESCRIBE_GROUPS: "DescribeGroups",
    ApiKey.DELETE_GROUPS: "DeleteGroups",
    ApiKey.CONSUMER_GROUP_DESCRIBE: "ConsumerGroupDescribe",
    ApiKey.FIND_COORDINATOR: "FindCoordinator",
}


def _identity(entry: Any) -> Any:
    return entry


@dataclass(frozen=True)
class GroupRefusal:
    """A group request naming the cluster group. ``rest``: the request without it, to serve as
    usual (None: nothing is left); ``answer(served)``: the client's answer from the answer to
    ``rest`` (None when nothing was served)."""

    api_key: int
    rest: Message | None
    answer: Callable[[Message | None], Message]

    @property
    def api_name(self) -> str:
        return API_NAMES[self.api_key]


def named_groups(api_key: int, request: Message) -> list[str]:
    """The group ids a multi-group request names, in order ([] for any other request)."""
    shape = _MULTI.get(api_key)
    if shape is None:
        return []
    request_field, group_attribute, _response_field, _response_group = shape
    entries = getattr(request, request_field) or []
    if group_attribute is None:
        return [e or "" for e in entries]
    return [getattr(e, group_attribute) or "" for e in entries]


def check(api_key: int, version: int, request: Message, group: str) -> GroupRefusal | None:
    """None to serve ``request`` as usual, or how to answer it without ever serving ``group``."""
    if api_key in SINGLE_GROUP_APIS or (
        api_key == ApiKey.OFFSET_FETCH and version < OFFSET_FETCH_GROUPS_SINCE
    ):
        if request.group_id != group:  # type: ignore[attr-defined]
            return None
        refused = error_response(api_key, version, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        return GroupRefusal(api_key, None, lambda _served: refused)
    if api_key == ApiKey.FIND_COORDINATOR:
        assert isinstance(request, m.FindCoordinatorRequest)
        if request.key_type != GROUP_KEY:
            return None
        if version < FIND_COORDINATOR_BATCHED_SINCE:
            if request.key != group:
                return None
            refused = error_response(api_key, version, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
            return GroupRefusal(api_key, None, lambda _served: refused)
    shape = _MULTI.get(api_key)
    if shape is None:
        return None
    request_field, group_attribute, _response_field, _response_group = shape
    entries = getattr(request, request_field) or []
    ids = entries if group_attribute is None else map(attrgetter(group_attribute), entries)
    if group not in ids:
        return None
    return refuse_entries(api_key, version, request, lambda g: g == group)


def refuse_entries(
    api_key: int,
    version: int,
    request: Message,
    refused: Callable[[str], bool],
    error: int = ErrorCode.GROUP_AUTHORIZATION_FAILED,
) -> GroupRefusal | None:
    """A multi-group request (DescribeGroups, DeleteGroups, OffsetFetch v8+, ConsumerGroupDescribe,
    FindCoordinator v4+) with the entries ``refused`` answered ``error``, appended after the served
    ones as Kafka appends them; None if it is no such request or no entry is refused. ``refused``
    is asked once per entry."""
    shape = _MULTI.get(api_key)
    if shape is None:
        return None
    request_field, group_attribute, response_field, _response_group = shape
    entries = getattr(request, request_field) or []
    request_group = _identity if group_attribute is None else attrgetter(group_attribute)
    flags = [refused(request_group(e) or "") for e in entries]
    if not any(flags):
        return None
    cls = type(request)
    refused_part = cls(**{n: getattr(request, n) for n in cls.FIELDS})
    setattr(refused_part, request_field, [e for e, no in zip(entries, flags, strict=True) if no])
    whole = error_response(api_key, version, refused_part, error)
    refused_entries = getattr(whole, response_field)
    kept = [e for e, no in zip(entries, flags, strict=True) if not no]
    rest: Message | None = None
    if kept:
        rest = cls(**{n: getattr(request, n) for n in cls.FIELDS})
        setattr(rest, request_field, kept)

    def answer(served: Message | None) -> Message:
        if served is None:
            return whole
        setattr(served, response_field, [*(getattr(served, response_field) or ()), *refused_entries])
        return served

    return GroupRefusal(api_key, rest, answer)
