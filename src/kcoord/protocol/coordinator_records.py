"""The record structs Kafka's group coordinator stores in ``__consumer_offsets``, generated from
``protocol/schemas`` (Kafka's ``group-coordinator/src/main/resources/common/message`` specs).

Each spec is a ``coordinator-key`` or ``coordinator-value`` whose ``apiKey`` is the record type
written in front of it: type 1 OffsetCommit, 2 GroupMetadata (classic groups), and the KIP-848
consumer-group records, types 3-8 and 16. Keys have one version (0); values are versioned by the
int16 that precedes them. How records are framed and which versions kcoord writes is
:mod:`kcoord.protocol.records`' business; this module serves the classes, defined in
``generated/coordinator_records.py`` (written by ``python -m kcoord.protocol.codegen``).
"""

from __future__ import annotations

from .catalog import RECORD_STEMS as RECORD_STEMS  # record type -> spec stem
from .codec import Message
from .generated.coordinator_records import *  # noqa: F403 - every generated record class (its __all__)
from .generated.coordinator_records import CLASSES as _GENERATED

# Every generated record class by name; each is a module attribute too.
CLASSES: dict[str, type[Message]] = {cls.__name__: cls for cls in _GENERATED}
