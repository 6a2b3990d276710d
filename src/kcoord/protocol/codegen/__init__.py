"""The code generator: Kafka's JSON message specs in, Python modules out.

``python -m kcoord.protocol.codegen`` writes ``kcoord/protocol/generated/*.py`` (checked in) from
``protocol/schemas`` and :mod:`kcoord.protocol.catalog`; importing those modules runs no ``exec``.

- :mod:`.classes`: the message and struct classes, with typed fields and ``__init__``;
- :mod:`.functions`: one specialised encoder and decoder per (message, version);
- :mod:`.programs`: the C decoder's programs for the same;
- :mod:`.modules`: which module holds which specs, whole files, the freshness check.

The runtime those modules build on is :mod:`kcoord.protocol.codec` (import ``Message`` and the
rest from there); a few of its names are re-exported here for the tests of the generator.
:func:`build_message_class` generates and executes the code of one ad-hoc schema (tests do).
"""

from __future__ import annotations

from typing import cast

from kcoord.protocol.codec import DECODER_BACKEND, ZERO_UUID, Message, Struct
from kcoord.protocol.schema import MessageSchema

__all__ = ["DECODER_BACKEND", "ZERO_UUID", "Message", "Struct", "build_message_class"]


def build_message_class(schema: MessageSchema) -> type[Message]:
    """The class of ``schema``, generated and executed on the spot (for schemas not in the catalog)."""
    from .modules import render_source

    namespace: dict[str, object] = {"__name__": f"kcoord.protocol.generated.adhoc_{schema.name}"}
    exec(render_source([schema], f"{schema.name}, generated on the fly."), namespace)  # noqa: S102
    return cast(type[Message], namespace[schema.name])
