"""The checked-in typed stubs (protocol/*.pyi) against the schemas and the runtime classes.

Three guards, so a schema change cannot leave the stubs (and everything type-checked with them)
describing classes that no longer exist:

1. each stub is exactly what ``python -m kcoord.protocol.stubgen`` writes from today's schemas;
2. mypy's ``stubtest`` finds the stubs consistent with the imported modules: every declared class,
   field and ``__init__`` argument exists at runtime, with the same defaults;
3. every generated class the runtime serves is declared, with the same nested struct classes.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from kcoord.protocol import coordinator_records, messages, storage_messages, stubgen
from kcoord.protocol.codegen import Message, Struct

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("mod", stubgen.MODULES, ids=lambda m: m.stub)
def test_checked_in_stub_is_what_the_generator_writes(mod: stubgen.StubModule) -> None:
    path = stubgen.PROTOCOL_DIR / mod.stub
    assert path.read_text(encoding="utf-8") == stubgen.render_module(mod), (
        f"{path.name} is stale: run `python -m kcoord.protocol.stubgen` and commit the result"
    )


def test_stubtest_finds_stubs_consistent_with_runtime() -> None:
    modules = [m.module for m in stubgen.MODULES]
    if importlib.util.find_spec("kcoord.protocol._cdecode") is not None:  # optional: setup.py may skip it
        modules.append("kcoord.protocol._cdecode")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "--concise", *modules],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _declared(stub: str) -> dict[str, set[str]]:
    """Top-level classes of a stub → the names of the classes nested in them."""
    tree = ast.parse((stubgen.PROTOCOL_DIR / stub).read_text(encoding="utf-8"))
    return {
        node.name: {n.name for n in node.body if isinstance(n, ast.ClassDef)}
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        and any(isinstance(b, ast.Name) and b.id == "Message" for b in node.bases)
    }


def _runtime(module: str, names: list[str]) -> dict[str, set[str]]:
    mod = importlib.import_module(module)
    out = {}
    for name in names:
        cls = getattr(mod, name)
        assert isinstance(cls, type) and issubclass(cls, Message)
        out[name] = {k for k, v in vars(cls).items() if isinstance(v, type) and issubclass(v, Struct)}
    return out


def test_every_runtime_class_is_declared_with_its_structs() -> None:
    served = {
        "messages.pyi": (
            "kcoord.protocol.messages",
            [*messages._by_name, "RequestHeader", "ResponseHeader",
             "ConsumerProtocolSubscription", "ConsumerProtocolAssignment"],
        ),
        "storage_messages.pyi": (
            "kcoord.protocol.storage_messages",
            # Classes built by the module itself; the reused ones are declared in messages.pyi.
            [n for n, v in vars(storage_messages).items()
             if isinstance(v, type) and issubclass(v, Message) and v is not Message
             and v.__name__ not in messages._by_name],
        ),
        "coordinator_records.pyi": ("kcoord.protocol.coordinator_records", list(coordinator_records.CLASSES)),
    }  # fmt: skip
    for stub, (module, names) in served.items():
        assert _declared(stub) == _runtime(module, names), stub


def test_old_imports_keep_working() -> None:
    """The aliases messages.py used to spell out are served by its __getattr__ (and declared in the stub)."""
    from kcoord.protocol.messages import ConsumerGroupHeartbeatRequest, JoinGroupRequest  # noqa: F401
    from kcoord.protocol.records import GroupMetadataValue, MemberMetadata, OffsetCommitKey  # noqa: F401
    from kcoord.protocol.storage_messages import FetchRequest, ListOffsetsRequest  # noqa: F401

    assert messages.JoinGroupRequest is messages.REQUESTS[messages.ApiKey.JOIN_GROUP]
    assert storage_messages.FetchRequest is messages.FetchRequest
    assert MemberMetadata is GroupMetadataValue.MemberMetadata
    with pytest.raises(AttributeError):
        messages.NoSuchRequest  # noqa: B018
