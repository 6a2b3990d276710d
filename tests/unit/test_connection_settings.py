"""The connection limits' settings: Kafka's names and defaults, parsing and validation."""

from __future__ import annotations

import pytest

from kcoord.coordinator.cli import build_parser
from kcoord.coordinator.ops import config
from kcoord.coordinator.ops.settings import Settings


def resolve(argv: list[str] = (), env: dict[str, str] | None = None) -> config.Resolved:  # type: ignore[assignment]
    return config.resolve(build_parser().parse_args(["serve", *argv]), env or {})


def test_defaults_are_kafkas_where_kafka_has_the_setting() -> None:
    s = Settings()
    assert s.connections_max_idle_ms == 600_000
    assert s.max_connections == s.max_connections_per_ip == 2_147_483_647
    assert s.max_connections_per_ip_overrides == {}
    # kcoord's own (Kafka's queued.max.request.bytes is unbounded by default; kcoord bounds it)
    assert s.request_receive_timeout_ms == 30_000
    assert s.queued_max_request_bytes == 256 * 1024 * 1024
    assert (s.connection_output_pause_bytes, s.connection_output_max_bytes) == (1 << 20, 128 << 20)
    assert s.queued_max_response_bytes == 512 * 1024 * 1024


def test_flags_environment_and_file_spellings(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "k.toml"  # type: ignore[operator]
    path.write_text(
        'max.connections.per.ip.overrides = ["10.0.0.1:5", "[::1]:7"]\nqueued.max.request.bytes = -1\n'
    )
    r = resolve(
        [
            "--config",
            str(path),
            "--connections-max-idle-ms",
            "-1",
            "--max-connections",
            "100",
            "--connection-output-max-bytes",
            "5000000000",
        ],
        {"KCOORD_REQUEST_RECEIVE_TIMEOUT_MS": "5000", "KCOORD_MAX_CONNECTIONS_PER_IP": "0"},
    )
    s = r.settings
    assert (s.connections_max_idle_ms, s.max_connections, s.connection_output_max_bytes) == (
        -1,
        100,
        5_000_000_000,
    )
    assert (s.request_receive_timeout_ms, s.max_connections_per_ip) == (5000, 0)
    assert s.max_connections_per_ip_overrides == {"10.0.0.1": 5, "::1": 7}
    assert s.queued_max_request_bytes == -1
    assert "max.connections.per.ip.overrides=10.0.0.1:5,::1:7 (config file" in config.describe(r)
    flag = resolve(["--max-connections-per-ip-overrides", "127.0.0.2:3, 0:0:0:0:0:0:0:1:4"]).settings
    assert flag.max_connections_per_ip_overrides == {"127.0.0.2": 3, "::1": 4}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--connections-max-idle-ms", "0"],
            "connections.max.idle.ms (flag --connections-max-idle-ms): 0 is out of",
        ),
        (["--request-receive-timeout-ms", "-2"], "request.receive.timeout.ms"),
        (["--max-connections", "-1"], "max.connections (flag --max-connections)"),
        (["--max-connections-per-ip-overrides", "somehost:3"], "'somehost' is not an IP address"),
        (["--max-connections-per-ip-overrides", "10.0.0.1"], "expected ADDRESS:N"),
        (["--max-connections-per-ip-overrides", "10.0.0.1:x"], "expected an integer"),
        (["--queued-max-request-bytes", "0"], "queued.max.request.bytes"),
        (["--connection-output-pause-bytes", "0"], "connection.output.pause.bytes"),
        (
            ["--connection-output-pause-bytes", "2000", "--connection-output-max-bytes", "1000"],
            "connection.output.pause.bytes (flag --connection-output-pause-bytes): 2000 is greater than "
            "connection.output.max.bytes = 1000 (flag --connection-output-max-bytes)",
        ),
    ],
)
def test_bad_values_name_the_setting(argv: list[str], message: str) -> None:
    with pytest.raises(config.ConfigError) as info:
        resolve(argv)
    assert message in str(info.value)


def test_the_limits_are_listed_last_in_the_server_section() -> None:
    title, options = config.SECTIONS[0]
    names = [o.name for o in options]
    assert title == "server" and names[-1] == "queued.max.response.bytes"
    assert names.index("max.inflight") < names.index("connections.max.idle.ms")
