"""The metric names in the shipped Grafana dashboard and Prometheus rules (deploy/), and the series a
kcoord scrape can show: for the tests that hold the two together."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "deploy" / "prometheus" / "alerts.yml"
ALERT_TESTS = REPO / "deploy" / "prometheus" / "alerts_test.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "kcoord.json"
SCRAPE_CONFIG = REPO / "deploy" / "prometheus.yml"

# Prometheus's own series next to an exporter's: the scrape's health.
PROMETHEUS_SERIES = frozenset({"up"})
_SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"),
             "gauge": ("",), "summary": ("", "_sum", "_count", "_created"), "info": ("_info",),
             "unknown": ("",)}  # fmt: skip


def exported_series(exposition: str) -> set[str]:
    """Every series name a scrape with this text exposition can show (a family without samples yet
    included: its ``# TYPE`` line is there)."""
    names: set[str] = set()
    for family, kind in re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.M):
        base = family.removesuffix("_total") if kind == "counter" else family
        names.update(base + suffix for suffix in _SUFFIXES[kind])
    return names


def rule_expressions() -> list[str]:
    rules = yaml.safe_load(ALERTS.read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    exprs += [v["query"] for v in dashboard["templating"]["list"] if v.get("type") == "query"]
    return exprs


def series_named(expr: str) -> set[str]:
    """The metric names an expression selects (label names, functions and keywords are not)."""
    without_labels = re.sub(r"\{[^}]*\}", "", expr)
    words = set(re.findall(r"\b(?:kcoord|process|python)_[a-zA-Z0-9_]+\b|\bup\b", without_labels))
    return words


OPERATIONS = REPO / "docs" / "operations.md"


def documented_metrics() -> set[str]:
    """The metric names in docs/operations.md's metrics table (the first cell of each row, which
    may name several), as a scrape shows them: counters with ``_total``, histograms by base name."""
    section = OPERATIONS.read_text().split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([a-z_]+)`", row.split("|")[1])}


def exported_metrics(exposition: str) -> set[str]:
    """The metric names of a text exposition, one per family, as its ``# TYPE`` lines name them."""
    return set(re.findall(r"^# TYPE (\S+) \S+$", exposition, re.M))
