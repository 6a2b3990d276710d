"""Offset commits for topics that do not exist.

Kafka 4.0's KafkaApis checks a commit's topics against its metadata before the group coordinator
sees it (handleOffsetCommitRequest, handleTxnOffsetCommitRequest): an unknown topic gets
UNKNOWN_TOPIC_OR_PARTITION for each of its partitions, so does a partition the topic does not
have; the rest is committed and the answers merged. kcoord stored such commits with error NONE.
These tests drive the topic catalog with a fake upstream, and a real ClientConnection over an App
with in-memory storage.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from kcoord.coordinator.net.topics import TopicCatalog, all_known, merged, without
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from support.in_process import Harness

UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
MR = m.MetadataResponse


class FakeUpstream:
    """Answers the catalog's Metadata lookups from a dict of topic -> partition count."""

    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = topics
        self.asked: list[list[str]] = []
        self.gate: asyncio.Event | None = None
        self.fail = False

    async def fetch(self, names: list[str]) -> Any:
        self.asked.append(list(names))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise ConnectionError("upstream unreachable")
        return MR(topics=[metadata_topic(n, self.topics.get(n)) for n in names])


def metadata_topic(name: str, partitions: int | None) -> Any:
    if partitions is None:
        return MR.MetadataResponseTopic(name=name, error_code=UNKNOWN, partitions=[])
    return MR.MetadataResponseTopic(name=name, error_code=0, partitions=[
        MR.MetadataResponsePartition(partition_index=p) for p in range(partitions)])  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def commit(group: str, offsets: dict[tuple[str, int], int], generation: int = -1, member: str = "") -> Any:
    R = m.OffsetCommitRequest
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            R.OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset)
        )
    return R(group_id=group, generation_id_or_member_epoch=generation, member_id=member,
             topics=[R.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()])  # fmt: skip


def errors(response: Any) -> list[tuple[str, int, int]]:
    return [(t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions]


# -- the catalog ------------------------------------------------------------------------------------------
async def test_topics_of_relayed_metadata_are_known_without_asking() -> None:
    upstream = FakeUpstream({})
    catalog = TopicCatalog(upstream.fetch)
    catalog.learn([metadata_topic("orders", 3), metadata_topic("gone", None)])
    request = commit("g", {("orders", 0): 1, ("orders", 2): 1})
    assert all_known(catalog.partitions, request.topics)
    assert not all_known(catalog.partitions, commit("g", {("orders", 3): 1}).topics)  # no partition 3
    missing, to_look_up = catalog.classify(commit("g", {("gone", 0): 1, ("new", 0): 1}).topics)
    assert missing == {("gone", 0)} and to_look_up == ["new"]
    assert upstream.asked == []


async def test_an_unknown_topic_is_looked_up_once_however_many_commits_wait() -> None:
    upstream = FakeUpstream({"orders": 2})
    upstream.gate = asyncio.Event()
    catalog = TopicCatalog(upstream.fetch)
    waiting = [asyncio.ensure_future(catalog.lookup(["orders", "nope"])) for _ in range(5)]
    await asyncio.sleep(0.01)
    upstream.gate.set()
    await asyncio.gather(*waiting)
    assert upstream.asked == [["orders", "nope"]]
    missing, to_look_up = catalog.classify(commit("g", {("orders", 1): 1, ("nope", 0): 1}).topics)
    assert missing == {("nope", 0)} and to_look_up == []


async def test_does_not_exist_is_believed_briefly_and_a_created_topic_is_seen() -> None:
    clock = Clock()
    upstream = FakeUpstream({})
    catalog = TopicCatalog(upstream.fetch, clock=clock)
    await catalog.lookup(["later"])
    assert catalog.classify(commit("g", {("later", 0): 1}).topics) == ({("later", 0)}, [])
    upstream.topics["later"] = 1
    clock.now += 2.5  # past missing_ttl_s: asked again
    assert catalog.classify(commit("g", {("later", 0): 1}).topics) == (set(), ["later"])
    await catalog.lookup(["later"])
    assert all_known(catalog.partitions, commit("g", {("later", 0): 1}).topics)


async def test_a_subscriptions_names_are_unsure_until_known_or_believed_missing() -> None:
    """What a ConsumerGroupHeartbeat's topic names make kcoord look up before it serves the join."""
    clock = Clock()
    upstream = FakeUpstream({"orders": 3})
    catalog = TopicCatalog(upstream.fetch, clock=clock)
    assert catalog.unsure(["orders", "nope", "orders"]) == ["orders", "nope"]
    await catalog.lookup(["orders", "nope"])
    assert catalog.unsure(["orders", "nope"]) == []  # one known, one believed missing
    clock.now += 2.5  # past missing_ttl_s: "nope" may have been created since
    assert catalog.unsure(["orders", "nope"]) == ["nope"]


def test_a_created_topic_is_learnt_from_the_createtopics_answer() -> None:
    catalog = TopicCatalog(FakeUpstream({}).fetch, clock=Clock())
    first, second = uuid.UUID(int=7), uuid.UUID(int=8)
    before = catalog.image()
    catalog.learn_created(
        [("orders", first, 3), ("no-id", uuid.UUID(int=0), 3), ("no-count", uuid.UUID(int=9), -1)]
    )
    assert catalog.partitions == {"orders": 3} and catalog.names == {first: "orders"}
    assert catalog.image() is not before and catalog.image()[first].partition_count == 3
    assert catalog.unsure(["orders"]) == []
    catalog.learn_created([("orders", second, 5)])  # deleted and created again under the same name
    assert catalog.ids == {"orders": second} and catalog.names == {second: "orders"}


async def test_a_partition_beyond_a_known_topic_is_checked_again_then_refused() -> None:
    clock = Clock()
    upstream = FakeUpstream({"orders": 2})
    catalog = TopicCatalog(upstream.fetch, clock=clock)
    catalog.learn([metadata_topic("orders", 2)])
    clock.now += 10
    request = commit("g", {("orders", 0): 1, ("orders", 5): 1})
    assert catalog.classify(request.topics) == (set(), ["orders"])  # partitions may have been added
    await catalog.lookup(["orders"])
    assert catalog.classify(request.topics) == ({("orders", 5)}, [])
    upstream.topics["orders"] = 6  # partitions added
    clock.now += 10
    await catalog.lookup(catalog.classify(request.topics)[1])
    assert all_known(catalog.partitions, request.topics)


async def test_known_topics_are_confirmed_again_and_a_deleted_one_is_forgotten() -> None:
    clock = Clock()
    upstream = FakeUpstream({"keep": 1, "drop": 1})
    catalog = TopicCatalog(upstream.fetch, clock=clock)
    catalog.learn([metadata_topic("keep", 1), metadata_topic("drop", 1)])
    await catalog.refresh_stale()
    assert upstream.asked == []  # fresh: nothing to ask
    del upstream.topics["drop"]
    clock.now += 31
    await catalog.refresh_stale()
    assert upstream.asked == [["keep", "drop"]]
    assert catalog.partitions == {"keep": 1}
    assert catalog.classify(commit("g", {("drop", 0): 1}).topics) == ({("drop", 0)}, [])


async def test_an_invalid_topic_name_is_missing() -> None:
    """Kafka's metadata cache holds no topic named "" (nor any invalid name)."""

    async def fetch(names: list[str]) -> Any:
        return MR(
            topics=[
                MR.MetadataResponseTopic(name=n, error_code=ErrorCode.INVALID_TOPIC_EXCEPTION) for n in names
            ]
        )

    catalog = TopicCatalog(fetch)
    await catalog.lookup([""])
    assert catalog.classify(commit("g", {("", 0): 1}).topics, looked_up=True) == ({("", 0)}, [])


async def test_a_failed_lookup_decides_nothing() -> None:
    upstream = FakeUpstream({})
    upstream.fail = True
    catalog = TopicCatalog(upstream.fetch)
    await catalog.lookup(["maybe"])
    request = commit("g", {("maybe", 0): 1})
    assert catalog.classify(request.topics, looked_up=True) == (set(), [])  # goes on unchecked


def test_split_and_merge_keep_request_order() -> None:
    request = commit("g", {("a", 0): 1, ("b", 0): 1, ("a", 1): 1, ("c", 0): 1, ("b", 9): 1})
    missing = {("b", 0), ("b", 9), ("a", 1)}
    rest = without(request, missing)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in rest.topics] == [
        ("a", [0]),
        ("c", [0]),
    ]
    assert [(t.name, len(t.partitions)) for t in request.topics] == [
        ("a", 2),
        ("b", 2),
        ("c", 1),
    ]  # untouched
    R = m.OffsetCommitResponse
    answer = R(throttle_time_ms=7, topics=[
        R.OffsetCommitResponseTopic(name="a", partitions=[R.OffsetCommitResponsePartition(partition_index=0)]),
        R.OffsetCommitResponseTopic(name="c", partitions=[R.OffsetCommitResponsePartition(partition_index=0,
                                                                                           error_code=25)])])  # fmt: skip
    response = merged(ApiKey.OFFSET_COMMIT, request, missing, answer)
    assert errors(response) == [
        ("a", 0, 0),
        ("a", 1, UNKNOWN),
        ("b", 0, UNKNOWN),
        ("b", 9, UNKNOWN),
        ("c", 0, 25),
    ]
    assert response.throttle_time_ms == 7
    assert without(request, {("a", 0), ("a", 1), ("b", 0), ("b", 9), ("c", 0)}) is None
    assert errors(merged(ApiKey.OFFSET_COMMIT, commit("g", {("x", 3): 1}), {("x", 3)}, None)) == [
        ("x", 3, UNKNOWN)
    ]


# -- through a client connection ------------------------------------------------------------------------
class Client(Harness):
    """support.in_process's harness (a ClientConnection over a real App, in-memory storage) whose
    topic catalog asks a FakeUpstream."""

    def __init__(self, upstream: FakeUpstream) -> None:
        super().__init__(shards=3)
        self.upstream = upstream

    async def start(self) -> Client:  # type: ignore[override]
        await super().start()
        assert self.app.cluster is not None
        self.app.cluster.topics = TopicCatalog(self.upstream.fetch)
        return self

    async def exchange(self, *requests: tuple[int, int, Any]) -> list[Any]:
        """Send every request in one read (pipelined), return the answers in order."""
        frames_out = []
        for api_key, version, request in requests:
            self.correlation += 1
            frames_out.append(frames.encode_request(api_key, version, self.correlation, "t", request))
        self.conn.data_received(b"".join(frames_out))
        decoder = frames.FrameDecoder()
        got: list[bytes] = []
        for _ in range(200):
            await asyncio.sleep(0.005)
            got += decoder.feed(self.transport.take())
            if len(got) == len(requests):
                break
        assert len(got) == len(requests), got
        return [frames.decode_response(k, v, raw)[1] for (k, v, _), raw in zip(requests, got, strict=True)]


def fetch_request(group: str, topics: dict[str, list[int]]) -> Any:
    F = m.OffsetFetchRequest
    return F(
        group_id=group,
        topics=[F.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in topics.items()],
    )


def offsets(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions}


@pytest.mark.parametrize("version", [2, 8, 9])
async def test_commit_naming_an_unknown_topic_is_split_and_answered_in_request_order(version: int) -> None:
    client = await Client(FakeUpstream({"orders": 2})).start()
    request = commit("g", {("nope", 0): 5, ("orders", 0): 7, ("orders", 3): 9, ("nope", 1): 5})
    (answer,) = await client.exchange((ApiKey.OFFSET_COMMIT, version, request))
    assert errors(answer) == [
        ("nope", 0, UNKNOWN),
        ("nope", 1, UNKNOWN),
        ("orders", 0, 0),
        ("orders", 3, UNKNOWN),
    ]
    (fetched,) = await client.exchange(
        (ApiKey.OFFSET_FETCH, 7, fetch_request("g", {"orders": [0, 3], "nope": [0]}))
    )
    assert offsets(fetched) == {("orders", 0): 7, ("orders", 3): -1, ("nope", 0): -1}
    assert client.upstream.asked == [["nope", "orders"]]
    # Known now: the same commit is decided without asking again.
    (again,) = await client.exchange((ApiKey.OFFSET_COMMIT, version, request))
    assert errors(again) == errors(answer)
    assert client.upstream.asked == [["nope", "orders"]]


async def test_a_commit_of_only_unknown_topics_never_reaches_the_coordinator() -> None:
    """As in Kafka, the topic check comes first: a generation the group never had is not looked at."""
    client = await Client(FakeUpstream({})).start()
    (answer,) = await client.exchange((ApiKey.OFFSET_COMMIT, 8, commit("ghost", {("nope", 0): 1}, 42, "m")))
    assert errors(answer) == [("nope", 0, UNKNOWN)]
    assert all(not shard.state.groups for shard in client.app.shards)  # type: ignore[attr-defined]


async def test_later_requests_on_the_connection_wait_for_the_lookup() -> None:
    """A commit held for a lookup is applied before the connection's next commit, as a broker
    handles one request of a connection at a time: the later offset wins."""
    upstream = FakeUpstream({"orders": 1})
    upstream.gate = asyncio.Event()
    client = await Client(upstream).start()
    client.app.cluster.topics.learn([metadata_topic("orders", 1)])
    first = commit("g", {("nope", 0): 1, ("orders", 0): 5})
    second = commit("g", {("orders", 0): 6})
    asyncio.get_running_loop().call_later(0.05, upstream.gate.set)
    answers = await client.exchange((ApiKey.OFFSET_COMMIT, 8, first), (ApiKey.OFFSET_COMMIT, 8, second),
                                    (ApiKey.OFFSET_FETCH, 7, fetch_request("g", {"orders": [0]})))  # fmt: skip
    assert errors(answers[0]) == [("nope", 0, UNKNOWN), ("orders", 0, 0)]
    assert errors(answers[1]) == [("orders", 0, 0)]
    assert offsets(answers[2]) == {("orders", 0): 6}


async def test_txn_offset_commit_checks_topics_too() -> None:
    client = await Client(FakeUpstream({"orders": 1})).start()
    T = m.TxnOffsetCommitRequest
    request = T(transactional_id="tx", group_id="g", producer_id=1, producer_epoch=0, topics=[
        T.TxnOffsetCommitRequestTopic(name="orders", partitions=[T.TxnOffsetCommitRequestPartition(partition_index=0)]),
        T.TxnOffsetCommitRequestTopic(name="nope", partitions=[T.TxnOffsetCommitRequestPartition(partition_index=0)]),
    ])  # fmt: skip
    for version in (0, 3):
        (answer,) = await client.exchange((ApiKey.TXN_OFFSET_COMMIT, version, request))
        # The rest reaches the shard, where producer 1 opened no transaction (no AddOffsetsToTxn).
        assert errors(answer) == [("orders", 0, ErrorCode.INVALID_TXN_STATE), ("nope", 0, UNKNOWN)]


async def test_an_unreachable_upstream_lets_commits_through() -> None:
    upstream = FakeUpstream({})
    upstream.fail = True
    client = await Client(upstream).start()
    (answer,) = await client.exchange((ApiKey.OFFSET_COMMIT, 8, commit("g", {("maybe", 0): 3})))
    assert errors(answer) == [("maybe", 0, 0)]
