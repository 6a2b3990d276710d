"""The source of one message's encoders and decoders: straight-line Python per version.

Kafka's generic codecs (kafka-python's included) walk a schema tree for every message. We walk
it once per (struct, version), when the code is generated, and write straight-line Python for
that version: consecutive fixed-size fields are packed/unpacked with one precompiled
``struct.Struct``, absent fields cost nothing, compact and classic encodings are chosen up front.

Invariants the generated decoders keep (tested by the fuzz and truncation tests):
- every length is checked against the bytes that remain before ``blen`` (the end of the frame)
  before anything is allocated for it; fixed-size reads may peek past ``blen`` inside the buffer,
  so ``decode_from`` rejects a message that ends beyond ``end`` and each known tagged field must
  end exactly where its size says;
- any malformed input surfaces as :class:`~kcoord.protocol.primitives.CodecError`;
- unknown tagged fields are kept, in order, in ``unknown_tagged`` and written back on encode.

The functions refer to module-level names the generated module defines: the helpers of
:data:`PRELUDE`, the struct classes by their aliases (:meth:`CodecWriter.class_ref`) and the
precompiled packers (:meth:`CodecWriter.constant`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kcoord.protocol.primitives import MAX_STRING_BYTES
from kcoord.protocol.schema import Field, MessageSchema

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

# The names every generated function may use, bound at module level as the functions' globals
# (a global lookup is what the former ``exec`` namespace cost too).
PRELUDE = "\n".join(
    [
        "_uv = decode_uvarint",
        "_uvenc = encode_uvarint",
        "_UUID = uuid.UUID",
        "_ZERO_UUID = ZERO_UUID",
        "_MISSING = MISSING",
        "_new = new_instance",
        "_unpack_from = struct.unpack_from",
        "_pack = struct.pack",
        '_U16 = struct.Struct(">h").unpack_from',
        '_U32 = struct.Struct(">i").unpack_from',
        '_P16 = struct.Struct(">h").pack',
        '_P32 = struct.Struct(">i").pack',
        *(f'_UF_{t} = struct.Struct(">{ch}").unpack_from' for t, ch in _FIXED_FORMATS.items()),
        *(f'_PF_{t} = struct.Struct(">{ch}").pack' for t, ch in _FIXED_FORMATS.items()),
        "_itemgetter0 = operator.itemgetter(0)",
    ]
)


def _format_name(fmt: str) -> str:
    """A ``struct`` format as part of a Python name (``>qi?`` -> ``qiT``; ``?`` is a bool)."""
    return fmt[1:].replace("?", "T")


def field_default(f: Field) -> object:
    """A scalar field's default value (the zero uuid where the spec leaves a uuid's default out)."""
    return uuid.UUID(int=0) if f.type == "uuid" and f.default is None else f.default


def python_literal(value: object) -> str:
    """Source for an immutable default: what the generated module shares between instances."""
    if isinstance(value, uuid.UUID):
        if value.int != 0:
            raise ValueError(f"unexpected uuid default {value}")
        return "_ZERO_UUID"
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return repr(value)
    raise TypeError(f"no literal for default {value!r}")


@dataclass
class ModuleNames:
    """The module-level names a generated module's functions share, with the source that binds them."""

    constants: dict[str, str] = field(default_factory=dict)  # bound before the classes exist
    after_classes: dict[str, str] = field(default_factory=dict)  # class aliases, shared instances


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


class CodecWriter:
    """Writes the encoders and decoders of one message schema, every valid version."""

    def __init__(self, schema: MessageSchema, names: ModuleNames) -> None:
        self.schema = schema
        self.message = schema.name
        self.names = names
        self.functions: list[str] = []
        self.defined: set[str] = set()
        self.encoders: dict[int, str] = {}
        self.decoders: dict[int, str] = {}
        hi = schema.valid.high if schema.valid.high is not None else schema.valid.low
        for v in range(schema.valid.low, hi + 1):
            flexible = v in schema.flexible
            self.decoders[v] = self.decoder(schema.name, schema.fields, v, flexible)
            self.encoders[v] = self.encoder(schema.name, schema.fields, v, flexible)

    def class_ref(self, name: str) -> str:
        """The module-level name of the message class or of one of its struct classes."""
        if name == self.message:
            return name
        alias = f"_C_{self.message}_{name}"
        self.names.after_classes.setdefault(alias, f"{self.message}.{name}")
        return alias

    def constant(self, name: str, source: str, after_classes: bool = False) -> str:
        """Bind ``name`` to ``source`` once at module level (shared by every function that uses it)."""
        table = self.names.after_classes if after_classes else self.names.constants
        table.setdefault(name, source)
        return name

    # -- decoders ----------------------------------------------------------------------------------
    def decoder(self, cls_name: str, fields: list[Field], version: int, flexible: bool) -> str:
        """One function per (message, version); nested structs are decoded inline (see below)."""
        fname = f"_d_{cls_name}_{version}"
        src = _Source()
        self.decode_struct(src, cls_name, fields, version, flexible, "o")
        src.emit("return o, pos")
        header = f"def {fname}(buf: bytes, pos: int, blen: int) -> tuple[Any, int]:\n"
        self.functions.append(header + "\n".join(src.lines) + "\n")
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
            sname = self.constant(f"_UNPACK_{_format_name(fmt)}", f"struct.Struct({fmt!r}).unpack_from")
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
                # Typed Any: the wire may hold None where the default is a list or a struct.
                src.emit(f"{var[f.name]}: Any = {self._default_expr(f)}")
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
        src.emit(f"{target} = _new({self.class_ref(cls_name)})")
        for f in fields:
            present = any(f is g for g in regular) or any(f is g for g in tagged)
            src.emit(f"{target}.{f.name} = {var[f.name] if present else self._default_expr(f)}")
        src.emit(f"{target}.unknown_tagged = {unk if flexible else 'None'}")

    def _default_expr(self, f: Field) -> str:
        """Source for a field's default: a fresh list/struct where mutable, else the shared constant."""
        if f.is_array and f.default is not None:
            return "[]"
        if f.is_struct and not f.is_array:
            return f"{self.class_ref(f.type)}()"
        return python_literal(field_default(f))

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
            name = f.type
            if nullable and not f.is_array and tagged:
                # In a tagged field Kafka's generator writes the presence as an unsigned varint:
                # 0 null, 1 present (Kafka 4.0 writes a null ClassicMemberMetadata so).
                # kcoord wrote an int8 -1 there before it matched Kafka: a lone 0xff still means null.
                src.emit("if blen - pos == 1 and buf[pos] == 255: pres = 0; pos += 1")
                src.emit("else: pres, pos = _uv(buf, pos)")
                src.emit(f"if pres == 0: {target} = None")
                src.emit("else:")
                src.indent += 1
                self.decode_struct(src, name, f.fields, version, flexible, target)
                src.indent -= 1
            elif nullable and not f.is_array:
                # Nullable structs carry a presence byte (-1 null, 1 present).
                src.emit("(pres,) = _UF_int8(buf, pos)")
                src.emit("pos += 1")
                src.emit(f"if pres < 0: {target} = None")
                src.emit("else:")
                src.indent += 1
                self.decode_struct(src, name, f.fields, version, flexible, target)
                src.indent -= 1
            else:
                self.decode_struct(src, name, f.fields, version, flexible, target)

    # -- encoders ----------------------------------------------------------------------------------
    def encoder(self, cls_name: str, fields: list[Field], version: int, flexible: bool) -> str:
        # A struct's encoder is named after its message too: two messages may have a struct of one name.
        owner = cls_name if cls_name == self.message else f"{self.message}_{cls_name}"
        fname = f"_e_{owner}_{version}"
        if fname in self.defined:
            return fname
        self.defined.add(fname)
        src = _Source()
        regular = [f for f in fields if f.present_in(version) and not (flexible and f.tagged_in(version))]
        tagged = [f for f in fields if flexible and f.present_in(version) and f.tagged_in(version)]
        run: list[Field] = []

        def flush_run() -> None:
            if not run:
                return
            fmt = ">" + "".join(_FIXED_FORMATS[f.type] for f in run)
            sname = self.constant(f"_PACK_{_format_name(fmt)}", f"struct.Struct({fmt!r}).pack")
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
                    src.emit(f"if o.{f.name} != {self._tag_default(f)}:")
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
        self.functions.append(f"def {fname}(o: Any, out: bytearray) -> None:\n" + "\n".join(src.lines) + "\n")
        return fname

    @staticmethod
    def _emit_uvarint(src: _Source, out: str, expr: str) -> None:
        """Append ``expr`` as an unsigned varint; lengths below 128 (nearly all) take one append."""
        n = src.tmp("n")
        src.emit(f"{n} = {expr}")
        src.emit(f"if {n} < 128: {out}.append({n})")
        src.emit(f"else: {out} += _uvenc({n})")

    def _tag_default(self, f: Field) -> str:
        """Source for the value an encoder leaves out of the tagged fields (Kafka's generator does too)."""
        if f.is_array:
            return "None" if f.default is None else "[]"
        if f.is_struct:
            # One shared empty instance per struct, compared with ``!=``: built once, at import.
            ref = self.class_ref(f.type)
            return self.constant(f"_EMPTY{ref}", f"{ref}()", after_classes=True)
        return python_literal(field_default(f))

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
            sub = self.encoder(f.type, f.fields, version, flexible)
            if nullable and not f.is_array:
                v = src.tmp("st")
                src.emit(f"{v} = {expr}")
                # presence: int8 -1/1, or in a tagged field an unsigned varint 0/1 (as Kafka's generator)
                src.emit(f"if {v} is None: {out}.append({0 if tagged else 255})")
                src.emit(f"else: {out}.append(1); {sub}({v}, {out})")
            else:
                src.emit(f"{sub}({expr}, {out})")
