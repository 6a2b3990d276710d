"""deploy/docker-compose.cluster.yml: three kcoord nodes in cluster mode in front of three Kafka brokers.

Parsed, not run (no Docker engine on the CI machines): each kcoord node's command line and
environment go through kcoord's own configuration code, and the nodes must differ where a cluster
needs them to (node id, ports) and agree where it needs them to (topic, shards, upstream).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from kcoord.coordinator.cli import build_parser
from kcoord.coordinator.ops import config
from tests.support.compose_files import load_compose

REPO = Path(__file__).resolve().parents[2]
KCOORD_NODES = ("kcoord1", "kcoord2", "kcoord3")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    # With none of its HOST_PORT* variables set, as a user runs it: the documented ports.
    return load_compose(REPO / "deploy" / "docker-compose.cluster.yml")


def valid_kraft_cluster_id(text: str) -> bool:
    """What `kafka-storage.sh format` accepts: a Uuid, 16 bytes in unpadded base64url (22 characters)."""
    if len(text) != 22:
        return False
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except ValueError:
        return False
    # Re-encoding must give the same text (no stray bits in the last character); the zero Uuid is reserved.
    return len(raw) == 16 and base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == text and any(raw)


def settings_of(service: dict[str, Any]) -> Any:
    args = build_parser().parse_args([str(a) for a in service["command"]])
    env = {k: str(v) for k, v in service["environment"].items()}
    return config.resolve(args, env).settings


def test_three_kafka_brokers_in_one_kraft_quorum(compose: dict[str, Any]) -> None:
    kafkas = [compose["services"][f"kafka{i}"] for i in (1, 2, 3)]
    assert {k["environment"]["KAFKA_NODE_ID"] for k in kafkas} == {1, 2, 3}
    [cluster_id] = {k["environment"]["CLUSTER_ID"] for k in kafkas}
    assert valid_kraft_cluster_id(cluster_id), cluster_id
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
        # The image's HEALTHCHECK (`kcoord health`) follows --metrics: no per-node copy of the port.
        assert "healthcheck" not in compose["services"][name], name


def test_the_cluster_id_check_knows_valid_from_invalid() -> None:
    assert valid_kraft_cluster_id("5L6g3nShT-eMCtK--X86sw")  # the official image's default
    assert not valid_kraft_cluster_id("kcoord-cluster-demo-0001")  # 24 characters, the old value here
    assert not valid_kraft_cluster_id("AAAAAAAAAAAAAAAAAAAAAA")  # the zero Uuid


def test_moved_host_ports_keep_listen_and_published_ports_equal() -> None:
    env = {"HOST_PORTS_KCOORD1": "211", "HOST_PORTS_KCOORD2": "212", "HOST_PORTS_KCOORD3": "213",
           "HOST_PORT_METRICS1": "21150", "HOST_PORT_METRICS2": "21250", "HOST_PORT_METRICS3": "21350"}  # fmt: skip
    services = load_compose(REPO / "deploy" / "docker-compose.cluster.yml", env)["services"]
    for n in (1, 2, 3):
        s = settings_of(services[f"kcoord{n}"])
        assert s.listen == ("0.0.0.0", int(f"21{n}92")) and s.broker_ports == [
            int(f"21{n}{x}") for x in (93, 94, 95)
        ]
        assert s.metrics == ("0.0.0.0", int(f"21{n}50"))
        assert {tuple(map(int, p.split(":"))) for p in services[f"kcoord{n}"]["ports"]} == {
            (p, p) for p in (s.listen[1], *s.broker_ports, s.metrics[1])
        }
