"""The container path run for real: kcoord's image and both compose files, driven from the host.

- ``test_image_serves_a_group_on_its_embedded_broker``: kcoord:latest alone (its embedded tansu
  broker), a non-default metrics port so the image's HEALTHCHECK has to follow ``--metrics``;
  produce, consume in a group, commit, read the committed offsets back.
- ``test_compose_stack_kafka_kcoord_prometheus``: docker-compose.yml up: Kafka, kcoord and
  Prometheus healthy, Prometheus scraping kcoord (its API says up == 1 for the kcoord target), and
  the same round trip through kcoord.
- ``test_cluster_compose_survives_a_killed_and_a_cut_off_node``: deploy/docker-compose.cluster.yml
  (3 kcoord nodes, 3 Kafka brokers): commits for groups served by every node, then ``docker kill``
  one node and ``docker network disconnect`` another from Kafka's network: the remaining node serves
  every group, with every acknowledged commit.

Images come from scripts/build_images.sh; without an engine or an image each test skips and says
which. What the tests change in the files, and only that (``KCOORD_SPEEDUPS``, ``SCRAPE_INTERVAL``,
merged in as a second compose file): how often Docker runs kcoord's own health check and
Prometheus scrapes (seconds, not tens of them; as long allowed before a container counts as
unhealthy), and kcoord's first rebalance of a new group not held 3 s for more members (each round
trip here is a group of one). Each compose test runs under its own project name, on host ports
picked free below the ephemeral range (the compose files take them from HOST_PORT* variables), and
always ends with ``down -v``.
"""

from __future__ import annotations

import json
import random
import socket
import time
import urllib.parse
import uuid
from collections.abc import Iterator

import pytest
import yaml

from support.kcoord_cluster import coordinator_of
from support.ports import ephemeral_range_start, free_port_block
from tests.support.containers import (
    REPO,
    ComposeProject,
    committed,
    consume_and_commit,
    create_topic,
    docker,
    group_round_trip,
    http_get,
    produce,
    require_images,
    wait_healthy,
)
from tests.support.docker_images import KCOORD_TAG

pytestmark = pytest.mark.integration

KAFKA = "apache/kafka:4.0.0"
PROMETHEUS = "prom/prometheus:v2.55.1"

# kcoord's image checks its health every 10 s (Dockerfile HEALTHCHECK) with 3 retries after a 30 s
# start period: "healthy" showed up to 10 s late. The same check every 2 s, 15 retries (the same
# 30 s of failures before "unhealthy"). Kafka's check (a JVM per run, 3 brokers) stays as it is.
KCOORD_HEALTH_EVERY_2S = {"interval": "2s", "retries": 15}
# group.initial.rebalance.delay.ms (3 s by default) holds the first JoinGroup of a new group for
# more members: the round trips here are groups of one, whose join it only delays.
KCOORD_NO_INITIAL_DELAY = {"KCOORD_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"}
KCOORD_SPEEDUPS = {"healthcheck": KCOORD_HEALTH_EVERY_2S, "environment": KCOORD_NO_INITIAL_DELAY}
# deploy/prometheus.yml scrapes every 15 s; the test waits for a scrape that found kcoord up.
SCRAPE_INTERVAL = "2s"


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- the image alone ----------------------------------------------------------------------------------
@pytest.fixture
def kcoord_container() -> Iterator[tuple[str, int, int]]:
    require_images(KCOORD_TAG)
    base = free_port_block(3)
    port, metrics = base, base + 2
    name = _unique("kcoordtest-image")
    # No --bootstrap-server: kcoord starts its embedded tansu broker inside the container.
    # Port per broker: kcoord tells clients its listen port and base+1 for the broker, so both are
    # published unchanged; the metrics port is not 9100, which the HEALTHCHECK must find by itself.
    docker(
        "run",
        "-d",
        "--name",
        name,
        "-p",
        f"127.0.0.1:{port}:{port}",
        "-p",
        f"127.0.0.1:{port + 1}:{port + 1}",
        "-p",
        f"127.0.0.1:{metrics}:{metrics}",
        "--health-interval",
        "2s",
        "--health-start-period",
        "60s",
        "--env",
        *(f"{k}={v}" for k, v in KCOORD_NO_INITIAL_DELAY.items()),
        KCOORD_TAG,
        "serve",
        "--listen",
        f"0.0.0.0:{port}",
        "--broker-ports",
        str(port + 1),
        "--advertised-host",
        "127.0.0.1",
        "--metrics",
        f"0.0.0.0:{metrics}",
        "--shards",
        "4",
    )
    try:
        yield name, port, metrics
    finally:
        docker("rm", "-f", "-v", name, check=False)


def test_image_serves_a_group_on_its_embedded_broker(kcoord_container: tuple[str, int, int]) -> None:
    name, port, metrics = kcoord_container
    wait_healthy({"kcoord": name}, timeout=90, logs=lambda: docker("logs", "--tail", "40", name, check=False))
    bootstrap = f"127.0.0.1:{port}"
    topic, group = _unique("img-topic"), _unique("img-group")
    create_topic(bootstrap, topic, 3, 1)
    offsets = group_round_trip(bootstrap, topic, group, 300, 3)
    assert offsets == {0: 100, 1: 100, 2: 100}
    # The group went through kcoord's coordinator: its metrics count the join.
    status, body = http_get(f"http://127.0.0.1:{metrics}/metrics")
    assert status == 200 and 'kcoord_requests_total{api="join_group"' in body.decode()


# -- docker-compose.yml -------------------------------------------------------------------------------
def prometheus_kcoord_up(prometheus: str) -> list[str]:
    """Values of up{job="kcoord"} Prometheus holds right now."""
    query = urllib.parse.urlencode({"query": 'up{job="kcoord"}'})
    status, body = http_get(f"{prometheus}/api/v1/query?{query}")
    if status != 200:
        return []
    return [r["value"][1] for r in json.loads(body)["data"]["result"]]


@pytest.mark.timeout(600)
def test_compose_stack_kafka_kcoord_prometheus() -> None:
    require_images(KCOORD_TAG, KAFKA, PROMETHEUS)
    base = free_port_block(4)
    env = {"HOST_PORT_KCOORD": str(base), "HOST_PORT_BROKER": str(base + 1),
           "HOST_PORT_METRICS": str(base + 2), "HOST_PORT_PROMETHEUS": str(base + 3)}  # fmt: skip
    project = ComposeProject(REPO / "docker-compose.yml", env, {"kcoord": KCOORD_SPEEDUPS})
    # deploy/prometheus.yml as it is but for the scrape interval, mounted where the file mounts it
    config = yaml.safe_load((REPO / "deploy" / "prometheus.yml").read_text())
    config["global"]["scrape_interval"] = SCRAPE_INTERVAL
    mounted = project.private_file("prometheus.yml", yaml.safe_dump(config))
    project.files.append(project.private_file("scrape.yml", json.dumps(
        {"services": {"prometheus": {"volumes": [f"{mounted}:/etc/prometheus/prometheus.yml:ro"]}}}
    )))  # fmt: skip
    with project.up():
        containers = {s: project.container(s) for s in ("kafka", "kcoord")}
        wait_healthy(containers, timeout=240, logs=project.logs)
        prometheus = f"http://127.0.0.1:{base + 3}"
        deadline = time.monotonic() + 90
        while http_get(f"{prometheus}/-/healthy")[0] != 200 or prometheus_kcoord_up(prometheus) != ["1"]:
            assert time.monotonic() < deadline, (
                f"Prometheus: kcoord target not up: {prometheus_kcoord_up(prometheus)}"
            )
            time.sleep(2)
        assert http_get(f"http://127.0.0.1:{base + 2}/healthz")[0] == 200

        bootstrap = f"localhost:{base}"
        topic, group = _unique("compose-topic"), _unique("compose-group")
        create_topic(bootstrap, topic, 3, 1)
        assert group_round_trip(bootstrap, topic, group, 300, 3) == {0: 100, 1: 100, 2: 100}
        # A new member of the group resumes from the commits: only the 30 new records come.
        produce(bootstrap, topic, 30, 3)
        assert consume_and_commit(bootstrap, topic, group, 30) == {0: 110, 1: 110, 2: 110}


# -- deploy/docker-compose.cluster.yml ----------------------------------------------------------------
def cluster_ports() -> dict[str, str]:
    """Per node a three-digit prefix P (node ports P92..P95) and a metrics port: free, below the ephemeral range."""
    rng = random.Random()
    top = (ephemeral_range_start() - 96) // 100
    prefixes = list(range(100, top))
    rng.shuffle(prefixes)
    env: dict[str, str] = {}
    taken: set[int] = set()
    for node in (1, 2, 3):
        prefix = next(p for p in prefixes if _free(range(p * 100 + 92, p * 100 + 96), taken))
        taken |= set(range(prefix * 100 + 92, prefix * 100 + 96))
        metrics = next(p for p in iter(lambda: free_port_block(1), None) if p not in taken)
        taken.add(metrics)
        env[f"HOST_PORTS_KCOORD{node}"] = str(prefix)
        env[f"HOST_PORT_METRICS{node}"] = str(metrics)
    return env


def _free(ports: range, taken: set[int]) -> bool:
    for p in ports:
        if p in taken:
            return False
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                return False
    return True


GROUPS_PER_NODE = 2
PARTITIONS = 3


@pytest.mark.timeout(900)
def test_cluster_compose_survives_a_killed_and_a_cut_off_node() -> None:
    require_images(KCOORD_TAG, KAFKA)
    env = cluster_ports()
    node_port = {n: int(env[f"HOST_PORTS_KCOORD{n}"] + "92") for n in (1, 2, 3)}
    project = ComposeProject(
        REPO / "deploy" / "docker-compose.cluster.yml",
        env,
        {f"kcoord{n}": KCOORD_SPEEDUPS for n in (1, 2, 3)},
    )
    started = time.monotonic()

    def phase(what: str) -> None:  # where the minutes go (shown with pytest -s or on failure)
        print(f"cluster test: {what} at {time.monotonic() - started:.0f}s", flush=True)

    with project.up():
        kcoords = {f"kcoord{n}": project.container(f"kcoord{n}") for n in (1, 2, 3)}
        wait_healthy(kcoords, timeout=420, logs=project.logs)
        phase("3 Kafka brokers and 3 kcoord nodes healthy")
        every_node = ",".join(f"localhost:{p}" for p in node_port.values())
        topic = _unique("cluster-topic")
        create_topic(every_node, topic, PARTITIONS, 3)

        # Groups whose coordinator is each of the three nodes (FindCoordinator answers by shard owner);
        # wait until the nodes' shard ownership settled, i.e. some group lands on every node.
        groups: dict[int, list[str]] = {n: [] for n in (1, 2, 3)}
        deadline = time.monotonic() + 120
        while min(len(g) for g in groups.values()) < GROUPS_PER_NODE:
            assert time.monotonic() < deadline, f"groups did not spread over the nodes: {groups}"
            name = _unique("cluster-group")
            try:
                node_id, port = coordinator_of(f"localhost:{node_port[3]}", name)
            except AssertionError:  # COORDINATOR_NOT_AVAILABLE while the nodes divide the shards
                time.sleep(0.5)
                continue
            node = node_id - 1_000_000
            if node in groups and port == node_port[node] and len(groups[node]) < GROUPS_PER_NODE:
                groups[node].append(name)
        # Each group consumes everything produced so far and commits it: acknowledged commits to keep.
        acked: dict[str, dict[int, int]] = {}
        count = 0
        for node_groups in groups.values():
            for group in node_groups:
                count += 30
                produce(every_node, topic, 30, PARTITIONS)
                acked[group] = consume_and_commit(every_node, topic, group, count)
                assert sum(acked[group].values()) == count, (group, acked[group])

        phase(f"{len(acked)} groups committed")
        # Faults: node 1 dies; node 2 keeps running but loses Kafka (and with that its published ports).
        docker("kill", kcoords["kcoord1"])
        docker("network", "disconnect", project.network(), kcoords["kcoord2"])
        assert docker("inspect", "--format", "{{.State.Running}}", kcoords["kcoord1"]) == "false"

        # Every group is served again, by node 3, with exactly the acknowledged offsets.
        survivor = f"localhost:{node_port[3]}"
        deadline = time.monotonic() + 120
        pending = set(acked)
        while pending:
            for group in sorted(pending):
                try:
                    node_id, port = coordinator_of(survivor, group)
                except (OSError, AssertionError):
                    continue
                if node_id == 1_000_003 and port == node_port[3]:
                    got = committed(survivor, topic, group, PARTITIONS)
                    assert got == acked[group], (group, got, acked[group])
                    pending.discard(group)
            if pending:
                assert time.monotonic() < deadline, (
                    f"not served by node 3 after the faults: {sorted(pending)}"
                )
                time.sleep(1)
        phase("every group served by node 3 with its acknowledged offsets")
        # And served for real: a member of a group node 1 had resumes from its commit and commits again.
        group = groups[1][0]
        produce(survivor, topic, 30, PARTITIONS)
        after = consume_and_commit(survivor, topic, group, count + 30 - sum(acked[group].values()))
        assert sum(after.values()) == count + 30
        assert all(after[p] >= acked[group][p] for p in acked[group])
        phase("a group of node 1 consumed and committed on node 3")
