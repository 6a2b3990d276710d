"""OffsetCommit v10 and OffsetFetch v10 name topics by id (KIP-848); the group state keys them by name.

Kafka's broker resolves a request's topic ids through its metadata before the group coordinator
sees it, and the coordinator's answer (by name) gets the ids back; an id the metadata does not
know is answered UNKNOWN_TOPIC_ID for each of its partitions, and the rest of the request is
served. kcoord does the same with :class:`~kcoord.coordinator.net.topics.TopicCatalog`'s id map
(learnt from every Metadata answer it relays and from its own lookups): :func:`by_name` turns the
request into one the shards serve as v10 (names filled in, unknown ids taken out) and
:func:`by_id` turns the shards' answer back. Records keep topic *names*, as Kafka's do.

For an OffsetFetch of all of a group's topics (``topics`` null), a committed topic the catalog
has no id for (deleted upstream) is left out of the answer: a v10 answer cannot name it.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey

TOPIC_ID_SINCE = 10  # OffsetCommit and OffsetFetch v10 carry topic ids instead of names
TOPIC_ID_APIS = frozenset({ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH})
_UNKNOWN_TOPIC_ID = int(ErrorCode.UNKNOWN_TOPIC_ID)


def request_ids(api_key: int, request: Any) -> list[uuid.UUID]:
    """Every topic id a v10 request names."""
    if api_key == ApiKey.OFFSET_COMMIT:
        return [t.topic_id for t in request.topics]
    return [t.topic_id for g in request.groups for t in (g.topics or ())]


def by_name(api_key: int, request: Any, names: dict[uuid.UUID, str]) -> tuple[Any | None, set[uuid.UUID]]:
    """``(the request with names filled in and unknown ids taken out, the unknown ids)``; the
    request is None when nothing is left for the coordinator (an OffsetCommit of unknown ids only)."""
    unknown = {i for i in request_ids(api_key, request) if i not in names}
    if api_key == ApiKey.OFFSET_COMMIT:
        topics = [_named(t, names) for t in request.topics if t.topic_id not in unknown]
        if not topics:
            return None, unknown
        out = copy.copy(request)
        out.topics = topics
        return out, unknown
    groups = []
    for g in request.groups:
        group = copy.copy(g)
        if g.topics is not None:
            group.topics = [_named(t, names) for t in g.topics if t.topic_id not in unknown]
        groups.append(group)
    out = copy.copy(request)
    out.groups = groups
    return out, unknown


def _named(topic: Any, names: dict[uuid.UUID, str]) -> Any:
    named = copy.copy(topic)
    named.name = names[topic.topic_id]
    return named


def by_id(
    api_key: int, request: Any, answer: Any | None, names: dict[uuid.UUID, str], ids: dict[str, uuid.UUID]
) -> Any:
    """The v10 answer to ``request`` (the client's, by id) from the coordinator's ``answer`` to the
    :func:`by_name` request (None if it was not sent): topics in request order, each with its id;
    unknown ids UNKNOWN_TOPIC_ID. ``names``: id → name as :func:`by_name` used it; ``ids``: name →
    id for the topics an "all topics" fetch may answer."""
    if api_key == ApiKey.OFFSET_COMMIT:
        return _commit_by_id(request, answer, names)
    return _fetch_by_id(request, answer, names, ids)


def _commit_by_id(request: Any, answer: Any | None, names: dict[uuid.UUID, str]) -> Any:
    R = m.OffsetCommitResponse
    answered: dict[str, Any] = {t.name: t for t in answer.topics} if answer is not None else {}
    topics = []
    for t in request.topics:
        # Absent when the id was unknown (or, defensively, when the coordinator dropped the topic).
        name = names.get(t.topic_id)
        done = answered.get(name) if name is not None else None
        if done is None:
            parts = [
                R.OffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=_UNKNOWN_TOPIC_ID
                )
                for p in t.partitions
            ]
        else:
            parts = done.partitions
        # name: absent from v10+ on the wire and None as in the coordinator's answers (the stub
        # types the field for the versions that carry it).
        topic = R.OffsetCommitResponseTopic(topic_id=t.topic_id, name=None, partitions=parts)  # type: ignore[arg-type]
        topics.append(topic)
    throttle = answer.throttle_time_ms if answer is not None else 0
    return R(throttle_time_ms=throttle, topics=topics)


def _fetch_by_id(request: Any, answer: Any, names: dict[uuid.UUID, str], ids: dict[str, uuid.UUID]) -> Any:
    R = m.OffsetFetchResponse
    groups_answered: dict[str, Any] = {g.group_id: g for g in answer.groups}
    groups = []
    for g in request.groups:
        done = groups_answered.get(g.group_id)
        if done is None:
            continue
        group = copy.copy(done)
        if done.error_code or g.topics is None:
            # A group-level error has no topics; "all topics" keeps those with a known id.
            group.topics = [_with_id(t, ids[t.name]) for t in done.topics or () if t.name in ids]
        else:
            answered: dict[str, Any] = {t.name: t for t in done.topics or ()}
            topics = []
            for t in g.topics:
                name = names.get(t.topic_id)
                if name is not None and name in answered:
                    topics.append(_with_id(answered[name], t.topic_id))
                else:
                    topics.append(R.OffsetFetchResponseTopics(topic_id=t.topic_id, name=None, partitions=[  # type: ignore[arg-type]  # None: as above
                        R.OffsetFetchResponsePartitions(partition_index=p, committed_offset=-1,
                                                        committed_leader_epoch=-1, metadata=None,
                                                        error_code=_UNKNOWN_TOPIC_ID)
                        for p in t.partition_indexes
                    ]))  # fmt: skip
            group.topics = topics
        groups.append(group)
    out = copy.copy(answer)
    out.groups = groups
    return out


def _with_id(topic: Any, topic_id: uuid.UUID) -> Any:
    out = copy.copy(topic)
    out.topic_id = topic_id
    return out
