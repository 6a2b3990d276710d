"""The supervisor's /metrics: every worker's samples labelled, each metric family written once."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kcoord.coordinator.workers.endpoint import answer
from kcoord.coordinator.workers.scrape import merge_metrics


def exposition(commits: float, loaded: float) -> str:
    registry = CollectorRegistry()
    Counter("kcoord_commits", "Offset commits", ["api"], registry=registry).labels(api="OffsetCommit").inc(
        commits
    )
    Gauge("kcoord_up", "Up", registry=registry).set(loaded)
    return generate_latest(registry).decode()


def test_merged_text_parses_and_keeps_every_worker_apart() -> None:
    merged = merge_metrics({0: exposition(5, 1), 1: exposition(7, 0)})
    families = {f.name: f for f in text_string_to_metric_families(merged)}
    commits = {
        (s.labels["worker"], s.labels["api"]): s.value
        for s in families["kcoord_commits"].samples
        if s.name == "kcoord_commits_total"
    }
    assert commits == {("0", "OffsetCommit"): 5.0, ("1", "OffsetCommit"): 7.0}
    assert {s.labels["worker"]: s.value for s in families["kcoord_up"].samples} == {"0": 1.0, "1": 0.0}
    assert merged.count("# TYPE kcoord_up gauge") == 1
    assert merged.count("# HELP kcoord_commits_total Offset commits") <= 1


def test_a_worker_missing_from_the_scrape_is_left_out() -> None:
    merged = merge_metrics({1: exposition(3, 1)})
    workers = {s.labels["worker"] for f in text_string_to_metric_families(merged) for s in f.samples}
    assert workers == {"1"}


def test_readiness_needs_every_worker_running() -> None:
    status, _, body = asyncio.run(answer("/readyz", lambda: {0: None, 1: None}, stopping=False))
    assert status == 503 and b"not running" in body
    status, _, _ = asyncio.run(answer("/healthz", lambda: {0: None}, stopping=False))
    assert status == 200  # the supervisor's own liveness: it replaces dead workers itself
    status, _, _ = asyncio.run(answer("/healthz", lambda: {0: None}, stopping=True))
    assert status == 503
