"""A large multi-group request under the upstream's ACLs: its decisions are made in steps before it
is served (net/decision_warmup.py), and its answer is the one the check at once gives.

Through a real connection and App over memory storage (support/in_process.py), no sockets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kcoord.coordinator.net import dispatch
from kcoord.coordinator.net.acls import Acl, AclOperation, AclPermission, AclRules, PatternType, ResourceType
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from support.in_process import Harness, split_responses

PRINCIPAL = "User:alice"
GROUP_AUTHORIZATION_FAILED = ErrorCode.GROUP_AUTHORIZATION_FAILED


def rules() -> AclRules:
    """alice may DESCRIBE and DELETE groups named team-*; no ACL names the others (denied)."""
    allow, prefixed = AclPermission.ALLOW, PatternType.PREFIXED
    return AclRules(
        [
            Acl(ResourceType.GROUP, prefixed, "team-", PRINCIPAL, "*", AclOperation.DESCRIBE, allow),
            Acl(ResourceType.GROUP, prefixed, "team-", PRINCIPAL, "*", AclOperation.DELETE, allow),
        ],
        frozenset(),
        False,
    )


async def answer(h: Harness, api_key: int, version: int, request: Any) -> Any:
    h.conn.data_received(h.frame(api_key, version, request))
    out: list[bytes] = []
    for _ in range(10_000):
        out += split_responses(h.transport.take())
        if out:
            break
        await asyncio.sleep(0.001)
    [raw] = out
    return frames.decode_response(api_key, version, raw)[1]


def ids(count: int, denied_every: int) -> list[str]:
    return [f"other-{i}" if i % denied_every == 0 else f"team-{i}" for i in range(count)]


CASES: list[tuple[str, int, int, Callable[[list[str]], Any], Callable[[Any], list[tuple[str, int]]]]] = [
    ("DescribeGroups", ApiKey.DESCRIBE_GROUPS, 5, lambda g: m.DescribeGroupsRequest(groups=g),
     lambda a: [(x.group_id, x.error_code) for x in a.groups]),
    ("DescribeGroups with operations", ApiKey.DESCRIBE_GROUPS, 5,
     lambda g: m.DescribeGroupsRequest(groups=g, include_authorized_operations=True),
     lambda a: [(x.group_id, x.error_code, x.authorized_operations) for x in a.groups]),
    ("DeleteGroups", ApiKey.DELETE_GROUPS, 2, lambda g: m.DeleteGroupsRequest(groups_names=g),
     lambda a: [(x.group_id, x.error_code) for x in a.results]),
    ("OffsetFetch", ApiKey.OFFSET_FETCH, 8,
     lambda g: m.OffsetFetchRequest(groups=[m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=x) for x in g]),
     lambda a: [(x.group_id, x.error_code) for x in a.groups]),
]  # fmt: skip


@pytest.mark.parametrize("denied_every", [7, 1, 10_000], ids=["some denied", "all denied", "none denied"])
@pytest.mark.parametrize(("name", "api_key", "version", "build", "summary"), CASES, ids=[c[0] for c in CASES])
async def test_a_large_request_is_authorized_in_steps_as_at_once(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    api_key: int,
    version: int,
    build: Callable[[list[str]], Any],
    summary: Callable[[Any], list[tuple[str, int]]],
    denied_every: int,
) -> None:
    groups = ids(3 * dispatch.DECODE_IN_STEPS_ABOVE, denied_every)
    answers = []
    for stepped in (True, False):
        if not stepped:  # the reference: decoded, checked and served at once
            monkeypatch.setattr(dispatch, "DECODE_IN_STEPS_ABOVE", 10 * len(groups))
            monkeypatch.setattr(dispatch, "DECODE_IN_STEPS_FRAMES_ABOVE", 1 << 30)
        h = Harness(4)
        await h.start()
        h.conn.principal = PRINCIPAL
        h.app.authorization.allow_all, h.app.authorization.rules = False, rules()
        answers.append(summary(await answer(h, api_key, version, build(groups))))
    in_steps, at_once = answers
    assert in_steps == at_once
    refused = {entry[0] for entry in at_once if entry[1] == GROUP_AUTHORIZATION_FAILED}
    assert refused == {g for g in groups if g.startswith("other-")}
