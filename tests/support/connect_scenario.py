"""KIP-415 incremental cooperative rebalancing between two real Connect workers, as one reusable check."""

from __future__ import annotations

from collections.abc import Callable

from support.java import JavaPeer


def two_workers_share_work(
    bootstrap: str, group: str, java_peer: Callable[..., JavaPeer], session_ms: int
) -> None:
    """The first worker takes everything; when a second joins, the first revokes half of its work and a
    follow-up rebalance hands it over, so the two end up with disjoint halves of 2 connectors x 3 tasks."""
    common = ["--bootstrap", bootstrap, "--group", group, "--connectors", "2", "--tasks", "3",
              "--session-timeout-ms", str(session_ms), "--max-seconds", "180"]  # fmt: skip
    w1 = java_peer("ConnectWorkerPeer", [*common, "--worker-id", "w1"], name="w1")
    first = w1.wait_for("assignment", timeout=60)
    assert first["isLeader"] and first["error"] == 0
    assert first["connectors"] == ["c0", "c1"] and len(first["tasks"]) == 6

    w2 = java_peer("ConnectWorkerPeer", [*common, "--worker-id", "w2"], name="w2")
    got = w2.wait_for("assignment", lambda e: e["tasks"], timeout=120)
    mine = w1.wait_for("assignment", lambda e: e["generation"] == got["generation"], timeout=30)
    assert set(mine["tasks"]).isdisjoint(got["tasks"])
    assert sorted(mine["tasks"] + got["tasks"]) == first["tasks"]
    assert sorted(mine["connectors"] + got["connectors"]) == ["c0", "c1"]
    assert w1.latest("revoked") is not None
    for worker in (w2, w1):
        assert worker.stop() == 0
        assert worker.latest("closed")["exitCode"] == 0
