"""deploy/docker-compose.cluster.yml: three kcoord nodes in cluster mode in front of three Kafka brokers.

Parsed, not run (no Docker engine on the CI machines): each kcoord node's command line and
environment go through kcoord's own configuration code, and the nodes must differ where a cluster
needs them to (node id, ports) and agree where it needs them to (topic, shards, upstream).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kcoord.coordinator.cli import build_parser
from kcoord.coordinator.ops import config

REPO = Path(__file__).resolve().parents[2]
KCOORD_NODES = ("kcoord1", "kcoord2", "kcoord3")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "deploy" / "docker-compose.cluster.yml").read_text())


def settings_of(service: dict[str, Any]) -> Any:
    args = build_parser().parse_args([str(a) for a in service["command"]])
    env = {k: str(v) for k, v in service["environment"].items()}
    return config.resolve(args, env).settings


def test_three_kafka_brokers_in_one_kraft_quorum(compose: dict[str, Any]) -> None:
    kafkas = [compose["services"][f"kafka{i}"] for i in (1, 2, 3)]
    assert {k["environment"]["KAFKA_NODE_ID"] for k in kafkas} == {1, 2, 3}
    assert {k["environment"]["CLUSTER_ID"] for k in kafkas} == {"kcoord-cluster-demo-0001"}
    voters = kafkas[0]["environment"]["KAFKA_CONTROLLER_QUORUM_VOTERS"]
    assert voters == "1@kafka1:9093,2@kafka2:9093,3@kafka3:9093"


def test_kcoord_nodes_form_one_cluster_with_their_own_ids_and_ports(compose: dict[str, Any]) -> None:
    nodes = [settings_of(compose["services"][name]) for name in KCOORD_NODES]
    assert all(s.cluster_enabled and s.storage == "kafka" for s in nodes)
    assert len({s.coordinator_node_id for s in nodes}) == 3
    assert len({(s.internal_topic, s.shards, tuple(s.bootstrap_servers)) for s in nodes}) == 1
    assert nodes[0].bootstrap_servers == [("kafka1", 9092), ("kafka2", 9092), ("kafka3", 9092)]
    for name, s in zip(KCOORD_NODES, nodes, strict=True):
        published = {tuple(map(int, p.split(":"))) for p in compose["services"][name]["ports"]}
        # Clients are told the listen port and the broker ports: host port must equal container port.
        wanted = {(s.listen[1], s.listen[1]), *((p, p) for p in s.broker_ports), (s.metrics[1], s.metrics[1])}
        assert wanted == published, name
        assert len(s.broker_ports) == 3 and s.advertised == "localhost"
        assert str(s.metrics[1]) in " ".join(compose["services"][name]["healthcheck"]["test"])
