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
from tests.support.compose_files import load_compose
from tests.support.docker_images import context_files, dockerignore_rules, in_build_context

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
    # As docker-compose reads it with none of its HOST_PORT_* variables set: the documented defaults.
    return load_compose(REPO / "docker-compose.yml")


def package_folders() -> list[str]:
    """src/kcoord/ and every package folder under it (relative paths), as the wheel's package finder sees them."""
    package = REPO / "src" / "kcoord"
    return sorted(p.parent.relative_to(REPO).as_posix() for p in package.rglob("__init__.py")
                  if "__pycache__" not in p.parts)  # fmt: skip


def build_stage_copy_sources() -> list[str]:
    """Sources of the build stage's COPY instructions (the stage that runs pip wheel)."""
    instructions = dockerfile_instructions((REPO / "Dockerfile").read_text())
    stages: list[list[tuple[str, str]]] = []
    for instruction, args in instructions:
        if instruction == "FROM":
            stages.append([])
        stages[-1].append((instruction, args))
    [build] = [st for st in stages if any(i == "RUN" and "pip wheel" in a for i, a in st)]
    return [src for i, a in build if i == "COPY" and not a.startswith("--from=") for src in a.split()[:-1]]


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
    # The installed entry point must start: a module the CLI imports but the wheel lacks fails the build.
    assert "kcoord --help" in runs and "kcoord serve --help" in runs
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
    assert {".git", ".venv", "tests", "bench", "support"} <= ignored
    assert "README.md" not in ignored  # pyproject.toml names it as the readme
    rules = dockerignore_rules(REPO)
    for rel in (
        ".venv/bin/python",
        "tests/unit/test_deploy_files.py",
        "src/kcoord/protocol/__pycache__/x.pyc",
        "bench/x.py",
        "support/procs.py",
    ):
        assert not in_build_context(rel, rules), rel


def test_every_package_folder_gets_into_the_wheel_the_image_builds() -> None:
    """A bug this test guards against: cli.py imported kcoord.analytics, the Dockerfile's COPY list lacked analytics/.

    Whatever the build stage copies, every package under src/kcoord/ must reach pip wheel: either
    the stage copies the whole context (or src/), or it names the folder, and .dockerignore keeps its files.
    """
    folders = package_folders()
    assert "src/kcoord/analytics" in folders  # the folder that went missing
    sources = {src.rstrip("/") for src in build_stage_copy_sources()}
    context = context_files(REPO)
    for folder in folders:
        copied = {".", "src", "src/kcoord", folder} & sources
        assert copied, f"the build stage does not copy {folder}/"
        inside = [f for f in context if f.startswith(folder + "/") and f.endswith(".py")]
        assert f"{folder}/__init__.py" in inside, f".dockerignore leaves {folder}/ out of the build context"
        tracked_modules = {p.relative_to(REPO).as_posix() for p in (REPO / folder).rglob("*.py")
                           if "__pycache__" not in p.parts}  # fmt: skip
        assert tracked_modules <= set(inside), f"{folder}/: {sorted(tracked_modules - set(inside))[:5]}"
    for needed in ("pyproject.toml", "setup.py", "README.md", "src/kcoord/protocol/_cdecode.c",
                   "src/kcoord/protocol/py.typed"):  # fmt: skip
        assert needed in context, needed
    schemas = [f for f in context if f.startswith("src/kcoord/protocol/schemas/") and f.endswith(".json")]
    assert schemas, "the protocol's JSON schemas are not in the build context"


def test_healthcheck_follows_the_configured_metrics_address() -> None:
    instructions = dockerfile_instructions((REPO / "Dockerfile").read_text())
    [check] = [a for i, a in instructions if i == "HEALTHCHECK"]
    command = json.loads(check[check.index("CMD") + 3 :].strip())
    # `kcoord health` resolves --metrics / KCOORD_METRICS / the config file as `kcoord serve` does.
    assert command == ["kcoord", "health"]
    assert build_parser().parse_args(command[1:]).command == "health"


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


def test_compose_host_ports_move_together_when_overridden() -> None:
    """The container tests move the host ports; kcoord must listen where it publishes (port per broker)."""
    env = {"HOST_PORT_KCOORD": "21092", "HOST_PORT_BROKER": "21093", "HOST_PORT_METRICS": "21100",
           "HOST_PORT_PROMETHEUS": "21090"}  # fmt: skip
    services = load_compose(REPO / "docker-compose.yml", env)["services"]
    s = resolve_serve([*map(str, services["kcoord"]["command"])]).settings
    assert s.listen == ("0.0.0.0", 21092) and s.broker_ports == [21093]
    published = set(services["kcoord"]["ports"])
    assert published == {"21092:21092", "21093:21093", f"21100:{s.metrics[1] if s.metrics else 0}"}
    assert services["prometheus"]["ports"] == ["21090:9090"]
