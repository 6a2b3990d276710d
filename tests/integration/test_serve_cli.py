"""The command line's edges with a real kcoord: output into a closed pipe, a bad ``--listen``, a
derived broker port that is taken, and ``kcoord groups list``'s TYPE and PROTOCOL columns."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from support import REPO
from support.kcoord_process import KcoordProcess
from support.ports import free_port_block
from support.workload import create_topic, unique
from tests.support.wire import commit_offset

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kcoord() -> Iterator[KcoordProcess]:
    with KcoordProcess("--shards", "4") as proc:
        yield proc


def kcoord_cli(*args: str, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kcoord.coordinator", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        timeout=60,
    )


def test_output_into_a_closed_pipe_ends_quietly(kcoord: KcoordProcess) -> None:
    """``kcoord groups ... | head`` once head has left: the reading end is closed before kcoord
    writes anything, so every write fails (not only a late one, as with a real head)."""
    topic = unique("pipe-topic")
    create_topic(kcoord.bootstrap, topic, 1)
    assert commit_offset(kcoord.bootstrap, unique("pipe-group"), topic, 1) == 0
    for args in (["shards"], ["--json", "list"], ["list"]):
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            result = kcoord_cli("groups", "--bootstrap-server", kcoord.bootstrap, *args, stdout=write_end)
        finally:
            os.close(write_end)
        assert result.stderr == "", result.stderr
        assert result.returncode == 141, args  # as a command ended by SIGPIPE reports in a shell


def test_groups_list_shows_type_and_protocol_like_kafka_groups(kcoord: KcoordProcess) -> None:
    group, topic = unique("list-type-group"), unique("list-type-topic")
    create_topic(kcoord.bootstrap, topic, 1)
    assert commit_offset(kcoord.bootstrap, group, topic, 5) == 0  # an Empty classic group
    result = kcoord_cli("groups", "--bootstrap-server", kcoord.bootstrap, "list")
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["GROUP", "TYPE", "PROTOCOL", "STATE"]
    assert next(r.split() for r in rows if r.startswith(group)) == [group, "Classic", "-", "Empty"]


def test_a_listen_address_without_a_port_names_the_setting() -> None:
    result = kcoord_cli("serve", "--listen", "notaport")
    assert result.returncode == 2
    assert "listen" in result.stderr and "'notaport' (no port)" in result.stderr, result.stderr


def test_a_listen_host_that_does_not_resolve_names_the_setting_before_the_broker_starts() -> None:
    result = kcoord_cli("serve", "--listen", "no-such-host.invalid:9092")
    assert result.returncode == 1
    assert "cannot listen on no-such-host.invalid:9092 (listen)" in result.stderr, result.stderr
    assert "embedded tansu" not in result.stderr  # it failed before starting a broker


def test_a_taken_derived_broker_port_is_an_error_unless_automatic_ports_are_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = free_port_block(4)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port + 1))  # the first broker's derived port
        squatter.listen(1)
        monkeypatch.setenv("KCOORD_BROKER_PORTS_AUTO", "false")
        refused = KcoordProcess("--shards", "1", "--storage", "memory", port=port)
        with pytest.raises(RuntimeError, match="exited with 1"):
            refused.start()
        [line] = refused.log_lines("kcoord failed to start")
        assert f"port {port + 1} for broker" in line and "broker.ports.auto=true" in line, line
        monkeypatch.setenv("KCOORD_BROKER_PORTS_AUTO", "true")
        with KcoordProcess("--shards", "1", "--storage", "memory", port=port) as auto:
            [warning] = auto.log_lines(f"port {port + 1} for broker")
            assert "serving it on" in warning
