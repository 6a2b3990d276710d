"""The checked-in generated modules (kcoord/protocol/generated/*.py) against the schemas and the generator.

1. each generated file is exactly what ``python -m kcoord.protocol.codegen`` writes from today's
   spec files and generator, so a schema or generator change cannot leave them stale;
2. each class's ``SCHEMA`` equals the spec file parsed now;
3. importing them builds nothing from source: no ``exec`` or ``compile`` call in the modules
   imported to serve the classes;
4. the names callers have always imported keep working.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from kcoord.protocol import coordinator_records, messages, storage_messages
from kcoord.protocol.codec import Message
from kcoord.protocol.codegen import modules
from kcoord.protocol.generated import coordinator_records as gen_records
from kcoord.protocol.generated import messages as gen_messages
from kcoord.protocol.generated import storage_messages as gen_storage
from kcoord.protocol.schema import load_schema

PROTOCOL = Path(modules.__file__).resolve().parents[1]


@pytest.mark.parametrize("mod", modules.MODULES, ids=lambda m: m.file)
def test_checked_in_module_is_what_the_generator_writes(mod: modules.GeneratedModule) -> None:
    assert mod.path.read_text(encoding="utf-8") == modules.render_module(mod), (
        f"generated/{mod.file} is stale: run `python -m kcoord.protocol.codegen` and commit the result"
    )


def test_check_command_reports_fresh_files() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kcoord.protocol.codegen", "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("generated", [gen_messages, gen_storage, gen_records], ids=lambda m: m.__name__)
def test_every_class_carries_its_spec(generated: object) -> None:
    classes: tuple[type[Message], ...] = generated.CLASSES  # type: ignore[attr-defined]
    assert classes
    for cls in classes:
        assert load_schema(cls.__name__) == cls.SCHEMA, cls.__name__


@pytest.mark.parametrize(
    "path",
    [*sorted((PROTOCOL / "generated").glob("*.py")), PROTOCOL / "codec.py", PROTOCOL / "messages.py",
     PROTOCOL / "storage_messages.py", PROTOCOL / "coordinator_records.py"],
    ids=lambda p: p.name,
)  # fmt: skip
def test_serving_the_classes_runs_no_exec(path: Path) -> None:
    calls = {
        node.func.id
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert not calls & {"exec", "eval", "compile"}, path.name


def test_old_imports_keep_working() -> None:
    from kcoord.protocol.codegen import DECODER_BACKEND, ZERO_UUID, Struct  # noqa: F401
    from kcoord.protocol.messages import ConsumerGroupHeartbeatRequest, JoinGroupRequest  # noqa: F401
    from kcoord.protocol.records import GroupMetadataValue, MemberMetadata, OffsetCommitKey  # noqa: F401
    from kcoord.protocol.storage_messages import FetchRequest, ListOffsetsRequest  # noqa: F401

    assert messages.JoinGroupRequest is messages.REQUESTS[messages.ApiKey.JOIN_GROUP]
    assert storage_messages.FetchRequest is messages.FetchRequest
    assert storage_messages.ListOffsetsRequest is gen_storage.ListOffsetsRequest
    assert MemberMetadata is GroupMetadataValue.MemberMetadata
    assert set(coordinator_records.CLASSES) == {c.__name__ for c in gen_records.CLASSES}
    with pytest.raises(AttributeError):
        messages.NoSuchRequest  # noqa: B018
