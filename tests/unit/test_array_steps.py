"""Large group answers encoded in steps: the same bytes as at once, in queue order, a step per
loop iteration, dropped once their client left (protocol/array_steps.py, net/loop_steps.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.coordinator.net import loop_steps
from kcoord.coordinator.net.dispatch import _ANSWER_ARRAYS, ENCODE_ENTRIES_PER_STEP
from kcoord.coordinator.net.loop_steps import LoopSteps
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.array_steps import SteppedResponse, steppable
from kcoord.protocol.codec import Message
from kcoord.protocol.messages import KCOORD_VERSIONS, RESPONSES, ApiKey
from kcoord.protocol.primitives import CodecError
from tests.unit.test_codec_roundtrip import message_strategy

# Every (api, version) kcoord serves whose answer has the array dispatch.py may encode in steps.
CASES = [
    (api_key, version)
    for api_key, field in _ANSWER_ARRAYS.items()
    for version in range(KCOORD_VERSIONS[api_key][0], KCOORD_VERSIONS[api_key][1] + 1)
    if any(f.name == field and f.present_in(version) for f in RESPONSES[api_key].SCHEMA.fields)
]


def encode_in_steps(api_key: int, version: int, response: Message, field: str, count: int) -> bytes:
    encoding = SteppedResponse(api_key, version, 42, response, field)
    while not encoding.done:
        encoding.step(count)
    return encoding.frame()


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=lambda v: str(v))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), count=st.sampled_from([1, 7, 100, 5000]), repeat=st.sampled_from([1, 50, 400]))
def test_stepped_frame_is_the_frame_encoded_at_once(
    api_key: int, version: int, data: st.DataObject, count: int, repeat: int
) -> None:
    field = _ANSWER_ARRAYS[api_key]
    response = data.draw(message_strategy(RESPONSES[api_key], version, unknown_tags=False))
    # Repeated so that the array's length takes more than one byte (compact lengths over 127).
    setattr(response, field, (getattr(response, field) or []) * repeat)
    assert steppable(response, version, field)
    before = frames.encode_response(api_key, version, 42, response)
    assert encode_in_steps(api_key, version, response, field, count) == before
    assert getattr(response, field) == []  # the entries were taken, and let go as they were encoded


def test_unknown_tagged_fields_of_the_message_are_encoded_at_once() -> None:
    response = m.DescribeGroupsResponse(groups=[], unknown_tagged=[(7, b"x")])
    assert not steppable(response, 5, "groups")
    assert steppable(m.DescribeGroupsResponse(groups=[]), 5, "groups")


def describe_answer(groups: int, prefix: str) -> m.DescribeGroupsResponse:
    return m.DescribeGroupsResponse(
        groups=[
            m.DescribeGroupsResponse.DescribedGroup(error_code=16, group_id=f"{prefix}-{i}", members=[])
            for i in range(groups)
        ]
    )


def submit_encoding(
    steps: LoopSteps,
    encoding: SteppedResponse,
    abandoned: Any,
    done: Any,
) -> None:
    """Submit as dispatch.py does; ``done(frame, error)``: the frame, b"" if abandoned, or the error."""

    def finished(failed: Exception | None) -> None:
        if failed is not None:
            done(None, failed)
        elif abandoned():
            done(b"", None)
        else:
            done(encoding.frame(), None)

    steps.submit(encoding, ENCODE_ENTRIES_PER_STEP, abandoned, finished)


def test_answers_come_out_in_queue_order_a_step_per_loop_iteration() -> None:
    answers = LoopSteps()
    got: list[tuple[str, bytes | None, Exception | None]] = []
    iterations = 0

    async def run() -> None:
        nonlocal iterations
        responses = {name: describe_answer(3000, name) for name in ("a", "b", "c")}
        expected = {
            name: frames.encode_response(m.ApiKey.DESCRIBE_GROUPS, 5, 1, response)
            for name, response in responses.items()
        }
        for name, response in responses.items():
            encoding = SteppedResponse(m.ApiKey.DESCRIBE_GROUPS, 5, 1, response, "groups")
            submit_encoding(
                answers, encoding, lambda: False, lambda f, e, name=name: got.append((name, f, e))
            )
        while len(got) < 3:
            iterations += 1
            await asyncio.sleep(0)
        for name, frame, error in got:
            assert error is None
            assert frame == expected[name]

    loop_steps.STEP_SECONDS, saved = 0.0, loop_steps.STEP_SECONDS
    try:
        asyncio.run(run())
    finally:
        loop_steps.STEP_SECONDS = saved
    assert [name for name, _, _ in got] == ["a", "b", "c"]
    # No time at all per step: one slice of ENTRIES_PER_STEP entries per loop iteration, for all.
    assert iterations >= 3 * 3000 // ENCODE_ENTRIES_PER_STEP
    assert len(answers) == 0


def test_an_abandoned_answer_is_dropped_and_a_failing_one_reported() -> None:
    answers = LoopSteps()
    got: dict[str, tuple[bytes | None, Exception | None]] = {}
    bad = describe_answer(2000, "bad")
    bad.groups[1500].error_code = 2**20  # not an int16: encoding fails when that slice is reached
    left = {"gone": False}

    async def run() -> None:
        def done(name: str) -> Any:
            return lambda frame, error: got.__setitem__(name, (frame, error))

        submit_encoding(
            answers,
            SteppedResponse(m.ApiKey.DESCRIBE_GROUPS, 5, 1, describe_answer(5000, "x"), "groups"),
            lambda: left["gone"],
            done("gone"),
        )
        submit_encoding(
            answers,
            SteppedResponse(m.ApiKey.DESCRIBE_GROUPS, 5, 2, bad, "groups"),
            lambda: False,
            done("bad"),
        )
        good = describe_answer(1500, "ok")
        expected = frames.encode_response(m.ApiKey.DESCRIBE_GROUPS, 5, 3, good)
        submit_encoding(
            answers,
            SteppedResponse(m.ApiKey.DESCRIBE_GROUPS, 5, 3, good, "groups"),
            lambda: False,
            done("ok"),
        )
        await asyncio.sleep(0)
        left["gone"] = True
        while len(got) < 3:
            await asyncio.sleep(0)
        assert got["ok"] == (expected, None)

    asyncio.run(run())
    assert got["gone"] == (b"", None)
    frame, error = got["bad"]
    assert frame is None and isinstance(error, Exception)


def _described(
    group_id: str, state: str = "Dead", error: int = 0, message: str | None = None, members: int = 0
) -> Any:
    G = m.DescribeGroupsResponse.DescribedGroup
    return G(
        group_id=group_id,
        group_state=state,
        error_code=error,
        error_message=message,
        protocol_type="consumer" if members else "",
        members=[
            m.DescribeGroupsResponse.DescribedGroupMember(member_id=f"m{i}", client_id="c")
            for i in range(members)
        ],
        authorized_operations=-2147483648 if state == "Dead" else 8,
    )


@pytest.mark.parametrize("version", range(0, 7))
@pytest.mark.parametrize("count", [1, 3, 100])
def test_describe_groups_entries_without_members_encode_as_the_generated_encoder(
    version: int, count: int
) -> None:
    groups = [
        _described("hostile-0000001"),
        _described("grüppe-😀", error=69, message="Group grüppe-😀 not found."),
        _described("x" * 200, error=69, message="m" * 300),  # lengths over 127: two-byte varints
        _described("live", state="Stable", members=2),  # members: the generated encoder's
        _described("", state="Empty"),
        _described("hostile-0000002"),
        _described("other-error", error=16),
        _described("live-2", state="PreparingRebalance", members=1),
    ] * 40
    response = m.DescribeGroupsResponse(throttle_time_ms=7, groups=groups)
    before = frames.encode_response(ApiKey.DESCRIBE_GROUPS, version, 42, response)
    encoding = SteppedResponse(ApiKey.DESCRIBE_GROUPS, version, 42, response, "groups")
    assert encoding._no_member_groups is not None
    while not encoding.done:
        encoding.step(count)
    assert encoding.frame() == before
    assert len(encoding._no_member_groups._tails) == 4  # Dead (two error codes, v6's), Empty, error 16


def test_describe_groups_entries_out_of_range_fail_as_the_generated_encoder() -> None:
    response = m.DescribeGroupsResponse(groups=[_described("g", error=1 << 20)])
    with pytest.raises(CodecError):
        frames.encode_response(ApiKey.DESCRIBE_GROUPS, 5, 42, response)
    response = m.DescribeGroupsResponse(groups=[_described("g", error=1 << 20)])
    encoding = SteppedResponse(ApiKey.DESCRIBE_GROUPS, 5, 42, response, "groups")
    with pytest.raises(CodecError):
        encoding.step(10)
