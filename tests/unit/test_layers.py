"""The house rules of the layout: imports run only downwards, and only through ``kcoord.*``.

Layers, lowest first (docs/architecture.md, "Layers"):

    kcoord.protocol            sans-IO codec
    kcoord.coordinator.core    pure group state: no I/O, no asyncio; imports only kcoord.protocol
    kcoord.client              the one Kafka client (asyncio)
    kcoord.storage             shard logs on the cluster
    kcoord.coordinator.runtime shard runtimes and the router
    kcoord.coordinator.ops     settings, logs, metrics
    kcoord.coordinator.net     listeners, connections, gateway, server
    kcoord.coordinator.tools, kcoord.analytics, then .cli and .__main__ (the entry points)

A module may import its own layer and those below it, never one above, type-checking imports
included (they are dependencies a reader and a checker follow). Nothing may import the package
folders by their bare names (``protocol``, ``storage``, ...): with src/kcoord/ on a path they would
load a second copy of the same module next to ``kcoord.protocol``. The code is under src/kcoord/, one
folder per subpackage; kcoord/__init__.py itself imports nothing.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "kcoord"
FOLDERS = ["protocol", "client", "storage", "coordinator", "analytics"]
LAYERS = [
    "kcoord.protocol",
    "kcoord.coordinator.core",  # directly above the codec: the pure state needs no client and no log
    "kcoord.client",
    "kcoord.storage",
    "kcoord.coordinator.runtime",
    "kcoord.coordinator.ops",
    "kcoord.coordinator.net",
    "kcoord.coordinator.tools",
    "kcoord.analytics",  # the PySpark pipeline (reads the event topic; not part of the server)
    "kcoord.coordinator",  # cli, __main__
]
BARE = {"protocol", "client", "storage", "coordinator", "analytics"}


def layer_of(module: str) -> int:
    """Index of the most specific layer ``module`` belongs to."""
    best = -1
    for i, layer in enumerate(LAYERS):
        if (module == layer or module.startswith(layer + ".")) and (
            best < 0 or len(layer) > len(LAYERS[best])
        ):
            best = i
    assert best >= 0, module
    return best


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = ["kcoord", *rel.parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def parsed(path: Path) -> ast.Module:
    """Each file parsed once per run: the generated message module alone is ~2 MB of source."""
    return ast.parse(path.read_text(), str(path))


def imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``path``, relative ones resolved."""
    tree = parsed(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            # "from pkg import submodule" depends on the submodule's layer, not the package's.
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
    return found


def code_files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (PACKAGE / folder).rglob("*.py"))


def test_the_layout_is_what_this_test_knows() -> None:
    names = {module_name(p) for p in code_files()}
    assert {"kcoord.coordinator.core.shard_state", "kcoord.coordinator.runtime.shard",
            "kcoord.coordinator.net.server", "kcoord.protocol.codegen"} <= names  # fmt: skip
    # Every subpackage is a folder this test walks: a new one must be given its layer here.
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert subpackages == set(FOLDERS)


def test_the_package_root_imports_nothing() -> None:
    """``import kcoord.protocol`` runs kcoord/__init__.py first: it must not pull in the server or PySpark."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


@pytest.mark.parametrize("path", code_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_imports_run_only_downwards(path: Path) -> None:
    module = module_name(path)
    own = layer_of(module)
    upward = [
        f"line {line}: {target} ({LAYERS[layer_of(target)]})"
        for line, target in imports(path, module)
        if target.startswith("kcoord") and layer_of(target) > own
    ]
    assert not upward, f"{module} ({LAYERS[own]}) imports a higher layer: {upward}"


def python_files_anywhere() -> list[Path]:
    skip = {".venv", ".cache", ".git", "build", "node_modules"}
    return sorted(p for p in REPO.rglob("*.py") if not skip & set(p.relative_to(REPO).parts))


def test_nothing_imports_the_folders_by_their_bare_names() -> None:
    bare = []
    for path in python_files_anywhere():
        tree = parsed(path)
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            bare += [f"{path.relative_to(REPO)}:{node.lineno} {n}" for n in names if n.split(".")[0] in BARE]
    assert not bare, bare


def test_the_checker_catches_an_upward_import(tmp_path: Path) -> None:
    """The rule itself: a core module importing the server is refused."""
    assert layer_of("kcoord.coordinator.net.server") > layer_of("kcoord.coordinator.core.offsets")
    assert layer_of("kcoord.coordinator.core.classic.group") == layer_of("kcoord.coordinator.core")
    assert layer_of("kcoord.coordinator.cli") > layer_of("kcoord.coordinator.tools.groups")
    assert layer_of("kcoord.coordinator.core.result") < layer_of("kcoord.storage.kafka")
    assert layer_of("kcoord.coordinator.core.offsets") < layer_of("kcoord.client.connection")
    assert layer_of("kcoord.coordinator.core.shard_state") == layer_of("kcoord.protocol") + 1


# -- outside the package: tests/, bench/ and the support/ package they share --------------------------
# tests/ and bench/ never import each other; what both need lives in support/, which imports neither.
NEVER_IMPORTS = {"tests": {"bench"}, "bench": {"tests"}, "support": {"tests", "bench"}}


def top_level_imports(path: Path) -> set[tuple[int, str]]:
    """(line, first name) of every absolute import in ``path``, type-checking and lazy ones included."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[tuple[int, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {(node.lineno, alias.name.split(".")[0]) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add((node.lineno, node.module.split(".")[0]))
    return found


@pytest.mark.parametrize("folder", sorted(NEVER_IMPORTS))
def test_tests_and_benchmarks_share_only_the_support_package(folder: str) -> None:
    forbidden = NEVER_IMPORTS[folder]
    wrong = [
        f"{path.relative_to(REPO)}:{line} imports {name}"
        for path in sorted((REPO / folder).rglob("*.py"))
        for line, name in sorted(top_level_imports(path))
        if name in forbidden
    ]
    assert not wrong, wrong
