"""Kafka's ACL rules (coordinator/net/acls.py): each rule of StandardAuthorizer, and a property test
against a reference that scans every ACL the plain way."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.coordinator.net import acls as acls_module
from kcoord.coordinator.net.acls import (
    Acl,
    AclOperation,
    AclPermission,
    AclRules,
    PatternType,
    ResourceType,
    parse_super_users,
)

ALLOW, DENY = AclPermission.ALLOW, AclPermission.DENY
GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation


def acl(
    name: str = "g",
    op: int = Op.READ,
    permission: int = ALLOW,
    principal: str = "User:alice",
    host: str = "*",
    pattern: int = LITERAL,
    rtype: int = GROUP,
) -> Acl:
    return Acl(rtype, pattern, name, principal, host, op, permission)


def rules(*acls: Acl, super_users: str = "", allow_if_no_acl: bool = False) -> AclRules:
    return AclRules(acls, parse_super_users(super_users), allow_if_no_acl)


def may(
    r: AclRules,
    op: int = Op.READ,
    name: str = "g",
    principal: str = "User:alice",
    host: str = "10.0.0.1",
    rtype: int = GROUP,
) -> bool:
    return r.allowed(principal, host, op, rtype, name)


def test_an_allow_acl_allows_its_operation_only() -> None:
    r = rules(acl(op=Op.READ))
    assert may(r, Op.READ)
    assert not may(r, Op.DELETE)
    assert not may(r, Op.READ, principal="User:bob")
    assert not may(r, Op.READ, name="other")  # another group: no ACL at all, allow.everyone off


def test_deny_wins_over_allow() -> None:
    r = rules(acl(op=Op.READ), acl(op=Op.READ, permission=DENY, principal="User:*"))
    assert not may(r, Op.READ)
    assert not may(rules(acl(op=Op.ALL), acl(op=Op.READ, permission=DENY)), Op.READ)
    assert may(rules(acl(op=Op.ALL), acl(op=Op.READ, permission=DENY)), Op.DELETE)


def test_describe_is_implied_by_read_write_delete_alter_only_when_allowed() -> None:
    for implying in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.ALL):
        assert may(rules(acl(op=implying)), Op.DESCRIBE), implying
    for other in (Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.CLUSTER_ACTION):
        assert not may(rules(acl(op=other)), Op.DESCRIBE), other
    # A DENY of READ does not deny DESCRIBE (which an ALLOW of DESCRIBE gives).
    assert may(rules(acl(op=Op.DESCRIBE), acl(op=Op.READ, permission=DENY)), Op.DESCRIBE)
    # ... and an ALLOW of DESCRIBE does not give READ.
    assert not may(rules(acl(op=Op.DESCRIBE)), Op.READ)


def test_describe_configs_is_implied_by_alter_configs() -> None:
    assert may(rules(acl(op=Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS)
    assert not may(rules(acl(op=Op.DESCRIBE_CONFIGS)), Op.ALTER_CONFIGS)
    assert not may(rules(acl(op=Op.ALTER)), Op.DESCRIBE_CONFIGS)


def test_wildcard_name_prefixed_patterns_and_literal_prefixes() -> None:
    assert may(rules(acl(name="*")), name="anything")
    assert may(rules(acl(name="app-", pattern=PREFIXED)), name="app-orders")
    assert may(rules(acl(name="app-", pattern=PREFIXED)), name="app-")
    assert not may(rules(acl(name="app-", pattern=PREFIXED)), name="app")
    assert not may(rules(acl(name="app-")), name="app-orders")  # a LITERAL is no prefix
    assert not may(rules(acl(name="*", pattern=PREFIXED)), name="g")  # "*" is a wildcard only as LITERAL
    assert not may(rules(acl(name="app-", pattern=PREFIXED, permission=DENY), acl(name="*")), name="app-x")


def test_wildcard_principal_and_host() -> None:
    assert may(rules(acl(principal="User:*")), principal="User:bob")
    assert may(rules(acl(principal="User:*")), principal="User:ANONYMOUS")
    assert may(rules(acl(host="10.0.0.1")), host="10.0.0.1")
    assert not may(rules(acl(host="10.0.0.2")), host="10.0.0.1")


def test_resource_types_are_separate() -> None:
    r = rules(acl(name="x", rtype=TOPIC))
    assert may(r, name="x", rtype=TOPIC)
    assert not may(r, name="x", rtype=GROUP, principal="User:bob")
    # A GROUP named like the topic has no ACL: allow.everyone applies to it alone.
    assert may(rules(acl(name="x", rtype=TOPIC), allow_if_no_acl=True), name="x", rtype=GROUP)


def test_super_users_may_do_anything() -> None:
    r = rules(acl(op=Op.ALL, permission=DENY, principal="User:*"), super_users="User:admin; User:ops")
    assert may(r, Op.DELETE, principal="User:admin")
    assert may(r, Op.READ, principal="User:ops")
    assert not may(r, Op.READ, principal="User:alice")
    assert parse_super_users(" User:a ;User:b;; ") == frozenset({"User:a", "User:b"})


def test_allow_everyone_only_when_no_acl_matches_the_resource_at_all() -> None:
    assert may(rules(allow_if_no_acl=True), Op.DELETE, principal="User:anyone")
    # An ACL on the group for someone else: bob is denied, although he is named by no ACL.
    r = rules(acl(op=Op.READ, principal="User:alice"), allow_if_no_acl=True)
    assert not may(r, Op.READ, principal="User:bob")
    # An ACL for another operation, another host, or a prefix/wildcard one: still "has ACLs".
    assert not may(rules(acl(op=Op.WRITE), allow_if_no_acl=True), Op.READ)
    assert not may(rules(acl(host="10.9.9.9"), allow_if_no_acl=True), Op.READ)
    assert not may(
        rules(acl(name="g", pattern=PREFIXED, principal="User:x"), allow_if_no_acl=True), name="gg"
    )
    assert not may(rules(acl(name="*", principal="User:x"), allow_if_no_acl=True), name="zz")
    assert not may(rules(), Op.READ)


def test_decisions_are_cached_per_snapshot() -> None:
    r = rules(acl(op=Op.READ))
    assert may(r, Op.READ)
    assert len(r._cache) == 1
    assert may(r, Op.READ)
    assert len(r._cache) == 1
    decide = r.decider("User:alice", "10.0.0.1")
    assert decide is r.decider("User:alice", "10.0.0.1")  # one per principal and host
    assert decide(Op.READ, GROUP, "g") and not decide(Op.WRITE, GROUP, "g")
    assert r.same_as(frozenset({acl(op=Op.READ)}), frozenset(), False)
    assert not r.same_as(frozenset(), frozenset(), False)


# -- the property: the indexed, cached rules agree with a plain scan of every ACL -------------------

NAMES = ["a", "ab", "abc", "b", "*", "ba"]
PRINCIPALS = ["User:alice", "User:bob", "User:*", "Group:alice"]
HOSTS = ["*", "10.0.0.1", "10.0.0.2"]
OPERATIONS = [op for op in Op if op not in (Op.UNKNOWN, Op.ANY)]
TYPES = [GROUP, TOPIC, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID]

acls_strategy = st.builds(
    Acl,
    st.sampled_from(TYPES),
    st.sampled_from([LITERAL, PREFIXED]),
    st.sampled_from(NAMES),
    st.sampled_from(PRINCIPALS),
    st.sampled_from(HOSTS),
    st.sampled_from(OPERATIONS),
    st.sampled_from([ALLOW, DENY]),
)
IMPLIES = {
    Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
    Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS},
}


def reference(
    acls: list[Acl],
    super_users: set[str],
    allow_if_no_acl: bool,
    principal: str,
    host: str,
    op: int,
    rtype: int,
    name: str,
) -> bool:
    """The rules read straight from Kafka's documentation, one ACL at a time."""
    if principal in super_users:
        return True

    def on_resource(a: Acl) -> bool:
        if a.resource_type != rtype:
            return False
        if a.pattern_type == LITERAL:
            return a.resource_name in (name, "*")
        return name.startswith(a.resource_name)

    def applies(a: Acl) -> bool:
        if a.principal not in (principal, "User:*") or a.host not in (host, "*"):
            return False
        if a.operation in (Op.ALL, op):
            return True
        return a.permission == ALLOW and a.operation in IMPLIES.get(Op(op), set())

    on_it = [a for a in acls if on_resource(a)]
    applying = [a for a in on_it if applies(a)]
    if any(a.permission == DENY for a in applying):
        return False
    if any(a.permission == ALLOW for a in applying):
        return True
    return allow_if_no_acl and not on_it


@settings(max_examples=300, deadline=None)
@given(
    acls=st.lists(acls_strategy, max_size=12),
    super_users=st.sets(st.sampled_from(["User:alice", "User:carol"]), max_size=1),
    allow_if_no_acl=st.booleans(),
    questions=st.lists(
        st.tuples(
            st.sampled_from(["User:alice", "User:bob", "User:carol", "Group:alice"]),
            st.sampled_from(["10.0.0.1", "10.0.0.2"]),
            st.sampled_from(OPERATIONS),
            st.sampled_from(TYPES),
            st.sampled_from(["a", "ab", "abc", "abd", "b", "ba", "c", "*"]),
        ),
        min_size=1,
        max_size=20,
    ),
)
def test_rules_agree_with_the_reference(
    acls: list[Acl],
    super_users: set[str],
    allow_if_no_acl: bool,
    questions: list[tuple[str, str, int, int, str]],
) -> None:
    r = AclRules(acls, frozenset(super_users), allow_if_no_acl)
    for principal, host, op, rtype, name in questions * 2:  # the second round is answered from the cache
        expected = reference(acls, super_users, allow_if_no_acl, principal, host, op, rtype, name)
        assert r.allowed(principal, host, op, rtype, name) == expected, (principal, host, op, rtype, name)
        assert r.decider(principal, host)(op, rtype, name) == expected, (principal, host, op, rtype, name)


def test_the_decision_caches_together_stay_under_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acls_module, "CACHE_LIMIT", 4)
    r = rules(acl(name="g", pattern=PREFIXED))
    alice, bob = r.decider("User:alice", "h"), r.decider("User:bob", "h")
    for i in range(10):
        assert alice(Op.READ, GROUP, f"g{i}") and not bob(Op.READ, GROUP, f"g{i}")
        assert r._decided <= 4
    assert sum(len(names) for _may, cache in r._deciders.values() for names in cache.values()) <= 4
