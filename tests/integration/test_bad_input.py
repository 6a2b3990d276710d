"""Bad input closes the offending connection with a log line and never disturbs other clients."""

from __future__ import annotations

import os
import struct

import pytest

from kcoord.protocol import frames
from kcoord.protocol import messages as m
from support.kcoord_process import KcoordProcess
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kcoord():
    with KcoordProcess("--shards", "4") as proc:
        yield proc


def still_serving(address: str) -> None:
    with WireClient(address) as other:
        assert other.api_versions().error_code == 0
        hb = other.request(12, 4, m.HeartbeatRequest(group_id="nobody", generation_id=1, member_id="x"))
        assert hb.error_code != 0  # a real answer from a live shard, not a crash


def test_garbage_bytes(kcoord: KcoordProcess) -> None:
    with WireClient(kcoord.bootstrap) as bad:
        bad.send_bytes(struct.pack(">i", 64) + os.urandom(64))
        assert bad.is_closed_by_server()
    still_serving(kcoord.bootstrap)
    assert "closing connection" in kcoord.log_tail(200)


def test_two_gib_size_prefix(kcoord: KcoordProcess) -> None:
    with WireClient(kcoord.bootstrap) as bad:
        bad.send_bytes(struct.pack(">i", 2**31 - 1) + b"\x00" * 32)
        assert bad.is_closed_by_server()
    still_serving(kcoord.bootstrap)
    assert "oversized frame" in kcoord.log_tail(200)


def test_negative_size_prefix(kcoord: KcoordProcess) -> None:
    with WireClient(kcoord.bootstrap) as bad:
        bad.send_bytes(struct.pack(">i", -5))
        assert bad.is_closed_by_server()
    still_serving(kcoord.bootstrap)


def test_truncated_frame_then_disconnect(kcoord: KcoordProcess) -> None:
    request = frames.encode_request(
        12, 4, 1, "t", m.HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    )
    with WireClient(kcoord.bootstrap) as bad:
        bad.send_bytes(request[: len(request) // 2])  # the rest never comes
    still_serving(kcoord.bootstrap)


def test_truncated_body_inside_a_whole_frame(kcoord: KcoordProcess) -> None:
    body = m.JoinGroupRequest(
        group_id="g", session_timeout_ms=10000, member_id="", protocol_type="consumer"
    ).encode(5)
    header = struct.pack(">hhih", 11, 5, 1, 1) + b"t"
    with WireClient(kcoord.bootstrap) as bad:
        bad.send_bytes(frames.frame(header + body[:7]))
        assert bad.is_closed_by_server()
    still_serving(kcoord.bootstrap)
    assert "malformed request" in kcoord.log_tail(200)


def test_unknown_api_key(kcoord: KcoordProcess) -> None:
    with WireClient(kcoord.bootstrap) as bad:
        bad.send_bytes(frames.frame(struct.pack(">hhih", 999, 0, 1, -1)))
        assert bad.is_closed_by_server()
    still_serving(kcoord.bootstrap)


def test_unsupported_group_api_version(kcoord: KcoordProcess) -> None:
    with WireClient(kcoord.bootstrap) as bad:
        bad.send_bytes(frames.frame(struct.pack(">hhih", 11, 42, 1, -1)))
        assert bad.is_closed_by_server()
    still_serving(kcoord.bootstrap)
    assert "unsupported api 11 v42" in kcoord.log_tail(200)


def test_oversized_frame_cap_is_configurable() -> None:
    with KcoordProcess("--shards", "1", "--max-frame-size", "4096") as proc:
        with WireClient(proc.bootstrap) as bad:
            bad.send_bytes(struct.pack(">i", 8192) + b"\x00" * 16)
            assert bad.is_closed_by_server()
        still_serving(proc.bootstrap)


@pytest.mark.parametrize("version", [3, 9])
def test_truncated_produce_closes_with_one_log_line(kcoord: KcoordProcess, version: int) -> None:
    """A Produce cut inside its transactional id, before the acks kcoord reads
    to relay it, is bad input like any other: one log line, no traceback, the connection closed."""
    flexible = version >= 9
    header = struct.pack(">hhih", 0, version, 1, 8) + b"producer" + (b"\x00" if flexible else b"")
    # The transactional id claims 40 bytes; the frame ends after 5 of them.
    tid = bytes([41]) + b"tx-id" if flexible else struct.pack(">h", 40) + b"tx-id"
    before = len(kcoord.log_path.read_text().splitlines())
    with WireClient(kcoord.bootstrap) as bad:
        bad.send_bytes(frames.frame(header + tid))
        assert bad.is_closed_by_server()
    still_serving(kcoord.bootstrap)
    assert kcoord.alive
    new = kcoord.log_path.read_text().splitlines()[before:]
    assert [line for line in new if "malformed request" in line and "Produce" in line], new
    assert len([line for line in new if "malformed request" in line]) == 1, new
    assert not [
        line for line in new if "Traceback" in line or "Fatal error" in line or "struct.error" in line
    ], new
