"""Whole generated modules: what each one holds, its source, and writing or checking the files.

A generated module is one file under ``kcoord/protocol/generated/``: a header naming the command
that writes it and a hash of its inputs (the spec files and the generator's own source), the
message classes (:mod:`.classes`), their encoders and decoders (:mod:`.functions`), their C decoder
programs (:mod:`.programs`), and one :func:`~kcoord.protocol.codec.install_codecs` call per class.
``tests/unit/test_generated.py`` fails when a checked-in file differs from what this writes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kcoord.protocol import catalog
from kcoord.protocol.schema import SCHEMA_DIR, MessageSchema, load_schema

from .classes import render_class, schema_literal
from .functions import PRELUDE, CodecWriter, ModuleNames
from .programs import ProgramWriter

PROTOCOL_DIR = Path(__file__).resolve().parents[1]
GENERATED_DIR = PROTOCOL_DIR / "generated"
COMMAND = "python -m kcoord.protocol.codegen"


@dataclass(frozen=True)
class GeneratedModule:
    """One generated module: its file under ``generated/``, what it is, the specs it is built from."""

    file: str
    about: str  # the docstring's first line
    specs: Callable[[], list[str]]

    @property
    def path(self) -> Path:
        return GENERATED_DIR / self.file


MODULES: list[GeneratedModule] = [
    GeneratedModule(
        "messages.py",
        "The classes of every request and response kcoord speaks (served by kcoord.protocol.messages).",
        catalog.message_specs,
    ),
    GeneratedModule(
        "storage_messages.py",
        "The classes of the APIs only kcoord's storage speaks (served by kcoord.protocol.storage_messages).",
        catalog.storage_specs,
    ),
    GeneratedModule(
        "relay_messages.py",
        "The classes of the relayed APIs kcoord reads to guard its own topics (served by "
        "kcoord.protocol.relay_messages).",
        catalog.relay_specs,
    ),
    GeneratedModule(
        "coordinator_records.py",
        "The record structs of __consumer_offsets (served by kcoord.protocol.coordinator_records).",
        catalog.record_specs,
    ),
]

_IMPORTS = """from __future__ import annotations

import operator
import struct
import uuid
from types import ModuleType
from typing import Any, ClassVar

from kcoord.protocol.codec import (
    MISSING,
    ZERO_UUID,
    Message,
    Struct,
    install_codecs,
    new_instance,
)
from kcoord.protocol.primitives import CodecError, decode_uvarint, encode_uvarint
from kcoord.protocol.schema import Field, MessageSchema, Versions
"""


def inputs_hash(specs: list[str]) -> str:
    """sha256 over the spec files and the generator's source: what the module's text depends on."""
    digest = hashlib.sha256()
    sources = [*(SCHEMA_DIR / f"{s}.json" for s in specs), *sorted(Path(__file__).parent.glob("*.py"))]
    sources.append(PROTOCOL_DIR / "catalog.py")
    for path in sources:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def render_source(schemas: list[MessageSchema], about: str, header: str = "") -> str:
    """A module's whole source for ``schemas`` (``header``: the lines above its docstring)."""
    names = ModuleNames()
    classes = [render_class(s) for s in schemas]
    writers = [CodecWriter(s, names) for s in schemas]
    programs = [ProgramWriter(s, w.class_ref).function() for s, w in zip(schemas, writers, strict=True)]
    installs = []
    for schema, writer in zip(schemas, writers, strict=True):
        encoders = ", ".join(f"{v}: {n}" for v, n in writer.encoders.items())
        decoders = ", ".join(f"{v}: {n}" for v, n in writer.decoders.items())
        installs.append(
            f"install_codecs(\n    {schema.name},\n    {schema_literal(schema)},\n"
            f"    {{{encoders}}},\n    {{{decoders}}},\n    _programs_{schema.name},\n)\n"
        )
    names_list = ", ".join(f'"{s.name}"' for s in schemas)
    class_tuple = ", ".join(s.name for s in schemas)
    parts = [
        header + f'"""{about}\n\nGenerated from protocol/schemas by `{COMMAND}`; do not edit."""\n',
        _IMPORTS,
        f"__all__ = [{names_list}]\n",
        "# The helpers the codec functions use, bound as module globals.",
        PRELUDE,
        *(f"{n} = {src}" for n, src in names.constants.items()),
        "\n",
        "\n\n".join(classes),
        "\n# The struct classes and shared values the codec functions use, by module-level name.",
        *(f"{n} = {src}" for n, src in names.after_classes.items()),
        "\n",
        "\n\n".join(f for w in writers for f in w.functions),
        "\n",
        "\n\n".join(programs),
        "\n",
        "\n".join(installs),
        f"CLASSES: tuple[type[Message], ...] = ({class_tuple},)\n",
    ]
    return "\n".join(parts)


def render_module(mod: GeneratedModule) -> str:
    """The whole text of ``mod``'s file, as ``python -m kcoord.protocol.codegen`` writes it."""
    specs = mod.specs()
    header = (
        f"# Generated by `{COMMAND}` from protocol/schemas: do not edit.\n"
        f"# Inputs (spec files and generator) sha256: {inputs_hash(specs)}\n"
    )
    return render_source([load_schema(s) for s in specs], mod.about, header)


def stale() -> list[Path]:
    """Generated files that differ from what :func:`render_module` writes now."""
    return [
        m.path
        for m in MODULES
        if not m.path.exists() or m.path.read_text(encoding="utf-8") != render_module(m)
    ]


def write_all() -> list[Path]:
    GENERATED_DIR.mkdir(exist_ok=True)
    for m in MODULES:
        m.path.write_text(render_module(m), encoding="utf-8")
    return [m.path for m in MODULES]
