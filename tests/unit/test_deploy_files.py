"""Dockerfile, docker-compose.yml and deploy/prometheus.yml are valid and agree with each other.

No Docker engine is needed: the files are parsed, and the kcoord command lines in them are run
through kcoord's own configuration code, so a flag typo in a deploy file fails here, not at 3 a.m.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from kcoord.coordinator.cli import build_parser
from kcoord.coordinator.ops import config

REPO = Path(__file__).resolve().parents[2]


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, comments dropped, backslash continuations joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        instruction, _, args = line.partition(" ")
        out.append((instruction.upper(), args.strip()))
    assert not pending, "dangling line continuation"
    return out


def resolve_serve(argv: list[str], env: dict[str, str] | None = None) -> config.Resolved:
    args = build_parser().parse_args(argv)
    assert args.command == "serve"
    return config.resolve(args, env or {})


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def test_dockerfile_is_small_non_root_with_kcoord_as_entrypoint() -> None:
    instructions = dockerfile_instructions((REPO / "Dockerfile").read_text())
    names = [i for i, _ in instructions]
    assert set(names) <= {"FROM", "ENV", "COPY", "RUN", "USER", "WORKDIR", "EXPOSE", "HEALTHCHECK", "ENTRYPOINT",
                          "CMD", "ARG", "LABEL"}  # fmt: skip
    # a build stage with a compiler for the C decoder, then the slim runtime image
    assert [a for i, a in instructions if i == "FROM"] == ["python:3.11-slim AS build", "python:3.11-slim"]
    users = [a for i, a in instructions if i == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert names.index("USER") < names.index("ENTRYPOINT")
    runs = " ".join(a for i, a in instructions if i == "RUN")
    assert "pip install" in runs and f"useradd --create-home --uid 10001 --user-group {users[-1]}" in runs
    assert "DECODER_BACKEND == 'c'" in runs
    for i, a in instructions:
        if i == "COPY" and not a.startswith("--from="):
            for source in a.split()[:-1]:
                assert (REPO / source).exists(), source
    entrypoint = json.loads(next(a for i, a in instructions if i == "ENTRYPOINT"))
    assert entrypoint == ["kcoord"]
    cmd = json.loads(next(a for i, a in instructions if i == "CMD"))
    settings = resolve_serve(cmd).settings
    assert settings.listen == ("0.0.0.0", 9092) and settings.metrics == ("0.0.0.0", 9100)
    exposed = {int(p) for i, a in instructions if i == "EXPOSE" for p in a.split()}
    assert {9092, 9093, 9100} <= exposed


def test_dockerignore_keeps_the_context_small() -> None:
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()}
    assert {".git", ".venv", "tests"} <= ignored
    assert "README.md" not in ignored  # pyproject.toml names it as the readme


def test_compose_has_apache_kafka_in_kraft_mode_for_one_node(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"kafka", "kcoord", "prometheus"}
    kafka = compose["services"]["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    env = {k: str(v) for k, v in kafka["environment"].items()}
    assert "controller" in env["KAFKA_PROCESS_ROLES"] and "broker" in env["KAFKA_PROCESS_ROLES"]
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://kafka:9092"
    for key in ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
                "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"):  # fmt: skip
        assert env[key] == "1", key
    assert "ports" not in kafka  # clients reach Kafka only through kcoord


def test_compose_kcoord_fronts_kafka_and_publishes_its_ports(compose: dict[str, Any]) -> None:
    kcoord = compose["services"]["kcoord"]
    assert kcoord["build"] == "." and kcoord["depends_on"]["kafka"]["condition"] == "service_healthy"
    command = kcoord["command"] if isinstance(kcoord["command"], list) else shlex.split(kcoord["command"])
    env = {k: str(v) for k, v in kcoord.get("environment", {}).items()}
    resolved = resolve_serve([*map(str, command)], env)
    s = resolved.settings
    assert s.bootstrap_servers == [("kafka", 9092)]
    assert s.advertised == "localhost"
    assert s.listen == ("0.0.0.0", 9092) and s.broker_ports == [9093]
    assert s.metrics is not None
    published = {tuple(map(int, p.split(":"))) for p in kcoord["ports"]}
    # Port per broker: clients are told these exact ports, so host port must equal container port.
    assert {(9092, 9092), (9093, 9093), (s.metrics[1], s.metrics[1])} <= published


def test_prometheus_scrapes_kcoords_metrics_port(compose: dict[str, Any]) -> None:
    prometheus = compose["services"]["prometheus"]
    assert prometheus["image"].startswith("prom/prometheus:")
    mounts = {v.split(":")[0]: v.split(":")[1] for v in prometheus["volumes"]}
    source = mounts.get("./deploy/prometheus.yml")
    assert source == "/etc/prometheus/prometheus.yml"
    scrape = yaml.safe_load((REPO / "deploy" / "prometheus.yml").read_text())
    [job] = [j for j in scrape["scrape_configs"] if j["job_name"] == "kcoord"]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    targets = [t for sc in job["static_configs"] for t in sc["targets"]]
    command = compose["services"]["kcoord"]["command"]
    metrics = resolve_serve([*map(str, command)]).settings.metrics
    assert metrics is not None
    assert targets == [f"kcoord:{metrics[1]}"]
