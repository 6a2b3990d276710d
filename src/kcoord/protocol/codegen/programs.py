"""The source of one message's C decoder programs: what :mod:`kcoord.protocol._cdecode` interprets.

For each (message, version) the schema is compiled into a *program* of nested tuples that the
extension validates once (:func:`kcoord.protocol.codec.install_codecs`), resolving every field to
the byte offset of its ``__slots__`` member. The generated module holds them as a function of the
extension module, ``_programs_<Message>(c)``, called only when the C backend is active: op codes
are the extension's own constants, read from it, never copied.

Program format (op codes are the extension's module constants ``OP_*``, ``LEN_*``, ``DEF_*``)::

    struct  = (cls, flexible, ((name, op), ...),              # regular fields, wire order
               ((tag, name, op), ...),                        # known tagged fields
               ((name, DEF_CONST | DEF_LIST | DEF_CALL, value), ...))  # absent / untagged defaults
    op      = (OP_BOOL | OP_INT8 | ... | OP_FLOAT64,) | (OP_UUID,)
            | (OP_STRING | OP_BYTES, LEN_INT16 | LEN_INT32 | LEN_COMPACT, nullable, label)
            | (OP_STRUCT, nullable, struct)                   # nullable: a presence byte first
            | (OP_ARRAY, LEN_INT32 | LEN_COMPACT, nullable, label, element_op)

These mirror :class:`~kcoord.protocol.codegen.functions.CodecWriter`'s decoders field for field:
the C extension interprets what the Python decoder does. The differential tests
(tests/unit/test_codec_cdecode.py) hold them together.
"""

from __future__ import annotations

from collections.abc import Callable

from kcoord.protocol.schema import Field, MessageSchema

from .functions import _FIXED_FORMATS, field_default, python_literal


class _Source(str):
    """A piece of program already written as source (an op code, a class): rendered as is."""


def _op(name: str) -> _Source:
    return _Source(f"c.{name}")


def render(value: object) -> str:
    """A program as Python source: tuples, booleans, strings, ints and :class:`_Source` pieces."""
    if isinstance(value, _Source):
        return str(value)
    if isinstance(value, tuple):
        inner = ", ".join(render(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    raise TypeError(f"cannot render {value!r} in a program")


class ProgramWriter:
    """Writes ``_programs_<Message>(c)``: a dict of every version's program."""

    def __init__(self, schema: MessageSchema, class_ref: Callable[[str], str]) -> None:
        self.schema = schema
        self.class_ref = class_ref

    def function(self) -> str:
        schema = self.schema
        hi = schema.valid.high if schema.valid.high is not None else schema.valid.low
        lines = [f"def _programs_{schema.name}(c: ModuleType) -> dict[int, tuple[Any, ...]]:", "    return {"]
        for v in range(schema.valid.low, hi + 1):
            program = self.struct_program(schema.name, schema.fields, v, v in schema.flexible)
            lines.append(f"        {v}: {render(program)},")
        lines.append("    }")
        return "\n".join(lines) + "\n"

    def struct_program(
        self, cls_name: str, fields: list[Field], version: int, flexible: bool
    ) -> tuple[object, ...]:
        regular = [f for f in fields if f.present_in(version) and not (flexible and f.tagged_in(version))]
        tagged = [f for f in fields if flexible and f.present_in(version) and f.tagged_in(version)]
        on_wire = {id(f) for f in regular}  # by identity, as the decoders do: Fields compare by value
        ops = tuple((f.name, self.field_op(f, version, flexible)) for f in regular)
        tags = tuple((f.tag, f.name, self.field_op(f, version, flexible, tagged=True)) for f in tagged)
        # Absent fields and tagged fields (when the wire does not carry them) get their default.
        defaults = tuple((f.name, *self._default_spec(f)) for f in fields if id(f) not in on_wire)
        return (_Source(self.class_ref(cls_name)), flexible, ops, tags, defaults)

    def _default_spec(self, f: Field) -> tuple[object, object]:
        """A default as data: a fresh list, a fresh struct (its class, called), or the shared constant."""
        if f.is_array and f.default is not None:
            return (_op("DEF_LIST"), None)
        if f.is_struct and not f.is_array:
            return (_op("DEF_CALL"), _Source(self.class_ref(f.type)))
        return (_op("DEF_CONST"), _Source(python_literal(field_default(f))))

    def field_op(self, f: Field, version: int, flexible: bool, tagged: bool = False) -> tuple[object, ...]:
        nullable = version in f.nullable
        if f.flexible_override is not None:
            flexible = flexible and version in f.flexible_override
        if f.is_array:
            count = _op("LEN_COMPACT") if flexible else _op("LEN_INT32")
            elem = self._scalar_op(f, version, flexible, nullable=False)
            return (_op("OP_ARRAY"), count, nullable, f"array {f.kafka_name}", elem)
        return self._scalar_op(f, version, flexible, nullable, tagged)

    def _scalar_op(
        self, f: Field, version: int, flexible: bool, nullable: bool, tagged: bool = False
    ) -> tuple[object, ...]:
        t = f.type
        if t in _FIXED_FORMATS:
            return (_op(f"OP_{t.upper()}"),)
        if t == "uuid":
            return (_op("OP_UUID"),)
        if t in ("string", "bytes", "records"):
            if flexible:
                length = _op("LEN_COMPACT")
            else:
                length = _op("LEN_INT16") if t == "string" else _op("LEN_INT32")
            kind = _op("OP_STRING") if t == "string" else _op("OP_BYTES")
            return (kind, length, nullable, f"{t} {f.kafka_name}")
        # 0: no presence marker; 1: an int8 (-1 null); 2: an unsigned varint (0 null), in a tagged field
        presence = 0 if not nullable or f.is_array else 2 if tagged else 1
        return (_op("OP_STRUCT"), presence, self.struct_program(f.type, f.fields, version, flexible))
