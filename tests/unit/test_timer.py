"""The keyed timer queue: replace-by-key, cancel, deadline order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kcoord.coordinator.core.timer import TimerQueue


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
    assert q.next_deadline() == 100  # a wake-up time: at or before the live deadline
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


def test_pushing_a_deadline_back_does_not_grow_the_heap() -> None:
    q = TimerQueue()
    q.schedule("member", 10_000)
    for now in range(0, 100_000, 3_000):  # a heartbeat every 3 s pushes the deadline back
        q.schedule("member", now + 10_000)
    assert len(q._heap) == 1
    assert q.pop_due(108_999) == []  # the first wake-up re-arms it at its live deadline
    assert q.next_deadline() == 99_000 + 10_000
    assert len(q._heap) == 1
    [due] = q.pop_due(109_000)
    assert due.key == "member" and due.deadline_ms == 109_000


class _EagerModel:
    """The reference semantics: a sorted list of live (deadline, seq, key, payload)."""

    def __init__(self) -> None:
        self.live: dict[str, tuple[int, int, object]] = {}
        self.seq = 0

    def schedule(self, key: str, deadline: int, payload: object) -> None:
        self.seq += 1
        self.live[key] = (deadline, self.seq, payload)

    def cancel(self, key: str) -> bool:
        return self.live.pop(key, None) is not None

    def push_back(self, key: str, deadline: int) -> bool:
        """Scheduling a live key again with its own payload."""
        if key not in self.live:
            return False
        self.schedule(key, deadline, self.live[key][2])
        return True

    def next_deadline(self) -> int | None:
        return min((d for d, _, _ in self.live.values()), default=None)

    def pop_next_due(self, now: int) -> tuple[str, int, object] | None:
        if not self.live:
            return None
        key, (deadline, _, payload) = min(self.live.items(), key=lambda kv: (kv[1][0], kv[1][1]))
        if deadline > now:
            return None
        del self.live[key]
        return key, deadline, payload


@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("schedule"), st.sampled_from("abcde"), st.integers(0, 50)),
            st.tuples(st.just("cancel"), st.sampled_from("abcde"), st.just(0)),
            st.tuples(st.just("push_back"), st.sampled_from("abcde"), st.integers(0, 50)),
            st.tuples(st.just("pop"), st.just(""), st.integers(0, 50)),
            st.tuples(st.just("next"), st.just(""), st.just(0)),
        ),
        max_size=80,
    )
)
def test_lazy_heap_matches_eager_semantics(ops: list[tuple[str, str, int]]) -> None:
    q, model = TimerQueue(), _EagerModel()
    for i, (op, key, value) in enumerate(ops):
        if op == "schedule":
            q.schedule(key, value, i)
            model.schedule(key, value, i)
        elif op == "cancel":
            assert q.cancel(key) == model.cancel(key)
        elif (
            op == "push_back"
        ):  # its own copy of schedule()'s arming (the hot path): held to the same semantics
            assert q.push_back(key, value) == model.push_back(key, value)
        elif op == "pop":
            due = q.pop_next_due(value)
            expected = model.pop_next_due(value)
            assert (None if due is None else (due.key, due.deadline_ms, due.payload)) == expected
        else:
            wake_up, deadline = q.next_deadline(), model.next_deadline()
            assert (wake_up is None) == (deadline is None)
            assert wake_up is None or deadline is None or wake_up <= deadline
        assert len(q) == len(model.live)
        assert {k: q.deadline(k) for k in "abcde"} == {k: model.live.get(k, (None,))[0] for k in "abcde"}


def test_push_back_moves_a_live_timer_and_keeps_its_payload() -> None:
    q = TimerQueue()
    assert q.push_back("k", 50) is False and not q.is_scheduled("k")
    q.schedule("k", 100, "payload")
    q.schedule("other", 150, "o")
    assert q.push_back("k", 200) is True
    assert [(d.key, d.deadline_ms, d.payload) for d in q.pop_due(1_000)] == [
        ("other", 150, "o"),
        ("k", 200, "payload"),
    ]
