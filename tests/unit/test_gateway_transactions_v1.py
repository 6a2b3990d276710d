"""kcoord offers clients transactions v1 only (docs/transactions.md, section 4): whatever the
upstream offers, the transaction APIs are advertised up to their last v1 versions and the
``transaction.version`` feature never reaches a client, so clients send AddOffsetsToTxn."""

from __future__ import annotations

from typing import Any

from kcoord.coordinator.net.gateway import ClusterView, without_transaction_version
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 22, 24, 26


async def _no_listener(broker: Any) -> int:
    raise AssertionError("no listener is opened here")


def test_transaction_apis_are_offered_up_to_their_v1_versions() -> None:
    cluster = ClusterView([("upstream", 9092)], "kcoord", 9092, 1_000_000, _no_listener)
    cluster.upstream_versions = {
        INIT_PRODUCER_ID: (0, 6), ADD_PARTITIONS_TO_TXN: (0, 5), END_TXN: (0, 5),
        ApiKey.ADD_OFFSETS_TO_TXN: (0, 4), ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    }  # fmt: skip
    cluster._compute_advertised()
    offered = {api: (lo, hi) for api, lo, hi in cluster.api_versions()}
    assert offered[INIT_PRODUCER_ID] == (0, 5)
    assert offered[ADD_PARTITIONS_TO_TXN] == (0, 3)
    assert offered[END_TXN] == (0, 4)
    assert offered[ApiKey.TXN_OFFSET_COMMIT] == (0, 5)  # kcoord's own: v5 adds the group itself
    assert offered[ApiKey.ADD_OFFSETS_TO_TXN] == (0, 4)  # answered by kcoord, never relayed
    assert not cluster.supports(END_TXN, 5) and not cluster.supports(ADD_PARTITIONS_TO_TXN, 4)


def test_the_transaction_version_feature_never_reaches_a_client() -> None:
    R = m.ApiVersionsResponse
    supported = [R.SupportedFeatureKey(name="transaction.version", min_version=0, max_version=2),
                 R.SupportedFeatureKey(name="metadata.version", min_version=1, max_version=25)]  # fmt: skip
    finalized = [R.FinalizedFeatureKey(name="transaction.version", max_version_level=2, min_version_level=2),
                 R.FinalizedFeatureKey(name="group.version", max_version_level=1, min_version_level=1)]  # fmt: skip
    assert [f.name for f in without_transaction_version(supported)] == ["metadata.version"]
    assert [f.name for f in without_transaction_version(finalized)] == ["group.version"]
    assert without_transaction_version(None) == []
