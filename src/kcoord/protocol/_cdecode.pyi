# Types of the C decoder extension built from protocol/_cdecode.c (see protocol/codegen.py for the
# program format). Hand-written: the extension's API is three decoder functions and its constants,
# Java's string hash for the router's placement of groups (runtime/router.py), the records section
# of a RecordBatch and an offset commit record (record_batch.py, records.py), and the relay's read
# of a Produce (coordinator/net/relay/guard.py: produce_scan).

from collections.abc import Callable
from typing import Any

_Decoder = Callable[[bytes, int, int], tuple[Any, int]]

PROGRAM_FORMAT: int
OP_BOOL: int
OP_INT8: int
OP_INT16: int
OP_UINT16: int
OP_INT32: int
OP_INT64: int
OP_FLOAT64: int
OP_UUID: int
OP_STRING: int
OP_BYTES: int
OP_STRUCT: int
OP_ARRAY: int
LEN_INT16: int
LEN_INT32: int
LEN_COMPACT: int
DEF_CONST: int
DEF_LIST: int
DEF_CALL: int

def configure(codec_error: type[Exception], uuid_type: type, /) -> None: ...
def compile(program: tuple[Any, ...], fallback: _Decoder, /) -> _Decoder: ...
def tag_section(decoder: _Decoder, buf: bytes, pos: int, blen: int, /) -> int: ...
def java_string_hash(s: str, /) -> int: ...
def group_partition(group_id: str, partitions: int, /) -> int: ...
def encode_records(records: object, /) -> bytes | None: ...
def offset_commit_pair(*args: object) -> tuple[bytes, bytes | None] | None: ...
def offset_commit_response(version: int, correlation_id: int, response: object, /) -> bytes | None: ...
def produce_scan(
    payload: bytes, version: int, keys: frozenset[bytes], prefix: bytes, /
) -> tuple[int, int, bool]: ...
