"""Docker for the container tests: skip with the reason when there is no engine or image, compose
projects that always come down, and a group round trip from the host with confluent-kafka.

An engine comes from scripts/docker_engine.sh and the images from scripts/build_images.sh
(scripts/test.sh runs both before pytest); the tests never build or pull on their own, so a missing
image is a skip that names it, not a ten-minute build inside a test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from .docker_images import REASON_FILE as BUILD_REASON_FILE
from .docker_images import docker_cli, missing_images

REPO = Path(__file__).resolve().parents[2]
BUILD_HINT = "run scripts/docker_engine.sh and scripts/build_images.sh"
ENGINE_REASON_FILE = REPO / ".cache" / "docker-engine.reason"


def _script_said(path: Path) -> str:
    """What scripts/docker_engine.sh or build_images.sh last gave as its reason for failing, if anything."""
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def engine_problem() -> str | None:
    """None when a Docker engine answers, otherwise why not (for the skip reason)."""
    try:
        cli = docker_cli()
    except Exception as exc:
        return str(exc)
    try:
        proc = subprocess.run(
            [cli, "version", "--format", "{{.Server.Version}}"], capture_output=True, timeout=15
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{cli} version: {exc}"
    if proc.returncode != 0:
        return proc.stderr.decode(errors="replace").strip().splitlines()[-1] if proc.stderr else "no answer"
    return None


def require_engine() -> None:
    problem = engine_problem()
    if problem is not None:
        said = _script_said(ENGINE_REASON_FILE)
        pytest.skip(f"no Docker engine: {said}" if said else f"no Docker engine: {problem} ({BUILD_HINT})")


def require_images(*tags: str) -> None:
    require_engine()
    missing = missing_images(tags)
    if missing:
        said = _script_said(BUILD_REASON_FILE)
        why = f"scripts/build_images.sh failed: {said}" if said else BUILD_HINT
        pytest.skip(f"images not built: {', '.join(missing)} ({why})")


def docker(*args: str, check: bool = True, timeout: float = 120) -> str:
    proc = subprocess.run([docker_cli(), *args], capture_output=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {proc.stderr.decode(errors='replace')[-2000:]}")
    return proc.stdout.decode(errors="replace").strip()


def health(container: str) -> str:
    """'healthy', 'starting', 'unhealthy', or the state ('exited', ...) of a container without a check."""
    state = json.loads(docker("inspect", "--format", "{{json .State}}", container))
    if not state.get("Running"):
        return str(state.get("Status"))
    return str((state.get("Health") or {}).get("Status", "running"))


def wait_healthy(containers: Mapping[str, str], timeout: float, logs: Any = None) -> None:
    """Wait for every container (name -> id) to report healthy; fail naming the ones that did not."""
    deadline = time.monotonic() + timeout
    while True:
        states = {name: health(cid) for name, cid in containers.items()}
        if all(s == "healthy" for s in states.values()):
            return
        dead = {n: s for n, s in states.items() if s in ("exited", "dead", "unhealthy")}
        if dead or time.monotonic() > deadline:
            detail = logs() if logs else ""
            raise AssertionError(f"not healthy after {timeout:.0f}s: {states}\n{detail}")
        time.sleep(1)


def http_get(url: str, timeout: float = 5) -> tuple[int, bytes]:
    """(status, body); status 0 when nothing answers (yet)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError as exc:
        return 0, str(exc).encode()


class ComposeProject:
    """``docker-compose -p NAME -f FILE [-f OVERRIDE]`` with its own project name (containers,
    network, volumes). ``override`` (service -> settings, merged over FILE the way docker-compose
    merges a second ``-f`` file) is how a test changes what it must without editing FILE."""

    def __init__(self, file: Path, env: Mapping[str, str], override: Mapping[str, Any] | None = None) -> None:
        compose = shutil.which("docker-compose")
        if compose is None:
            pytest.skip(f"no docker-compose ({BUILD_HINT})")
        self.cli = compose
        self.file = file
        self.name = f"kcoordtest{uuid.uuid4().hex[:10]}"
        # Only what compose needs: the port variables, and no KCOORD_* leaking from the test process.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")} | dict(env)
        self.files = [file]
        self._tmp = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        if override:
            extra = self._tmp / "override.yml"
            extra.write_text(json.dumps({"services": override}))  # JSON is YAML
            self.files.append(extra)

    def private_file(self, name: str, text: str) -> Path:
        """A file of this project's own (world-readable: containers may run as another user), to mount."""
        path = self._tmp / name
        path.write_text(text)
        path.chmod(0o644)
        self._tmp.chmod(0o755)
        return path

    def run(self, *args: str, timeout: float = 300, check: bool = True) -> str:
        files = [arg for f in self.files for arg in ("-f", str(f))]
        proc = subprocess.run(
            [self.cli, "-p", self.name, *files, *args],
            capture_output=True,
            timeout=timeout,
            env=self.env,
            cwd=self.file.parent,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"docker-compose {' '.join(args)}: {proc.stderr.decode(errors='replace')[-3000:]}"
            )
        return proc.stdout.decode(errors="replace")

    def container(self, service: str) -> str:
        cid = self.run("ps", "-q", service).strip()
        assert cid, f"no container for {service}"
        return cid

    def network(self) -> str:
        return f"{self.name}_default"

    def logs(self, tail: int = 40) -> str:
        try:
            return self.run("logs", "--no-color", "--tail", str(tail), check=False, timeout=60)[-12000:]
        except subprocess.SubprocessError as exc:
            return f"(no logs: {exc})"

    @contextmanager
    def up(self) -> Iterator[ComposeProject]:
        try:
            # --no-build: the images come from scripts/build_images.sh (checked before this).
            self.run("up", "-d", "--no-build", timeout=600)
            yield self
        finally:
            self.run("down", "-v", "--remove-orphans", "-t", "5", check=False, timeout=300)
            shutil.rmtree(self._tmp, ignore_errors=True)


# -- a consumer group round trip from the host (confluent-kafka / librdkafka) -------------------------
def create_topic(bootstrap: str, topic: str, partitions: int, replication: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, replication)], operation_timeout=30)
    futures[topic].result(60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            return
        time.sleep(0.5)
    raise AssertionError(f"topic {topic} did not appear with {partitions} partitions")


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"v%06d" % i, partition=i % partitions)
    assert producer.flush(60) == 0, "records not acknowledged"


def consume_and_commit(
    bootstrap: str, topic: str, group: str, expected: int, timeout: float = 90
) -> dict[int, int]:
    """Join ``group``, consume until ``expected`` records came, commit synchronously (acknowledged);
    returns partition -> the committed offset the coordinator acknowledged."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 10000,
        }
    )
    try:
        consumer.subscribe([topic])
        consumed = 0
        deadline = time.monotonic() + timeout
        while consumed < expected and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                assert msg.error() is None, msg.error()
                consumed += 1
        assert consumed == expected, f"{group}: consumed {consumed} of {expected}"
        acked: list[TopicPartition] = consumer.commit(asynchronous=False)  # raises unless acknowledged
        return {tp.partition: tp.offset for tp in acked if tp.error is None}
    finally:
        consumer.close()


def committed(bootstrap: str, topic: str, group: str, partitions: int, timeout: float = 30) -> dict[int, int]:
    """partition -> committed offset, read back by a fresh client of ``group`` (OffsetFetch)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=timeout)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def group_round_trip(bootstrap: str, topic: str, group: str, count: int, partitions: int) -> dict[int, int]:
    """Produce, consume in a group and commit, then re-read the committed offsets; returns them."""
    produce(bootstrap, topic, count, partitions)
    acked = consume_and_commit(bootstrap, topic, group, count)
    assert sum(acked.values()) == count, acked
    read_back = committed(bootstrap, topic, group, partitions)
    assert read_back == acked, (read_back, acked)
    return read_back
