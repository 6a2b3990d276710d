"""Kafka's ACL rules, as its StandardAuthorizer applies them; pure (no I/O, no clock).

An ACL binding names a resource (type, pattern LITERAL or PREFIXED, name; the LITERAL name "*"
matches every name of its type), a principal ("User:*" matches every principal), a host ("*"
matches every host), an operation (ALL matches every operation) and a permission (ALLOW or DENY).
Deciding whether a principal connected from a host may perform an operation on a resource:

1. a super user may do anything;
2. of the ACLs whose resource pattern matches the resource, those naming the principal (or
   "User:*") and the host (or "*") and the operation decide: any DENY denies, else any ALLOW
   allows. An ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and an ALLOW of
   ALTER_CONFIGS also allows DESCRIBE_CONFIGS; a DENY denies only the operation it names (or ALL);
3. if no ACL matched that way, the request is denied when some ACL matches the resource at all
   (for anyone, any host, any operation); only a resource no ACL matches at all falls to
   ``allow.everyone.if.no.acl.found``.

:class:`AclRules` is one snapshot of the upstream's ACLs with those two settings. Its decisions are
cached per (principal, host, operation, resource type, name), so an offset commit's check is a
dict lookup; a changed ACL set is a new snapshot, with an empty cache.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import IntEnum

WILDCARD_NAME = "*"  # a LITERAL resource name matching every name of its type
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name
CACHE_LIMIT = 100_000  # decisions kept per snapshot; the cache is emptied when it is full

# May the principal (bound in) perform (operation, resource type, name)?
Decider = Callable[[int, int, str], bool]


class ResourceType(IntEnum):
    """Kafka's resource type codes (DescribeAcls' ResourceType)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    """Kafka's resource pattern type codes; stored ACLs are LITERAL or PREFIXED."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    """Kafka's ACL operation codes."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermission(IntEnum):
    """Kafka's ACL permission type codes."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# Only an ALLOW implies: an ALLOW of any of these also allows the key operation.
_IMPLIED_BY: dict[int, frozenset[int]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}


@dataclass(frozen=True, slots=True)
class Acl:
    """One ACL binding, as DescribeAcls lists it (codes as Kafka's)."""

    resource_type: int
    pattern_type: int
    resource_name: str
    principal: str
    host: str
    operation: int
    permission: int


def acl_verdict(acl: Acl, principal: str, host: str, operation: int) -> bool | None:
    """What ``acl`` says about ``principal`` from ``host`` doing ``operation``, its resource
    already matched: True (allow), False (deny) or None (it does not apply)."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD_HOST and acl.host != host:
        return None
    allow = acl.permission == AclPermission.ALLOW
    if acl.operation != AclOperation.ALL and acl.operation != operation:
        implied_by = _IMPLIED_BY.get(operation)
        if not allow or implied_by is None or acl.operation not in implied_by:
            return None
    if allow:
        return True
    if acl.permission == AclPermission.DENY:
        return False
    return None  # a permission Kafka would not store


@dataclass(slots=True)
class _TypeAcls:
    """The ACLs of one resource type, indexed by how their pattern matches a name."""

    literal: dict[str, list[Acl]]
    wildcard: list[Acl]
    prefixed: dict[str, list[Acl]]
    prefix_lengths: tuple[int, ...] = ()  # the PREFIXED names' distinct lengths, ascending


class AclRules:
    """One snapshot of the ACLs, the super users and ``allow.everyone.if.no.acl.found``."""

    __slots__ = ("acls", "super_users", "allow_if_no_acl", "_by_type", "_cache", "_deciders", "_decided")

    def __init__(self, acls: Iterable[Acl], super_users: frozenset[str], allow_if_no_acl: bool) -> None:
        self.acls = frozenset(acls)
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._by_type: dict[int, _TypeAcls] = {}
        for acl in self.acls:
            index = self._by_type.get(acl.resource_type)
            if index is None:
                index = self._by_type[acl.resource_type] = _TypeAcls({}, [], {})
            if acl.pattern_type == PatternType.PREFIXED:
                index.prefixed.setdefault(acl.resource_name, []).append(acl)
                index.prefix_lengths = tuple(sorted({*index.prefix_lengths, len(acl.resource_name)}))
            elif acl.pattern_type == PatternType.LITERAL:
                if acl.resource_name == WILDCARD_NAME:
                    index.wildcard.append(acl)
                else:
                    index.literal.setdefault(acl.resource_name, []).append(acl)
        self._cache: dict[tuple[str, str, int, int, str], bool] = {}
        # Each principal's decisions: (its decision function, its cache); all of them together hold
        # at most CACHE_LIMIT decisions (``_decided`` counts them), then they are emptied at once.
        self._deciders: dict[tuple[str, str], tuple[Decider, dict[int, dict[str, bool]]]] = {}
        self._decided = 0

    def same_as(self, acls: frozenset[Acl], super_users: frozenset[str], allow_if_no_acl: bool) -> bool:
        return (
            self.acls == acls and self.super_users == super_users and self.allow_if_no_acl == allow_if_no_acl
        )

    def allowed(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        """May ``principal``, connected from ``host``, perform ``operation`` on the resource?"""
        key = (principal, host, operation, resource_type, name)
        cache = self._cache
        decided = cache.get(key)
        if decided is None:
            decided = self.decide(principal, host, operation, resource_type, name)
            if len(cache) >= CACHE_LIMIT:
                cache.clear()
            cache[key] = decided
        return decided

    def decider(self, principal: str, host: str) -> Decider:
        """``may(operation, resource_type, name)`` for ``principal`` from ``host``, with its own
        cache of decisions (one per principal and host, shared by their connections): a check on
        the hot path is one call and one dict lookup."""
        who = (principal, host)
        known = self._deciders.get(who)
        if known is not None:
            return known[0]
        if len(self._deciders) >= CACHE_LIMIT // 100:
            self._forget_decisions()
            self._deciders.clear()
        # Decisions by (operation, resource type), then by resource name: a lookup builds no key
        # object, and 20,000 new decisions add no object the garbage collector must walk (a tuple
        # key per decision did: a young-generation pass of ~6 ms after one large DescribeGroups).
        cache: dict[int, dict[str, bool]] = {}
        decide = self.decide

        def may(operation: int, resource_type: int, name: str) -> bool:
            kind = operation << 8 | resource_type
            by_name = cache.get(kind)
            if by_name is not None:
                decided = by_name.get(name)
                if decided is not None:
                    return decided
            decided = decide(principal, host, operation, resource_type, name)
            if self._decided >= CACHE_LIMIT:
                self._forget_decisions()  # empties this cache too
                by_name = None
            if by_name is None:
                by_name = cache[kind] = {}
            self._decided += 1
            by_name[name] = decided
            return decided

        self._deciders[who] = (may, cache)
        return may

    def _forget_decisions(self) -> None:
        for _may, cache in self._deciders.values():
            cache.clear()
        self._decided = 0

    def decide(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        """The decision, uncached."""
        if principal in self.super_users:
            return True
        index = self._by_type.get(resource_type)
        if index is None:
            return self.allow_if_no_acl
        matching: list[list[Acl]] = [index.wildcard]
        exact = index.literal.get(name)
        if exact is not None:
            matching.append(exact)
        if index.prefixed:
            for end in index.prefix_lengths:
                if end > len(name):
                    break
                prefixed = index.prefixed.get(name[:end])
                if prefixed is not None:
                    matching.append(prefixed)
        any_resource_acl = False
        allowed = False
        for acls in matching:
            for acl in acls:
                any_resource_acl = True
                verdict = acl_verdict(acl, principal, host, operation)
                if verdict is False:
                    return False
                if verdict:
                    allowed = True
        if allowed:
            return True
        return self.allow_if_no_acl and not any_resource_acl


def parse_super_users(raw: str | None) -> frozenset[str]:
    """Kafka's ``super.users``: principals separated by ";" (blanks around each ignored)."""
    if not raw:
        return frozenset()
    return frozenset(p.strip() for p in raw.split(";") if p.strip())
