"""kcoord answers every version of every group API that Kafka 4.0 serves (its ApiVersions answer,
below as a 4.0.0 broker gave it; tests/integration/test_kafka_group_api_versions.py asks a live one).
Beyond it, kcoord serves OffsetCommit and OffsetFetch v10 (topics by id) and JoinGroup v0-1."""

from __future__ import annotations

from kcoord.protocol import messages as m
from kcoord.protocol.messages import KCOORD_VERSIONS, ApiKey

# Kafka 4.0.0's ApiVersions ranges for the APIs kcoord answers itself.
KAFKA_4_0_GROUP_API_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (2, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
}


def test_every_version_kafka_4_0_serves_is_served() -> None:
    missing = {
        ApiKey(api).name: (kafka, KCOORD_VERSIONS.get(api))
        for api, kafka in KAFKA_4_0_GROUP_API_VERSIONS.items()
        if api not in KCOORD_VERSIONS
        or not (KCOORD_VERSIONS[api][0] <= kafka[0] and kafka[1] <= KCOORD_VERSIONS[api][1])
    }
    assert missing == {}
    assert set(KCOORD_VERSIONS) == set(KAFKA_4_0_GROUP_API_VERSIONS)


def test_every_served_version_has_a_codec() -> None:
    """Each version kcoord offers decodes its request and encodes its response."""
    for api, (lo, hi) in KCOORD_VERSIONS.items():
        request, response = m.REQUESTS[api], m.RESPONSES[api]
        for version in range(lo, hi + 1):
            assert request.decode(request().encode(version), version) is not None, (api, version)
            assert response().encode(version), (api, version)


def test_txn_offset_commit_v5_reads_as_v4_does() -> None:
    """v5 (KIP-890) changes the meaning, not the fields: the same request decodes the same."""
    R = m.TxnOffsetCommitRequest
    request = R(transactional_id="tx", group_id="g", producer_id=7, producer_epoch=2,
                generation_id_or_member_epoch=3, member_id="m", topics=[R.TxnOffsetCommitRequestTopic(
                    name="t", partitions=[R.TxnOffsetCommitRequestPartition(partition_index=1, committed_offset=9)])])  # fmt: skip
    assert request.encode(5) == request.encode(4)
    assert R.decode(request.encode(5), 5) == R.decode(request.encode(4), 4)
