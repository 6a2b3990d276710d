"""Build hook: the kcoord package layout and the optional C decoder; other metadata lives in pyproject.toml.

The repository keeps the design card's folders at its top (coordinator/, protocol/, storage/, plus
client/); installed, each is a subpackage of ``kcoord`` (``kcoord.protocol`` ...), so kcoord puts
one import name into site-packages instead of generic ones like ``protocol`` and ``storage``.
``package_dir`` does the mapping; ``kcoord`` itself is a namespace package with no folder of its
own, so no ``kcoord/`` in a checkout can shadow the installed mapping. scripts/*.sh install in
setuptools' strict editable mode: a tree of links that type checkers read like any package.

``optional=True``: on a machine without a C compiler (the python:3.11-slim image) the build
prints a warning and kcoord installs without the extension, using the pure-Python decoders
(kcoord.protocol.codegen.DECODER_BACKEND == "python").
"""

from pathlib import Path

from setuptools import Extension, setup

ROOTS = {"kcoord.coordinator": "coordinator", "kcoord.protocol": "protocol", "kcoord.storage": "storage",
         "kcoord.client": "client", "kcoord.analytics": "analytics"}  # fmt: skip


def packages() -> list[str]:
    found = []
    for name, folder in ROOTS.items():
        for init in sorted(Path(folder).rglob("__init__.py")):
            rel = init.parent.relative_to(folder)
            found.append(".".join([name, *rel.parts]))
    return found


setup(
    package_dir=ROOTS,
    packages=packages(),
    package_data={name: ["py.typed"] for name in ROOTS} | {"kcoord.protocol": ["py.typed", "schemas/*.json", "*.pyi"]},
    ext_modules=[
        Extension(
            "kcoord.protocol._cdecode",
            ["protocol/_cdecode.c"],
            optional=True,
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
        )
    ],
)
