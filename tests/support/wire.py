"""A blocking Kafka-protocol client for tests that need exact requests, on kcoord's own client."""

from __future__ import annotations

import struct
from typing import Any

from kcoord.client import BlockingConnection
from kcoord.protocol import frames
from kcoord.protocol.messages import REQUESTS


class WireClient:
    """``request(api_key, version, body)`` at an exact version; no ApiVersions handshake first."""

    def __init__(self, address: str, timeout: float = 10.0) -> None:
        host, port = address.rsplit(":", 1)
        self.conn = BlockingConnection((host, int(port)), timeout, negotiate=False, client_id="wire-test")
        self._raw_ids = 0x40000000  # request_raw's own correlation ids, apart from the client's

    def send_bytes(self, data: bytes) -> None:
        """Write ``data`` as it is (garbage, half frames): no response is expected."""
        self.conn.send_frame(data, expect_response=False)

    def send(self, api_key: int, version: int, request: Any) -> None:
        """Send without waiting for the response."""
        assert REQUESTS[api_key] is type(request)
        self.conn.send(request, version)

    def api_versions(self) -> Any:
        """The server's ApiVersions answer, through the client's own negotiation."""
        return self.conn.negotiate(software_name="t", software_version="1")

    def request(self, api_key: int, version: int, request: Any) -> Any:
        assert REQUESTS[api_key] is type(request)
        return self.conn.request(request, version)

    def request_frame(self, api_key: int, version: int, request: Any) -> bytes:
        """The response to ``request`` exactly as it came on the wire (size prefix stripped), for
        tests about the bytes themselves."""
        self._raw_ids += 1
        framed = frames.encode_request(api_key, version, self._raw_ids, "wire-test", request)
        payload = self.conn.send_frame(framed)
        assert payload is not None
        (got,) = struct.unpack_from(">i", payload, 0)
        assert got == self._raw_ids
        return payload

    def request_raw(self, api_key: int, version: int, body: bytes) -> bytes:
        """Send a v1-header request with an arbitrary body; return the response body after header v0."""
        self._raw_ids += 1
        header = struct.pack(">hhih", api_key, version, self._raw_ids, -1)
        payload = self.conn.send_frame(frames.frame(header + body))
        assert payload is not None
        (got,) = struct.unpack_from(">i", payload, 0)
        assert got == self._raw_ids
        return payload[4:]

    def is_closed_by_server(self, timeout: float = 5.0) -> bool:
        return self.conn.wait_closed_by_peer(timeout)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def offset_commit_request(group: str, topic: str, offset: int, partition: int = 0) -> Any:
    """A generation -1 OffsetCommit (v8 shape) of one partition: a commit by a member-less client."""
    from kcoord.protocol import messages as m

    R = m.OffsetCommitRequest
    return R(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        topics=[R.OffsetCommitRequestTopic(
            name=topic, partitions=[R.OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset)]
        )],
    )  # fmt: skip


def commit_offset(address: str, group: str, topic: str, offset: int) -> int:
    """OffsetCommit v8 of partition 0 on a new connection; the partition's error code."""
    with WireClient(address) as client:
        response = client.request(8, 8, offset_commit_request(group, topic, offset))
    return int(response.topics[0].partitions[0].error_code)


def fetch_offset(address: str, group: str, topic: str) -> tuple[int, int]:
    """OffsetFetch v6 of partition 0 on a new connection: (error code, committed offset); a
    top-level error gives (that error, -1)."""
    from kcoord.protocol import messages as m

    R = m.OffsetFetchRequest
    with WireClient(address) as client:
        response = client.request(
            9, 6, R(group_id=group, topics=[R.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])
        )
    if response.error_code:
        return int(response.error_code), -1
    part = response.topics[0].partitions[0]
    return int(part.error_code), int(part.committed_offset)
