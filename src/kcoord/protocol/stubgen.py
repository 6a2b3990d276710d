"""Write the typed stubs (``.pyi``) of the modules whose message classes :mod:`kcoord.protocol.codegen` builds.

The classes only exist after ``exec`` at import time, so no editor or type checker can see their
fields. This generator reads the same schema files (:mod:`kcoord.protocol.schema`) and writes, next to
each such module, a stub that declares every generated class the way codegen shapes it:

- one class per message (a :class:`~kcoord.protocol.codegen.Message`), with every struct nested in it,
  at any depth, as a flat class attribute named after the struct's type (``FetchResponse.PartitionData``
  and ``FetchResponse.FetchableTopicResponse`` alike), each a :class:`~kcoord.protocol.codegen.Struct`;
- the snake_case fields, typed over the union of all versions: ``X | None`` where some version
  makes the field nullable (or its default is null), ``list[X]`` for arrays, ``uuid.UUID``;
- ``__init__`` with every field as an argument with its default (``...`` for a fresh list, struct
  or the zero uuid), ``unknown_tagged``, ``SCHEMA``, ``encode``/``decode``/``decode_from``;
- a docstring naming the spec file the class came from and its versions.

The rest of each stub — the module's hand-written API (registries, helpers) — is declared here in
:data:`MODULES`, next to the list of schemas the module builds. ``tests/unit/test_stubs.py`` fails
when a checked-in stub differs from what this writes, and compares the stubs with the runtime
classes, so a schema change cannot leave them stale.

Usage: ``python -m kcoord.protocol.stubgen`` rewrites the stubs; ``--check`` only reports stale ones.
"""

from __future__ import annotations

import argparse
import builtins
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .schema import Field, MessageSchema, Versions, load_schema

PROTOCOL_DIR = Path(__file__).resolve().parent

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
# Names a stub's class bodies rely on: a nested struct class must not shadow them.
_RESERVED = frozenset({"Message", "Struct", "ClassVar", "MessageSchema", "uuid", *dir(builtins)})
_LINE = 110  # ruff's line length (pyproject.toml)


def _nonempty(v: Versions) -> bool:
    return v.high is None or v.low <= v.high


def _range(v: Versions) -> str:
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
    # Non-array structs default to an empty instance (codegen), never to None.
    default_none = f.default is None and not (f.is_struct and not f.is_array) and f.type != "uuid"
    if _nonempty(f.nullable) or default_none:
        return f"{base} | None"
    return base


def _default(f: Field) -> str:
    """The ``__init__`` default as stub source; ``...`` where codegen builds a fresh object."""
    if f.is_array:
        return "None" if f.default is None else "..."
    if f.is_struct or f.type == "uuid":
        return "..."
    if isinstance(f.default, (bool, int, float, str, bytes)) or f.default is None:
        text = repr(f.default)
        # ruff format's double quotes, where that needs no escaping
        return text.replace("'", '"') if text.count("'") == 2 and '"' not in text else text
    raise TypeError(f"unexpected default {f.default!r} for {f.kafka_name}")


def _field_note(f: Field) -> str:
    notes = [f"v{_range(f.versions)}"]
    if _nonempty(f.nullable):
        notes.append(f"nullable v{_range(f.nullable)}")
    if f.tag is not None:
        notes.append(f"tag {f.tag} v{_range(f.tagged)}")
    return ", ".join(notes)


def _structs(fields: list[Field]) -> Iterator[Field]:
    """Every struct field, depth first, the first one of each type name (codegen keys classes by it)."""
    seen: set[str] = set()

    def walk(fs: list[Field]) -> Iterator[Field]:
        for f in fs:
            if f.is_struct and f.type not in seen:
                seen.add(f.type)
                yield f
            yield from walk(f.fields)

    yield from walk(fields)


def _signature(name: str, params: list[str], returns: str, indent: str) -> list[str]:
    one_line = f"{indent}def {name}({', '.join(params)}) -> {returns}: ..."
    if len(one_line) <= _LINE:
        return [one_line]
    return [f"{indent}def {name}(", *(f"{indent}    {p}," for p in params), f"{indent}) -> {returns}: ..."]


def _class_body(fields: list[Field], owner: str, indent: str) -> list[str]:
    """Field annotations and ``__init__`` of one generated class."""
    lines = [f"{indent}{f.name}: {_py_type(f, owner)}  # {_field_note(f)}" for f in fields]
    lines.append(f"{indent}unknown_tagged: {_UNKNOWN_TAGGED}")
    params = ["self", *(f"{f.name}: {_py_type(f, owner)} = {_default(f)}" for f in fields)]
    params.append(f"unknown_tagged: {_UNKNOWN_TAGGED} = None")
    lines += _signature("__init__", params, "None", indent)
    return lines


def render_class(schema: MessageSchema) -> str:
    """The stub of one generated message class, its nested struct classes included."""
    name = schema.name
    flexible = f", flexible v{_range(schema.flexible)}" if _nonempty(schema.flexible) else ""
    lines = [
        f"class {name}(Message):",
        f'    """Kafka\'s {name} (protocol/schemas/{name}.json): versions {_range(schema.valid)}{flexible}."""',
        "",
    ]
    for f in _structs(schema.fields):
        if f.type in _RESERVED or f.type == name:
            raise ValueError(f"{name}: struct {f.type} would shadow a name its stub uses")
        lines.append(f"    class {f.type}(Struct):")
        lines += _class_body(f.fields, name, " " * 8)
        lines.append("")
    lines.append("    SCHEMA: ClassVar[MessageSchema]")
    lines += _class_body(schema.fields, name, " " * 4)
    lines += [
        "    def encode(self, version: int) -> bytes: ...",
        "    def encode_into(self, out: bytearray, version: int) -> None: ...",
        "    @classmethod",
        f"    def decode(cls, data: bytes, version: int) -> {name}: ...",
        "    @classmethod",
        *_signature(
            "decode_from",
            ["cls", "data: bytes", "pos: int", "version: int", "end: int | None = None"],
            f"tuple[{name}, int]",
            "    ",
        ),
    ]
    return "\n".join(lines) + "\n"


def _uses_uuid(schemas: list[MessageSchema]) -> bool:
    def walk(fs: list[Field]) -> bool:
        return any(f.type == "uuid" or walk(f.fields) for f in fs)

    return any(walk(s.fields) for s in schemas)


# -- the stubbed modules ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StubModule:
    """One module whose classes codegen builds: its stub path, its own API, the schemas it builds."""

    module: str  # the dotted module name the stub types
    stub: str  # file name under protocol/
    header: Callable[[], str]  # the hand-written part of the stub, its whole import block first
    schemas: Callable[[], list[str]]


def _messages_header() -> str:
    from . import messages

    members = "\n".join(f"    {k.name} = {k.value}" for k in messages.ApiKey)
    return f"""from enum import IntEnum
from typing import ClassVar

from .codegen import Message, Struct
from .schema import MessageSchema

class ApiKey(IntEnum):
{members}

_STEMS: list[str]
KCOORD_VERSIONS: dict[int, tuple[int, int]]
REQUESTS: dict[int, type[Message]]
RESPONSES: dict[int, type[Message]]
_by_name: dict[str, type[Message]]

def is_flexible(api_key: int, version: int) -> bool: ...
"""


def _messages_schemas() -> list[str]:
    from . import messages

    return [
        *(stem + kind for stem in messages._STEMS for kind in ("Request", "Response")),
        "RequestHeader",
        "ResponseHeader",
        "ConsumerProtocolSubscription",
        "ConsumerProtocolAssignment",
    ]


# Re-exported by storage_messages from kcoord.protocol.messages (the gateway reads those too).
_STORAGE_REUSED = ["ApiVersions", "FindCoordinator", "Fetch", "Metadata", "Produce"]


def _storage_header() -> str:
    reused = sorted(f"{stem}{kind}" for stem in _STORAGE_REUSED for kind in ("Request", "Response"))
    imports = "\n".join(f"from .messages import {n} as {n}" for n in reused)
    return f"""from typing import ClassVar, TypeVar

from .codegen import Message, Struct
{imports}
from .schema import MessageSchema

_M = TypeVar("_M", bound=Message)

STORAGE_STEMS: list[str]
RESPONSE_OF: dict[type[Message], type[Message]]

def encode_request(request: Message, version: int, correlation_id: int, client_id: str) -> bytes: ...
def decode_response(response_cls: type[_M], version: int, payload: bytes) -> tuple[int, _M]: ...
"""


def _storage_schemas() -> list[str]:
    from . import storage_messages

    return [stem + kind for stem in storage_messages.STORAGE_STEMS for kind in ("Request", "Response")]


def _records_header() -> str:
    return """from typing import ClassVar

from .codegen import Message, Struct
from .schema import MessageSchema

RECORD_STEMS: dict[int, str]
CLASSES: dict[str, type[Message]]
"""


def _records_schemas() -> list[str]:
    from . import coordinator_records

    return [stem + part for stem in coordinator_records.RECORD_STEMS.values() for part in ("Key", "Value")]


MODULES: list[StubModule] = [
    StubModule("kcoord.protocol.messages", "messages.pyi", _messages_header, _messages_schemas),
    StubModule("kcoord.protocol.storage_messages", "storage_messages.pyi", _storage_header, _storage_schemas),
    StubModule(
        "kcoord.protocol.coordinator_records", "coordinator_records.pyi", _records_header, _records_schemas
    ),
]


def render_module(mod: StubModule) -> str:
    """The whole stub text of ``mod``, as ``python -m kcoord.protocol.stubgen`` writes it."""
    schemas = [load_schema(n) for n in mod.schemas()]
    # Headers start with their whole import block; ``import uuid`` sorts first in it (ruff's isort).
    imports = "import uuid\n" if _uses_uuid(schemas) else ""
    preamble = (
        f"# Typed stub of {mod.module}: written by `python -m kcoord.protocol.stubgen` from protocol/schemas.\n"
        "# Do not edit; tests/unit/test_stubs.py fails when it is stale.\n\n"
    )
    body = "\n".join(render_class(s) for s in schemas)
    return preamble + imports + mod.header() + "\n" + body


def stale() -> list[Path]:
    """Stub files that differ from what :func:`render_module` writes now."""
    out = []
    for mod in MODULES:
        path = PROTOCOL_DIR / mod.stub
        if not path.exists() or path.read_text(encoding="utf-8") != render_module(mod):
            out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kcoord.protocol.stubgen", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--check", action="store_true", help="only report stale stubs (exit 1 if any)")
    args = parser.parse_args(argv)
    if args.check:
        paths = stale()
        for p in paths:
            print(f"stale: {p} (run python -m kcoord.protocol.stubgen)", file=sys.stderr)
        return 1 if paths else 0
    for mod in MODULES:
        path = PROTOCOL_DIR / mod.stub
        path.write_text(render_module(mod), encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
