"""The strict schema of the event topic's records (docs/events.md), one per event version.

A record is an event only if every check here passes; otherwise :func:`problem` names why (the
``problem`` column of ``bad_events``), so bad input is counted and never becomes a number:

- ``empty``: no value, or an empty one;
- ``not_utf8``: bytes that are not UTF-8 (JSON is text);
- ``bad_json``: not one JSON object (``not json{``, ``5``, ``[...]``, single quotes, ``NaN``);
- ``unknown_version`` / ``unknown_type``: a ``v`` or ``type`` this reader does not know
  (counted and skipped, as the schema asks of readers);
- ``wrong_type``: a field of the wrong JSON type (``"ts":"abc"``, ``"ts":1.5``,
  ``"fenced":{"X":"lots"}``, an int out of the field's width, a boolean that is not one);
- ``missing_field``: a field the event's type needs is absent or null;
- ``out_of_range``: ``ts`` outside [2001-09-09, 2100-01-01), a negative duration, count,
  generation, size or seconds, an unknown member kind, a partition not ``topic:N``.

``detail`` names the failing fields of the last three. Spark's JSON reader gives a number or an
object where a string belongs as its JSON text (``"group":5`` is the group ``"5"``); such a field
is never summed, so it cannot become a number.
"""

from __future__ import annotations

import functools
import operator

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

SCHEMA_VERSION = 1
EVENT_TYPES = (
    "member_joined",
    "member_left",
    "member_expired",
    "member_fenced",
    "rebalance_started",
    "rebalance_completed",
    "assignment",
    "commits",
    "shard_loaded",
    "group_deleted",
    "reconciliation_completed",
)

# The column Spark's JSON reader fills with the record's text when a field does not parse as its type.
CORRUPT = "_corrupt_record"

EVENT_SCHEMA_V1 = T.StructType(
    [
        T.StructField("v", T.IntegerType()),
        T.StructField("type", T.StringType()),
        T.StructField("ts", T.LongType()),
        T.StructField("shard", T.IntegerType()),
        T.StructField("group", T.StringType()),
        T.StructField("member", T.StringType()),
        T.StructField("instance", T.StringType()),
        T.StructField("kind", T.StringType()),
        T.StructField("client_id", T.StringType()),
        T.StructField("host", T.StringType()),
        T.StructField("protocol_type", T.StringType()),
        T.StructField("rejoin", T.BooleanType()),
        T.StructField("reason", T.StringType()),
        T.StructField("detail", T.StringType()),
        T.StructField("timeout_ms", T.LongType()),
        T.StructField("error", T.StringType()),
        T.StructField("api", T.StringType()),
        T.StructField("mode", T.StringType()),
        T.StructField("generation", T.IntegerType()),
        T.StructField("members", T.IntegerType()),
        T.StructField("duration_ms", T.LongType()),
        T.StructField("protocol", T.StringType()),
        T.StructField("count", T.LongType()),
        T.StructField("requests", T.LongType()),
        T.StructField("fenced", T.MapType(T.StringType(), T.LongType())),
        T.StructField("rejected", T.MapType(T.StringType(), T.LongType())),
        T.StructField("records", T.LongType()),
        T.StructField("records_read", T.LongType()),
        T.StructField("seconds", T.DoubleType()),
        T.StructField(
            "assignment",
            T.ArrayType(
                T.StructType(
                    [
                        T.StructField("member", T.StringType()),
                        T.StructField("instance", T.StringType()),
                        T.StructField("partitions", T.ArrayType(T.StringType())),
                        T.StructField("bytes", T.LongType()),
                    ]
                )
            ),
        ),
    ]
)

# Version → the schema its records parse with. A new version adds an entry (and its checks below).
SCHEMAS: dict[int, T.StructType] = {SCHEMA_VERSION: EVENT_SCHEMA_V1}

# The parse schema: every version's fields (one parse per record), plus the corrupt-record column.
PARSE_SCHEMA = T.StructType([*EVENT_SCHEMA_V1.fields, T.StructField(CORRUPT, T.StringType())])

# Strict JSON: Spark's reader otherwise takes single quotes and NaN/Infinity.
JSON_OPTIONS = {
    "mode": "PERMISSIVE",
    "columnNameOfCorruptRecord": CORRUPT,
    "allowSingleQuotes": "false",
    "allowNonNumericNumbers": "false",
}

# Fields every v1 event carries, then those its type needs (what kcoord's writer always sets).
COMMON_FIELDS = ("ts", "shard")
MEMBER_FIELDS = ("group", "member", "kind")
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "member_joined": MEMBER_FIELDS,
    "member_left": (*MEMBER_FIELDS, "reason"),
    "member_expired": (*MEMBER_FIELDS, "timeout_ms"),
    "member_fenced": (*MEMBER_FIELDS, "error", "api"),
    "rebalance_started": ("group", "reason", "generation", "members"),
    "rebalance_completed": ("group", "generation", "duration_ms", "members"),
    "assignment": ("group", "generation", "members", "assignment"),
    "commits": ("group", "count", "requests", "fenced", "rejected", "mode"),
    "shard_loaded": ("records", "records_read", "seconds"),
    "group_deleted": ("group", "reason"),
    "reconciliation_completed": ("group", "generation", "duration_ms", "members"),
}

# Event times kcoord can have written: after epoch-ms took 13 digits, before 2100 (an epoch in
# seconds or microseconds, or a garbage number, falls outside).
TS_MIN_MS = 1_000_000_000_000  # 2001-09-09T01:46:40Z
TS_MAX_MS = 4_102_444_800_000  # 2100-01-01T00:00:00Z
NON_NEGATIVE = (
    "timeout_ms",
    "generation",
    "members",
    "duration_ms",
    "count",
    "requests",
    "records",
    "records_read",
    "seconds",
)
PARTITION_PATTERN = r"^.+:[0-9]+$"  # "topic:partition"
MEMBER_KINDS = ("static", "dynamic")


def _named(checks: list[tuple[str, Column]]) -> Column:
    """The names of the checks that fail, comma-separated ('' when none does)."""
    return F.array_join(F.array(*[F.when(failed, F.lit(name)) for name, failed in checks]), ",")


def _any(checks: list[tuple[str, Column]]) -> Column:
    """Whether any check fails: what :func:`problem` asks of every record, without building the
    names (an array of a string per check, then joined) that only a bad record's detail needs."""
    return functools.reduce(operator.or_, [F.coalesce(failed, F.lit(False)) for _, failed in checks])


def _missing_checks(e: Column) -> list[tuple[str, Column]]:
    """Per field an event's type may need: whether it is null where its type needs it."""
    needed_by: dict[str, list[str] | None] = dict.fromkeys(COMMON_FIELDS)  # None: every type
    for event_type, fields in REQUIRED_FIELDS.items():
        for field in fields:
            types = needed_by.setdefault(field, [])
            if types is not None:
                types.append(event_type)
    # The null test first: a field that is there (most are) ends the check.
    return [
        (field, e[field].isNull() if types is None else e[field].isNull() & e["type"].isin(*types))
        for field, types in needed_by.items()
    ]


def _out_of_range_checks(e: Column) -> list[tuple[str, Column]]:
    """Per field: whether its value is outside what kcoord writes (null counts as in range:
    presence is :func:`_missing_checks`')."""
    checks: list[tuple[str, Column]] = [
        ("ts", (e["ts"] < TS_MIN_MS) | (e["ts"] >= TS_MAX_MS)),
        ("shard", e["shard"] < -1),  # -1: a commit sum of a group whose shard is not known
        *[(f, e[f] < 0) for f in NON_NEGATIVE],
        ("seconds", F.isnan(e["seconds"])),
        ("kind", ~e["kind"].isin(*MEMBER_KINDS)),
        ("fenced", ~F.forall(F.map_values(e["fenced"]), lambda n: n.isNotNull() & (n >= 0))),
        ("rejected", ~F.forall(F.map_values(e["rejected"]), lambda n: n.isNotNull() & (n >= 0))),
        (
            "assignment",
            ~F.forall(
                e["assignment"],
                lambda m: (
                    m.isNotNull()
                    & F.coalesce(m["bytes"] >= 0, F.lit(True))
                    & F.coalesce(
                        F.forall(m["partitions"], lambda p: p.isNotNull() & p.rlike(PARTITION_PATTERN)),
                        F.lit(True),
                    )
                ),
            ),
        ),
    ]
    # Null comparisons (an absent field) are no failure here.
    return [(name, F.coalesce(failed, F.lit(False))) for name, failed in checks]


def problem(value: Column, text: Column, e: Column) -> Column:
    """Why the record (raw ``value`` bytes, its ``text``, its parse ``e`` with PARSE_SCHEMA) is no
    event, or null when it is one. Checks run in order; the first failing one names the problem."""
    corrupt = e[CORRUPT].isNotNull()
    # Only records the typed parse refused are parsed again, to tell bad JSON from a wrong type.
    not_an_object = ~F.coalesce(
        F.schema_of_variant(F.try_parse_json(text)).startswith("OBJECT"), F.lit(False)
    )
    return (
        F.when(value.isNull() | (F.length(value) == 0), F.lit("empty"))
        .when(~F.is_valid_utf8(text), F.lit("not_utf8"))
        .when(e.isNull() | (corrupt & not_an_object), F.lit("bad_json"))
        .when(e["v"].isNull(), F.when(corrupt, F.lit("wrong_type")).otherwise(F.lit("missing_field")))
        .when(~e["v"].isin(*SCHEMAS), F.lit("unknown_version"))
        .when(e["type"].isNull(), F.when(corrupt, F.lit("wrong_type")).otherwise(F.lit("missing_field")))
        .when(~e["type"].isin(*EVENT_TYPES), F.lit("unknown_type"))
        .when(corrupt, F.lit("wrong_type"))
        .when(_any(_missing_checks(e)), F.lit("missing_field"))
        .when(_any(_out_of_range_checks(e)), F.lit("out_of_range"))
    )


def problem_detail(problem_name: Column, e: Column) -> Column:
    """The failing fields of a missing_field or out_of_range record (null otherwise)."""
    return F.when(problem_name == "missing_field", _named(_missing_checks(e))).when(
        problem_name == "out_of_range", _named(_out_of_range_checks(e))
    )


def sample(value: Column, text: Column, problem_name: Column) -> Column:
    """What the report shows of a bad record: its first 200 characters, or the hex of its first 60
    bytes when they are not UTF-8 (a string column must hold text: Arrow refuses anything else)."""
    return F.when(problem_name == "not_utf8", F.concat(F.lit("hex:"), F.hex(F.substring(value, 1, 60)))).when(
        problem_name.isNotNull(), F.substring(text, 1, 200)
    )
