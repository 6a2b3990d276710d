"""Structured logs: one line per event, ``key=value`` (default) or JSON.

Operators grep and ship these lines, so every line has the same leading keys (``ts``, ``level``,
``logger``) and lifecycle events add ``event`` plus their own fields. :func:`log_event` is the one
way to write an event; plain ``log.info("...")`` lines still work and get a ``msg`` key.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any

_FIELDS = "kcoord_fields"
_EVENT = "kcoord_event"
# A value made only of these characters is written bare; any other is quoted (JSON string rules).
_BARE = re.compile(r"[a-zA-Z0-9\-_.:/,\[\]@+]+")


def log_event(logger: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    """Write one structured event; None-valued fields are left out."""
    if logger.isEnabledFor(level):
        clean = {k: v for k, v in fields.items() if v is not None}
        logger.log(level, event, extra={_EVENT: event, _FIELDS: clean})


# The last whole second formatted and its text: one tuple, replaced whole, so that a line logged
# from another thread never pairs one second with another's text.
_last_second: tuple[int, str] = (-1, "")


def _timestamp(record: logging.LogRecord) -> str:
    # A burst of lines (a mass leave writes two per member) shares its second: formatted once.
    global _last_second
    second = int(record.created)
    last = _last_second
    if last[0] != second:
        last = _last_second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{last[1]}.{int(record.msecs):03d}Z"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    out: dict[str, Any] = {"ts": _timestamp(record), "level": record.levelname, "logger": record.name}
    event = getattr(record, _EVENT, None)
    if event is not None:
        out["event"] = event
        out.update(getattr(record, _FIELDS, {}))
    else:
        out["msg"] = record.getMessage()
    if record.exc_info:
        out["exc"] = logging.Formatter().formatException(record.exc_info)
    return out


def _kv_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | tuple | set | frozenset):
        value = ",".join(str(v) for v in value)
    text = str(value)
    if _BARE.fullmatch(text):
        return text
    return json.dumps(text, ensure_ascii=False)


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return " ".join(f"{k}={_kv_value(v)}" for k, v in _fields(record).items())


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(_fields(record), ensure_ascii=False, default=str)


def setup_logging(level: str = "INFO", fmt: str = "kv") -> None:
    """Route every logger to stderr, one line per record, in the chosen format."""
    # Neither format writes the caller's file and line, the thread or the process, so a record
    # does not look them up (the logging HOWTO's "Optimization"): a mass leave writes two lines a
    # member, and these lookups were about a tenth of each line's cost.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else KeyValueFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
