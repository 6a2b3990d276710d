"""Where kcoord's group APIs take their ACLs from: the upstream cluster, read again and again.

kcoord keeps no ACL store of its own. Every ``authorizer.acl.refresh.ms`` it asks the upstream,
on a connection of its own (kcoord's own principal, like its metadata connection), for every ACL
(DescribeAcls with a match-any filter) and for the broker's ``super.users`` and
``allow.everyone.if.no.acl.found`` (DescribeConfigs on that broker); kcoord's settings of the same
names, when set, take the place of the broker's. A changed answer becomes a new
:class:`~kcoord.coordinator.net.acls.AclRules` snapshot (with an empty decision cache); the same
answer keeps the old one and its cache.

What :class:`Authorization` says while that goes on:

- ``authorizer.mode=none``, or an upstream without an authorizer (DescribeAcls answered
  SECURITY_DISABLED, or not offered at all; or no ACLs listed by an upstream that does not serve
  DescribeConfigs for its brokers, as tansu, whose DescribeAcls lists nothing and which enforces
  nothing): everything is allowed, as on a Kafka cluster without an authorizer;
- before the first answer, or when the last good one is older than :data:`STALE_AFTER_REFRESHES`
  refresh intervals (and at least :data:`STALE_AFTER_MIN_S`): nothing is decided; the group APIs
  answer COORDINATOR_NOT_AVAILABLE (fail closed, retriable: a client finds the coordinator again
  and retries, as while a coordinator starts up);
- otherwise the last good snapshot. A failed refresh keeps it (as a broker cut off from its
  controller keeps authorizing with the ACLs it has) and is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from kcoord.client import Connection, ConnectionLost, KafkaClientError, UnsupportedVersion, connect
from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.primitives import CodecError

from .acls import Acl, AclOperation, AclPermission, AclRules, PatternType, ResourceType, parse_super_users

if TYPE_CHECKING:
    from .gateway import ClusterView

log = logging.getLogger("kcoord.authorizer")

STALE_AFTER_REFRESHES = 10
STALE_AFTER_MIN_S = 30.0
BROKER_RESOURCE = 4  # DescribeConfigs resource type: a broker
SUPER_USERS = "super.users"
ALLOW_EVERYONE = "allow.everyone.if.no.acl.found"


class Authorization:
    """What kcoord's own group APIs are authorized by, now. Read on every group request."""

    __slots__ = ("allow_all", "rules")

    def __init__(self, allow_all: bool) -> None:
        # True: everything is allowed (authorizer.mode=none, or an upstream without an authorizer).
        self.allow_all = allow_all
        # The upstream's ACLs; None while they are not known (the group APIs fail closed).
        self.rules: AclRules | None = None


def match_any_filter() -> sm.DescribeAclsRequest:
    """DescribeAcls for every ACL of the cluster."""
    return sm.DescribeAclsRequest(
        resource_type_filter=ResourceType.ANY,
        resource_name_filter=None,
        pattern_type_filter=PatternType.ANY,
        principal_filter=None,
        host_filter=None,
        operation=AclOperation.ANY,
        permission_type=AclPermission.ANY,
    )


def acls_of(response: sm.DescribeAclsResponse) -> frozenset[Acl]:
    return frozenset(
        Acl(
            r.resource_type,
            r.pattern_type,
            r.resource_name,
            a.principal,
            a.host,
            a.operation,
            a.permission_type,
        )
        for r in response.resources
        for a in r.acls
    )


class AclSource:
    """Keeps ``authorization`` up to date from the upstream ``cluster``'s ACLs."""

    def __init__(
        self,
        authorization: Authorization,
        cluster: ClusterView,
        refresh_s: float,
        super_users: str | None = None,
        allow_everyone_if_no_acl_found: bool | None = None,
    ) -> None:
        self.authorization = authorization
        self.cluster = cluster
        self.refresh_s = refresh_s
        self.stale_after_s = max(STALE_AFTER_MIN_S, STALE_AFTER_REFRESHES * refresh_s)
        self._super_users = super_users
        self._allow_everyone = allow_everyone_if_no_acl_found
        self._conn: Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._loaded_at: float | None = None  # monotonic time of the last good answer
        self._failing = False
        self._warned_configs = False
        self._broker_configs_served = True  # False once the upstream closed the connection on it
        self.first_load = asyncio.Event()  # set after the first answer, good or not

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _run(self) -> None:
        while True:
            try:
                await self.refresh()
                if self._failing:
                    log.info("authorizer: the upstream's ACLs are read again")
                self._failing = False
            except (KafkaClientError, OSError, TimeoutError, CodecError, RuntimeError) as exc:
                self._refresh_failed(exc)
            self.first_load.set()
            await asyncio.sleep(self.refresh_s)

    def _refresh_failed(self, exc: BaseException) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        authorization = self.authorization
        stale = self._loaded_at is None or time.monotonic() - self._loaded_at > self.stale_after_s
        if stale and authorization.rules is not None and not authorization.allow_all:
            log.error(
                "authorizer: no ACLs from the upstream for %.0f s (%r): kcoord's group APIs answer "
                "COORDINATOR_NOT_AVAILABLE until they are read again",
                self.stale_after_s,
                exc,
            )
            authorization.rules = None
        elif not self._failing:
            log.warning(
                "authorizer: cannot read the upstream's ACLs (%r); %s",
                exc,
                "the group APIs answer COORDINATOR_NOT_AVAILABLE until they can"
                if authorization.rules is None and not authorization.allow_all
                else "the last ones read still apply",
            )
        self._failing = True

    async def _connection(self) -> tuple[Connection, int | None]:
        cluster = self.cluster
        node_id = min(cluster.brokers) if cluster.brokers else None
        conn = self._conn
        if conn is None or conn.closed:
            conn = self._conn = await connect(
                cluster.upstream_address(node_id),
                timeout=5.0,
                request_timeout=10.0,
                security=cluster.security,
            )
        return conn, node_id

    async def refresh(self) -> None:
        """Read the ACLs and the two broker settings once; a changed set becomes a new snapshot."""
        conn, node_id = await self._connection()
        authorization = self.authorization
        try:
            version = conn.version_for(sm.DescribeAclsRequest)
        except UnsupportedVersion:
            self._no_authorizer("does not offer DescribeAcls")
            return
        response: sm.DescribeAclsResponse = await conn.request(match_any_filter(), version)
        if response.error_code == ErrorCode.SECURITY_DISABLED:
            self._no_authorizer("has no authorizer (DescribeAcls: SECURITY_DISABLED)")
            return
        if response.error_code != ErrorCode.NONE:
            raise RuntimeError(
                f"DescribeAcls answered error {response.error_code}: {response.error_message or ''}"
                " (kcoord's principal needs DESCRIBE on the CLUSTER)"
            )
        acls = acls_of(response)
        try:
            super_users, allow_everyone = await self._broker_settings(conn, node_id)
        except ConnectionLost:
            # Kafka answers DescribeConfigs for a broker (an error code at worst); an upstream that
            # closes the connection instead does not serve it (tansu), so it was not asked again.
            self._broker_configs_served = False
            if not acls:
                self._no_authorizer("lists no ACLs and does not serve its brokers' settings")
                return
            raise
        if not acls and not self._broker_configs_served:
            self._no_authorizer("lists no ACLs and does not serve its brokers' settings")
            return
        self._loaded_at = time.monotonic()
        authorization.allow_all = False
        current = authorization.rules
        if current is not None and current.same_as(acls, super_users, allow_everyone):
            return
        authorization.rules = AclRules(acls, super_users, allow_everyone)
        log.info(
            "authorizer: %d ACLs from the upstream, %d super users, allow.everyone.if.no.acl.found=%s",
            len(acls),
            len(super_users),
            str(allow_everyone).lower(),
        )

    def _no_authorizer(self, why: str) -> None:
        if not self.authorization.allow_all:
            log.info("authorizer: the upstream %s: kcoord's group APIs allow everything", why)
        self.authorization.allow_all = True
        self.authorization.rules = None
        self._loaded_at = time.monotonic()

    async def _broker_settings(self, conn: Connection, node_id: int | None) -> tuple[frozenset[str], bool]:
        """``super.users`` and ``allow.everyone.if.no.acl.found``: kcoord's settings where set,
        else the broker's (DescribeConfigs) where it shows them, else Kafka's defaults (none, false)."""
        super_users, allow_everyone = self._super_users, self._allow_everyone
        if (
            (super_users is None or allow_everyone is None)
            and node_id is not None
            and self._broker_configs_served
        ):
            upstream = await self._describe_broker(conn, node_id)
            if super_users is None:
                super_users = upstream.get(SUPER_USERS)
            if allow_everyone is None:
                allow_everyone = (upstream.get(ALLOW_EVERYONE) or "false").strip().lower() == "true"
        return parse_super_users(super_users), bool(allow_everyone)

    async def _describe_broker(self, conn: Connection, node_id: int) -> dict[str, str | None]:
        """The broker's values of the two settings it shows. Kafka reports a setting its own
        configuration does not define (the authorizer's are not) as sensitive, without a value:
        those stay unknown, and kcoord's settings of those names are the way to give them."""
        R = sm.DescribeConfigsRequest
        request = R(
            resources=[
                R.DescribeConfigsResource(
                    resource_type=BROKER_RESOURCE,
                    resource_name=str(node_id),
                    configuration_keys=[SUPER_USERS, ALLOW_EVERYONE],
                )
            ]
        )
        response = await conn.request(request, conn.version_for(R))
        result = response.results[0] if response.results else None
        if result is None or result.error_code != ErrorCode.NONE:
            self._warn_once(
                f"cannot read broker {node_id}'s settings (error "
                f"{None if result is None else result.error_code}; kcoord's principal needs "
                "DESCRIBE_CONFIGS on the CLUSTER)"
            )
            return {}
        shown = {c.name: c.value for c in result.configs if c.value is not None}
        hidden = [n for n in (SUPER_USERS, ALLOW_EVERYONE) if n not in shown]
        if any(
            (n == SUPER_USERS and self._super_users is None)
            or (n == ALLOW_EVERYONE and self._allow_everyone is None)
            for n in hidden
        ):
            self._warn_once(f"broker {node_id} does not show {' and '.join(hidden)} (Kafka hides settings it "
                            "reports as sensitive, as it does the authorizer's)")  # fmt: skip
        return shown

    def _warn_once(self, why: str) -> None:
        if self._warned_configs:
            return
        self._warned_configs = True
        log.warning(
            "authorizer: %s: Kafka's defaults apply (no super users, allow.everyone.if.no.acl.found="
            "false) unless kcoord's settings %s and %s are set to the brokers' values",
            why,
            SUPER_USERS,
            ALLOW_EVERYONE,
        )
