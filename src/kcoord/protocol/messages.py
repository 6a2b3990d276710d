"""Every request and response class kcoord speaks, generated from ``protocol/schemas``.

``REQUESTS[api_key]`` / ``RESPONSES[api_key]`` map an API key to its generated class; the
classes are also module attributes (``messages.JoinGroupRequest``), defined, fields and types
and all, in ``generated/messages.py``, which ``python -m kcoord.protocol.codegen`` writes from the
specs :mod:`kcoord.protocol.catalog` lists. :data:`KCOORD_VERSIONS`
holds the version ranges kcoord itself serves (Kafka 4.0's; docs/compatibility.md), which may be narrower
than the schema files allow.
"""

from __future__ import annotations

from enum import IntEnum

from .catalog import MESSAGE_STEMS
from .codec import Message
from .generated.messages import *  # noqa: F403 - every generated class (its __all__)
from .generated.messages import CLASSES


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    ADD_OFFSETS_TO_TXN = 25
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CLUSTER = 60
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69


_STEMS = MESSAGE_STEMS  # the specs of every API kcoord decodes (catalog.py says which)

# The ranges kcoord serves for the APIs it answers itself (Kafka 4.0's, plus OffsetCommit
# and OffsetFetch v10, which name topics by id: coordinator/net/topic_ids.py).
KCOORD_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.OFFSET_COMMIT: (2, 10),
    ApiKey.OFFSET_FETCH: (1, 10),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    # TxnOffsetCommit v5 (KIP-890) also adds the group to the transaction: kcoord does that as its
    # AddOffsetsToTxn does (net/dispatch.py); docs/compatibility.md, "Exactly-once".
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
}


# Real module attributes (the star import above), not a module __getattr__: handlers read
# ``m.HeartbeatResponse`` on every request, and a __getattr__ call per read was a tenth of a
# heartbeat's CPU.
REQUESTS: dict[int, type[Message]] = {}
RESPONSES: dict[int, type[Message]] = {}
_by_name: dict[str, type[Message]] = {}
for _cls in CLASSES:
    _table = {"request": REQUESTS, "response": RESPONSES}.get(_cls.SCHEMA.kind)
    if _table is not None:
        _table[_cls.SCHEMA.api_key] = _cls  # type: ignore[index]
        _by_name[_cls.__name__] = _cls


def is_flexible(api_key: int, version: int) -> bool:
    cls = REQUESTS.get(api_key)
    return cls is not None and version in cls.SCHEMA.flexible
