"""The shipped dashboard and alert rules: Grafana's JSON shape, a runbook per alert, loaded by the
compose file's Prometheus, and Prometheus's own checks and unit tests of the rules (promtool, from
Debian's prometheus package, which scripts/test.sh installs). That they name only metrics kcoord
exports is checked against a real scrape (tests/integration/test_metrics.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml

from kcoord.coordinator.core.events import GROUP_TYPES
from kcoord.coordinator.ops.metrics import api_name
from tests.support.monitoring import (
    ALERT_TESTS,
    ALERTS,
    DASHBOARD,
    REPO,
    SCRAPE_CONFIG,
    dashboard_expressions,
    rule_expressions,
)

PROMTOOL = shutil.which("promtool")
NO_PROMTOOL = "promtool not installed (apt-get install prometheus; scripts/test.sh does it as root)"


def test_the_dashboard_is_grafana_json_with_a_query_per_panel() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "kcoord" and dashboard["panels"]
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        assert all(t["expr"].strip() for t in panel["targets"]), panel["title"]
    titles = [p["title"] for p in dashboard["panels"]]
    assert len(titles) == len(set(titles))


def test_every_alert_has_a_runbook_section() -> None:
    operations = (REPO / "docs" / "operations.md").read_text()
    rules = yaml.safe_load(ALERTS.read_text())
    for rule in (r for g in rules["groups"] for r in g["rules"]):
        anchor = rule["annotations"]["runbook"].split("#", 1)[1]
        assert f"### {rule['alert']}" in operations and anchor == rule["alert"].lower(), rule["alert"]


def test_prometheus_loads_the_rules() -> None:
    scrape = yaml.safe_load(SCRAPE_CONFIG.read_text())
    assert any(path.endswith("alerts.yml") for path in scrape["rule_files"]), scrape


@pytest.mark.skipif(PROMTOOL is None, reason=NO_PROMTOOL)
def test_promtool_checks_the_rules_and_passes_their_unit_tests() -> None:
    assert PROMTOOL is not None
    for args in (["check", "rules", str(ALERTS)], ["test", "rules", str(ALERT_TESTS)]):
        done = subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr


def test_label_values_the_rules_and_the_dashboard_match_are_ones_kcoord_exports() -> None:
    """A matcher on a value kcoord never exports selects nothing, and the alert never fires (API
    names are Kafka's in snake case, offset_commit; not OffsetCommit). The unit tests' input series
    stand for kcoord's, so they are held to the same values."""
    known = {
        "api": {api_name(key) for key in range(200)},
        "protocol": set(GROUP_TYPES),
        "type": set(GROUP_TYPES),
    }
    tests = yaml.safe_load(ALERT_TESTS.read_text())
    series = [s["series"] for case in tests["tests"] for s in case["input_series"]]
    for text in [*rule_expressions(), *dashboard_expressions(), *series]:
        for label, value in re.findall(r'\b(api|protocol|type)\s*(?:=~|!~|=|!=)\s*"([^"]*)"', text):
            for alternative in value.split("|"):
                assert alternative in known[label], (text, label, alternative)
