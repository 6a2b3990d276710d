"""Kafka RecordBatch v2 (magic 2), sans-IO: bytes in, batches out; records in, bytes out.

Layout (all big-endian; the CRC covers everything from ``attributes`` to the end)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 = 2 |
    crc uint32 (CRC-32C) | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordCount int32 | records...

    record = length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
             keyLength varint (-1 null) | key | valueLength varint (-1 null) | value |
             headerCount varint | (headerKeyLength varint | key | headerValueLength varint | value)*

``attributes``: bits 0-2 compression (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd), bit 3
timestamp type (log append time), bit 4 transactional, bit 5 control, bit 6 delete horizon set.
A compressed batch compresses the records section only; the header stays plain.

Invariants:
- :func:`decode_batches` verifies the CRC of every whole batch before looking at its records and
  raises :class:`~kcoord.protocol.primitives.CodecError` on a mismatch, a bad magic or any malformed
  length — it never returns records from a batch it could not check.
- A trailing *partial* batch (Fetch responses may end mid-batch when a size limit cuts them) is
  not an error: decoding stops before it and the caller fetches again from its offset.
- Encoding writes no compression (or gzip, for tests) and always a correct CRC.

Compression support for decoding: none and gzip always (stdlib); snappy (``cramjam`` or
``python-snappy``), lz4 (``lz4``) and zstd (``zstandard``) only when those libraries are
importable — otherwise such a batch raises :class:`UnsupportedCompression` naming the codec.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from .codec import c_encode_records
from .primitives import CodecError, decode_varint, encode_varint

try:  # the C extension is ~100x faster than the pure-Python table below
    from crc32c import crc32c as _crc32c

    _crc32c_ext: Callable[..., int] | None = _crc32c
except ImportError:  # pragma: no cover - exercised only where the wheel is missing
    _crc32c_ext = None

MAGIC = 2
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

ATTR_COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc
_PREFIX = struct.Struct(">qiibI")
# attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, count
_AFTER_CRC = struct.Struct(">hiqqqhii")
HEADER_SIZE = _PREFIX.size + _AFTER_CRC.size  # 61
_CRC_START = _PREFIX.size  # attributes begin here
_LENGTH_OFFSET = 8  # batchLength follows baseOffset
_LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted in batchLength
_CONTROL_KEY = struct.Struct(">hh")


class UnsupportedCompression(CodecError):
    """A batch compressed with a codec whose library is not installed."""


# -- CRC-32C (Castagnoli) -------------------------------------------------------------------------
def _make_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _make_table()


def crc32c_py(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """Table-driven CRC-32C; the fallback when the ``crc32c`` wheel is not installed."""
    crc ^= 0xFFFFFFFF
    table = _TABLE
    for b in bytes(data):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def crc32c(data: bytes | bytearray | memoryview) -> int:
    if _crc32c_ext is not None:
        return _crc32c_ext(data)
    return crc32c_py(data)


# -- compression ------------------------------------------------------------------------------------
def _decompress(codec: int, data: bytes) -> bytes:
    if codec == COMPRESSION_GZIP:
        try:
            return zlib.decompress(data, 16 + zlib.MAX_WBITS)
        except zlib.error as exc:
            raise CodecError(f"bad gzip batch: {exc}") from exc
    name = COMPRESSION_NAMES.get(codec)
    if name is None:
        raise CodecError(f"unknown compression codec {codec}")
    try:
        if codec == COMPRESSION_SNAPPY:
            return _snappy_decompress(data)
        if codec == COMPRESSION_LZ4:
            import lz4.frame  # type: ignore[import-not-found]

            out: bytes = lz4.frame.decompress(data)  # untyped library: its result, declared
            return out
        import zstandard  # type: ignore[import-not-found, unused-ignore]  # typed when installed (pyspark[connect] brings it)

        out = zstandard.ZstdDecompressor().decompressobj().decompress(data)
        return out
    except ImportError as exc:
        raise UnsupportedCompression(f"batch compressed with {name}, whose library is not installed") from exc


_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def _snappy_decompress(data: bytes) -> bytes:
    raw: Callable[[bytes], bytes]  # block decompressor of whichever (untyped) library is installed
    try:
        import cramjam  # type: ignore[import-not-found]

        raw = lambda b: bytes(cramjam.snappy.decompress_raw(b))  # noqa: E731
    except ImportError:
        import snappy  # type: ignore[import-not-found]

        raw = snappy.decompress
    if not data.startswith(_XERIAL_MAGIC):
        return raw(data)
    # Java clients frame snappy the xerial way: 16-byte header, then (int32 length, block)*.
    out = bytearray()
    pos = 16
    while pos < len(data):
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out += raw(data[pos : pos + n])
        pos += n
    return bytes(out)


# -- data model -------------------------------------------------------------------------------------
class BatchRecord(NamedTuple):
    """One record of a batch, with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


class RecordBatch(NamedTuple):
    base_offset: int
    partition_leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[BatchRecord]

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    def control_type(self) -> int | None:
        """For a control batch: CONTROL_ABORT or CONTROL_COMMIT (other types are returned as read)."""
        if not self.is_control or not self.records or self.records[0].key is None:
            return None
        key = self.records[0].key
        if len(key) < 4:
            raise CodecError("control record key shorter than 4 bytes")
        control_type: int = _CONTROL_KEY.unpack_from(key, 0)[1]
        return control_type


# -- encoding ---------------------------------------------------------------------------------------
# What :func:`encode_records` adds around one record's key and value, varints at their widest:
# length (5), attributes and timestamp delta (2), offset delta (5), key and value lengths (5 + 5),
# header count (1). A record alone in a batch therefore takes at most HEADER_SIZE + this + its bytes.
MAX_RECORD_FRAMING = 23

# Kafka's default max.message.bytes (broker message.max.bytes): 1 MiB plus the 12 bytes of log
# overhead. A topic whose configs do not say otherwise accepts batches up to this size.
KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588


def max_record_bytes_for(max_message_bytes: int) -> int:
    """The largest record (key + value bytes) a topic with this ``max.message.bytes`` accepts as a
    batch of its own: the batch header and the record's own framing at their largest come off."""
    return max_message_bytes - HEADER_SIZE - MAX_RECORD_FRAMING


DEFAULT_MAX_RECORD_BYTES = max_record_bytes_for(KAFKA_DEFAULT_MAX_MESSAGE_BYTES)


def encode_records(records: Sequence[tuple[bytes | None, bytes | None]]) -> bytes:
    """The records section for ``(key, value)`` pairs: offset deltas 0..n-1, timestamp delta 0, no headers.

    In C where the extension is built (``_cdecode.encode_records``, the same bytes:
    ``tests/unit/test_record_batch.py``) for a list of tuples of bytes or None, the shape every
    append has: about 2 µs of Python per record (four varints and the joins) was a few percent of
    a durable commit's CPU (bench/RESULTS.md)."""
    if c_encode_records is not None:
        encoded = c_encode_records(records)
        if encoded is not None:
            return encoded
    return py_encode_records(records)


def py_encode_records(records: Sequence[tuple[bytes | None, bytes | None]]) -> bytes:
    """:func:`encode_records` in Python: any sequence of pairs of bytes-like objects or None."""
    out = bytearray()
    enc = encode_varint
    for i, (key, value) in enumerate(records):
        # attributes 0, timestampDelta 0 (one byte each: 0x00 0x00)
        body = b"\x00\x00" + enc(i)
        body += b"\x01" if key is None else enc(len(key)) + key
        body += b"\x01" if value is None else enc(len(value)) + value
        body += b"\x00"  # no headers
        out += enc(len(body))
        out += body
    return bytes(out)


def encode_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    timestamp: int,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = -1,
    transactional: bool = False,
    control: bool = False,
    compression: int = COMPRESSION_NONE,
) -> bytes:
    """One RecordBatch v2 holding ``records`` (all stamped ``timestamp``, create time)."""
    if not records:
        raise ValueError("a record batch holds at least one record")
    body = encode_records(records)
    if compression == COMPRESSION_GZIP:
        body = _gzip(body)
    elif compression != COMPRESSION_NONE:
        raise ValueError(f"encoding {COMPRESSION_NAMES.get(compression, compression)} is not supported")
    attributes = compression
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    after = _AFTER_CRC.pack(
        attributes,
        len(records) - 1,
        timestamp,
        timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    crc = crc32c(after + body) if len(body) < 4096 else _crc_two(after, body)
    batch_length = HEADER_SIZE - _LOG_OVERHEAD + len(body)
    return _PREFIX.pack(base_offset, batch_length, partition_leader_epoch, MAGIC, crc) + after + body


def _crc_two(a: bytes, b: bytes) -> int:
    if _crc32c_ext is not None:
        return _crc32c_ext(b, _crc32c_ext(a))
    return crc32c_py(b, crc32c_py(a))


def _gzip(data: bytes) -> bytes:
    co = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return co.compress(data) + co.flush()


def encode_control_batch(
    control_type: int,
    *,
    timestamp: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
) -> bytes:
    """A transaction marker batch (what a transaction coordinator writes; used by tests)."""
    key = _CONTROL_KEY.pack(0, control_type)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return encode_batch(
        [(key, value)],
        timestamp=timestamp,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


# -- decoding ---------------------------------------------------------------------------------------
def _decode_records(
    buf: bytes, pos: int, end: int, count: int, base_offset: int, base_ts: int
) -> list[BatchRecord]:
    """Decode ``count`` records in ``buf[pos:end]``.

    The hot loop of every shard load: each varint is read inline when it is one byte (and the
    record length and offset delta also when two bytes) — nearly all of them — and falls back to :func:`decode_varint`
    otherwise; records are built with ``tuple.__new__`` to skip NamedTuple's argument parsing.
    """
    out: list[BatchRecord] = []
    append = out.append
    dv = decode_varint
    new = tuple.__new__
    cls = BatchRecord
    no_headers: tuple[tuple[str, bytes | None], ...] = ()
    for _ in range(count):
        b = buf[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif buf[pos + 1] < 0x80:  # two-byte varint: records of 64..8191 bytes
            b = (b & 0x7F) | (buf[pos + 1] << 7)
            length = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            length, pos = dv(buf, pos)
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise CodecError("record runs past the end of its batch")
        # attributes (1 byte, unused), then timestampDelta
        b = buf[pos + 1]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            ts_delta, pos = dv(buf, pos + 1)
        b = buf[pos]
        if b < 0x80:
            off_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        elif buf[pos + 1] < 0x80:  # offset deltas 64..8191
            b = (b & 0x7F) | (buf[pos + 1] << 7)
            off_delta = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            off_delta, pos = dv(buf, pos)
        b = buf[pos]
        if b < 0x80:
            klen = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            klen, pos = dv(buf, pos)
        if klen < 0:
            key = None
        else:
            key = buf[pos : pos + klen]
            pos += klen
        b = buf[pos]
        if b < 0x80:
            vlen = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            vlen, pos = dv(buf, pos)
        if vlen < 0:
            value = None
        else:
            value = buf[pos : pos + vlen]
            pos += vlen
        headers = no_headers
        if buf[pos] == 0:
            pos += 1
        else:
            nh, pos = dv(buf, pos)
            hs = []
            for _ in range(nh):
                hk, pos = dv(buf, pos)
                if hk < 0 or pos + hk > rec_end:
                    raise CodecError("record header key malformed")
                hkey = buf[pos : pos + hk].decode("utf-8", "replace")
                pos += hk
                hv, pos = dv(buf, pos)
                hval = None if hv < 0 else buf[pos : pos + hv]
                pos += max(hv, 0)
                hs.append((hkey, hval))
            headers = tuple(hs)
        if pos != rec_end:
            raise CodecError(f"record length {length} does not match its fields")
        append(new(cls, (base_offset + off_delta, base_ts + ts_delta, key, value, headers)))
    if pos != end:
        raise CodecError(f"{end - pos} bytes after the last record of a batch")
    return out


def decode_batches(data: bytes, verify_crc: bool = True) -> list[RecordBatch]:
    """Every whole batch in ``data`` (a Fetch response's ``records``), in order.

    Stops silently at a trailing partial batch; raises CodecError for a corrupt one.
    """
    batches: list[RecordBatch] = []
    pos = 0
    n = len(data)
    while n - pos >= _LOG_OVERHEAD:
        base_offset, batch_length = struct.unpack_from(">qi", data, pos)
        end = pos + _LOG_OVERHEAD + batch_length
        if batch_length < HEADER_SIZE - _LOG_OVERHEAD:
            if end > n:
                break  # partial (and too short to judge) tail
            raise CodecError(
                f"batch at offset {base_offset} has length {batch_length}, below the v2 header size"
            )
        if end > n:
            break
        _, _, leader_epoch, magic, crc = _PREFIX.unpack_from(data, pos)
        if magic != MAGIC:
            raise CodecError(
                f"batch at offset {base_offset} has magic {magic}; only v2 batches are supported"
            )
        if verify_crc:
            actual = crc32c(memoryview(data)[pos + _CRC_START : end])
            if actual != crc:
                raise CodecError(
                    f"batch at offset {base_offset}: CRC-32C {actual:#010x} != stored {crc:#010x}"
                )
        attrs, last_delta, base_ts, max_ts, pid, pepoch, bseq, count = _AFTER_CRC.unpack_from(
            data, pos + _CRC_START
        )
        body_start = pos + HEADER_SIZE
        codec = attrs & ATTR_COMPRESSION_MASK
        if count < 0:
            raise CodecError(f"batch at offset {base_offset} has a negative record count")
        if codec == COMPRESSION_NONE:
            records = _decode_records(data, body_start, end, count, base_offset, base_ts)
        else:
            raw = _decompress(codec, bytes(data[body_start:end]))
            records = _decode_records(raw, 0, len(raw), count, base_offset, base_ts)
        batches.append(
            RecordBatch(
                base_offset, leader_epoch, attrs, last_delta, base_ts, max_ts, pid, pepoch, bseq, records
            )
        )
        pos = end
    return batches


def iter_records(batches: Iterable[RecordBatch]) -> Iterable[BatchRecord]:
    """Data records only (control batches skipped); no transaction filtering."""
    for batch in batches:
        if not batch.is_control:
            yield from batch.records
