"""Generate specialised encoders and decoders from a :class:`~kcoord.protocol.schema.MessageSchema`.

Kafka's generic codecs (kafka-python's included) walk a schema tree for every message. We walk
it once per (struct, version) at import time and ``exec`` straight-line Python for that
version: consecutive fixed-size fields are packed/unpacked with one precompiled
``struct.Struct``, absent fields cost nothing, compact and classic encodings are chosen up
front. The generated classes are plain ``__slots__`` objects named after the schema's
structs, with snake_case attributes.

Invariants the generated decoders keep (tested by the fuzz and truncation tests):
- every length is checked against the bytes that remain before ``blen`` (the end of the frame)
  before anything is allocated for it; fixed-size reads may peek past ``blen`` inside the buffer,
  so ``decode_from`` rejects a message that ends beyond ``end`` and each known tagged field must
  end exactly where its size says;
- any malformed input surfaces as :class:`~kcoord.protocol.primitives.CodecError`;
- unknown tagged fields are kept, in order, in ``unknown_tagged`` and written back on encode.

Two decoder backends, one contract (``dec(buf, pos, blen) -> (obj, new_pos)``, objects identical
field for field, ``unknown_tagged`` included):

- ``"c"``: :mod:`kcoord.protocol._cdecode`, a C extension with one generic, table-driven decoder. For each
  (message, version) :meth:`_Generator.struct_program` compiles the schema into a *program* of
  nested tuples (format below) that the extension validates once, resolving every field to the
  byte offset of its ``__slots__`` member. It bounds every read by ``blen`` (so it rejects the same
  inputs as the Python decoders, only earlier) and decodes exact ``bytes``; other buffer types go
  to the Python decoder. Pure Python had reached a floor at about 2x kafka-python's decode speed
  (bench/RESULTS.md, "## Codec"); the interpreter's per-field dispatch was what remained.
- ``"python"``: the generated straight-line decoders, always built. Used when the extension is not
  built (``setup.py`` marks it optional) or ``KCOORD_PURE_PYTHON=1`` is set in the environment.

:data:`DECODER_BACKEND` says which one ``Message.decode``/``decode_from`` use. Each class keeps
both tables: ``_PY_DECODERS`` (always) and ``_C_DECODERS`` (empty without the extension);
``_DECODERS`` is the active one.

Program format (op codes are the extension's module constants ``OP_*``, ``LEN_*``, ``DEF_*``)::

    struct  = (cls, flexible, ((name, op), ...),              # regular fields, wire order
               ((tag, name, op), ...),                        # known tagged fields
               ((name, DEF_CONST | DEF_LIST | DEF_CALL, value), ...))  # absent / untagged defaults
    op      = (OP_BOOL | OP_INT8 | ... | OP_FLOAT64,) | (OP_UUID,)
            | (OP_STRING | OP_BYTES, LEN_INT16 | LEN_INT32 | LEN_COMPACT, nullable, label)
            | (OP_STRUCT, nullable, struct)                   # nullable: a presence byte first
            | (OP_ARRAY, LEN_INT32 | LEN_COMPACT, nullable, label, element_op)
"""

from __future__ import annotations

import os
import struct
import uuid
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any, ClassVar, Self, TypeVar, cast

from .primitives import MAX_STRING_BYTES, CodecError, decode_uvarint, encode_uvarint
from .schema import Field, MessageSchema

ZERO_UUID = uuid.UUID(int=0)
_MISSING: Any = object()
_S = TypeVar("_S", bound="Struct")

# The program format this module writes; the extension reports the one it reads.
_PROGRAM_FORMAT = 2


def _load_cdecode() -> ModuleType | None:
    """The C decoder extension, or None when it is not built, disabled, or built from older source."""
    if os.environ.get("KCOORD_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from . import _cdecode
    except ImportError:
        return None
    if getattr(_cdecode, "PROGRAM_FORMAT", None) != _PROGRAM_FORMAT:
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

_FIXED_FORMATS = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "int64": "q",
    "float64": "d",
}
# Literal byte strings spliced into generated source (f-strings cannot hold backslashes on 3.11).
_NULL_I16 = repr(b"\xff\xff")
_NULL_I32 = repr(b"\xff\xff\xff\xff")
_ZERO_I16 = repr(bytes(2))
_ZERO_I32 = repr(bytes(4))
_FIXED_SIZES = {"?": 1, "b": 1, "h": 2, "H": 2, "i": 4, "q": 8, "d": 8}


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
    _ENCODERS: ClassVar[dict[int, Callable[[Any, bytearray], None]]]
    _DECODERS: ClassVar[dict[int, Callable[[bytes, int, int], tuple[Any, int]]]]  # the active backend's
    _PY_DECODERS: ClassVar[dict[int, Callable[[bytes, int, int], tuple[Any, int]]]]
    _C_DECODERS: ClassVar[dict[int, Callable[[bytes, int, int], tuple[Any, int]]]]

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


class _Source:
    """Accumulates indented source lines for one generated function."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.indent = 1
        self.counter = 0

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def tmp(self, prefix: str = "t") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"


class _Generator:
    """Builds the classes and codecs for one message schema."""

    def __init__(self, schema: MessageSchema) -> None:
        self.schema = schema
        self.ns: dict[str, Any] = {
            "CodecError": CodecError,
            "_uv": decode_uvarint,
            "_uvenc": encode_uvarint,
            "_MISSING": _MISSING,
            "_UUID": uuid.UUID,
            "_ZERO_UUID": ZERO_UUID,
            "_unpack_from": struct.unpack_from,
            "_pack": struct.pack,
            "_new": object.__new__,
            "_U16": struct.Struct(">h").unpack_from,
            "_U32": struct.Struct(">i").unpack_from,
            "_P16": struct.Struct(">h").pack,
            "_P32": struct.Struct(">i").pack,
            **{f"_UF_{t}": struct.Struct(">" + ch).unpack_from for t, ch in _FIXED_FORMATS.items()},
            **{f"_PF_{t}": struct.Struct(">" + ch).pack for t, ch in _FIXED_FORMATS.items()},
            "_itemgetter0": lambda t: t[0],
        }
        self.classes: dict[str, type[Struct]] = {}
        self.sources: list[str] = []

    # -- classes -----------------------------------------------------------------------------------
    def make_class(self, name: str, fields: list[Field], base: type[_S]) -> type[_S]:
        names = tuple(f.name for f in fields)
        params = []
        body = []
        for f in fields:
            const = f"_D_{id(f)}"
            if f.is_array and f.default is not None:
                params.append(f"{f.name}=_MISSING")
                body.append(f"self.{f.name} = [] if {f.name} is _MISSING else {f.name}")
            elif f.is_struct and not f.is_array:
                sub = self.struct_class(f)
                self.ns[f"_C_{sub.__name__}"] = sub
                params.append(f"{f.name}=_MISSING")
                body.append(f"self.{f.name} = _C_{sub.__name__}() if {f.name} is _MISSING else {f.name}")
            else:
                default = ZERO_UUID if f.type == "uuid" and f.default is None else f.default
                self.ns[const] = default
                params.append(f"{f.name}={const}")
                body.append(f"self.{f.name} = {f.name}")
            if f.is_struct:
                self.struct_class(f)
        params.append("unknown_tagged=None")
        body.append("self.unknown_tagged = unknown_tagged")
        src = f"def __init__(self, {', '.join(params)}):\n    " + "\n    ".join(body) + "\n"
        ns = dict(self.ns)
        exec(src, ns)  # noqa: S102 - generated from our own schema files
        cls = type(
            name,
            (base,),
            {"__slots__": (*names, "unknown_tagged"), "FIELDS": names, "__init__": ns["__init__"]},
        )
        return cast(type[_S], cls)  # type() is typed as returning a plain type; this one subclasses base

    def struct_class(self, f: Field) -> type[Struct]:
        # Keyed by the struct's type name: a common struct used in several places is one class.
        cls = self.classes.get(f.type)
        if cls is None:
            cls = self.make_class(f.type, f.fields, Struct)
            self.classes[f.type] = cls
        return cls

    # -- decoders ----------------------------------------------------------------------------------
    def decoder(self, cls_name: str, fields: list[Field], version: int, flexible: bool) -> str:
        """One function per (message, version); nested structs are decoded inline (see below)."""
        fname = f"d_{cls_name}_{version}"
        if fname in self.ns:
            return fname
        self.ns[fname] = None  # reserve
        src = _Source()
        self.decode_struct(src, cls_name, fields, version, flexible, "o")
        src.emit("return o, pos")
        header = f"def {fname}(buf, pos, blen):\n"
        self.sources.append(header + "\n".join(src.lines) + "\n")
        return fname

    def decode_struct(
        self, src: _Source, cls_name: str, fields: list[Field], version: int, flexible: bool, target: str
    ) -> None:
        """Emit straight-line code that decodes one ``cls_name`` at ``pos`` into ``target``.

        Nested structs (array elements included) are emitted inline rather than called: a call and
        a returned ``(obj, pos)`` tuple per element was a third of the cost of decoding an array of
        small structs. Every local this emits carries a per-struct suffix, so a struct decoded
        inside another one's tagged-field loop cannot clobber the outer loop's state.
        """
        k = src.tmp("")
        regular = [f for f in fields if f.present_in(version) and not (flexible and f.tagged_in(version))]
        tagged = [f for f in fields if flexible and f.present_in(version) and f.tagged_in(version)]
        var = {f.name: f"v{k}_{f.name}" for f in fields}
        ntags, unk, te, outer = f"nt{k}", f"unk{k}", f"te{k}", f"ob{k}"
        run: list[Field] = []
        tags_read = False

        def flush_run(with_tag_count: bool = False) -> None:
            if not run:
                return
            fmt = ">" + "".join(_FIXED_FORMATS[f.type] for f in run) + ("B" if with_tag_count else "")
            size = sum(_FIXED_SIZES.get(c, 1) for c in fmt[1:])
            sname = f"_S_{len(self.ns)}"
            self.ns[sname] = struct.Struct(fmt).unpack_from
            targets = [var[f.name] for f in run] + ([ntags] if with_tag_count else [])
            src.emit(f"({', '.join(targets)},) = {sname}(buf, pos)")
            src.emit(f"pos += {size}")
            run.clear()

        for f in regular:
            if not f.is_array and f.type in _FIXED_FORMATS:
                run.append(f)
                continue
            flush_run()
            self.decode_field(src, f, var[f.name], version, flexible)
        if flexible and run:
            # The tag count byte that follows a run of fixed fields is read by the same unpack.
            flush_run(with_tag_count=True)
            tags_read = True
        flush_run()
        if flexible:
            for f in tagged:
                src.emit(f"{var[f.name]} = {self._default_expr(f)}")
            src.emit(f"{unk} = None")
            if not tags_read:
                src.emit(f"{ntags} = buf[pos]")
                src.emit("pos += 1")
            # Almost every struct has no tagged fields: one byte, no loop.
            src.emit(f"if {ntags}:")
            src.indent += 1
            src.emit(f"if {ntags} >= 128: {ntags}, pos = _uv(buf, pos - 1)")
            src.emit(f"for _ in range({ntags}):")
            src.indent += 1
            src.emit("tag, pos = _uv(buf, pos)")
            src.emit("sz, pos = _uv(buf, pos)")
            src.emit(f"{te} = pos + sz")
            src.emit(f"if {te} > blen: raise CodecError('tagged field past end of frame')")
            first = True
            for f in tagged:
                kw = "if" if first else "elif"
                first = False
                src.emit(f"{kw} tag == {f.tag}:")
                src.indent += 1
                src.emit(f"{outer}, blen = blen, {te}")
                self.decode_field(src, f, var[f.name], version, flexible, tagged=True)
                src.emit(f"blen = {outer}")
                # A known tagged field must fill exactly the size it declared: fixed-size reads are
                # not bounded by ``blen``, so an overrun is only visible here.
                src.emit(
                    f"if pos != {te}: raise CodecError('tagged field {f.kafka_name} does not match its size')"
                )
                src.indent -= 1
            if tagged:
                src.emit("else:")
                src.indent += 1
            src.emit(f"if {unk} is None: {unk} = []")
            src.emit(f"{unk}.append((tag, buf[pos:{te}]))")
            src.emit(f"pos = {te}")
            if tagged:
                src.indent -= 1
            src.indent -= 2
        # Build the instance without its __init__ (object.__new__ plus slot stores): a decoded
        # message has every field already, and the __init__ call is the costliest step per struct.
        src.emit(f"{target} = _new(_C_{cls_name})")
        for f in fields:
            present = any(f is g for g in regular) or any(f is g for g in tagged)
            src.emit(f"{target}.{f.name} = {var[f.name] if present else self._default_expr(f)}")
        src.emit(f"{target}.unknown_tagged = {unk if flexible else 'None'}")

    def _default_expr(self, f: Field) -> str:
        """Source for a field's default: a fresh list/struct where mutable, else the shared constant."""
        if f.is_array and f.default is not None:
            return "[]"
        if f.is_struct and not f.is_array:
            cls = self.struct_class(f)
            self.ns[f"_C_{cls.__name__}"] = cls
            return f"_C_{cls.__name__}()"
        return f"_D_{id(f)}"

    def decode_field(
        self, src: _Source, f: Field, target: str, version: int, flexible: bool, tagged: bool = False
    ) -> None:
        nullable = version in f.nullable
        if f.flexible_override is not None:
            flexible = flexible and version in f.flexible_override
        if f.is_array:
            self._read_length(src, "n", flexible, array=True)
            src.emit("if n < 0:")
            src.indent += 1
            if nullable:
                src.emit(f"{target} = None")
            else:
                src.emit(f"raise CodecError('non-nullable array {f.kafka_name} is null')")
            src.indent -= 1
            src.emit("else:")
            src.indent += 1
            src.emit("if n > blen - pos: raise CodecError('array length exceeds frame')")
            if f.type in _FIXED_FORMATS and f.type != "bool":
                ch = _FIXED_FORMATS[f.type]
                src.emit(f"{target} = list(_unpack_from('>%d{ch}' % n, buf, pos))")
                src.emit(f"pos += n * {_FIXED_SIZES[ch]}")
            else:
                lst = src.tmp("lst")
                src.emit(f"{lst} = []")
                src.emit("for _ in range(n):")
                src.indent += 1
                elem = src.tmp("el")
                self._decode_scalar(src, f, elem, version, flexible, nullable=False)
                src.emit(f"{lst}.append({elem})")
                src.indent -= 1
                src.emit(f"{target} = {lst}")
            src.indent -= 1
        else:
            self._decode_scalar(src, f, target, version, flexible, nullable, tagged)

    def _read_length(self, src: _Source, var: str, flexible: bool, array: bool, wide: bool = False) -> None:
        """Leave the element count/byte length in ``var``, -1 for null."""
        if flexible:
            # Compact lengths are stored +1 (0 = null); a first byte below 128 is the whole varint.
            src.emit(f"{var} = buf[pos] - 1")
            src.emit(f"if {var} < 127: pos += 1")
            src.emit(f"else: {var}, pos = _uv(buf, pos); {var} -= 1")
        elif array or wide:
            src.emit(f"({var},) = _U32(buf, pos)")
            src.emit("pos += 4")
        else:
            src.emit(f"({var},) = _U16(buf, pos)")
            src.emit("pos += 2")

    def _decode_scalar(
        self,
        src: _Source,
        f: Field,
        target: str,
        version: int,
        flexible: bool,
        nullable: bool,
        tagged: bool = False,
    ) -> None:
        t = f.type
        if t in _FIXED_FORMATS:
            ch = _FIXED_FORMATS[t]
            src.emit(f"({target},) = _UF_{t}(buf, pos)")
            src.emit(f"pos += {_FIXED_SIZES[ch]}")
        elif t == "uuid":
            src.emit("e = pos + 16")
            src.emit("if e > blen: raise CodecError('truncated uuid')")
            src.emit(f"{target} = _UUID(bytes=buf[pos:e])")
            src.emit("pos = e")
        elif t in ("string", "bytes", "records"):
            self._read_length(src, "ln", flexible, array=False, wide=t != "string")
            src.emit("if ln < 0:")
            src.indent += 1
            if nullable:
                src.emit(f"{target} = None")
            else:
                src.emit(f"raise CodecError('non-nullable {t} {f.kafka_name} is null')")
            src.indent -= 1
            if t == "string":
                # Empty strings are common (commit metadata, unset ids): skip the slice and decode.
                src.emit(f"elif ln == 0: {target} = ''")
                # Kafka's generated readers refuse a string longer than 0x7fff bytes, compact ones too
                # (MessageDataGenerator: "string field groupId had invalid length ..."): a parse error.
                src.emit(
                    f"elif ln > {MAX_STRING_BYTES}: raise CodecError('string {f.kafka_name} had invalid length %d' % ln)"
                )
            src.emit("else:")
            src.indent += 1
            src.emit("e = pos + ln")
            src.emit(f"if e > blen: raise CodecError('{t} {f.kafka_name} runs past end of frame')")
            if t == "string":
                src.emit(f"{target} = buf[pos:e].decode()")  # UTF-8, strict: the fastest spelling
            else:
                src.emit(f"{target} = buf[pos:e]")
            src.emit("pos = e")
            src.indent -= 1
        else:  # struct, decoded inline
            cls = self.struct_class(f)
            self.ns[f"_C_{cls.__name__}"] = cls
            if nullable and not f.is_array and tagged:
                # In a tagged field Kafka's generator writes the presence as an unsigned varint:
                # 0 null, 1 present (Kafka 4.0 writes a null ClassicMemberMetadata so).
                # kcoord wrote an int8 -1 there before it matched Kafka: a lone 0xff still means null.
                src.emit("if blen - pos == 1 and buf[pos] == 255: pres = 0; pos += 1")
                src.emit("else: pres, pos = _uv(buf, pos)")
                src.emit(f"if pres == 0: {target} = None")
                src.emit("else:")
                src.indent += 1
                self.decode_struct(src, cls.__name__, f.fields, version, flexible, target)
                src.indent -= 1
            elif nullable and not f.is_array:
                # Nullable structs carry a presence byte (-1 null, 1 present).
                src.emit("(pres,) = _UF_int8(buf, pos)")
                src.emit("pos += 1")
                src.emit(f"if pres < 0: {target} = None")
                src.emit("else:")
                src.indent += 1
                self.decode_struct(src, cls.__name__, f.fields, version, flexible, target)
                src.indent -= 1
            else:
                self.decode_struct(src, cls.__name__, f.fields, version, flexible, target)

    # -- programs for the C decoder ----------------------------------------------------------------
    # These mirror decode_struct/decode_field/_decode_scalar above, field for field: the C
    # extension interprets what the Python generator would have emitted (see the module docstring
    # for the format). The differential tests (tests/unit/test_codec_cdecode.py) hold them together.
    def struct_program(self, cls: type, fields: list[Field], version: int, flexible: bool) -> tuple[Any, ...]:
        assert _cdecode is not None
        regular = [f for f in fields if f.present_in(version) and not (flexible and f.tagged_in(version))]
        tagged = [f for f in fields if flexible and f.present_in(version) and f.tagged_in(version)]
        on_wire = {id(f) for f in regular}  # by identity, as decode_struct does: Fields compare by value
        ops = tuple((f.name, self.field_op(f, version, flexible)) for f in regular)
        tags = tuple((f.tag, f.name, self.field_op(f, version, flexible, tagged=True)) for f in tagged)
        # Absent fields and tagged fields (when the wire does not carry them) get _default_expr's value.
        defaults = tuple((f.name, *self._default_spec(f)) for f in fields if id(f) not in on_wire)
        return (cls, flexible, ops, tags, defaults)

    def _default_spec(self, f: Field) -> tuple[int, Any]:
        """_default_expr as data: a fresh list, a fresh struct (its class, called), or the shared constant."""
        assert _cdecode is not None
        if f.is_array and f.default is not None:
            return (_cdecode.DEF_LIST, None)
        if f.is_struct and not f.is_array:
            return (_cdecode.DEF_CALL, self.struct_class(f))
        return (_cdecode.DEF_CONST, self.ns[f"_D_{id(f)}"])

    def field_op(self, f: Field, version: int, flexible: bool, tagged: bool = False) -> tuple[Any, ...]:
        assert _cdecode is not None
        nullable = version in f.nullable
        if f.flexible_override is not None:
            flexible = flexible and version in f.flexible_override
        if f.is_array:
            count = _cdecode.LEN_COMPACT if flexible else _cdecode.LEN_INT32
            elem = self._scalar_op(f, version, flexible, nullable=False)
            return (_cdecode.OP_ARRAY, count, nullable, f"array {f.kafka_name}", elem)
        return self._scalar_op(f, version, flexible, nullable, tagged)

    def _scalar_op(
        self, f: Field, version: int, flexible: bool, nullable: bool, tagged: bool = False
    ) -> tuple[Any, ...]:
        assert _cdecode is not None
        t = f.type
        if t in _FIXED_FORMATS:
            return (getattr(_cdecode, f"OP_{t.upper()}"),)
        if t == "uuid":
            return (_cdecode.OP_UUID,)
        if t in ("string", "bytes", "records"):
            if flexible:
                length = _cdecode.LEN_COMPACT
            else:
                length = _cdecode.LEN_INT16 if t == "string" else _cdecode.LEN_INT32
            kind = _cdecode.OP_STRING if t == "string" else _cdecode.OP_BYTES
            return (kind, length, nullable, f"{t} {f.kafka_name}")
        cls = self.struct_class(f)
        # 0: no presence marker; 1: an int8 (-1 null); 2: an unsigned varint (0 null), in a tagged field
        presence = 0 if not nullable or f.is_array else 2 if tagged else 1
        return (_cdecode.OP_STRUCT, presence, self.struct_program(cls, f.fields, version, flexible))

    # -- encoders ----------------------------------------------------------------------------------
    def encoder(self, cls_name: str, fields: list[Field], version: int, flexible: bool) -> str:
        fname = f"e_{cls_name}_{version}"
        if fname in self.ns:
            return fname
        self.ns[fname] = None
        src = _Source()
        regular = [f for f in fields if f.present_in(version) and not (flexible and f.tagged_in(version))]
        tagged = [f for f in fields if flexible and f.present_in(version) and f.tagged_in(version)]
        run: list[Field] = []

        def flush_run() -> None:
            if not run:
                return
            fmt = ">" + "".join(_FIXED_FORMATS[f.type] for f in run)
            sname = f"_P_{len(self.ns)}"
            self.ns[sname] = struct.Struct(fmt).pack
            src.emit(f"out += {sname}({', '.join('o.' + f.name for f in run)})")
            run.clear()

        for f in regular:
            if not f.is_array and f.type in _FIXED_FORMATS:
                run.append(f)
                continue
            flush_run()
            self.encode_field(src, f, f"o.{f.name}", "out", version, flexible)
        flush_run()
        if flexible:
            if not tagged:
                src.emit("u = o.unknown_tagged")
                src.emit("if not u: out.append(0)")
                src.emit("else:")
                src.indent += 1
                src.emit("u = sorted(u, key=_itemgetter0)")
                src.emit("out += _uvenc(len(u))")
                src.emit("for tag, tb in u:")
                src.emit("    out += _uvenc(tag); out += _uvenc(len(tb)); out += tb")
                src.indent -= 1
            else:
                src.emit("tags = list(o.unknown_tagged or ())")
                for f in tagged:
                    dconst = f"_TD_{id(f)}"
                    self.ns[dconst] = self._tag_default(f)
                    src.emit(f"if o.{f.name} != {dconst}:")
                    src.indent += 1
                    src.emit("tb = bytearray()")
                    self.encode_field(src, f, f"o.{f.name}", "tb", version, flexible, tagged=True)
                    src.emit(f"tags.append(({f.tag}, tb))")
                    src.indent -= 1
                src.emit("tags.sort(key=_itemgetter0)")
                src.emit("out += _uvenc(len(tags))")
                src.emit("for tag, tb in tags:")
                src.emit("    out += _uvenc(tag); out += _uvenc(len(tb)); out += tb")
        if not src.lines:
            src.emit("pass")
        self.sources.append(f"def {fname}(o, out):\n" + "\n".join(src.lines) + "\n")
        return fname

    @staticmethod
    def _emit_uvarint(src: _Source, out: str, expr: str) -> None:
        """Append ``expr`` as an unsigned varint; lengths below 128 (nearly all) take one append."""
        n = src.tmp("n")
        src.emit(f"{n} = {expr}")
        src.emit(f"if {n} < 128: {out}.append({n})")
        src.emit(f"else: {out} += _uvenc({n})")

    def _tag_default(self, f: Field) -> Any:
        if f.is_array:
            return None if f.default is None else []
        if f.is_struct:
            return self.struct_class(f)()
        if f.type == "uuid":
            return ZERO_UUID
        return f.default

    def encode_field(
        self, src: _Source, f: Field, expr: str, out: str, version: int, flexible: bool, tagged: bool = False
    ) -> None:
        nullable = version in f.nullable
        if f.flexible_override is not None:
            flexible = flexible and version in f.flexible_override
        if f.is_array:
            v = src.tmp("a")
            src.emit(f"{v} = {expr}")
            src.emit(f"if {v} is None:")
            src.indent += 1
            if flexible:
                src.emit(f"{out}.append(0)" if nullable else f"{out}.append(1)")
            else:
                src.emit(f"{out} += {_NULL_I32 if nullable else _ZERO_I32}")
            src.indent -= 1
            src.emit("else:")
            src.indent += 1
            if flexible:
                self._emit_uvarint(src, out, f"len({v}) + 1")
            else:
                src.emit(f"{out} += _P32(len({v}))")
            if f.type in _FIXED_FORMATS and f.type != "bool":
                ch = _FIXED_FORMATS[f.type]
                src.emit(f"{out} += _pack('>%d{ch}' % len({v}), *{v})")
            else:
                el = src.tmp("el")
                src.emit(f"for {el} in {v}:")
                src.indent += 1
                self._encode_scalar(src, f, el, out, version, flexible, nullable=False)
                src.indent -= 1
            src.indent -= 1
        else:
            self._encode_scalar(src, f, expr, out, version, flexible, nullable, tagged)

    def _encode_scalar(
        self,
        src: _Source,
        f: Field,
        expr: str,
        out: str,
        version: int,
        flexible: bool,
        nullable: bool,
        tagged: bool = False,
    ) -> None:
        t = f.type
        if t in _FIXED_FORMATS:
            src.emit(f"{out} += _PF_{t}({expr})")
        elif t == "uuid":
            src.emit(f"{out} += ({expr} or _ZERO_UUID).bytes")
        elif t in ("string", "bytes", "records"):
            v = src.tmp("s")
            src.emit(f"{v} = {expr}")
            src.emit(f"if {v} is None:")
            src.indent += 1
            if nullable:
                if flexible:
                    src.emit(f"{out}.append(0)")
                else:
                    src.emit(f"{out} += {_NULL_I16 if t == 'string' else _NULL_I32}")
            else:
                # Lenient on encode: a None in a version where the field is not nullable is sent empty.
                if flexible:
                    src.emit(f"{out}.append(1)")
                else:
                    src.emit(f"{out} += {_ZERO_I16 if t == 'string' else _ZERO_I32}")
            src.indent -= 1
            src.emit("else:")
            src.indent += 1
            if t == "string":
                src.emit(f"{v} = {v}.encode('utf-8')")
            if flexible:
                self._emit_uvarint(src, out, f"len({v}) + 1")
            elif t == "string":
                src.emit(f"{out} += _P16(len({v}))")
            else:
                src.emit(f"{out} += _P32(len({v}))")
            src.emit(f"{out} += {v}")
            src.indent -= 1
        else:
            cls = self.struct_class(f)
            sub = self.encoder(cls.__name__, f.fields, version, flexible)
            if nullable and not f.is_array:
                v = src.tmp("st")
                src.emit(f"{v} = {expr}")
                # presence: int8 -1/1, or in a tagged field an unsigned varint 0/1 (as Kafka's generator)
                src.emit(f"if {v} is None: {out}.append({0 if tagged else 255})")
                src.emit(f"else: {out}.append(1); {sub}({v}, {out})")
            else:
                src.emit(f"{sub}({expr}, {out})")

    # -- assembly ------------------------------------------------------------------------------------
    def build(self, base: type[Message]) -> type[Message]:
        schema = self.schema
        cls = self.make_class(schema.name, schema.fields, base)
        self.ns[f"_C_{schema.name}"] = cls
        for c in self.classes.values():
            self.ns[f"_C_{c.__name__}"] = c
        for f in _all_fields(schema.fields):
            self.ns.setdefault(
                f"_D_{id(f)}", ZERO_UUID if f.type == "uuid" and f.default is None else f.default
            )
        encoders: dict[int, str] = {}
        decoders: dict[int, str] = {}
        hi = schema.valid.high if schema.valid.high is not None else schema.valid.low
        for v in range(schema.valid.low, hi + 1):
            flexible = v in schema.flexible
            decoders[v] = self.decoder(schema.name, schema.fields, v, flexible)
            encoders[v] = self.encoder(schema.name, schema.fields, v, flexible)
        exec("\n".join(self.sources), self.ns)  # noqa: S102 - generated from our own schema files
        cls.SCHEMA = schema
        cls._ENCODERS = {v: self.ns[n] for v, n in encoders.items()}
        cls._PY_DECODERS = {v: self.ns[n] for v, n in decoders.items()}
        cls._C_DECODERS = {}
        if _cdecode is not None:
            # The Python decoder rides along: the C one hands it buffers that are not exact bytes.
            cls._C_DECODERS = {
                v: _cdecode.compile(self.struct_program(cls, schema.fields, v, v in schema.flexible), py_dec)
                for v, py_dec in cls._PY_DECODERS.items()
            }
        cls._DECODERS = dict(cls._C_DECODERS or cls._PY_DECODERS)
        for name, sub in self.classes.items():
            setattr(cls, name, sub)
        return cls


def _all_fields(fields: list[Field]) -> list[Field]:
    out: list[Field] = []
    for f in fields:
        out.append(f)
        out.extend(_all_fields(f.fields))
    return out


def build_message_class(schema: MessageSchema, base: type[Message] = Message) -> type[Message]:
    """Create the class for ``schema`` with an encoder and a decoder for every valid version."""
    return _Generator(schema).build(base)
