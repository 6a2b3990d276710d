"""Which way each request goes: answered here, to the router and a shard, or relayed upstream.

Decided per API key and version, the way Kafka's KafkaApis dispatches what its SocketServer read:
- ApiVersions is answered here (what kcoord serves, and the relayed APIs both sides support:
  gateway.py), as is FindCoordinator for group keys (kcoord's coordinator listener) and ListGroups
  on a broker port (none: each group is listed once, by the coordinator listener);
- the group APIs kcoord serves go to the router (group_routing.py: in arrival order, with the
  offset-commit APIs' topics checked first); AddOffsetsToTxn to the transaction offsets;
- every other API kcoord advertises is relayed to this listener's upstream broker
  (relay/passthrough.py), answers naming brokers rewritten on the way back (relay/addresses.py);
  EndTxn and CreateTopics answers are also watched on their way through.

A request for an API version kcoord neither serves nor relays raises :class:`UnsupportedApi`, and a
malformed one CodecError: bad input, on which the connection closes (connection.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kcoord.coordinator.core.responses import error_response
from kcoord.coordinator.core.result import RequestContext
from kcoord.coordinator.runtime.router import GROUP_APIS
from kcoord.protocol import frames, relay_messages, storage_messages
from kcoord.protocol import messages as m
from kcoord.protocol.array_steps import SteppedResponse, steppable
from kcoord.protocol.codec import Message
from kcoord.protocol.endpoints import NODE_ENDPOINTS_SINCE
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import KCOORD_VERSIONS, ApiKey
from kcoord.protocol.primitives import CodecError
from kcoord.protocol.request_steps import SteppedRequest, stepped_request
from kcoord.protocol.storage_messages import CreateTopicsResponse

from . import group_authz, group_guard
from .acls import AclRules
from .decision_warmup import DecisionWarmup
from .group_guard import SINGLE_GROUP_APIS
from .group_routing import GroupRouting
from .relay import guard
from .relay.addresses import rewrite_node_endpoints
from .relay.guard import GUARDED_APIS, produce_keys, produce_scan

if TYPE_CHECKING:
    from .connection import ClientConnection
    from .relay import UpstreamRelay
    from .slot import Slot

log = logging.getLogger("kcoord.connection")
# TxnOffsetCommit v5 (KIP-890's transactions v2): the request adds the group to the transaction.
TXN_OFFSET_COMMIT_ADDS_GROUP_SINCE = 5

_PRODUCE = int(ApiKey.PRODUCE)  # a plain int: compared with every request's api key
CREATE_TOPICS = CreateTopicsResponse.SCHEMA.api_key  # relayed, not served: not in ApiKey
END_TXN = storage_messages.EndTxnRequest.SCHEMA.api_key  # relayed, and watched (transactions)
END_TXN_FLEXIBLE_SINCE = 3

# Group answers whose top-level array holds more than STEP_ANSWERS_ABOVE entries are encoded on the
# loop in steps (loop_steps.py), not at once: encoding a DescribeGroups answer of 20,000 groups
# takes ~18 ms of pure Python, all of which every other client would wait for.
STEP_ANSWERS_ABOVE = 1000
ENCODE_ENTRIES_PER_STEP = 100  # ~0.1 ms of encoding
# Multi-group requests naming more than DECODE_IN_STEPS_ABOVE groups are decoded in steps too
# (protocol/request_steps.py): 20,000 ids are ~1.6 ms of decoding at once, as long as an honest
# client's whole round trip on a quiet machine. Frames this small cannot name that many.
DECODE_IN_STEPS_ABOVE = 1000
DECODE_IN_STEPS_FRAMES_ABOVE = 2 * DECODE_IN_STEPS_ABOVE
DECODE_ENTRIES_PER_STEP = 500  # ~0.04 ms of decoding
# Such a request's authorization decisions are made in steps as well (decision_warmup.py).
DECISIONS_PER_STEP = 50  # ~0.08 ms of Kafka's rules per group and operation not yet cached
_STEPPED_REQUESTS = frozenset(
    {ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS, ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.OFFSET_FETCH}
)
_ANSWER_ARRAYS: dict[int, str] = {
    ApiKey.DESCRIBE_GROUPS: "groups",
    ApiKey.LIST_GROUPS: "groups",
    ApiKey.DELETE_GROUPS: "results",
    ApiKey.CONSUMER_GROUP_DESCRIBE: "groups",
    ApiKey.OFFSET_FETCH: "groups",
}
CREATE_TOPICS_WITH_IDS_SINCE = 7  # CreatableTopicResult has TopicId (and NumPartitions since v5)


# Completes the answer to what was served of a request (None: nothing was) into the client's answer.
Merge = Callable[[Message | None], Message]


def _allow_everything(operation: int, resource_type: int, name: str) -> bool:
    return True


class UnsupportedApi(CodecError):
    """A well-formed request for an API version kcoord neither serves nor relays."""


class ApiDispatcher:
    """Dispatches the requests of one client connection (``conn``); relayed ones go to ``relay``."""

    __slots__ = ("conn", "app", "relay", "_groups", "_refusals_logged", "_decider", "_describable")

    def __init__(self, conn: ClientConnection, relay: UpstreamRelay) -> None:
        self.conn = conn
        self.app = conn.app
        self.relay = relay
        self._groups = GroupRouting(conn)
        self._refusals_logged: set[str] | None = None  # APIs whose refusal this connection logged
        # The decision function of this connection's principal under the current rules (acls.py),
        # kept so the hot path (a commit's checks) looks nothing up.
        self._decider: tuple[AclRules, str, group_authz.Allowed, group_authz.TopicName] | None = None
        self._describable: tuple[group_authz.Allowed, Callable[[str], bool]] | None = None

    def dispatch(self, payload: bytes, api_key: int, version: int, correlation_id: int) -> None:
        """One request frame (its header already peeked by the connection)."""
        app = self.app
        app.metrics.request_received(api_key, version)
        if api_key == _PRODUCE and app.cluster.supports(_PRODUCE, version):
            # The relay's hot path (Produce is relayed, never served): its acks, topic names (or
            # ids) and transactional id read in one call (the C extension's), nothing decoded.
            protected = app.protected_topics
            acks, acks_at, refused = produce_scan(
                payload, version, produce_keys(protected, version), protected.prefix_utf8
            )
            if refused:
                self._refuse(guard.produce_refusal(payload, version, protected), correlation_id)
            else:
                self.relay.produce(payload, version, acks, acks_at)
            return
        if api_key == ApiKey.API_VERSIONS:
            self._reply_now(api_key, version, correlation_id, self._api_versions(version))
            return
        if api_key in KCOORD_VERSIONS:
            lo, hi = KCOORD_VERSIONS[api_key]
            if not lo <= version <= hi:
                raise UnsupportedApi(f"unsupported api {api_key} v{version}: kcoord serves v{lo}-{hi}")
            if api_key in _STEPPED_REQUESTS and len(payload) > DECODE_IN_STEPS_FRAMES_ABOVE:
                stepped = stepped_request(payload, api_key, version, DECODE_IN_STEPS_ABOVE)
                if stepped is not None:
                    self._decode_in_steps(stepped, payload, api_key, version, correlation_id)
                    return
            client_id, request = frames.decode_request_body(payload, api_key, version)
            ctx = RequestContext(version, client_id or "", self.conn.client_host, correlation_id)
            if api_key in GROUP_APIS:
                if (
                    isinstance(request, m.TxnOffsetCommitRequest)
                    and version >= TXN_OFFSET_COMMIT_ADDS_GROUP_SINCE
                ):
                    self._txn_offset_commit_adding_the_group(ctx, request)
                else:
                    self._serve_group(api_key, ctx, request)
            elif isinstance(request, m.FindCoordinatorRequest):
                self._find_coordinator(payload, ctx, request)
            elif isinstance(request, m.AddOffsetsToTxnRequest):
                self._add_offsets_to_txn(ctx, request)
            return
        if not self.app.cluster.supports(api_key, version):
            # As Kafka does for an API version it cannot parse.
            raise UnsupportedApi(
                f"unsupported api {api_key} v{version}: served neither by kcoord nor upstream"
            )
        relay = self.relay
        if api_key in GUARDED_APIS:
            refusal = guard.check(api_key, version, payload, self.app.protected_topics)
            if refusal is not None:
                self._refuse(refusal, correlation_id)
                return
        if api_key == ApiKey.FETCH:
            relay.fetch(payload, version)
        elif api_key == ApiKey.METADATA:
            relay.metadata(payload, version, correlation_id)
        elif api_key == ApiKey.LIST_OFFSETS:
            relay.list_offsets(payload, version)
        elif api_key == ApiKey.DESCRIBE_CLUSTER:
            relay.describe_cluster(payload, version)
        elif api_key == END_TXN:
            relay.forward_observed(payload, self._end_txn_observer(payload, version))
        elif api_key == CREATE_TOPICS and version >= CREATE_TOPICS_WITH_IDS_SINCE:
            relay.forward_observed(payload, lambda raw: self._learn_created_topics(raw, version))
        else:
            relay.forward(payload)

    # -- kcoord's own topics and group: refused ------------------------------------------------------
    def _refuse(self, refusal: guard.Refusal, correlation_id: int) -> None:
        """A relayed request naming kcoord's internal topics: those parts answered with Kafka's
        authorization error, the rest relayed and the two answers merged (relay/guard.py)."""
        self._refused(refusal.api_name, refusal.resources)
        api_key, version = refusal.api_key, refusal.version
        if not refusal.answered:
            # An acks=0 Produce: Kafka writes what it may, then closes the connection, the only
            # way to tell a client that expects no answer that some of its records were refused.
            if refusal.forward is not None:
                self.relay.produce(refusal.forward, version)  # reads the rewritten request's acks
            self.conn.close_with(f"acks=0 Produce to kcoord's internal topic {', '.join(refusal.resources)}")
            return
        if refusal.forward is None:
            response = refusal.answer(None)
            slot = self.conn.new_slot()
            self.app.metrics.response_sent(api_key, version, response)
            self.conn.fill(slot, relay_messages.encode_response(correlation_id, response, version))
            return
        cluster = self.app.cluster
        rewrite_endpoints = api_key == ApiKey.PRODUCE and version >= NODE_ENDPOINTS_SINCE[ApiKey.PRODUCE]

        async def merged(raw: bytes) -> bytes:
            upstream_correlation_id, upstream = storage_messages.decode_response(
                refusal.response_cls, version, raw
            )
            if rewrite_endpoints and getattr(upstream, "node_endpoints", None):
                upstream = await rewrite_node_endpoints(cluster, upstream)
            return relay_messages.encode_response(upstream_correlation_id, refusal.answer(upstream), version)

        self.relay.forward_amended(refusal.forward, merged)

    def _refuse_transactional_id(self, api_key: int, ctx: RequestContext, request: Any) -> bool:
        """AddOffsetsToTxn and TxnOffsetCommit (answered here) under a shard's own transactional id
        are answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka answers a transactional id the
        client may not use: kcoord's storage would otherwise act on its own shard's transaction."""
        transactional_id = request.transactional_id
        if not self.app.protected_topics.owns_transactional_id(transactional_id):
            return False
        self._refused(group_guard.API_NAMES[api_key], (transactional_id,))
        answer = error_response(
            api_key, ctx.api_version, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
        self._reply_now(api_key, ctx.api_version, ctx.correlation_id, (ctx.api_version, answer))
        return True

    def _refused(self, api_name: str, resources: tuple[str, ...]) -> None:
        """Count a refusal; log it once per connection and API (a client retrying in a loop
        would otherwise fill the log)."""
        metrics = self.app.metrics
        for resource in resources:
            metrics.relay_refused(api_name, resource)
        logged = self._refusals_logged
        if logged is None:
            logged = self._refusals_logged = set()
        if api_name in logged:
            return
        logged.add(api_name)
        log.warning(
            "%s: refused %s on %s: kcoord's internal topics and cluster group are kcoord's alone "
            "(logged once per connection and API)",
            self.conn.peer,
            api_name,
            ", ".join(dict.fromkeys(resources)),
        )

    # -- authorized by the upstream's ACLs ----------------------------------------------------------
    def _with_authorization(
        self,
        api_key: int,
        version: int,
        request: Message,
        merge: Merge | None,
        denied_groups: frozenset[str] | None = None,
    ) -> tuple[Message | None, Merge | None]:
        """``(the request left to serve or None, how its answer is completed)`` under the
        upstream's ACLs (group_authz.py), on top of ``merge`` (the cluster group's refusal)."""
        authorization = self.app.authorization
        rules = authorization.rules
        denial: group_authz.Denial | None
        if authorization.allow_all:  # asked only to fill authorized_operations: everything is allowed
            denial = group_authz.check(api_key, version, request, _allow_everything, self._topic_name)
        elif rules is None:  # the ACLs are not known (yet): fail closed, retriably (acl_source.py)
            unavailable = error_response(api_key, version, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            denial = group_authz.Denial(api_key, None, lambda _served: unavailable)
        else:
            allowed = self._allowed(rules)
            denial = group_authz.check(api_key, version, request, allowed, self._topic_name, denied_groups)
            if denial is not None and denial.denied:
                conn = self.conn
                self.app.denial_log.denied(conn.principal, conn.ip, denial.api_name, denial.denied)
        if denial is None:
            return request, merge
        if merge is None:
            return denial.rest, denial.answer
        outer, inner = merge, denial.answer
        return denial.rest, lambda served: outer(inner(served))

    def _decision_warmup(self, api_key: int, request: Message) -> DecisionWarmup | None:
        """The authorization decisions a large multi-group request will need, to be made in steps
        before it is served (decision_warmup.py); None when the ACLs are not enforced."""
        authorization = self.app.authorization
        rules = authorization.rules
        operation = group_authz.MULTI_GROUP_OPERATION.get(api_key)
        if authorization.allow_all or rules is None or operation is None:
            return None
        others = (
            group_authz.GROUP_OPERATIONS if getattr(request, "include_authorized_operations", False) else ()
        )
        allowed = self._allowed(rules)
        return DecisionWarmup(allowed, operation, others, group_guard.named_groups(api_key, request))

    def _allowed(self, rules: AclRules) -> group_authz.Allowed:
        """The decision function of this connection's principal under ``rules`` (kept)."""
        conn = self.conn
        principal = conn.principal
        decider = self._decider
        if decider is None or decider[0] is not rules or decider[1] != principal:
            decider = self._decider = (rules, principal, rules.decider(principal, conn.ip), self._topic_name)
        return decider[2]

    def _topic_describable(self, allowed: group_authz.Allowed) -> Callable[[str], bool]:
        """Whether the connection's principal may DESCRIBE a topic: what a KIP-848 regular
        expression resolved for its heartbeat keeps (one predicate per decider, not per request)."""
        known = self._describable
        if known is not None and known[0] is allowed:
            return known[1]

        def describable(topic: str) -> bool:
            return allowed(group_authz.DESCRIBE, group_authz.TOPIC, topic)

        self._describable = (allowed, describable)
        return describable

    def _topic_name(self, topic: Any) -> str | None:
        """A request's (or answer's) topic entry's name; by its id where it has none (v10)."""
        name: str | None = topic.name
        if name:
            return name
        return self.app.cluster.topics.names.get(getattr(topic, "topic_id", None))  # type: ignore[arg-type]

    # -- answered here ------------------------------------------------------------------------------
    def _reply_now(self, api_key: int, version: int, correlation_id: int, answer: tuple[int, Any]) -> None:
        slot = self.conn.new_slot()
        resp_version, response = answer
        self.app.metrics.response_sent(api_key, resp_version, response)
        self.conn.fill(slot, frames.encode_response(api_key, resp_version, correlation_id, response))

    def _api_versions(self, version: int) -> tuple[int, Any]:
        cluster = self.app.cluster
        sasl = self.conn.listener.sasl
        if version > KCOORD_VERSIONS[ApiKey.API_VERSIONS][1]:
            # Kafka answers an ApiVersions it cannot parse with a v0 body: error 35 and its ranges.
            return 0, cluster.api_versions_response(ErrorCode.UNSUPPORTED_VERSION, sasl=sasl)
        return version, cluster.api_versions_response(sasl=sasl)

    def _find_coordinator(
        self, payload: bytes, ctx: RequestContext, request: m.FindCoordinatorRequest
    ) -> None:
        version = ctx.api_version
        key_type = request.key_type
        response: Message
        if key_type == 0:
            refusal = group_guard.check(ApiKey.FIND_COORDINATOR, version, request, self.app.cluster_group)
            rest: Message | None = request
            merge: Merge | None = None
            if refusal is not None:
                self._refused(refusal.api_name, (self.app.cluster_group,))
                rest, merge = refusal.rest, refusal.answer
            if rest is not None and not self.app.authorization.allow_all:
                rest, merge = self._with_authorization(ApiKey.FIND_COORDINATOR, version, rest, merge)
            served: Message | None = None
            if rest is not None:
                assert isinstance(rest, m.FindCoordinatorRequest)
                served = self.app.cluster.group_coordinator_response(rest, version)
            assert served is not None or merge is not None
            response = merge(served) if merge is not None else served  # type: ignore[assignment]
        elif key_type == 1:
            self.relay.find_transaction_coordinator(payload, version)
            return
        else:
            response = error_response(ApiKey.FIND_COORDINATOR, version, request, ErrorCode.INVALID_REQUEST)
        self._reply_now(ApiKey.FIND_COORDINATOR, version, ctx.correlation_id, (version, response))

    # -- to the shards ------------------------------------------------------------------------------
    def _serve_group(
        self,
        api_key: int,
        ctx: RequestContext,
        request: Message,
        may_name_cluster_group: bool = True,
        denied_groups: frozenset[str] | None = None,
    ) -> None:
        """``denied_groups``: the groups of a multi-group request its operation is denied on, when
        decided already (decision_warmup.py)."""
        conn = self.conn
        if api_key == ApiKey.LIST_GROUPS and not conn.listener.is_coordinator:
            # kcoord's coordinator node is in the metadata; admin clients ask every node for its
            # groups, so broker ports answer with none to keep each group listed exactly once.
            self._reply_now(
                api_key, ctx.api_version, ctx.correlation_id, (ctx.api_version, m.ListGroupsResponse())
            )
            return
        if api_key == ApiKey.TXN_OFFSET_COMMIT and self._refuse_transactional_id(api_key, ctx, request):
            return
        cluster_group = self.app.cluster_group
        if not may_name_cluster_group or (
            api_key in SINGLE_GROUP_APIS and request.group_id != cluster_group  # type: ignore[attr-defined]
        ):
            refusal = None  # the hot path (heartbeats, commits): one comparison, no call
        else:
            refusal = group_guard.check(api_key, ctx.api_version, request, cluster_group)
        merge: Merge | None = None
        if refusal is not None:
            self._refused(refusal.api_name, (cluster_group,))
            if refusal.rest is None:
                answer = refusal.answer(None)
                self._reply_now(api_key, ctx.api_version, ctx.correlation_id, (ctx.api_version, answer))
                return
            request = refusal.rest
            merge = refusal.answer
        if not self.app.authorization.allow_all or getattr(request, "include_authorized_operations", False):
            rest, merge = self._with_authorization(api_key, ctx.api_version, request, merge, denied_groups)
            if rest is None:
                assert merge is not None
                answer = merge(None)
                self._reply_now(api_key, ctx.api_version, ctx.correlation_id, (ctx.api_version, answer))
                return
            request = rest
            decider = self._decider
            if (
                api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT
                and decider is not None
                and decider[0] is self.app.authorization.rules
                and not self.app.authorization.allow_all
            ):
                ctx.topic_describable = self._topic_describable(decider[2])
        slot = conn.new_slot()
        version = ctx.api_version
        correlation_id = ctx.correlation_id
        metrics = self.app.metrics

        def reply(response: Any) -> None:
            # Runs inside the shard's write path (often before route() returns): never raise.
            if conn.closed:
                conn.fill(slot, b"")  # nobody to answer, but the request's cost is given back
                return
            try:
                if merge is not None:
                    response = merge(response)
                metrics.response_sent(api_key, version, response)
                field = _ANSWER_ARRAYS.get(api_key)
                if (
                    field is not None
                    and len(getattr(response, field, None) or ()) > STEP_ANSWERS_ABOVE
                    and steppable(response, version, field)
                ):
                    self._encode_in_steps(
                        slot, SteppedResponse(api_key, version, correlation_id, response, field)
                    )
                    return
                data = frames.encode_response(api_key, version, correlation_id, response)
            except Exception as exc:
                log.exception("%s: cannot encode the response to api=%d v%d", conn.peer, api_key, version)
                conn.fail(slot, f"cannot encode a response: {exc!r}")
                return
            conn.fill(slot, data)

        self._groups.route(api_key, ctx, request, reply)

    def _decode_in_steps(
        self, stepped: SteppedRequest, payload: bytes, api_key: int, version: int, correlation_id: int
    ) -> None:
        """Decode a large group request a step per loop iteration (the App's loop steps), then
        serve it; the connection's later frames wait for it, so answers keep request order."""
        conn = self.conn
        deferred = conn.defer_dispatch()
        # A frame that does not hold the cluster group's id cannot name it: searching the bytes
        # (~20 us for 320 KB) spares group_guard a pass over 20,000 objects (~1 ms, cold in cache).
        may_name_cluster_group = self.app.cluster_group.encode() in payload

        decoded: list[Message] = []  # the request, once decoded (SteppedRequest.message is one-shot)

        denied: list[frozenset[str]] = []  # the groups the warm-up found denied, if it ran

        def serve() -> None:
            ctx = RequestContext(version, stepped.client_id or "", conn.client_host, correlation_id)
            self._serve_group(
                api_key, ctx, decoded.pop(), may_name_cluster_group, denied[0] if denied else None
            )

        def served(failed: Exception | None) -> None:
            if failed is None:
                conn.resume_dispatch(deferred, serve)
            else:
                conn.resume_dispatch(deferred, None, failed)

        def finished(failed: Exception | None) -> None:
            if failed is not None or conn.closed:
                served(failed)
                return
            try:
                decoded.append(stepped.message())
            except CodecError as exc:  # the rest of the frame is malformed: as a failed step
                served(exc)
                return
            warmup = self._decision_warmup(api_key, decoded[0])
            if warmup is None:
                served(None)
                return
            rules = self.app.authorization.rules

            def warmed(failed: Exception | None) -> None:
                if failed is None and self.app.authorization.rules is rules:  # else: decided anew
                    denied.append(frozenset(warmup.denied))
                served(failed)

            self.app.loop_steps.submit(warmup, DECISIONS_PER_STEP, lambda: conn.closed, warmed)

        self.app.loop_steps.submit(stepped, DECODE_ENTRIES_PER_STEP, lambda: conn.closed, finished)

    def _encode_in_steps(self, slot: Slot, encoding: SteppedResponse) -> None:
        """Encode a large answer a step per loop iteration (the App's loop steps), then fill its
        slot; dropped unencoded if the client leaves first."""
        conn = self.conn
        api_key, version = slot.api_key, encoding.version

        def finished(failed: Exception | None) -> None:
            if conn.closed:
                conn.fill(slot, b"")  # nobody to answer, but the request's cost is given back
                return
            try:
                if failed is not None:
                    raise failed
                parts = encoding.frame_parts()  # written as they are (writev), not joined
            except Exception as exc:
                log.error(
                    "%s: cannot encode the response to api=%d v%d: %r", conn.peer, api_key, version, exc
                )
                conn.fail(slot, f"cannot encode a response: {exc!r}")
                return
            conn.fill(slot, parts[0], parts[1:])

        self.app.loop_steps.submit(encoding, ENCODE_ENTRIES_PER_STEP, lambda: conn.closed, finished)

    def _txn_offset_commit_adding_the_group(
        self, ctx: RequestContext, request: m.TxnOffsetCommitRequest
    ) -> None:
        """TxnOffsetCommit v5+ (KIP-890): the request also does AddOffsetsToTxn's work, no
        AddOffsetsToTxn comes before it. kcoord adds the group's shard partition to the transaction
        as its AddOffsetsToTxn does (coordinator/runtime/transactions.py), then serves the commit;
        when the add is refused, its error is the answer on every partition. The connection's
        later frames wait meanwhile, so answers keep request order."""
        api_key, version = ApiKey.TXN_OFFSET_COMMIT, ctx.api_version
        if self._refuse_transactional_id(api_key, ctx, request):
            return
        if request.group_id == self.app.cluster_group:  # refused there; joins no transaction
            self._serve_group(api_key, ctx, request)
            return
        add = m.AddOffsetsToTxnRequest(
            transactional_id=request.transactional_id, producer_id=request.producer_id,
            producer_epoch=request.producer_epoch, group_id=request.group_id,
        )  # fmt: skip
        add_ctx = RequestContext(
            KCOORD_VERSIONS[ApiKey.ADD_OFFSETS_TO_TXN][1], ctx.client_id, ctx.client_host, ctx.correlation_id
        )
        if not self.app.authorization.allow_all:
            # Authorized before anything joins the transaction, as AddOffsetsToTxn is (WRITE on the
            # transactional id, READ on the group); the commit's topics are checked when it is served.
            rest, merge = self._with_authorization(ApiKey.ADD_OFFSETS_TO_TXN, add_ctx.api_version, add, None)
            if rest is None:
                assert merge is not None
                refused: int = merge(None).error_code  # type: ignore[attr-defined]
                answer = error_response(api_key, version, request, refused)
                self._reply_now(api_key, version, ctx.correlation_id, (version, answer))
                return
        conn = self.conn
        deferred = conn.defer_dispatch()

        def refuse(error: int) -> None:
            answer = error_response(api_key, version, request, error)
            self._reply_now(api_key, version, ctx.correlation_id, (version, answer))

        def added(task: asyncio.Future[Message]) -> None:
            if task.cancelled() or task.exception() is not None:
                log.error(
                    "%s: adding group %s to a transaction for TxnOffsetCommit v%d failed: %r",
                    conn.peer, request.group_id, version, None if task.cancelled() else task.exception(),
                )  # fmt: skip
                error: int = ErrorCode.UNKNOWN_SERVER_ERROR
            else:
                error = task.result().error_code  # type: ignore[attr-defined]
            if error == ErrorCode.NONE:
                conn.resume_dispatch(deferred, lambda: self._serve_group(api_key, ctx, request))
            else:
                conn.resume_dispatch(deferred, lambda: refuse(error))

        asyncio.ensure_future(self.app.transactions.add_offsets_to_txn(add_ctx, add)).add_done_callback(added)

    def _add_offsets_to_txn(self, ctx: RequestContext, request: m.AddOffsetsToTxnRequest) -> None:
        """Answered by kcoord, not relayed: the group's shard partition joins the client's
        transaction (coordinator/runtime/transactions.py)."""
        conn = self.conn
        api_key, version, correlation_id = ApiKey.ADD_OFFSETS_TO_TXN, ctx.api_version, ctx.correlation_id
        if self._refuse_transactional_id(api_key, ctx, request):
            return
        refusal = group_guard.check(api_key, version, request, self.app.cluster_group)
        if refusal is not None:  # the cluster group's offsets partition joins no transaction
            self._refused(refusal.api_name, (self.app.cluster_group,))
            self._reply_now(api_key, version, correlation_id, (version, refusal.answer(None)))
            return
        if not self.app.authorization.allow_all:
            rest, merge = self._with_authorization(api_key, version, request, None)
            if rest is None:  # AddOffsetsToTxn names one group: refused whole or not at all
                assert merge is not None
                self._reply_now(api_key, version, correlation_id, (version, merge(None)))
                return
        slot = conn.new_slot()

        def done(task: asyncio.Future[Message]) -> None:
            if conn.closed:
                conn.fill(slot, b"")  # gives the request's cost back
                return
            if task.cancelled() or task.exception() is not None:
                log.error(
                    "%s: AddOffsetsToTxn failed: %r",
                    conn.peer,
                    None if task.cancelled() else task.exception(),
                )
                response = error_response(api_key, version, request, ErrorCode.UNKNOWN_SERVER_ERROR)
            else:
                response = task.result()
            self.app.metrics.response_sent(api_key, version, response)
            conn.fill(slot, frames.encode_response(api_key, version, correlation_id, response))

        asyncio.ensure_future(self.app.transactions.add_offsets_to_txn(ctx, request)).add_done_callback(done)

    # -- relayed, and watched -----------------------------------------------------------------------
    def _end_txn_observer(self, payload: bytes, version: int) -> Callable[[bytes], None] | None:
        """What watches a relayed EndTxn: once the upstream answers NONE, the shards holding the
        producer's transaction open expect its marker (coordinator/runtime/transactions.py), before
        the client reads the answer and can start its next transaction."""
        peer = self.conn.peer
        try:
            header = frames.parse_request_header(payload, flexible=version >= END_TXN_FLEXIBLE_SINCE)
            request = storage_messages.EndTxnRequest.decode_from(payload, header.size, version)[0]
        except Exception as exc:  # relayed as it came; the upstream judges it
            log.warning(
                "%s: an EndTxn v%d request kcoord cannot read (%r); relayed as is", peer, version, exc
            )
            return None
        producer_id = request.producer_id
        app = self.app

        def observe(raw: bytes) -> None:  # runs as a future's callback: never raise
            try:
                _, response = storage_messages.decode_response(storage_messages.EndTxnResponse, version, raw)
                if response.error_code == ErrorCode.NONE:
                    app.transactions.transaction_ended(producer_id)
            except Exception as exc:
                log.warning(
                    "%s: an EndTxn v%d answer kcoord cannot read (%r); relayed as is", peer, version, exc
                )

        return observe

    def _learn_created_topics(self, raw: bytes, version: int) -> None:
        """What a relayed CreateTopics answer says was created goes to the topic catalog before the
        client reads it (the answer itself is relayed as it came)."""
        try:
            _, response = storage_messages.decode_response(CreateTopicsResponse, version, raw)
        except Exception as exc:  # runs as a future's callback: never raise; the answer is relayed anyway
            log.warning(
                "%s: a CreateTopics v%d answer kcoord cannot read (%r); relayed as is",
                self.conn.peer,
                version,
                exc,
            )
            return
        self.app.cluster.topics.learn_created(
            (t.name, t.topic_id, t.num_partitions) for t in response.topics if t.error_code == ErrorCode.NONE
        )
