"""The runtime every generated message class builds on: :class:`Struct`, :class:`Message` and the
decoder backend.

The classes themselves, with one encoder and one decoder per version, are Python source written
by :mod:`kcoord.protocol.codegen` into ``kcoord/protocol/generated/`` (checked in, never edited by
hand). Importing them runs no ``exec``: this module only gives them their base classes and, through
:func:`install_codecs`, their per-version codec tables.

Two decoder backends, one contract (``dec(buf, pos, blen) -> (obj, new_pos)``, objects identical
field for field, ``unknown_tagged`` included):

- ``"c"``: :mod:`kcoord.protocol._cdecode`, a C extension with one generic, table-driven decoder. Each
  generated module carries, per message, the *programs* the extension runs (one per version, the
  format is described in :mod:`kcoord.protocol.codegen`); the extension validates a program once,
  resolving every field to the byte offset of its ``__slots__`` member. It bounds every read by
  ``blen`` (so it rejects the same inputs as the Python decoders, only earlier) and decodes exact
  ``bytes``; other buffer types go to the Python decoder. Pure Python had reached a floor at about
  2x kafka-python's decode speed (bench/RESULTS.md, "## Codec"); the interpreter's per-field
  dispatch was what remained.
- ``"python"``: the generated straight-line decoders, always there. Used when the extension is not
  built (``setup.py`` marks it optional) or ``KCOORD_PURE_PYTHON=1`` is set in the environment.

:data:`DECODER_BACKEND` says which one ``Message.decode``/``decode_from`` use. Each class keeps
both tables: ``_PY_DECODERS`` (always) and ``_C_DECODERS`` (empty without the extension);
``_DECODERS`` is the active one.
"""

from __future__ import annotations

import os
import struct
import uuid
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any, ClassVar, Self

from .primitives import CodecError
from .schema import MessageSchema

ZERO_UUID = uuid.UUID(int=0)
# The default of an argument whose value is built fresh per instance (a list, a nested struct).
MISSING: Any = object()
# ``object.__new__`` typed for the generated decoders: they build instances without ``__init__``.
new_instance: Callable[[type[Any]], Any] = object.__new__

Encoder = Callable[[Any, bytearray], None]
Decoder = Callable[[bytes, int, int], tuple[Any, int]]
# A C decoder program for one version (format: kcoord.protocol.codegen), built from the extension's op codes.
ProgramsOf = Callable[[ModuleType], dict[int, tuple[Any, ...]]]

# The program format the generator writes; the extension reports the one it reads.
PROGRAM_FORMAT = 2


def _load_cdecode() -> ModuleType | None:
    """The C decoder extension, or None when it is not built, disabled, or built from older source."""
    if os.environ.get("KCOORD_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from . import _cdecode
    except ImportError:
        return None
    if getattr(_cdecode, "PROGRAM_FORMAT", None) != PROGRAM_FORMAT:
        # A stale in-place build (protocol/_cdecode*.so) from an older _cdecode.c: never misread programs.
        warnings.warn(
            "kcoord.protocol._cdecode was built from another version of _cdecode.c; rebuild it "
            "(pip install -e .). Using the pure-Python decoders.",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    _cdecode.configure(CodecError, uuid.UUID)
    return _cdecode


_cdecode = _load_cdecode()
DECODER_BACKEND: str = "c" if _cdecode is not None else "python"

# Java's String.hashCode and Kafka's partition of a group id in C (the router's placement of groups
# on shards, runtime/router.py), or None: the router then uses its pure-Python versions.
c_java_string_hash: Callable[[str], int] | None = getattr(_cdecode, "java_string_hash", None)
c_group_partition: Callable[[str, int], int] | None = getattr(_cdecode, "group_partition", None)
# A RecordBatch's records section in C (protocol/record_batch.py encode_records), or None.
c_encode_records: Callable[[object], bytes | None] | None = getattr(_cdecode, "encode_records", None)
# An offset commit record's key and value in C (protocol/records.py _offset_commit_pair), or None.
c_offset_commit_pair: Callable[..., tuple[bytes, bytes | None] | None] | None = getattr(
    _cdecode, "offset_commit_pair", None
)
# An OffsetCommit response frame in C (protocol/frames.py encode_response), or None.
c_offset_commit_response: Callable[[int, int, object], bytes | None] | None = getattr(
    _cdecode, "offset_commit_response", None
)
# The relay's read of a Produce's acks, topics and transactional id (coordinator/net/relay/guard.py).
c_produce_scan: Callable[[bytes, int, frozenset[bytes], bytes], tuple[int, int, bool]] | None = getattr(
    _cdecode, "produce_scan", None
)


def c_decoder_of(spec: tuple[Any, ...]) -> Decoder | None:
    """A C decoder for the struct program ``spec`` (format: codegen; None without the extension)."""
    if _cdecode is None:
        return None

    def python_buffers(buf: bytes, pos: int, blen: int) -> tuple[Any, int]:
        raise CodecError("only exact bytes are decoded here")

    decoder: Decoder = _cdecode.compile(spec, python_buffers)
    return decoder


def c_programs(cls: type[Message]) -> dict[int, tuple[Any, ...]]:
    """``cls``'s C decoder programs by version (empty without the extension)."""
    return cls._PROGRAMS(_cdecode) if _cdecode is not None else {}


class Struct:
    """Base class of every generated message and nested struct.

    Decoders build instances with ``object.__new__`` and slot stores, without calling
    ``__init__``: a subclass must not rely on ``__init__`` side effects.
    """

    __slots__ = ()
    FIELDS: ClassVar[tuple[str, ...]] = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.FIELDS)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.FIELDS)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        """A plain-dict view (nested structs become dicts); handy in tests and logs."""

        def conv(v: Any) -> Any:
            if isinstance(v, Struct):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            return v

        return {n: conv(getattr(self, n)) for n in self.FIELDS}


class Message(Struct):
    """A top-level message: knows its schema and its per-version codecs."""

    __slots__ = ()
    SCHEMA: ClassVar[MessageSchema]
    _ENCODERS: ClassVar[dict[int, Encoder]]
    _DECODERS: ClassVar[dict[int, Decoder]]  # the active backend's
    _PY_DECODERS: ClassVar[dict[int, Decoder]]
    _C_DECODERS: ClassVar[dict[int, Decoder]]
    _PROGRAMS: ClassVar[ProgramsOf]

    def encode(self, version: int) -> bytes:
        # encode_into's body, inlined (one call less on every response).
        try:
            enc = self._ENCODERS[version]
        except KeyError:
            raise CodecError(f"{type(self).__name__} has no version {version}") from None
        out = bytearray()
        try:
            enc(self, out)
        except (struct.error, AttributeError, TypeError, OverflowError) as exc:
            raise CodecError(f"cannot encode {type(self).__name__} v{version}: {exc}") from exc
        return bytes(out)

    def encode_into(self, out: bytearray, version: int) -> None:
        try:
            enc = self._ENCODERS[version]
        except KeyError:
            raise CodecError(f"{type(self).__name__} has no version {version}") from None
        try:
            enc(self, out)
        except (struct.error, AttributeError, TypeError, OverflowError) as exc:
            raise CodecError(f"cannot encode {type(self).__name__} v{version}: {exc}") from exc

    @classmethod
    def tag_section(cls, data: bytes, pos: int, version: int) -> int | None:
        """Where this message's own tagged fields start in ``data`` (it begins at ``pos``), found
        without building anything; None when the C decoder is not active (decode instead).

        Raises CodecError on malformed input, like decoding would.
        """
        if _cdecode is None or version not in cls._C_DECODERS or type(data) is not bytes:
            return None
        return int(_cdecode.tag_section(cls._C_DECODERS[version], data, pos, len(data)))

    @classmethod
    def decode(cls, data: bytes, version: int) -> Self:
        """Decode a whole buffer; trailing bytes are an error."""
        # decode_from's body, inlined: this is the hot path for every request kcoord serves.
        try:
            dec = cls._DECODERS[version]
        except KeyError:
            raise CodecError(f"{cls.__name__} has no version {version}") from None
        end = len(data)
        obj: Self  # what this class's decoders build (they are typed as returning Any)
        try:
            obj, pos = dec(data, 0, end)
        except CodecError:
            raise
        except (struct.error, IndexError, UnicodeDecodeError, ValueError, OverflowError) as exc:
            raise CodecError(f"malformed {cls.__name__} v{version}: {exc}") from exc
        if pos != end:
            if pos > end:
                raise CodecError(
                    f"{cls.__name__} v{version} runs {pos - end} bytes past the end of its frame"
                )
            raise CodecError(f"{cls.__name__} v{version}: {end - pos} trailing bytes")
        return obj

    @classmethod
    def decode_from(cls, data: bytes, pos: int, version: int, end: int | None = None) -> tuple[Self, int]:
        try:
            dec = cls._DECODERS[version]
        except KeyError:
            raise CodecError(f"{cls.__name__} has no version {version}") from None
        # An ``end`` beyond the buffer would let the Python decoders' length checks pass and their
        # slices come back short; both backends treat the buffer's end as the frame's end.
        size = len(data)
        if end is None or end > size:
            end = size
        try:
            obj, new_pos = dec(data, pos, end)
        except CodecError:
            raise
        except (struct.error, IndexError, UnicodeDecodeError, ValueError, OverflowError) as exc:
            raise CodecError(f"malformed {cls.__name__} v{version}: {exc}") from exc
        # Length-prefixed reads are checked against ``end`` as they go; fixed-size reads (struct
        # unpack, single bytes) are bounded only by ``len(data)``, so a message that runs past a
        # caller's ``end`` inside a larger buffer is caught here.
        if new_pos > end:
            raise CodecError(
                f"{cls.__name__} v{version} runs {new_pos - end} bytes past the end of its frame"
            )
        return obj, new_pos


def install_codecs(
    cls: type[Message],
    schema: MessageSchema,
    encoders: dict[int, Encoder],
    decoders: dict[int, Decoder],
    programs: ProgramsOf,
) -> None:
    """Give a generated message class its schema and codec tables; compile its C decoders if active."""
    cls.SCHEMA = schema
    cls._PROGRAMS = programs
    cls._ENCODERS = encoders
    cls._PY_DECODERS = decoders
    cls._C_DECODERS = {}
    if _cdecode is not None:
        # The Python decoder rides along: the C one hands it buffers that are not exact bytes.
        cls._C_DECODERS = {
            v: _cdecode.compile(program, decoders[v]) for v, program in programs(_cdecode).items()
        }
    cls._DECODERS = dict(cls._C_DECODERS or cls._PY_DECODERS)
