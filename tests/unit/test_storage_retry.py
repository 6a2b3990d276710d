"""The storage's one retry rule (kcoord.storage.retry.Retry): what a failed attempt means."""

from __future__ import annotations

from kcoord.protocol.errors import ErrorCode
from kcoord.storage.base import StorageError
from kcoord.storage.retry import Retry, Verdict


class Calls:
    def __init__(self, gone: str = "", fail: bool = False) -> None:
        self.refreshes = 0
        self.gone_checks = 0
        self.gone = gone
        self.fail = fail

    async def refresh(self) -> None:
        self.refreshes += 1

    async def topic_gone(self) -> str:
        self.gone_checks += 1
        if self.fail:
            raise StorageError("metadata unreachable")
        return self.gone


def retry(calls: Calls, timeout: float | None = 5.0) -> Retry:
    return Retry(timeout, backoff=0.0, refresh_leaders=calls.refresh, topic_gone=calls.topic_gone)


async def test_a_leadership_error_waits_and_refreshes_the_leaders() -> None:
    calls = Calls()
    r = retry(calls)
    assert await r.failed(ErrorCode.NOT_LEADER_OR_FOLLOWER, "error 6") is Verdict.RETRY
    assert (calls.refreshes, r.attempts, r.last) == (1, 1, "error 6")


async def test_no_answer_counts_as_a_leadership_move() -> None:
    calls = Calls()
    assert await retry(calls).failed(None, "connection lost") is Verdict.RETRY
    assert calls.refreshes == 1


async def test_a_transient_error_waits_without_a_refresh() -> None:
    calls = Calls()
    assert await retry(calls).failed(ErrorCode.NOT_ENOUGH_REPLICAS, "error 19") is Verdict.RETRY
    assert calls.refreshes == 0


async def test_an_error_retrying_cannot_fix_gives_up_at_once() -> None:
    calls = Calls()
    assert await retry(calls).failed(ErrorCode.PRODUCER_FENCED, "error 90") is Verdict.GIVE_UP
    assert calls.refreshes == 0


async def test_unknown_topic_while_the_topic_is_gone_says_why() -> None:
    calls = Calls(gone="the topic no longer exists upstream")
    r = retry(calls)
    assert await r.failed(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "error 3") is Verdict.TOPIC_GONE
    assert r.gone == "the topic no longer exists upstream"


async def test_unknown_topic_while_the_topic_stays_is_a_leadership_move() -> None:
    for calls in (Calls(), Calls(fail=True)):  # an unanswered Metadata counts as "not gone"
        assert await retry(calls).failed(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "error 3") is Verdict.RETRY
        assert (calls.gone_checks, calls.refreshes) == (1, 1)


async def test_past_the_deadline_it_expires() -> None:
    calls = Calls()
    assert await retry(calls, timeout=-1.0).failed(ErrorCode.REQUEST_TIMED_OUT, "error 7") is Verdict.EXPIRED
    assert calls.refreshes == 0


async def test_the_back_off_doubles_up_to_its_cap_and_starts_over_after_a_success() -> None:
    r = Retry(None, backoff=0.001, max_backoff=0.003)
    for _ in range(3):
        await r.wait()
    assert r.backoff == 0.003 and not r.expired()
    r.succeeded()
    assert r.backoff == 0.001
