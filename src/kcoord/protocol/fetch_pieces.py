"""Where a Fetch answer's root tagged fields start, read from the pieces it arrived in.

A relay writes a large Fetch answer to its client while the reads bring it and holds back only its
end, where KIP-951's NodeEndpoints live (coordinator/net/relay/passthrough.py). To find that field
it joined the pieces into one buffer for the C decoder's ``tag_section``: a second copy of every
byte of every large answer, a quarter of the relay's CPU on 10 MB answers, made after the last
piece came and before the held-back end could go (bench/fetch_hop.py). Walking the pieces instead
reads each partition's few header bytes and steps over its records by their length.

Flexible versions only (12+): the response header's tagged fields, compact lengths and per-struct
tagged fields are what this walk knows, and NodeEndpoints exist from v16.
"""

from __future__ import annotations

from collections.abc import Sequence

from .primitives import CodecError

FETCH_PIECES_SINCE = 12  # the first flexible Fetch version
_TOPIC_ID_SINCE = 13  # topics by id (16 bytes) instead of by name

# Per partition, before its aborted transactions: index, error code, high watermark, last stable
# offset, log start offset (each there since v5, so in every flexible version).
_PARTITION_HEAD = 4 + 2 + 8 + 8 + 8
_ABORTED_TRANSACTION = 8 + 8  # producer id, first offset (then its own tagged fields)
_PREFERRED_READ_REPLICA = 4
_BODY_HEAD = 4 + 2 + 4  # throttle time, error code, session id


class PiecesReader:
    """A read position over byte strings taken as one: skipping is arithmetic, reading finds the
    piece that holds the position (pieces are visited in order, as the walk goes forward)."""

    __slots__ = ("_pieces", "_index", "_start", "pos", "end")

    def __init__(self, pieces: Sequence[bytes]) -> None:
        self._pieces = pieces
        self._index = 0  # the piece that holds pos (or the one before it)
        self._start = 0  # where that piece starts
        self.pos = 0
        self.end = sum(map(len, pieces))

    def skip(self, n: int) -> None:
        if n < 0 or n > self.end - self.pos:
            raise CodecError(f"{n} bytes at {self.pos} run past the end of a {self.end}-byte frame")
        self.pos += n

    def byte(self) -> int:
        if self.pos >= self.end:
            raise CodecError("truncated frame")
        pieces = self._pieces
        while self.pos >= self._start + len(pieces[self._index]):
            self._start += len(pieces[self._index])
            self._index += 1
        value = pieces[self._index][self.pos - self._start]
        self.pos += 1
        return value

    def uvarint(self) -> int:
        result = shift = 0
        for _ in range(5):
            b = self.byte()
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7
        raise CodecError("varint longer than 5 bytes")

    def tagged_fields(self) -> None:
        """Step over a tagged-field section."""
        for _ in range(self.uvarint()):
            self.uvarint()  # the tag
            self.skip(self.uvarint())

    def array_length(self, what: str, nullable: bool = False) -> int:
        """A compact array's (or string's, or bytes') length: -1 for null, where ``nullable``."""
        n = self.uvarint() - 1
        if n < 0 and not nullable:
            raise CodecError(f"non-nullable {what} is null")
        return n


def fetch_root_tags_at(pieces: Sequence[bytes], version: int) -> int:
    """Where the root tagged fields of a Fetch response (``pieces``: its payload after the size
    prefix, correlation id first) start; CodecError when they are not where the frame ends."""
    if version < FETCH_PIECES_SINCE:
        raise CodecError(f"Fetch v{version} is not flexible: no tagged fields to find")
    r = PiecesReader(pieces)
    r.skip(4)  # correlation id
    r.tagged_fields()  # the response header's
    r.skip(_BODY_HEAD)
    for _ in range(r.array_length("responses")):
        if version >= _TOPIC_ID_SINCE:
            r.skip(16)
        else:
            r.skip(r.array_length("topic"))
        for _ in range(r.array_length("partitions")):
            r.skip(_PARTITION_HEAD)
            for _ in range(r.array_length("aborted transactions", nullable=True)):
                r.skip(_ABORTED_TRANSACTION)
                r.tagged_fields()
            r.skip(_PREFERRED_READ_REPLICA)
            size = r.array_length("records", nullable=True)
            if size > 0:
                r.skip(size)
            r.tagged_fields()
        r.tagged_fields()
    return r.pos


def tail(pieces: Sequence[bytes], keep: int) -> bytes:
    """The bytes of ``pieces`` taken as one from offset ``keep`` on (the part not written yet)."""
    out: list[bytes] = []
    start = 0
    for piece in pieces:
        end = start + len(piece)
        if end > keep:
            out.append(piece if start >= keep else piece[keep - start :])
        start = end
    return b"".join(out)
