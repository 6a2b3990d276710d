"""Message schemas in Kafka's JSON message-spec format.

Kafka describes every wire message once, in a JSON file with per-field version ranges
(``"versions": "3+"``), nullability ranges, tagged fields and a message-wide range of
*flexible* versions (compact encodings plus tagged fields). We keep those files, verbatim,
under ``protocol/schemas/`` — they are the public source of truth — and parse them here
into a small tree of :class:`Field` objects. :mod:`kcoord.protocol.codegen` turns the tree into
one specialised encoder and decoder per version.

This module only reads schemas; it never touches bytes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)
_CAMEL_1 = re.compile(r"(.)([A-Z][a-z]+)")
_CAMEL_2 = re.compile(r"([a-z0-9])([A-Z])")

# One JSON object of a spec file, as json.loads returns it.
_Spec = dict[str, Any]

PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "int64", "float64", "string", "bytes", "uuid", "records"}
)


def snake_case(name: str) -> str:
    """Kafka's field names are CamelCase (``GroupInstanceId``); Python attributes are snake_case."""
    return _CAMEL_2.sub(r"\1_\2", _CAMEL_1.sub(r"\1_\2", name)).lower()


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``high`` is None for an open range such as ``3+``."""

    low: int
    high: int | None

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text == "none":
            return cls(1, 0)  # empty
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return version >= self.low and (self.high is None or version <= self.high)


@dataclass
class Field:
    """One field of a message or struct."""

    name: str  # snake_case attribute name
    kafka_name: str  # the spec's name, for error messages
    type: str  # element type for arrays; struct name for structs
    is_array: bool
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: object
    fields: list[Field] = field(default_factory=list)  # for struct and array-of-struct
    # A field may opt out of the message's flexible encoding (RequestHeader.ClientId keeps its
    # int16 length in v2 so any broker can read the header of any ApiVersions request).
    flexible_override: Versions | None = None

    @property
    def is_struct(self) -> bool:
        return self.type not in PRIMITIVES

    def present_in(self, version: int) -> bool:
        return version in self.versions

    def tagged_in(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged


@dataclass
class MessageSchema:
    name: str
    api_key: int | None
    kind: str  # "request", "response", "header", "data", "coordinator-key" or "coordinator-value"
    valid: Versions
    flexible: Versions
    fields: list[Field]


def _default_for(spec: _Spec, type_name: str, is_array: bool) -> object:
    raw = spec.get("default")
    if is_array:
        return None if raw == "null" else []
    if raw == "null":
        return None
    if type_name in ("int8", "int16", "uint16", "int32", "int64"):
        if raw is None:
            return 0
        return int(raw, 16) if isinstance(raw, str) and raw.lower().startswith("0x") else int(raw)
    if type_name == "float64":
        return float(raw) if raw is not None else 0.0
    if type_name == "bool":
        return raw in (True, "true")
    if type_name == "string":
        return "" if raw is None else str(raw)
    if type_name == "bytes":
        return b""
    if type_name == "records":
        return None
    if type_name == "uuid":
        return None  # filled with the zero uuid by codegen
    return None  # struct: instance built by codegen


def _parse_field(spec: _Spec, common: dict[str, list[_Spec]]) -> Field:
    raw_type: str = spec["type"]
    is_array = raw_type.startswith("[]")
    type_name = raw_type[2:] if is_array else raw_type
    sub_specs = spec.get("fields")
    if sub_specs is None and type_name not in PRIMITIVES:
        sub_specs = common.get(type_name)
        if sub_specs is None:
            raise ValueError(f"unknown struct type {type_name}")
    return Field(
        name=snake_case(spec["name"]),
        kafka_name=spec["name"],
        type=type_name,
        is_array=is_array,
        versions=Versions.parse(spec.get("versions")),
        nullable=Versions.parse(spec.get("nullableVersions")),
        tagged=Versions.parse(spec.get("taggedVersions")),
        tag=spec.get("tag"),
        default=_default_for(spec, type_name, is_array),
        fields=[_parse_field(s, common) for s in (sub_specs or [])],
        flexible_override=Versions.parse(spec["flexibleVersions"]) if "flexibleVersions" in spec else None,
    )


def parse_schema(text: str) -> MessageSchema:
    data = json.loads(_COMMENT.sub("", text))
    common = {s["name"]: s["fields"] for s in data.get("commonStructs", [])}
    return MessageSchema(
        name=data["name"],
        api_key=data.get("apiKey"),
        kind=data["type"],
        valid=Versions.parse(data.get("validVersions")),
        flexible=Versions.parse(data.get("flexibleVersions")),
        fields=[_parse_field(s, common) for s in data["fields"]],
    )


@cache
def load_schema(name: str) -> MessageSchema:
    """Load ``protocol/schemas/<name>.json``."""
    text = (SCHEMA_DIR / f"{name}.json").read_text(encoding="utf-8")
    return parse_schema(text)
