"""How a kcoord cluster node treats the upstream group coordinator's error codes
(kcoord.coordinator.runtime.membership): retried (the coordinator moved), or fatal (no retry can
succeed, so the node says why and stops instead of looping)."""

from __future__ import annotations

import asyncio

import pytest

from kcoord.coordinator.runtime.membership import ClusterMembership, _Fatal, _Rediscover
from kcoord.protocol.errors import ErrorCode


def membership(session_timeout_ms: int = 4000) -> ClusterMembership:
    async def apply(_: object) -> None:
        return None

    return ClusterMembership(
        [("127.0.0.1", 9092)],
        node_id=7,
        advertised=("127.0.0.1", 9100),
        internal_topic="t",
        num_shards=3,
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=500,
        apply=apply,
        on_fatal=lambda _: None,
    )


def test_invalid_session_timeout_is_fatal_and_names_the_setting() -> None:
    """Apache Kafka answers a JoinGroup with a session below group.min.session.timeout.ms (6 s by
    default) INVALID_SESSION_TIMEOUT; tansu takes any session, so only Kafka ever says this."""
    with pytest.raises(
        _Fatal, match=r"cluster\.session\.timeout\.ms=4000: JoinGroup answered INVALID_SESSION_TIMEOUT"
    ):
        membership(4000)._check(ErrorCode.INVALID_SESSION_TIMEOUT, "JoinGroup")


@pytest.mark.parametrize("error", [ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                   ErrorCode.COORDINATOR_LOAD_IN_PROGRESS])  # fmt: skip
def test_a_moved_coordinator_is_found_again(error: int) -> None:
    with pytest.raises(_Rediscover):
        membership()._check(error, "Heartbeat")


def test_fenced_instance_id_is_fatal() -> None:
    with pytest.raises(_Fatal, match="FENCED_INSTANCE_ID"):
        membership()._check(ErrorCode.FENCED_INSTANCE_ID, "Heartbeat")


def test_a_keepalive_that_loses_its_cancellation_is_still_ended() -> None:
    """On Python 3.11 ``asyncio.wait_for`` returns the result of an operation that completes as the
    task is cancelled, and the cancellation is lost: the keep-alive's loop would go on. ``_end``
    cancels until the task has ended, and lets the caller's own cancellation through."""
    import asyncio

    from kcoord.coordinator.runtime.membership import _end

    async def scenario() -> tuple[int, bool]:
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[int] = loop.create_future()
        rounds = 0

        async def keepalive() -> None:
            nonlocal rounds
            await asyncio.wait_for(answered, 5)  # completes as it is cancelled: the cancel is dropped
            while True:
                rounds += 1
                await asyncio.sleep(0.01)

        task = asyncio.ensure_future(keepalive())
        await asyncio.sleep(0)
        answered.set_result(1)
        await asyncio.wait_for(_end(task), 2)
        return rounds, task.cancelled()

    rounds, cancelled = asyncio.run(scenario())
    assert cancelled
    assert rounds >= 1  # the first cancellation was lost indeed: the loop ran


def test_each_new_member_id_is_told_once_as_it_changes() -> None:
    """A worker tells its supervisor its member id from this hook (the supervisor removes a dead
    worker from the group by it), so the hook sees every change and nothing else."""

    async def scenario() -> list[str]:
        m = membership()
        told: list[str] = []
        m.member_id = "before-the-hook"
        m.on_member_id = told.append
        m.member_id = "a"
        m.member_id = "a"  # a JoinGroup that answers the same id: nothing new
        await m._gone("JoinGroup answered UNKNOWN_MEMBER_ID")
        m.member_id = "b"
        return told

    assert asyncio.run(scenario()) == ["a", "", "b"]
