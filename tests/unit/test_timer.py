"""The keyed timer queue: replace-by-key, cancel, deadline order."""

from __future__ import annotations

from coordinator.timer import TimerQueue


def test_pop_due_returns_due_timers_in_deadline_order() -> None:
    q = TimerQueue()
    q.schedule("b", 200, "B")
    q.schedule("a", 100, "A")
    q.schedule("c", 300, "C")
    due = q.pop_due(250)
    assert [(d.key, d.deadline_ms, d.payload) for d in due] == [("a", 100, "A"), ("b", 200, "B")]
    assert q.next_deadline() == 300
    assert len(q) == 1


def test_scheduling_a_key_again_replaces_its_timer() -> None:
    q = TimerQueue()
    q.schedule("k", 100, 1)
    q.schedule("k", 500, 2)
    assert q.pop_due(400) == []
    assert q.next_deadline() == 500
    [due] = q.pop_due(500)
    assert due.payload == 2
    assert q.next_deadline() is None


def test_cancel_disarms_and_reports_whether_armed() -> None:
    q = TimerQueue()
    q.schedule("k", 100)
    assert q.cancel("k") is True
    assert q.cancel("k") is False
    assert q.pop_due(1_000) == []
    assert q.next_deadline() is None


def test_equal_deadlines_fire_in_scheduling_order() -> None:
    q = TimerQueue()
    for key in ["x", "y", "z"]:
        q.schedule(key, 100)
    assert [d.key for d in q.pop_due(100)] == ["x", "y", "z"]


def test_pop_next_due_fires_one_at_a_time() -> None:
    q = TimerQueue()
    q.schedule("a", 100)
    q.schedule("b", 100)
    first = q.pop_next_due(100)
    assert first is not None and first.key == "a"
    q.cancel("b")  # a callback cancelling a later timer is honoured
    assert q.pop_next_due(100) is None
    assert q.deadline("a") is None and not q.is_scheduled("b")
