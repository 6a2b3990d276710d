"""A request frame whose opening array is decoded a slice of entries at a time: objects in steps.

A DescribeGroups request naming 20,000 group ids is a 320 KB frame that the C decoder turns into
objects in ~1.6 ms, all in one piece of the event loop: an honest member's heartbeat that arrives
meanwhile waits for all of it. Decoded here a slice at a time, the caller decides how much to do
per loop iteration (coordinator/net/loop_steps.py), the way responses are encoded in steps
(array_steps.py).

The multi-group requests (DescribeGroups, DeleteGroups, ConsumerGroupDescribe, OffsetFetch v8+)
open with the array that makes them large. Its entries are decoded by a program of one field, the
array itself, compiled from the message's own program (so the objects are those the whole-message
decoder builds); each step decodes the next ``n`` entries from a copy of the rest of the frame
behind a count of ``n``. What follows the array (the other fields, the tagged section) is decoded
last, by the message's own decoder, behind an empty array; the entries are then set into it.
Malformed input raises CodecError as :func:`kcoord.protocol.frames.decode_request_body` would,
in the step that meets it.

Only with the C decoder: without it, :func:`stepped_request` returns None and the caller decodes
the whole frame at once.
"""

from __future__ import annotations

import struct
from typing import Any

from .codec import Decoder, Message, c_decoder_of, c_programs
from .frames import client_id_and_body_start
from .messages import REQUESTS
from .primitives import CodecError, decode_uvarint, encode_uvarint

_INT32 = struct.Struct(">i")
_OP_ARRAY = 11  # the C decoder's array op code (codegen, _cdecode.c)


class _Entries:
    """What an entries program decodes into: the array, alone."""

    __slots__ = ("entries", "unknown_tagged")  # (the C decoder fills both)


_ENTRIES_DECODERS: dict[tuple[int, int], Decoder | None] = {}


def _entries_decoder(api_key: int, cls: type[Message], version: int) -> Decoder | None:
    """A decoder of ``cls``'s opening array alone in ``version``, or None if it does not open with one."""
    key = (api_key, version)
    if key not in _ENTRIES_DECODERS:
        _ENTRIES_DECODERS[key] = _compile_entries_decoder(cls, version)
    return _ENTRIES_DECODERS[key]


def _compile_entries_decoder(cls: type[Message], version: int) -> Decoder | None:
    program = c_programs(cls).get(version)
    if program is None:
        return None
    _cls, _flexible, fields, _tags, _defaults = program
    if not fields or fields[0][1][0] != _OP_ARRAY:
        return None
    return c_decoder_of((_Entries, False, (("entries", fields[0][1]),), (), ()))


def _count_prefix(count: int, flexible: bool) -> bytes:
    return encode_uvarint(count + 1) if flexible else _INT32.pack(count)


class SteppedRequest:
    """One request's body, its opening array decoded by :meth:`step` calls; :meth:`message` once
    :attr:`done`."""

    __slots__ = ("client_id", "_cls", "_version", "_flexible", "_field", "_decoder", "_frame", "_pos",
                 "_start", "_first_guess", "_left", "_entries")  # fmt: skip

    def __init__(
        self, cls: type[Message], version: int, decoder: Decoder, frame: bytes, client_id: str | None,
        pos: int, count: int,
    ) -> None:  # fmt: skip
        self.client_id = client_id
        self._cls = cls
        self._version = version
        self._flexible = version in cls.SCHEMA.flexible
        self._field = next(f.name for f in cls.SCHEMA.fields if f.present_in(version))
        self._decoder = decoder
        self._frame = frame
        self._pos = pos  # where the next entry starts
        self._start = pos
        self._first_guess = (len(frame) - pos) / count  # bytes per entry, before any is decoded
        self._left = count
        self._entries: list[Any] = []

    @property
    def done(self) -> bool:
        return self._left == 0

    def step(self, count: int) -> None:
        """Decode the next ``count`` entries (fewer at the array's end)."""
        n = min(count, self._left)
        prefix = _count_prefix(n, self._flexible)
        pos = self._pos
        frame = self._frame
        # The entries are copied out of the frame behind their count: twice the bytes the entries
        # so far took on average, not the whole rest of the frame (a 320 KB copy per step). If that
        # window cuts an entry, the step is decoded again from the whole rest, which is also how
        # malformed input is told from a window too short.
        decoded = len(self._entries)
        average = (pos - self._start) / decoded if decoded else self._first_guess
        window = int(2 * n * average) + 256
        try:
            buf = prefix + frame[pos : pos + window]
            piece, end = self._decoder(buf, 0, len(buf))
        except CodecError:
            if pos + window >= len(frame):
                raise
            buf = prefix + frame[pos:]
            piece, end = self._decoder(buf, 0, len(buf))
        self._entries += piece.entries
        self._pos = pos + end - len(prefix)
        self._left -= n

    def message(self) -> Message:
        """The whole request (the frame's bytes after the array decoded and checked now)."""
        if not self.done:
            raise RuntimeError("the request is not decoded yet")
        tail = _count_prefix(0, self._flexible) + self._frame[self._pos :]
        self._frame = b""
        request = self._cls.decode_from(tail, 0, self._version)[0]  # as decode_request_body
        setattr(request, self._field, self._entries)
        self._entries = []
        return request


def stepped_request(frame: bytes, api_key: int, version: int, more_than: int) -> SteppedRequest | None:
    """A stepped decoding of request ``frame`` if its opening array has more than ``more_than``
    entries and the C decoder can step it; None: decode the frame at once."""
    cls = REQUESTS.get(api_key)
    if cls is None:
        return None
    decoder = _entries_decoder(api_key, cls, version)
    if decoder is None:
        return None
    flexible = version in cls.SCHEMA.flexible
    client_id, pos = client_id_and_body_start(frame, flexible)
    end = len(frame)
    if flexible:
        if pos >= end:
            raise CodecError("request body missing")
        count, pos = decode_uvarint(frame, pos)
        count -= 1
    else:
        if pos + 4 > end:
            raise CodecError("request body missing")
        (count,) = _INT32.unpack_from(frame, pos)
        pos += 4
    if count <= more_than:  # null (-1) included
        return None
    if count > end - pos:  # every entry takes a byte at least
        raise CodecError(f"array of {count} entries in {end - pos} bytes")
    return SteppedRequest(cls, version, decoder, frame, client_id, pos, count)
