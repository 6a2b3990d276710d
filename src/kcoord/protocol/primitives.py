"""Wire primitives shared by the generated codecs: varints, errors and precomputed packers.

Kafka's flexible versions encode lengths as *unsigned varints* (LEB128, 7 bits per byte,
least significant group first); record batches use zig-zag *signed* varints. Both live here
so the generated code can bind them as locals.
"""

from __future__ import annotations

import struct


class CodecError(ValueError):
    """Raised for bytes that do not decode to a valid message: truncated, malformed or oversized.

    The server answers a CodecError by closing the connection with a log line; it never
    guesses at what the client meant.
    """


# Single-byte varints cover every small length and count; a table avoids an allocation per call.
_SMALL_UVARINTS = tuple(bytes((i,)) for i in range(128))
MAX_UVARINT_BYTES = 5  # 32-bit unsigned
# Kafka's generated message readers refuse a string field longer than this many UTF-8 bytes, in
# compact (flexible) encodings too, where the varint length could say more: a parse error.
MAX_STRING_BYTES = 0x7FFF


def encode_uvarint(value: int) -> bytes:
    if 0 <= value < 128:
        return _SMALL_UVARINTS[value]
    if value < 0 or value > 0xFFFFFFFF:
        raise CodecError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """Return ``(value, new_pos)``; raise CodecError past the end or beyond 5 bytes."""
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(MAX_UVARINT_BYTES):
        if pos >= end:
            raise CodecError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise CodecError("varint longer than 5 bytes")


def encode_varint(value: int) -> bytes:
    """Zig-zag signed varint (64-bit), as used inside record batches."""
    return encode_uvarlong((value << 1) ^ (value >> 63))


def encode_uvarlong(value: int) -> bytes:
    if 0 <= value < 128:
        return _SMALL_UVARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Zig-zag signed varint (up to 10 bytes)."""
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(10):
        if pos >= end:
            raise CodecError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise CodecError("varint longer than 10 bytes")


INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
FLOAT64 = struct.Struct(">d")
