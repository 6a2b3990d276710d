"""kcoord answers every version of every group API that a live Apache Kafka 4.0 broker serves: its
ApiVersions answer (read when support.kafka_broker started it) beside kcoord's own."""

from __future__ import annotations

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.messages import KCOORD_VERSIONS, ApiKey
from support.kafka_broker import KafkaBroker
from support.kcoord_process import KcoordProcess
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration


def test_kcoord_serves_every_group_api_version_kafka_serves(kafka: KafkaBroker) -> None:
    served_by_kafka = {api: kafka.api_versions[api] for api in KCOORD_VERSIONS if api in kafka.api_versions}
    assert set(served_by_kafka) == set(KCOORD_VERSIONS)
    narrower = {
        ApiKey(api).name: (versions, KCOORD_VERSIONS[api])
        for api, versions in served_by_kafka.items()
        if not (KCOORD_VERSIONS[api][0] <= versions[0] and versions[1] <= KCOORD_VERSIONS[api][1])
    }
    assert narrower == {}


def test_a_kcoord_in_front_of_kafka_advertises_them(kafka: KafkaBroker) -> None:
    kcoord = KcoordProcess("--storage", "memory", bootstrap=kafka.bootstrap)
    with kcoord, WireClient(kcoord.bootstrap) as client:
        answer = client.request(ApiKey.API_VERSIONS, 3, m.ApiVersionsRequest())
    advertised = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert advertised[ApiKey.TXN_OFFSET_COMMIT] == (0, 5)
    assert all(advertised[api] == versions for api, versions in KCOORD_VERSIONS.items())
