"""The source of one message's classes: the message, its struct classes, their typed fields.

The classes are shaped the way every caller and the C decoder expect:

- one class per message (a :class:`~kcoord.protocol.codec.Message`), with every struct nested in it,
  at any depth, as a class attribute named after the struct's type (``FetchResponse.PartitionData``
  and ``FetchResponse.FetchableTopicResponse`` alike), each a :class:`~kcoord.protocol.codec.Struct`;
- ``__slots__`` of the snake_case fields plus ``unknown_tagged``, and ``FIELDS`` in schema order;
- fields typed over the union of all versions: ``X | None`` where some version makes the field
  nullable (or its default is null), ``list[X]`` for arrays, ``uuid.UUID``;
- ``__init__`` with every field as an argument with its default; a list or struct default is
  built fresh per instance (``MISSING`` stands for it), the zero uuid is shared.

It also writes each schema back as a literal (:func:`schema_literal`): ``Message.SCHEMA`` is the
same :class:`~kcoord.protocol.schema.MessageSchema` that :func:`~kcoord.protocol.schema.load_schema`
returns, built without reading the JSON at import.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator

from kcoord.protocol.schema import Field, MessageSchema, Versions

from .functions import field_default, python_literal

_INT_TYPES = frozenset({"int8", "int16", "uint16", "int32", "int64"})
_SCALARS = {
    "bool": "bool",
    "float64": "float",
    "string": "str",
    "bytes": "bytes",
    "records": "bytes",
    "uuid": "uuid.UUID",
}
_UNKNOWN_TAGGED = "list[tuple[int, bytes]] | None"
# Names a generated class body relies on: a nested struct class must not shadow them.
_RESERVED = frozenset({"Message", "Struct", "ClassVar", "MessageSchema", "uuid", *dir(builtins)})


def _nonempty(v: Versions) -> bool:
    return v.high is None or v.low <= v.high


def version_range(v: Versions) -> str:
    if v.high is None:
        return f"{v.low}+"
    return str(v.low) if v.low == v.high else f"{v.low}-{v.high}"


def _py_type(f: Field, owner: str) -> str:
    """The attribute's type over every version: what a decoder may return and ``__init__`` accepts."""
    if f.is_struct:
        base = f"{owner}.{f.type}"
    elif f.type in _INT_TYPES:
        base = "int"
    else:
        base = _SCALARS[f.type]
    if f.is_array:
        base = f"list[{base}]"
    # Non-array structs default to an empty instance, never to None.
    default_none = f.default is None and not (f.is_struct and not f.is_array) and f.type != "uuid"
    if _nonempty(f.nullable) or default_none:
        return f"{base} | None"
    return base


def _fresh_per_instance(f: Field) -> bool:
    """A list or struct default: built by ``__init__`` for each instance, never shared."""
    return (f.is_array and f.default is not None) or (f.is_struct and not f.is_array)


def _field_note(f: Field) -> str:
    notes = [f"v{version_range(f.versions)}"]
    if _nonempty(f.nullable):
        notes.append(f"nullable v{version_range(f.nullable)}")
    if f.tag is not None:
        notes.append(f"tag {f.tag} v{version_range(f.tagged)}")
    return ", ".join(notes)


def structs(fields: list[Field]) -> Iterator[Field]:
    """Every struct field, depth first, the first one of each type name (one class per type name)."""
    seen: set[str] = set()

    def walk(fs: list[Field]) -> Iterator[Field]:
        for f in fs:
            if f.is_struct and f.type not in seen:
                seen.add(f.type)
                yield f
            yield from walk(f.fields)

    yield from walk(fields)


def _class_body(fields: list[Field], owner: str, indent: str) -> list[str]:
    """``__slots__``, ``FIELDS``, the annotated fields and ``__init__`` of one generated class."""
    names = [f.name for f in fields]
    lines = [
        f"{indent}__slots__ = {_tuple([*names, 'unknown_tagged'])}",
        f"{indent}FIELDS: ClassVar[tuple[str, ...]] = {_tuple(names)}",
        "",
    ]
    lines += [f"{indent}{f.name}: {_py_type(f, owner)}  # {_field_note(f)}" for f in fields]
    lines.append(f"{indent}unknown_tagged: {_UNKNOWN_TAGGED}")
    lines.append("")
    params = ["self"]
    for f in fields:
        default = "MISSING" if _fresh_per_instance(f) else python_literal(field_default(f))
        params.append(f"{f.name}: {_py_type(f, owner)} = {default}")
    params.append(f"unknown_tagged: {_UNKNOWN_TAGGED} = None")
    lines.append(f"{indent}def __init__(")
    lines += [f"{indent}    {p}," for p in params]
    lines.append(f"{indent}) -> None:")
    for f in fields:
        if f.is_array and f.default is not None:
            value = f"[] if {f.name} is MISSING else {f.name}"
        elif f.is_struct and not f.is_array:
            value = f"{owner}.{f.type}() if {f.name} is MISSING else {f.name}"
        else:
            value = f.name
        lines.append(f"{indent}    self.{f.name} = {value}")
    lines.append(f"{indent}    self.unknown_tagged = unknown_tagged")
    return lines


def _tuple(names: list[str]) -> str:
    inner = ", ".join(f'"{n}"' for n in names)
    return f"({inner},)" if len(names) == 1 else f"({inner})"


def render_class(schema: MessageSchema) -> str:
    """The source of one message class, its nested struct classes included."""
    name = schema.name
    flexible = f", flexible v{version_range(schema.flexible)}" if _nonempty(schema.flexible) else ""
    lines = [
        f"class {name}(Message):",
        f'    """Kafka\'s {name} (protocol/schemas/{name}.json): versions {version_range(schema.valid)}{flexible}."""',
        "",
    ]
    for f in structs(schema.fields):
        if f.type in _RESERVED or f.type == name:
            raise ValueError(f"{name}: struct {f.type} would shadow a name its module uses")
        lines.append(f"    class {f.type}(Struct):")
        lines += _class_body(f.fields, name, " " * 8)
        lines.append("")
    lines += _class_body(schema.fields, name, " " * 4)
    return "\n".join(lines) + "\n"


# -- the schema as a literal ----------------------------------------------------------------------


def _versions(v: Versions) -> str:
    return f"Versions({v.low}, {v.high})"


def _field_literal(f: Field, indent: str) -> str:
    default = "[]" if f.is_array and f.default is not None else python_literal(f.default)
    override = "None" if f.flexible_override is None else _versions(f.flexible_override)
    head = (
        f"Field({f.name!r}, {f.kafka_name!r}, {f.type!r}, {f.is_array}, {_versions(f.versions)}, "
        f"{_versions(f.nullable)}, {_versions(f.tagged)}, {f.tag!r}, {default}, "
    )
    return f"{indent}{head}{_fields_literal(f.fields, indent)}, {override}),"


def _fields_literal(fields: list[Field], indent: str) -> str:
    if not fields:
        return "[]"
    inner = "\n".join(_field_literal(f, indent + "    ") for f in fields)
    return f"[\n{inner}\n{indent}]"


def schema_literal(schema: MessageSchema) -> str:
    """Source that builds ``schema`` again (a :class:`MessageSchema` compares by value)."""
    return (
        f"MessageSchema({schema.name!r}, {schema.api_key!r}, {schema.kind!r}, {_versions(schema.valid)}, "
        f"{_versions(schema.flexible)}, {_fields_literal(schema.fields, '    ')})"
    )
