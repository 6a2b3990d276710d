"""Build hook for the optional C decoder only; everything else (packages, data, extras) is pyproject.toml.

``optional=True``: on a machine without a C compiler (the python:3.11-slim image) the build
prints a warning and kcoord installs without the extension, using the pure-Python decoders
(kcoord.protocol.codegen.DECODER_BACKEND == "python").
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kcoord.protocol._cdecode",
            ["src/kcoord/protocol/_cdecode.c"],
            optional=True,
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
        )
    ],
)
