"""A response frame encoded a slice of its top-level array at a time: bytes in steps, no sockets.

Encoding a DescribeGroups answer of 20,000 groups is ~18 ms of pure Python. Done at once on the
event loop, every other client waits for all of it; done on a thread, the loop waits for the GIL
at every switch (up to ``sys.getswitchinterval()``, 5 ms, each time it lets go of the GIL, which
uvloop does around every I/O callback), so a busy loop's iterations grew to 15-60 ms. Encoded here
a slice at a time, the caller decides how much to do per loop iteration.

Each array entry encodes independently of the others, so the frame is: the response header, the
message's fields before the array, the array's length, each slice's entries as they come, and the
message's tagged section. Only the layout where the array is the message's last field and no
tagged field follows it is stepped (:func:`steppable`); the bytes are those of
:func:`kcoord.protocol.frames.encode_response` (tests/unit/test_array_steps.py checks it).

DescribeGroups' entries that describe no member (every id naming no group is answered Dead, and
a hostile client names 20,000 such ids) are encoded from their id, error code and message
between the cached bytes of their other fields (:class:`_NoMemberGroups`): the generated encoder
spent a third of such an answer's CPU on the same four fields of every entry.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from .codec import Message
from .frames import response_header_flexible
from .messages import DescribeGroupsResponse
from .primitives import CodecError, encode_uvarint

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_SIZE_AND_CORRELATION = struct.Struct(">ii")


def _array_length(count: int, flexible: bool) -> bytes:
    """An array's length prefix: compact (uvarint of count + 1) in flexible versions, else int32."""
    return encode_uvarint(count + 1) if flexible else _INT32.pack(count)


def steppable(response: Message, version: int, field: str) -> bool:
    """Whether ``response``'s array ``field`` can be encoded in steps: it is the last field present
    in ``version``, no tagged field is, and the message carries no unknown tagged fields."""
    schema = type(response).SCHEMA
    present = [f for f in schema.fields if f.present_in(version)]
    if not present or any(f.tagged_in(version) for f in present):
        return False
    last = present[-1]
    return (
        last.name == field
        and last.is_array
        and isinstance(getattr(response, field, None), list)
        and not getattr(response, "unknown_tagged", None)
    )


class _NoMemberGroups:
    """DescribeGroups entries with no members and no unknown tagged fields, encoded as the
    generated encoder would: error code, error message (v6+), group id, then the bytes of the
    other fields (state, protocol type and data, no members, authorized operations, tags), kept
    per distinct value of those. Others go to ``generic`` (the generated encoder, in order)."""

    __slots__ = ("_flexible", "_with_message", "_tails", "_generic")

    _MAX_TAILS = 64  # distinct (error, state, protocol type and data, operations): a few in practice

    def __init__(self, version: int, flexible: bool, generic: Callable[[list[Any]], bytes]) -> None:
        self._flexible = flexible
        self._with_message = version >= 6
        self._tails: dict[tuple[Any, ...], bytes] = {}
        self._generic = generic

    def encode(self, entries: list[Any]) -> bytes:
        out = bytearray()
        tails = self._tails
        flexible = self._flexible
        with_message = self._with_message
        pack_h = _INT16.pack
        others: list[Any] = []
        for entry in entries:
            group_id = entry.group_id
            if entry.members != [] or entry.unknown_tagged or type(group_id) is not str:
                others.append(entry)
                continue
            if others:
                out += self._generic(others)
                others = []
            key = (
                entry.error_code,
                entry.group_state,
                entry.protocol_type,
                entry.protocol_data,
                entry.authorized_operations,
            )
            tail = tails.get(key)
            if tail is None:
                tail = self._tail(key)
            out += pack_h(entry.error_code)
            if with_message:
                message = entry.error_message
                if message is None:
                    out.append(0)
                else:
                    data = message.encode("utf-8")
                    out += encode_uvarint(len(data) + 1)
                    out += data
            data = group_id.encode("utf-8")
            if flexible:
                n = len(data) + 1
                if n < 128:
                    out.append(n)
                else:
                    out += encode_uvarint(n)
            else:
                out += pack_h(len(data))
            out += data
            out += tail
        if others:
            out += self._generic(others)
        return bytes(out)

    def _tail(self, key: tuple[Any, ...]) -> bytes:
        """The bytes after the group id of an entry with these other fields (generated encoder)."""
        error_code, group_state, protocol_type, protocol_data, operations = key
        probe = DescribeGroupsResponse.DescribedGroup(
            error_code=error_code,
            group_id="",
            group_state=group_state,
            protocol_type=protocol_type,
            protocol_data=protocol_data,
            authorized_operations=operations,
        )
        encoded = self._generic([probe])
        head = 2 + (1 if self._with_message else 0) + (1 if self._flexible else 2)  # error, null message, ""
        tail = encoded[head:]
        if len(self._tails) >= self._MAX_TAILS:
            self._tails.clear()
        self._tails[key] = tail
        return tail


class SteppedResponse:
    """One response frame, its array ``field`` encoded by :meth:`step` calls; :meth:`frame` once
    :attr:`done`. Raises CodecError as ``encode_response`` would (first in the step that meets it).

    The array is taken out of ``response`` (left empty there) and each slice's entries are let go
    once encoded: freeing 20,000 answer objects at once took ~5 ms of a busy server's loop, so the
    caller must hold no other reference to them, and the memory goes back a step at a time."""

    __slots__ = (
        "_shell",
        "_field",
        "_version",
        "_entries",
        "_count",
        "_next",
        "_pieces",
        "_flexible",
        "_tail",
        "_skip",
        "_no_member_groups",
    )

    def __init__(
        self, api_key: int, version: int, correlation_id: int, response: Message, field: str
    ) -> None:
        if not steppable(response, version, field):
            raise ValueError(f"{type(response).__name__} v{version}: {field} cannot be encoded in steps")
        entries: list[Any] = getattr(response, field)
        setattr(response, field, [])
        flexible = version in type(response).SCHEMA.flexible
        # The response itself, its array set to each slice in turn and emptied again after it.
        shell = response
        empty = bytearray()
        shell.encode_into(empty, version)
        tail = 1 if flexible else 0  # the message's tagged section: none, one zero byte
        before = len(empty) - tail - len(_array_length(0, flexible))
        header = bytearray(_SIZE_AND_CORRELATION.pack(0, correlation_id))  # size is set in frame()
        if response_header_flexible(api_key, version):
            header.append(0)  # no tagged fields in the header
        header += empty[:before]
        header += _array_length(len(entries), flexible)
        self._shell = shell
        self._field = field
        self._version = version
        self._entries = entries
        self._count = len(entries)
        self._next = 0
        self._flexible = flexible
        self._tail = bytes(empty[len(empty) - tail :])
        self._skip = before  # bytes of each slice's encoding before its array length
        self._pieces: list[bytes | bytearray] = [header]
        self._no_member_groups: _NoMemberGroups | None = None
        if type(response) is DescribeGroupsResponse and field == "groups":
            self._no_member_groups = _NoMemberGroups(version, flexible, self._encode)

    @property
    def version(self) -> int:
        return self._version

    @property
    def done(self) -> bool:
        return self._next >= self._count

    def step(self, count: int) -> None:
        """Encode the next ``count`` entries of the array (fewer at its end)."""
        start = self._next
        entries = self._entries
        part = entries[start : start + count]
        end = start + len(part)
        templated = self._no_member_groups
        if templated is None:
            self._pieces.append(self._encode(part))
        else:
            try:
                self._pieces.append(templated.encode(part))
            except (struct.error, AttributeError, TypeError, OverflowError) as exc:
                raise CodecError(
                    f"cannot encode {type(self._shell).__name__} v{self._version}: {exc}"
                ) from exc
        self._next = end
        entries[start:end] = [None] * len(part)  # the slice's objects are freed here, with ``part``
        if end >= len(entries):
            entries.clear()

    def _encode(self, part: list[Any]) -> bytes:
        """``part``'s entries, encoded by the generated encoder (within the message, cut out of it)."""
        shell = self._shell
        setattr(shell, self._field, part)
        out = bytearray()
        try:
            shell.encode_into(out, self._version)
        finally:
            setattr(shell, self._field, [])
        first = self._skip + len(_array_length(len(part), self._flexible))
        return bytes(out[first : len(out) - len(self._tail)])

    def frame(self) -> bytes:
        """The whole response frame, size prefix included."""
        return b"".join(self.frame_parts())

    def frame_parts(self) -> list[bytes]:
        """The whole response frame as the pieces it was encoded in (size prefix included), for a
        vectored write: joining the ~0.5 MB answer of 20,000 groups was a copy of its own."""
        if not self.done:
            raise RuntimeError("the response is not encoded yet")
        pieces, self._pieces = self._pieces, []
        header = pieces[0]
        assert isinstance(header, bytearray)
        _INT32.pack_into(header, 0, sum(map(len, pieces)) + len(self._tail) - 4)
        pieces[0] = bytes(header)
        pieces.append(self._tail)
        return pieces  # type: ignore[return-value]  # bytes only now: the bytearray header was copied
