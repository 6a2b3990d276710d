"""Prometheus metrics, one :class:`CollectorRegistry` per App (tests run several Apps in a process).

Label values stay bounded: API names, versions, Kafka error names, a fixed vocabulary of reasons
(:mod:`kcoord.coordinator.core.events`), group states and a few protocol types — never group or member ids.
Hooks are called from the event loop only; the hot ones cache their labelled children so a
request costs a dict lookup and an increment, not a label resolution.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from itertools import accumulate
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from kcoord.coordinator.core.events import FENCING_ERRORS, GROUP_TYPES, LEAVE_REASONS, REBALANCE_REASONS
from kcoord.protocol.api_names import API_NAMES
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.schema import snake_case

# Pass-through APIs are labelled by Kafka's name for them too (create_topics, not api_19); kcoord's
# own ApiKey names win where both exist (they agree: tests/unit/test_api_names.py).
_API_NAMES = {
    **{key: snake_case(name) for key, name in API_NAMES.items()},
    **{k.value: k.name.lower() for k in ApiKey},
}
# kcoord owns its process: the *_created series only double every counter in the exposition.
# (prometheus_client leaves this one function unannotated.)
disable_created_metrics()  # type: ignore[no-untyped-call]
_FENCING = frozenset(getattr(ErrorCode, n) for n in FENCING_ERRORS if hasattr(ErrorCode, n))
_COMMIT_APIS = frozenset((int(ApiKey.OFFSET_COMMIT), int(ApiKey.TXN_OFFSET_COMMIT)))
_LEAVE_GROUP = int(ApiKey.LEAVE_GROUP)
# Protocol types are chosen by clients; the label keeps the well-known ones and folds the rest.
KNOWN_PROTOCOL_TYPES = frozenset({"consumer", "connect", "sr"})
# Why kcoord closed a connection on its own: connections.max.idle.ms, request.receive.timeout.ms,
# max.connections(.per.ip), connection.output.max.bytes.
CLOSE_REASONS = ("idle", "slow_frame", "limit", "output_cap")
# The mechanism label's values: the ones Kafka ships; a client may ask for any name, so the rest is "other".
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")
# Why a TLS handshake on a listener failed: refused by TLS, the client hung up or reset midway,
# not finished within ssl.handshake.timeout.ms, or a plaintext client on the TLS port.
TLS_FAILURE_REASONS = ("handshake", "aborted", "timeout", "plaintext")
LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    300,
)


def api_name(api_key: int) -> str:
    return _API_NAMES.get(api_key, f"api_{api_key}" if 0 <= api_key < 200 else "unknown")


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error_{code}" if -1 <= code < 200 else "unknown"


def protocol_type_label(protocol_type: str | None) -> str:
    if not protocol_type:
        return "none"
    return protocol_type if protocol_type in KNOWN_PROTOCOL_TYPES else "other"


def _bounded(value: str, vocabulary: Iterable[str]) -> str:
    return value if value in vocabulary else "other"


def _leave_member_errors(response: Message) -> Iterator[int]:
    """The per-member error codes of a LeaveGroup response (v3+ batches members)."""
    for member in getattr(response, "members", None) or ():
        yield member.error_code


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        # process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds, ... under the
        # names every Prometheus client library uses, read from /proc at scrape time (nothing on
        # other systems, where /proc is missing).
        ProcessCollector(registry=r)
        self.log_lost_total = 0  # shards that lost their log since start (also a labelled counter below)
        # The per-request series (requests, responses, request latency, committed partitions) are
        # plain tallies exported by RequestTallyCollector at scrape time: prometheus_client's
        # labelled children take a lock and several calls per increment, which was a tenth of a
        # heartbeat's CPU. These hooks run on the event loop only, so plain ints are safe.
        self.tally = RequestTally()
        # The tallies themselves, one attribute load each on the hot path.
        self._requests = self.tally.requests
        self._responses = self.tally.responses
        self._commits = self.tally.commits
        self._latency = self.tally.latency
        r.register(RequestTallyCollector(self.tally))
        self.fenced = Counter(
            "kcoord_fenced_requests",
            "Requests refused because the member is fenced, by API and error",
            ["api", "reason"],
            registry=r,
        )
        # connections and the gateway
        self.connections = Gauge("kcoord_connections", "Open client connections", registry=r)
        self.connections_total = Counter(
            "kcoord_connections_accepted", "Client connections accepted", registry=r
        )
        # Relayed bytes, [out, in]: a relay adds to the list per frame (no labels() or lock), and
        # RequestTallyCollector exports it as kcoord_upstream_bytes_total.
        self.upstream_byte_counts = self.tally.upstream_bytes
        self.upstream_errors = Counter(
            "kcoord_upstream_errors", "Pass-through requests that failed", registry=r
        )
        self._relay_refused = Counter(
            "kcoord_relay_refused",
            "Requests (or their parts) refused because they would write, delete or alter kcoord's "
            "internal topics or act on its cluster group, by API and resource",
            ["api", "resource"],
            registry=r,
        )
        self._authorization_denials = Counter(
            "kcoord_authorization_denials",
            "Requests (or their parts) to kcoord's own group APIs the upstream's ACLs refuse, by API",
            ["api"],
            registry=r,
        )
        closed = Counter(
            "kcoord_connections_closed",
            "Client connections closed by a limit, by reason",
            ["reason"],
            registry=r,
        )
        self._closed_by = {reason: closed.labels(reason) for reason in CLOSE_REASONS}
        # authentication on the listeners
        self._sasl_authentications = Counter(
            "kcoord_sasl_authentications",
            "SASL logins (and re-authentications) the upstream accepted, by mechanism",
            ["mechanism"],
            registry=r,
        )
        self._sasl_failures = Counter(
            "kcoord_sasl_authentication_failures",
            "SASL logins that failed (wrong credentials, unreadable tokens, refused mechanisms), by mechanism",
            ["mechanism"],
            registry=r,
        )
        tls_failures = Counter(
            "kcoord_tls_handshake_failures",
            "TLS handshakes on the listeners that failed, by reason (handshake, aborted, timeout, plaintext)",
            ["reason"],
            registry=r,
        )
        self._tls_failed = {reason: tls_failures.labels(reason) for reason in TLS_FAILURE_REASONS}
        # storage and shards
        self.append_latency = Histogram(
            "kcoord_storage_append_seconds",
            "Latency of shard log appends",
            registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )
        self.append_batch = Histogram(
            "kcoord_storage_append_batch_records",
            "Records per shard log append",
            registry=r,
            buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000),
        )
        self.shard_load_seconds = Histogram(
            "kcoord_shard_load_seconds",
            "Time to load a shard from its log",
            registry=r,
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60),
        )
        self.shard_load_records = Counter(
            "kcoord_shard_loaded_records",
            "Live records replayed while loading (after compaction)",
            registry=r,
        )
        self.shard_load_records_read = Counter(
            "kcoord_shard_load_read_records",
            "Records fetched from the log while loading (before compaction)",
            registry=r,
        )
        self.shard_log_lost = Counter(
            "kcoord_shard_log_lost",
            "Shards that stopped serving because their log was lost: fenced by another kcoord, or the topic "
            "deleted, re-created or truncated upstream",
            ["reason"],
            registry=r,
        )
        # group lifecycle (from kcoord.coordinator.core.events)
        rebalance_buckets = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
        self.rebalances = Counter(
            "kcoord_rebalances",
            "Rebalances started (consumer protocol: group epoch bumps), by reason and protocol",
            ["reason", "protocol"],
            registry=r,
        )
        self.rebalance_duration = Histogram(
            "kcoord_rebalance_duration_seconds",
            "Classic protocol: from PreparingRebalance to Stable; consumer protocol: from a group epoch "
            "bump to its target assignment computed",
            ["protocol"],
            registry=r,
            buckets=rebalance_buckets,
        )
        self.reconciliation_duration = Histogram(
            "kcoord_consumer_group_reconciliation_seconds",
            "KIP-848 consumer groups: from a group epoch bump until every member reports the target "
            "assignment of the group epoch",
            registry=r,
            buckets=rebalance_buckets,
        )
        self.member_joins = Counter(
            "kcoord_member_joins", "Members added to a group, by kind (static/dynamic)", ["kind"], registry=r
        )
        self.member_removals = Counter(
            "kcoord_member_removals",
            "Members removed from a group, by reason (left/expired/fenced/...)",
            ["reason"],
            registry=r,
        )
        self.groups_deleted = Counter(
            "kcoord_groups_deleted", "Groups deleted, by reason", ["reason"], registry=r
        )

    # -- connection hooks ---------------------------------------------------------------------------
    def relay_refused(self, api: str, resource: str) -> None:
        self._relay_refused.labels(api, resource).inc()

    def authorization_denied(self, api: str, count: int = 1) -> None:
        self._authorization_denials.labels(api).inc(count)

    # Every request pays these three: one tally update each (defaultdicts, no get-then-set), the
    # nested per-partition walk only for commits and leaves, labels only at scrape time.
    def request_received(self, api_key: int, version: int) -> None:
        self._requests[(api_key, version)] += 1

    def response_sent(self, api_key: int, version: int, response: Message) -> None:
        code = getattr(response, "error_code", 0)
        if not isinstance(code, int):
            code = 0
        self._responses[(api_key, version, code)] += 1
        fenced = code if code in _FENCING else 0
        if api_key in _COMMIT_APIS:
            commits = self._commits
            for topic in getattr(response, "topics", None) or ():
                for partition in topic.partitions:
                    partition_code = partition.error_code
                    commits[(api_key, partition_code)] += 1
                    if partition_code and not fenced and partition_code in _FENCING:
                        fenced = partition_code
        elif api_key == _LEAVE_GROUP and not fenced:
            fenced = next((c for c in _leave_member_errors(response) if c in _FENCING), 0)
        if fenced:
            self.fenced.labels(api_name(api_key), error_name(fenced)).inc()

    def request_done(self, api_key: int, seconds: float) -> None:
        latency = self._latency.get(api_key)
        if latency is None:
            latency = self._latency[api_key] = [0.0] + [0] * (len(LATENCY_BUCKETS) + 1)
        latency[0] += seconds
        latency[1 + bisect_left(LATENCY_BUCKETS, seconds)] += 1

    def upstream_error(self) -> None:
        self.upstream_errors.inc()

    def connection_limited(self, reason: str) -> None:
        """A connection closed (or refused) by a limit; ``reason`` is one of :data:`CLOSE_REASONS`."""
        self._closed_by[reason].inc()

    def sasl_authentication(self, mechanism: str, succeeded: bool) -> None:
        counter = self._sasl_authentications if succeeded else self._sasl_failures
        counter.labels(_bounded(mechanism, SASL_MECHANISMS)).inc()

    def tls_handshake_failed(self, reason: str) -> None:
        """``reason``: one of :data:`TLS_FAILURE_REASONS`."""
        self._tls_failed[reason].inc()

    def watch_buffers(
        self, output: Callable[[], int], partial_frames: Callable[[], int], inflight: Callable[[], int]
    ) -> None:
        """Register the scrape-time gauge of bytes held for connections (once per App)."""
        self.registry.register(BufferCollector(output, partial_frames, inflight))

    # -- shard hooks (ShardObserver) ----------------------------------------------------------------
    def append_done(self, shard: int, records: int, seconds: float) -> None:
        self.append_latency.observe(seconds)
        self.append_batch.observe(records)

    def shard_loaded(self, shard: int, records: int, seconds: float, records_read: int) -> None:
        self.shard_load_seconds.observe(seconds)
        self.shard_load_records.inc(records)
        self.shard_load_records_read.inc(records_read)

    def shard_lost(self, shard: int, fenced: bool, reason: str) -> None:
        self.shard_log_lost.labels("fenced" if fenced else "log_lost").inc()
        self.log_lost_total += 1

    # -- group lifecycle ------------------------------------------------------------------------------
    def rebalance_started(self, reason: str, group_type: str = "classic") -> None:
        self.rebalances.labels(_bounded(reason, REBALANCE_REASONS), _bounded(group_type, GROUP_TYPES)).inc()

    def rebalance_completed(self, seconds: float, group_type: str = "classic") -> None:
        self.rebalance_duration.labels(_bounded(group_type, GROUP_TYPES)).observe(seconds)

    def reconciliation_completed(self, seconds: float) -> None:
        self.reconciliation_duration.observe(seconds)

    def member_joined(self, static: bool) -> None:
        self.member_joins.labels("static" if static else "dynamic").inc()

    def member_removed(self, reason: str) -> None:
        self.member_removals.labels(_bounded(reason, (*LEAVE_REASONS, "expired", "fenced"))).inc()

    def group_deleted(self, reason: str) -> None:
        self.groups_deleted.labels(_bounded(reason, ("delete_groups", "offsets_expired"))).inc()

    def watch_shards(self, shards: Callable[[], list[Any]], expected: Callable[[], int]) -> None:
        """Register the scrape-time collector of group and shard gauges (once per App)."""
        self.registry.register(GroupStateCollector(shards, expected))


class RequestTally:
    """Plain counts behind the per-request series, keyed by the raw ints (names at scrape time)."""

    __slots__ = ("requests", "responses", "commits", "latency", "upstream_bytes")

    def __init__(self) -> None:
        self.requests: defaultdict[tuple[int, int], int] = defaultdict(int)  # (api key, version)
        self.responses: defaultdict[tuple[int, int, int], int] = defaultdict(
            int
        )  # (api key, version, error code)
        self.commits: defaultdict[tuple[int, int], int] = defaultdict(int)  # (api key, partition error code)
        # api key -> [sum of seconds, count per bucket..., count above the last bucket]
        self.latency: dict[int, list[Any]] = {}
        self.upstream_bytes = [0, 0]  # relayed to (out) and from (in) the brokers: a list a relay adds to


class RequestTallyCollector(Collector):
    """Exports a :class:`RequestTally` as the counters and histogram Prometheus expects."""

    def __init__(self, tally: RequestTally) -> None:
        self._tally = tally

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        t = self._tally
        requests = CounterMetricFamily(
            "kcoord_requests", "Requests received, by API and version", labels=["api", "version"]
        )
        for (api_key, version), n in sorted(t.requests.items()):
            requests.add_metric([api_name(api_key), str(version)], n)
        responses = CounterMetricFamily(
            "kcoord_responses",
            "Responses kcoord answered itself, by API, version and top-level error",
            labels=["api", "version", "error"],
        )
        for (api_key, version, code), n in sorted(t.responses.items()):
            responses.add_metric([api_name(api_key), str(version), error_name(code)], n)
        commits = CounterMetricFamily(
            "kcoord_offset_commits",
            "Partition offsets in OffsetCommit/TxnOffsetCommit responses, by API and result",
            labels=["api", "result"],
        )
        for (api_key, code), n in sorted(t.commits.items()):
            commits.add_metric([api_name(api_key), error_name(code)], n)
        latency = HistogramMetricFamily(
            "kcoord_request_latency_seconds",
            "From a request frame received to its response written (pass-through included), by API",
            labels=["api"],
        )
        bounds = [*(str(float(b)) for b in LATENCY_BUCKETS), "+Inf"]
        for api_key, (seconds, *counts) in sorted(t.latency.items()):
            cumulative = list(accumulate(counts))
            latency.add_metric([api_name(api_key)], list(zip(bounds, cumulative, strict=True)), seconds)
        relayed = CounterMetricFamily(
            "kcoord_upstream_bytes",
            "Bytes passed to (out) and from (in) upstream brokers",
            labels=["direction"],
        )
        relayed.add_metric(["out"], t.upstream_bytes[0])
        relayed.add_metric(["in"], t.upstream_bytes[1])
        yield requests
        yield responses
        yield commits
        yield latency
        yield relayed


class BufferCollector(Collector):
    """Bytes held for client connections now: responses not yet sent, and the memory reserved by
    large requests being received, and the estimated memory of requests in flight (read at scrape
    time from the App's accounting)."""

    def __init__(
        self, output: Callable[[], int], partial_frames: Callable[[], int], inflight: Callable[[], int]
    ) -> None:
        self._output = output
        self._partial_frames = partial_frames
        self._inflight = inflight

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        held = GaugeMetricFamily(
            "kcoord_buffered_bytes",
            "Bytes held for client connections: unsent responses (output), large requests being "
            "received (partial_frames), requests in flight, estimated (inflight)",
            labels=["kind"],
        )
        held.add_metric(["output"], self._output())
        held.add_metric(["partial_frames"], self._partial_frames())
        held.add_metric(["inflight"], self._inflight())
        yield held


class GroupStateCollector(Collector):
    """Gauges read from the shards' live state at scrape time, on the event loop that owns it.

    Counting at scrape time (rather than incrementing gauges on every transition) cannot drift
    from the truth after a shard reload. A scrape walks every group once: groups keep their counts
    of static and classic-protocol members by replay, so only a mixed group's members are walked
    (to split its static members by protocol).

    Groups are labelled by ``type``, the protocol the group runs (classic, or consumer for KIP-848
    groups), and members also by ``protocol``, the one the member speaks: a consumer group with
    classic members (an online migration under way) shows ``type="consumer", protocol="classic"``
    members and counts in ``kcoord_mixed_groups``.
    """

    def __init__(self, shards: Callable[[], list[Any]], expected: Callable[[], int]) -> None:
        self._shards = shards
        self._expected = expected

    def describe(self) -> list[Any]:
        return []  # collected lazily: describe() must not walk state at registration

    def collect(self) -> Iterator[Any]:
        groups = GaugeMetricFamily(
            "kcoord_groups",
            "Groups by type (classic, consumer), state and protocol type (loaded shards)",
            labels=["type", "state", "protocol_type"],
        )
        mixed = GaugeMetricFamily(
            "kcoord_mixed_groups",
            "Consumer groups with classic-protocol members (an online migration under way), by state",
            labels=["state"],
        )
        members = GaugeMetricFamily(
            "kcoord_group_members",
            "Members by group type, group state, the member's protocol and kind (static, dynamic)",
            labels=["type", "state", "protocol", "kind"],
        )
        shards = GaugeMetricFamily("kcoord_shards", "Coordinator shards by status", labels=["status"])
        by_group: defaultdict[tuple[str, str, str], int] = defaultdict(int)  # type, state, protocol type
        by_mixed: defaultdict[str, int] = defaultdict(int)  # state
        by_member: defaultdict[tuple[str, str, str, str], int] = defaultdict(
            int
        )  # type, state, protocol, kind
        status = {"loaded": 0, "loading": 0, "fenced": 0, "log_lost": 0}
        runtimes = self._shards()
        for runtime in runtimes:
            if getattr(runtime, "fenced", False):
                status["fenced"] += 1
                continue
            if getattr(runtime, "lost", None) is not None:
                status["log_lost"] += 1
                continue
            if not getattr(runtime, "loaded", False):
                status["loading"] += 1
                continue
            status["loaded"] += 1
            for group in getattr(runtime.state, "groups", ()):
                state = str(group.state_name)
                by_group[("classic", state, protocol_type_label(group.protocol_type))] += 1
                by_member[("classic", state, "classic", "static")] += group.num_static_members
                by_member[("classic", state, "classic", "dynamic")] += group.num_dynamic_members
            for consumer_group in getattr(runtime.state, "consumer_groups", ()):
                state = str(consumer_group.state_name)
                by_group[("consumer", state, "consumer")] += 1
                group_members = consumer_group.members
                # O(1) per group: the group keeps its counts of classic-protocol and static members
                # by replay; only a mixed group's members are walked, to split its static ones.
                classic = consumer_group.num_classic_protocol_members
                static = len(consumer_group.static_members)
                if classic:
                    by_mixed[state] += 1
                    classic_static = sum(
                        1
                        for m in group_members.values()
                        if m.uses_classic_protocol and m.instance_id is not None
                    )
                    by_member[("consumer", state, "classic", "static")] += classic_static
                    by_member[("consumer", state, "classic", "dynamic")] += classic - classic_static
                    static -= classic_static
                by_member[("consumer", state, "consumer", "static")] += static
                by_member[("consumer", state, "consumer", "dynamic")] += len(group_members) - classic - static
        status["loading"] += max(0, self._expected() - len(runtimes))
        for (group_type, state, protocol_type), n in sorted(by_group.items()):
            groups.add_metric([group_type, state, protocol_type], n)
        for state, n in sorted(by_mixed.items()):
            mixed.add_metric([state], n)
        for labels, n in sorted(by_member.items()):
            if n:
                members.add_metric(list(labels), n)
        for name, n in status.items():
            shards.add_metric([name], n)
        yield groups
        yield mixed
        yield members
        yield shards
