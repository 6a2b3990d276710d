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
"""

from __future__ import annotations

import struct
from typing import Any

from .codec import Message
from .frames import response_header_flexible
from .primitives import encode_uvarint

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
        shell = self._shell
        setattr(shell, self._field, part)
        out = bytearray()
        shell.encode_into(out, self._version)
        setattr(shell, self._field, [])
        first = self._skip + len(_array_length(len(part), self._flexible))
        self._pieces.append(bytes(out[first : len(out) - len(self._tail)]))
        self._next = end
        entries[start:end] = [None] * len(part)  # the slice's objects are freed here, with ``part``
        if end >= len(entries):
            entries.clear()

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
