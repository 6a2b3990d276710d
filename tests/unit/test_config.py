"""``kcoord serve`` configuration: names, sources, precedence and validation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kcoord.coordinator.cli import build_parser, main
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.ops import config
from kcoord.coordinator.ops.settings import Settings


def resolve(argv: list[str] = (), env: dict[str, str] | None = None) -> config.Resolved:  # type: ignore[assignment]
    args = build_parser().parse_args(["serve", *argv])
    return config.resolve(args, env or {})


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "kcoord.toml"
    path.write_text(text)
    return str(path)


def test_defaults_are_the_dataclass_defaults_and_kafkas() -> None:
    r = resolve()
    assert r.settings == Settings()
    assert r.settings.group == GroupConfig()
    assert r.settings.group.min_session_timeout_ms == 6_000
    assert r.settings.group.offsets_retention_ms == 10_080 * 60_000
    assert set(r.sources.values()) == {"default"}
    assert config.describe(r) == "all defaults"


def test_every_settings_and_group_config_field_has_an_option() -> None:
    assert config.all_fields() == config.settings_fields()


def test_names_derive_flag_and_environment_variable() -> None:
    opt = config.BY_NAME["group.min.session.timeout.ms"]
    assert (opt.flag, opt.env) == ("--group-min-session-timeout-ms", "KCOORD_GROUP_MIN_SESSION_TIMEOUT_MS")
    assert config.BY_NAME["bootstrap.server"].flag == "--bootstrap-server"
    assert config.BY_NAME["listen"].env == "KCOORD_LISTEN"


def test_existing_flags_keep_working() -> None:
    s = resolve([
        "--listen", "0.0.0.0:19092", "--bootstrap-server", "a:9092,b:9093", "--advertised-host", "kc.example",
        "--broker-ports", "19093,19094", "--shards", "8", "--storage", "memory", "--internal-topic", "__x",
        "--replication-factor", "1", "--max-frame-size", "2048", "--max-inflight", "10", "--log-level", "debug",
    ]).settings  # fmt: skip
    assert s.listen == ("0.0.0.0", 19092)
    assert s.bootstrap_servers == [("a", 9092), ("b", 9093)]
    assert (s.advertised_host, s.advertised) == ("kc.example", "kc.example")
    assert s.broker_ports == [19093, 19094]
    assert (s.shards, s.storage, s.internal_topic, s.replication_factor) == (8, "memory", "__x", 1)
    assert (s.max_frame_size, s.max_inflight, s.log_level) == (2048, 10, "DEBUG")


def test_toml_file_with_kafka_names_dotted_keys_and_tables(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
listen = "0.0.0.0:9092"
bootstrap.server = ["k1:9092", "k2:9092"]
metrics = "0.0.0.0:9100"
shards = 12
"group.max.session.timeout.ms" = 60000
offsets.retention.minutes = 60

[group]
min.session.timeout.ms = 1000
initial.rebalance.delay.ms = 0
max.size = 100
""",
    )
    r = resolve(["--config", path])
    s = r.settings
    assert s.listen == ("0.0.0.0", 9092) and s.bootstrap_servers == [("k1", 9092), ("k2", 9092)]
    assert s.metrics == ("0.0.0.0", 9100) and s.shards == 12
    g = s.group
    assert (g.min_session_timeout_ms, g.max_session_timeout_ms) == (1000, 60000)
    assert (g.initial_rebalance_delay_ms, g.max_size, g.offsets_retention_ms) == (0, 100, 3_600_000)
    assert r.sources["shards"] == f"config file {path}"
    assert "offsets.retention.minutes=60" in config.describe(r)


def test_precedence_flag_over_env_over_file_over_default(tmp_path: Path) -> None:
    path = write(tmp_path, "shards = 3\nmax.inflight = 7\ngroup.max.size = 5\n")
    env = {"KCOORD_SHARDS": "4", "KCOORD_MAX_INFLIGHT": "8", "KCOORD_CONFIG": path}
    r = resolve(["--shards", "5"], env)
    assert (r.settings.shards, r.settings.max_inflight, r.settings.group.max_size) == (5, 8, 5)
    assert r.settings.max_frame_size == Settings().max_frame_size
    assert r.sources["shards"] == "flag --shards"
    assert r.sources["max.inflight"] == "environment KCOORD_MAX_INFLIGHT"
    assert r.sources["group.max.size"].startswith("config file")


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--shards", "zero"], {}, "invalid value for shards (flag --shards): expected an integer"),
        (["--shards", "0"], {}, "invalid value for shards (flag --shards): 0 is out of range"),
        ([], {"KCOORD_GROUP_MAX_SIZE": "-1"}, "group.max.size (environment KCOORD_GROUP_MAX_SIZE)"),
        (["--storage", "disk"], {}, "storage (flag --storage): 'disk' is not one of kafka, memory"),
        (["--listen", "host:99999"], {}, "listen (flag --listen): port 99999 is out of range"),
        (["--listen", "host:x"], {}, "listen (flag --listen): expected HOST:PORT"),
        (["--log-format", "xml"], {}, "log.format"),
        (["--internal-topic", "bad topic"], {}, "internal.topic"),
        (["--max-frame-size", "10"], {}, "max.frame.size"),
        (
            ["--group-min-session-timeout-ms", "60000"],
            {"KCOORD_GROUP_MAX_SESSION_TIMEOUT_MS": "30000"},
            "group.min.session.timeout.ms (flag --group-min-session-timeout-ms): 60000 is greater than "
            "group.max.session.timeout.ms = 30000 (environment KCOORD_GROUP_MAX_SESSION_TIMEOUT_MS)",
        ),
        (["--metrics", "127.0.0.1:9092", "--listen", "127.0.0.1:9092"], {}, "metrics (flag --metrics)"),
    ],
)
def test_invalid_values_name_the_setting_and_its_source(
    argv: list[str], env: dict[str, str], message: str
) -> None:
    with pytest.raises(config.ConfigError, match=None) as info:
        resolve(argv, env)
    assert message in str(info.value)


def test_file_errors_unknown_keys_wrong_types_and_bad_toml(tmp_path: Path) -> None:
    with pytest.raises(
        config.ConfigError,
        match=r"unknown setting 'group.min.sesion.timeout.ms'.*did you mean "
        r"group.min.session.timeout.ms",
    ):
        resolve(["--config", write(tmp_path, "group.min.sesion.timeout.ms = 1\n")])
    with pytest.raises(
        config.ConfigError, match=r"invalid value for shards \(config file .*\): expected an integer"
    ):
        resolve(["--config", write(tmp_path, 'shards = "many"\n')])
    with pytest.raises(config.ConfigError, match="expected an integer, got True"):
        resolve(["--config", write(tmp_path, "group.max.size = true\n")])
    with pytest.raises(config.ConfigError, match="not valid TOML"):
        resolve(["--config", write(tmp_path, "shards = \n")])
    with pytest.raises(config.ConfigError, match="cannot read config file"):
        resolve(["--config", str(tmp_path / "missing.toml")])


def test_optional_values_accept_empty_and_auto() -> None:
    s = resolve(["--replication-factor", "auto", "--metrics", "", "--advertised-host", ""]).settings
    assert (s.replication_factor, s.metrics, s.advertised_host) == (None, None, None)


def test_unknown_kcoord_environment_variables_are_warned_about() -> None:
    r = resolve([], {"KCOORD_SHARDZ": "3", "KCOORD_SHARDS": "3", "PATH": "/bin"})
    assert r.warnings == ["ignoring unknown environment variable KCOORD_SHARDZ"]


def test_main_exits_2_with_the_setting_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--group-max-size", "0"]) == 2
    err = capsys.readouterr().err
    assert "kcoord serve: error: invalid value for group.max.size (flag --group-max-size)" in err


def test_help_documents_every_option() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kcoord.coordinator", "serve", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    ).stdout
    out = " ".join(out.split())
    for opt in config.OPTIONS:
        assert opt.flag in out and opt.env in out and f"key {opt.name}]" in out
    assert "flag > environment > file > default" in out


def test_consumer_offset_commit_fencing_setting(tmp_path: Path) -> None:
    """kcoord's name for the three commit fences; KIP-1251's (Kafka 4.3) is the default."""
    assert resolve().settings.group.consumer_offset_commit_fencing == "assignment-epoch"
    r = resolve(["--group-consumer-offset-commit-fencing", "Revocation-Epoch"])
    assert r.settings.group.consumer_offset_commit_fencing == "revocation-epoch"
    r = resolve([], {"KCOORD_GROUP_CONSUMER_OFFSET_COMMIT_FENCING": "strict"})
    assert r.settings.group.consumer_offset_commit_fencing == "strict"
    r = resolve(["--config", write(tmp_path, "[group.consumer.offset.commit]\nfencing = 'strict'\n")])
    assert r.settings.group.consumer_offset_commit_fencing == "strict"
    with pytest.raises(config.ConfigError, match="group.consumer.offset.commit.fencing"):
        resolve(["--group-consumer-offset-commit-fencing", "lenient"])


def test_consumer_group_heartbeat_settings(tmp_path: Path) -> None:
    """KIP-848's group.consumer.* settings, with Kafka's names and defaults."""
    group = resolve().settings.group
    assert (group.consumer_session_timeout_ms, group.consumer_heartbeat_interval_ms) == (45_000, 5_000)
    assert group.consumer_max_size == 2**31 - 1
    assert group.consumer_assignors == ("uniform", "range")
    r = resolve(["--group-consumer-assignors", "Range,uniform", "--group-consumer-max-size", "3"])
    assert r.settings.group.consumer_assignors == ("range", "uniform")
    assert r.settings.group.consumer_max_size == 3
    r = resolve(["--config", write(tmp_path, "group.consumer.assignors = ['range']\n")])
    assert r.settings.group.consumer_assignors == ("range",)
    for bad in ("sticky", "range,range", ""):
        with pytest.raises(config.ConfigError, match="group.consumer.assignors"):
            resolve(["--group-consumer-assignors", bad])


def test_tls_settings_that_only_work_together(tmp_path: Path) -> None:
    pem = tmp_path / "kcoord.pem"
    pem.write_text("not read here: the files are loaded at start-up")
    s = resolve([
        "--listener-security-protocol", "ssl", "--ssl-keystore-location", str(pem),
        "--ssl-truststore-location", str(pem), "--ssl-client-auth", "required",
        "--bootstrap-server", "b:9093", "--upstream-security-protocol", "SSL",
        "--upstream-ssl-endpoint-identification-algorithm", "",
    ]).settings  # fmt: skip
    assert (s.listener_security_protocol, s.ssl_client_auth, s.upstream_security_protocol) == (
        "SSL",
        "required",
        "SSL",
    )
    assert s.upstream_ssl_endpoint_identification_algorithm == ""
    refused = {
        "listener.security.protocol": ["--listener-security-protocol", "SSL"],  # no keystore
        "ssl.client.auth": ["--ssl-client-auth", "requested"],  # no truststore
        "upstream.security.protocol": ["--upstream-security-protocol", "SSL"],  # embedded broker
        "ssl.keystore.location": ["--ssl-keystore-location", str(tmp_path / "missing.pem")],
        "upstream.ssl.endpoint.identification.algorithm": [
            "--upstream-ssl-endpoint-identification-algorithm", "dns"
        ],
    }  # fmt: skip
    for name, argv in refused.items():
        with pytest.raises(config.ConfigError, match=f"invalid value for {name}"):
            resolve(argv)


def test_a_cluster_may_have_tls_and_sasl_listeners(tmp_path: Path) -> None:
    pem = tmp_path / "kcoord.pem"
    pem.write_text("not read here: the files are loaded at start-up")
    for protocol in ("SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        s = resolve([
            "--cluster-enabled", "true", "--bootstrap-server", "b:9094",
            "--listener-security-protocol", protocol, "--ssl-keystore-location", str(pem),
            "--upstream-security-protocol", "SASL_SSL", "--upstream-sasl-username", "kcoord",
            "--upstream-sasl-password", "secret",
            *(["--listener-relay-principal", "kcoord"] if protocol == "SSL" else []),
        ]).settings  # fmt: skip
        assert (s.cluster_enabled, s.listener_security_protocol) == (True, protocol)


def test_clients_that_do_not_log_in_run_as_kcoord_upstream_only_when_asked() -> None:
    sasl_upstream = ["--bootstrap-server", "b:9094", "--upstream-security-protocol", "SASL_PLAINTEXT",
                     "--upstream-sasl-username", "kcoord", "--upstream-sasl-password", "secret"]  # fmt: skip
    for listener in ("PLAINTEXT", "SSL"):
        extra = ["--ssl-keystore-location", __file__] if listener == "SSL" else []
        argv = [*sasl_upstream, "--listener-security-protocol", listener, *extra]
        with pytest.raises(config.ConfigError, match="kcoord's own principal"):
            resolve(argv)
        s = resolve([*argv, "--listener-relay-principal", "kcoord"]).settings
        assert s.listener_relay_principal == "kcoord"
    assert resolve([*sasl_upstream, "--listener-security-protocol", "SASL_PLAINTEXT"]).settings


def test_key_passwords_are_not_in_the_startup_log(tmp_path: Path) -> None:
    r = resolve(["--ssl-key-password", "hunter2", "--upstream-ssl-key-password", "s3cret", "--shards", "3"])
    line = config.describe(r)
    assert "hunter2" not in line and "s3cret" not in line
    assert "ssl.key.password=(hidden)" in line and "shards=3" in line
