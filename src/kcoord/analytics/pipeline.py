"""The analytics pipeline: raw topic records → typed Spark tables (written as Parquet).

Inputs, each a DataFrame with Spark's Kafka-source columns (``partition, offset, timestamp, key, value``):
- the event topic (``__kcoord_events``, JSON schema v1, docs/events.md; checked by :mod:`.event_schema`);
- optionally an offsets topic in Kafka's ``__consumer_offsets`` formats — kcoord's own internal
  topic or a plain Kafka cluster's ``__consumer_offsets`` — decoded with kcoord's record decoders.

Tables (:func:`build`): ``events``, ``bad_events``, ``rebalances``, ``movement``, ``commits``,
``fencing``, ``zombies``, ``churn``, ``shard_loads``, and from the offsets topic ``offset_commits``,
``generations`` and ``generation_movement``; ``lag`` is added by :mod:`.run` (it needs the cluster's
end offsets).

Definitions (also in the report):
- a *rebalance* is a completed generation (classic) or a new target assignment epoch (KIP-848);
  its reason is the first ``rebalance_started`` since the group's previous completed one;
- *moved* partitions of a rebalance: owned before it and not by the same owner after it
  (an owner is the member's group.instance.id if static, else its member id);
- *stop-the-world partition-seconds*: eager protocols revoke every partition for the whole
  rebalance (max(partitions before, after) × duration); incremental ones (cooperative, KIP-848)
  leave unowned only the partitions they assign from nobody (× duration).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from . import event_schema

# A member that owns no partition still gets one row, with a null partition.
NO_PARTITION: list[tuple[str | None, int | None]] = [(None, None)]

OFFSET_ROWS = T.StructType(
    [
        T.StructField("kind", T.StringType()),  # offset | group | bad | other
        T.StructField("group", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("ts", T.LongType()),
        T.StructField("generation", T.IntegerType()),
        T.StructField("protocol_type", T.StringType()),
        T.StructField("protocol", T.StringType()),
        T.StructField("owner", T.StringType()),
        T.StructField("static", T.BooleanType()),
        T.StructField("tp", T.StringType()),
        T.StructField("sample", T.StringType()),
        T.StructField("lifetime", T.IntegerType()),
    ]
)


def protocol_class(protocol_type: Any, protocol: Any) -> Any:
    """eager / cooperative / kip848, as a Spark column expression."""
    p = F.lower(F.coalesce(protocol, F.lit("")))
    return (
        F.when(protocol_type == "kip848", "kip848")
        .when(p.contains("cooperative") | p.isin("sessioned", "compatible"), "cooperative")
        .otherwise("eager")
    )


# -- the event topic ----------------------------------------------------------------------------------
# The parse cache's columns for bad_events (renamed to problem, detail, sample in that table).
BAD_PROBLEM, BAD_DETAIL, BAD_SAMPLE = "_problem", "_problem_detail", "_sample"
EVENT_FIELDS = [f.name for f in event_schema.EVENT_SCHEMA_V1.fields]
CONSTRAINT_PROPAGATION = "spark.sql.constraintPropagation.enabled"
# The event types that describe generations, and the one that ends a group's lifetime.
GENERATION_TYPES = ("assignment", "rebalance_started", "rebalance_completed")
DELETED = "group_deleted"
_DELETIONS = "_deletions"  # a group's deletions, (ts, offset) each: with_lifetimes' broadcast side


def with_lifetimes(events: DataFrame, types: tuple[str, ...] = GENERATION_TYPES) -> DataFrame:
    """The events of ``types`` (by default the generation events, :data:`GENERATION_TYPES`) with
    ``lifetime``: how many times their group was deleted before them, by (ts, offset), in this read
    (0 for the group as first seen). A group deleted and created again under the same name starts
    again at generation 1; keyed by (group, lifetime, generation) its generations never collide
    with its predecessor's.

    Deletions are rare: each group's list of them is broadcast to the rows, which count those
    before them; the rows are neither shuffled nor sorted (a window over every generation event
    was, with every column)."""
    deletions = (
        events.where(F.col("type") == DELETED)
        .groupBy("group")
        .agg(F.collect_list(F.struct("ts", "offset")).alias(_DELETIONS))
    )
    rows = events.where(F.col("type").isin(*types))
    before = F.filter(
        _DELETIONS,
        lambda d: (d["ts"] < F.col("ts")) | ((d["ts"] == F.col("ts")) & (d["offset"] < F.col("offset"))),
    )
    lifetime = F.when(F.col(_DELETIONS).isNull(), F.lit(0)).otherwise(F.size(before))
    return rows.join(F.broadcast(deletions), "group", "left").select(
        *rows.columns, lifetime.alias("lifetime")
    )


def reconciliations(events: DataFrame) -> DataFrame:
    """KIP-848 reconciliations: from a group epoch bump until every member reported the target
    assignment (kcoord's ``reconciliation_completed``), per group lifetime."""
    done = with_lifetimes(events, ("reconciliation_completed",))
    return done.select(
        "group",
        "lifetime",
        F.col("generation").alias("epoch"),
        F.col("ts").alias("completed_ts"),
        "duration_ms",
        "members",
    )


def _parse(raw: DataFrame) -> DataFrame:
    """Every record, good and bad, with the event's fields as columns of their own (not one struct:
    every table after this reads a few fields, and a struct is read whole) and bad_events' own
    columns: null for a good record."""
    text = F.col("value").cast("string")
    parsed = raw.select(
        "partition",
        "offset",
        F.col("timestamp").alias("record_ts"),
        "value",
        text.alias("text"),
        F.from_json(text, event_schema.PARSE_SCHEMA, event_schema.JSON_OPTIONS).alias("e"),
    )
    parsed = parsed.withColumn("problem", event_schema.problem(F.col("value"), F.col("text"), F.col("e")))
    # bad_events' own columns under names no event field has ("detail" is one)
    return parsed.select(
        "partition",
        "offset",
        "record_ts",
        F.col("problem").alias(BAD_PROBLEM),
        event_schema.problem_detail(F.col("problem"), F.col("e")).alias(BAD_DETAIL),
        event_schema.sample(F.col("value"), F.col("text"), F.col("problem")).alias(BAD_SAMPLE),
        *[F.col("e")[name].alias(name) for name in EVENT_FIELDS],
    )


def _bad_columns() -> list[Column]:
    """bad_events' columns, from the parse's."""
    return [
        F.col("partition"),
        F.col("offset"),
        F.col("record_ts"),
        F.col(BAD_PROBLEM).alias("problem"),
        F.col(BAD_DETAIL).alias("detail"),
        F.col(BAD_SAMPLE).alias("sample"),
    ]


def _good(parsed: DataFrame) -> DataFrame:
    return parsed.where(F.col(BAD_PROBLEM).isNull()).select("partition", "offset", *EVENT_FIELDS)


def _bad(parsed: DataFrame) -> DataFrame:
    return parsed.where(F.col(BAD_PROBLEM).isNotNull()).select(*_bad_columns())


def parse_events(raw: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(events, bad_events) in Spark's in-memory cache: each record checked against its version's
    strict schema (:mod:`.event_schema`); one that fails goes to bad_events with its problem, the
    failing fields and a sample. The input is read and parsed once; both tables are filters of that.

    For tests and small inputs: at 10M events the cache (~175 bytes per event) outgrew the driver's
    storage memory. ``kcoord analytics`` writes the events table in the parse's own pass instead
    (:func:`write_events`)."""
    parsed = _parse(raw).cache()
    return _good(parsed), _bad(parsed)


# Bad records gathered in the parse's own pass (write_events); should there be more, they are parsed
# again, from the raw records, in a pass of their own.
BAD_ROWS_GATHERED = 10_000


def write_events(
    raw: DataFrame, write: Callable[[DataFrame], DataFrame], gathered: int = BAD_ROWS_GATHERED
) -> tuple[DataFrame, DataFrame]:
    """(events, bad_events) with the events table written in the parse's own pass: ``write`` writes
    the good records as the events table and gives the table read back. The bad records are gathered
    on the way as an observed metric (the first ``gathered`` of them by partition and offset, and
    their count); more than that are parsed again from ``raw``.

    One pass: the parse is neither kept (a cache or a stage's files) nor read a second time, and
    every table after this reads the events table's files: of each only the columns it needs.

    An observed metric over this plan sent Catalyst's constraint propagation into a search that
    filled a 2g heap before any row was read (the strict schema's large expressions); it is off for
    the write (bench/RESULTS.md, "The one-pass parse's out-of-memory, found")."""
    spark = raw.sparkSession
    parsed = _parse(raw)
    is_bad = F.col(BAD_PROBLEM).isNotNull()
    observation = Observation("kcoord-bad-events")
    observed = parsed.observe(
        observation,
        F.count_if(is_bad).alias("bad"),
        F.min_by(
            F.when(is_bad, F.struct(*_bad_columns())),
            F.when(is_bad, F.struct("partition", "offset")),
            gathered,
        ).alias("rows"),
    )
    before = spark.conf.get(CONSTRAINT_PROPAGATION, None)
    spark.conf.set(CONSTRAINT_PROPAGATION, "false")
    try:
        events = write(_good(observed))
    finally:
        if before is None:
            spark.conf.unset(CONSTRAINT_PROPAGATION)
        else:
            spark.conf.set(CONSTRAINT_PROPAGATION, before)
    seen = observation.get
    rows = [tuple(row) for row in seen["rows"] or []]
    if seen["bad"] > len(rows):
        return events, _bad(_parse(raw))
    return events, spark.createDataFrame(rows, _bad(parsed).schema)


def assignment_generations(events: DataFrame) -> DataFrame:
    """One row per assignment event (of :func:`with_lifetimes`): ``owners`` [{owner, static}] and
    ``tps`` [{tp, owner}]."""
    a = events.where(F.col("type") == "assignment")

    def owner(member: Column) -> Column:
        return F.coalesce(member["instance"], member["member"])

    return a.select(
        "group",
        "lifetime",
        "generation",
        "ts",
        "protocol_type",
        "protocol",
        F.transform(
            F.coalesce("assignment", F.array()),
            lambda m: F.struct(owner(m).alias("owner"), m["instance"].isNotNull().alias("static")),
        ).alias("owners"),
        F.flatten(
            F.transform(
                F.coalesce("assignment", F.array()),
                lambda m: F.transform(
                    F.coalesce(m["partitions"], F.array().cast("array<string>")),
                    lambda p: F.struct(p.alias("tp"), owner(m).alias("owner")),
                ),
            )
        ).alias("tps"),
    )


def generations_from_rows(rows: DataFrame) -> DataFrame:
    """The same shape from one row per (group, lifetime, generation, owner, tp) (the offsets topic's members)."""
    return rows.groupBy("group", "lifetime", "generation").agg(
        F.max("ts").alias("ts"),
        F.first("protocol_type").alias("protocol_type"),
        F.first("protocol").alias("protocol"),
        F.array_distinct(F.collect_list(F.struct("owner", "static"))).alias("owners"),
        F.collect_list(F.when(F.col("tp").isNotNull(), F.struct("tp", "owner"))).alias("tps"),
    )


def movement(gens: DataFrame) -> DataFrame:
    """Per (group, lifetime, generation): partitions before/after, moved, assigned from nobody,
    members in/out. A lifetime's first generation follows nothing (a re-created group moves nothing).

    One window pass: each generation's partition → owner map next to the previous generation's
    (no joins, so it scales with the number of generations, not with partitions × generations)."""
    # The last record of each (group, lifetime, generation), should one be there twice: a sort-based
    # window, not an aggregation (a hash aggregate of these arrays ran out of memory at 10M events).
    last = Window.partitionBy("group", "lifetime", "generation").orderBy(F.col("ts").desc())
    # Shuffled once by (group, lifetime): both windows take that partitioning (by the generation
    # too, the first one would shuffle again for the second).
    g = (
        gens.repartition("group", "lifetime")
        .withColumn("_n", F.row_number().over(last))
        .where(F.col("_n") == 1)
        .drop("_n")
    )
    w = Window.partitionBy("group", "lifetime").orderBy("generation")
    g = g.select(
        "*",
        F.lag("generation").over(w).alias("prev_generation"),
        F.map_from_entries("tps").alias("cur"),
        F.coalesce(F.lag(F.map_from_entries("tps")).over(w), F.create_map().cast("map<string,string>")).alias(
            "prev"
        ),
        F.transform("owners", lambda o: o["owner"]).alias("cur_owners"),
        F.coalesce(
            F.lag(F.transform("owners", lambda o: o["owner"])).over(w), F.array().cast("array<string>")
        ).alias("prev_owners"),
    )
    return g.select(
        "group",
        "lifetime",
        "generation",
        "prev_generation",
        "ts",
        "protocol_type",
        "protocol",
        protocol_class(F.col("protocol_type"), F.col("protocol")).alias("protocol_class"),
        F.size(F.map_keys("prev")).alias("partitions_before"),
        F.size(F.map_keys("cur")).alias("partitions_after"),
        F.size(
            F.filter(
                F.map_keys("prev"), lambda k: F.coalesce(F.col("cur")[k] != F.col("prev")[k], F.lit(True))
            )
        ).alias("moved"),
        F.size(F.filter(F.map_keys("cur"), lambda k: F.col("prev")[k].isNull())).alias(
            "assigned_from_nobody"
        ),
        F.size(F.array_distinct("cur_owners")).alias("members_after"),
        F.size(F.array_except("cur_owners", "prev_owners")).alias("members_in"),
        F.size(F.array_except("prev_owners", "cur_owners")).alias("members_out"),
        F.size(F.filter("owners", lambda o: o["static"])).alias("static_members"),
    )


def rebalances(events: DataFrame, lives: DataFrame, moves: DataFrame) -> DataFrame:
    """One row per completed rebalance, with its cause and the partition movement it caused
    (``lives``: the generation events with their group's lifetime, :func:`with_lifetimes`)."""
    marks = lives.where(F.col("type").isin("rebalance_started", "rebalance_completed")).select(
        "group",
        "lifetime",
        "ts",
        "offset",
        "type",
        "reason",
        "generation",
        "duration_ms",
        "members",
        "protocol",
    )
    w = (
        Window.partitionBy("group", "lifetime")
        .orderBy("ts", "offset")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    marks = marks.withColumn(
        "episode", F.coalesce(F.sum((F.col("type") == "rebalance_completed").cast("int")).over(w), F.lit(0))
    )
    # An episode's starts and its completion (its last mark, if it completed) in one window over the
    # partitioning the marks already have: the cause is the first start's reason. (An aggregate of
    # the starts joined back to the completions shuffled both sides again.)
    started = F.col("type") == "rebalance_started"
    in_episode = Window.partitionBy("group", "lifetime", "episode")
    done = marks.select(
        "*",
        F.min_by(F.when(started, F.col("reason")), F.when(started, F.struct("ts", "offset")))
        .over(in_episode)
        .alias("first_reason"),
        F.count(F.when(started, F.lit(1))).over(in_episode).alias("triggers"),
        F.min(F.when(started, F.col("ts"))).over(in_episode).alias("started_ts"),
    ).where(F.col("type") == "rebalance_completed")
    done = done.select(
        "group",
        "lifetime",
        "generation",
        F.col("first_reason").alias("reason"),
        "triggers",
        "started_ts",
        F.col("ts").alias("completed_ts"),
        "duration_ms",
        "members",
        "protocol",
    )
    # A generation with no assignment event (an empty group's, or one that completed before the
    # read started) is classed by the group's protocol type and the rebalance's own protocol.
    group_types = (
        events.where(F.col("type").isin("member_joined", "assignment") & F.col("protocol_type").isNotNull())
        .groupBy("group")
        .agg(F.max_by("protocol_type", F.struct("ts", "offset")).alias("group_protocol_type"))
    )
    r = (
        done.join(moves.drop("ts", "protocol"), ["group", "lifetime", "generation"], "left")
        .join(group_types, ["group"], "left")
        .withColumn(
            "protocol_class",
            F.coalesce(
                "protocol_class",
                F.when(
                    F.col("protocol").isNotNull(),
                    protocol_class(F.coalesce("protocol_type", "group_protocol_type"), F.col("protocol")),
                ),
            ),
        )
    )
    eager = F.col("protocol_class") == "eager"
    unowned = F.when(eager, F.greatest("partitions_before", "partitions_after")).otherwise(
        F.col("assigned_from_nobody")
    )
    return r.select(
        "group",
        "lifetime",
        "generation",
        F.coalesce("reason", F.lit("unknown")).alias("reason"),
        F.coalesce("triggers", F.lit(0)).alias("triggers"),
        "started_ts",
        "completed_ts",
        "duration_ms",
        "members",
        "protocol",
        "protocol_type",
        F.coalesce("protocol_class", F.lit("unknown")).alias("protocol_class"),
        *[
            F.coalesce(F.col(c), F.lit(0)).alias(c)
            for c in (
                "partitions_before",
                "partitions_after",
                "moved",
                "assigned_from_nobody",
                "members_in",
                "members_out",
                "static_members",
            )
        ],
        (F.coalesce(unowned, F.lit(0)) * F.col("duration_ms") / 1000.0).alias("stw_partition_seconds"),
    )


def commits(events: DataFrame) -> DataFrame:
    c = events.where(F.col("type") == "commits")
    return c.select(
        "group",
        "ts",
        F.col("count").alias("partitions"),
        "requests",
        "mode",
        F.coalesce(
            F.aggregate(F.map_values("fenced"), F.lit(0).cast("long"), lambda a, b: a + b), F.lit(0)
        ).alias("fenced"),
        F.coalesce(
            F.aggregate(F.map_values("rejected"), F.lit(0).cast("long"), lambda a, b: a + b), F.lit(0)
        ).alias("rejected"),
        F.col("fenced").alias("fenced_by_error"),
        F.col("rejected").alias("rejected_by_error"),
    )


def fencing(events: DataFrame) -> DataFrame:
    """Refused commits by error and fencing mode (from the per-second commit sums), and fenced
    requests of every API (member_fenced events)."""
    c = events.where(F.col("type") == "commits")
    fenced = c.select("group", "ts", "mode", F.explode("fenced").alias("error", "n")).withColumn(
        "outcome", F.lit("fenced")
    )
    rejected = c.select("group", "ts", "mode", F.explode("rejected").alias("error", "n")).withColumn(
        "outcome", F.lit("rejected")
    )
    commit_side = (
        fenced.unionByName(rejected)
        .withColumn("api", F.lit("offset_commit"))
        .withColumn("source", F.lit("commits"))
    )
    requests = events.where(F.col("type") == "member_fenced").select(
        "group",
        "ts",
        "mode",
        "error",
        F.lit(1).cast("long").alias("n"),
        F.lit("fenced").alias("outcome"),
        "api",
        F.lit("member_fenced").alias("source"),
    )
    return commit_side.unionByName(requests)


def zombies(events: DataFrame) -> DataFrame:
    """Members refused as fenced: when, how often, and whether they had already left, expired or
    been replaced (a zombie)."""
    f = (
        events.where(F.col("type") == "member_fenced")
        .groupBy("group", "member", "instance")
        .agg(
            F.count(F.lit(1)).alias("fenced_requests"),
            F.collect_set("error").alias("errors"),
            F.collect_set("api").alias("apis"),
            F.min("ts").alias("first_fenced_ts"),
            F.max("ts").alias("last_fenced_ts"),
            F.max(F.nullif("client_id", F.lit(""))).alias("fenced_client_id"),
            F.max(F.nullif("host", F.lit(""))).alias("fenced_host"),
        )
    )
    # The writer names a fenced member's client only while it remembers the join (not after the
    # member left or expired, nor in another kcoord process): the join event names it for good.
    joined = (
        events.where(F.col("type") == "member_joined")
        .groupBy("group", "member")
        .agg(
            F.max_by(F.nullif("client_id", F.lit("")), "ts").alias("joined_client_id"),
            F.max_by(F.nullif("host", F.lit("")), "ts").alias("joined_host"),
        )
    )
    gone = (
        events.where(F.col("type").isin("member_left", "member_expired"))
        .groupBy("group", "member")
        .agg(F.min("ts").alias("gone_ts"))
    )
    z = (
        f.join(gone, ["group", "member"], "left")
        .join(joined, ["group", "member"], "left")
        .select(
            "*",
            F.coalesce("fenced_client_id", "joined_client_id", F.lit("")).alias("client_id"),
            F.coalesce("fenced_host", "joined_host", F.lit("")).alias("host"),
        )
        .drop("fenced_client_id", "joined_client_id", "fenced_host", "joined_host")
    )
    zombie = (
        F.array_contains("errors", "FENCED_INSTANCE_ID")
        | (F.col("gone_ts").isNotNull() & (F.col("last_fenced_ts") >= F.col("gone_ts")))
        | F.array_contains("errors", "UNKNOWN_MEMBER_ID")
    )
    return z.withColumn("zombie", zombie)


def churn(events: DataFrame) -> DataFrame:
    m = events.where(F.col("type").isin("member_joined", "member_left", "member_expired"))
    return m.groupBy(
        F.coalesce("client_id", F.lit("")).alias("client_id"),
        F.coalesce("host", F.lit("")).alias("host"),
        "kind",
    ).agg(
        F.sum(((F.col("type") == "member_joined") & ~F.coalesce("rejoin", F.lit(False))).cast("int")).alias(
            "joins"
        ),
        F.sum(((F.col("type") == "member_joined") & F.coalesce("rejoin", F.lit(False))).cast("int")).alias(
            "static_rejoins"
        ),
        F.sum((F.col("type") == "member_left").cast("int")).alias("leaves"),
        F.sum((F.col("type") == "member_expired").cast("int")).alias("expiries"),
        F.countDistinct("group").alias("groups"),
    )


# -- the offsets topic (Kafka's __consumer_offsets formats) -------------------------------------------
# Record types of an offsets topic that are no consumer group's (by Kafka's coordinator-record specs,
# group-coordinator/src/main/resources/common/message): share groups (KIP-932) and streams groups
# (KIP-1071), and kcoord's shard fence. Counted by type in ``other_offset_records``, not read further;
# any other type no decoder knows is a bad record (``UnknownRecordType``).
OTHER_RECORD_TYPES: dict[int, str] = {
    10: "ShareGroupMemberMetadata",
    11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
    17: "StreamsGroupMetadata",
    19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
    0x4B43: "KcoordShardFence",
}


def _record_type_and_group(key: bytes) -> tuple[int, str | None]:
    """A record key's type and, when its first field is a string (every group record's GroupId), that."""
    rtype = int.from_bytes(key[:2], "big", signed=True)
    size = int.from_bytes(key[2:4], "big", signed=True) if len(key) >= 4 else -1
    if size < 0 or len(key) < 4 + size:
        return rtype, None
    try:
        return rtype, key[4 : 4 + size].decode("utf-8")
    except UnicodeDecodeError:
        return rtype, None


def _other_row(row: Any, rtype: int, group: str | None) -> tuple[Any, ...]:
    """A record of a type listed in :data:`OTHER_RECORD_TYPES` (``sample``: the type's name)."""
    name = OTHER_RECORD_TYPES[rtype]
    return ("other", group, None, row["partition"], row["offset"], row["timestamp"], None, None, None, None,
            None, None, name, None)  # fmt: skip


class _Lifetimes:
    """Which lifetime of its group a generation record belongs to, in one topic partition's
    offset order. A tombstone of the group's record (GroupMetadata for a classic group,
    ConsumerGroupMetadata for a consumer group) marks it deleted. The next generation record starts
    a new lifetime if it is of the same kind, or if its generation goes back (a re-created group
    starts again at 1). One of the other kind that does not go back is an online migration: Kafka
    writes the old kind's tombstone and goes on at the same generation as the other kind (classic
    generation → consumer group epoch, or back), the same lifetime."""

    def __init__(self) -> None:
        self.current: dict[str, int] = {}
        self.last_generation: dict[str, int] = {}
        self.deleted: dict[str, str] = {}  # group → the kind of record whose tombstone was seen

    def delete(self, group: str, kind: str) -> None:
        if group in self.last_generation:
            self.deleted[group] = kind

    def of(self, group: str, generation: int, kind: str) -> int:
        """The lifetime of a ``kind`` ("classic" or "consumer") record of ``generation``."""
        last = self.last_generation.get(group)
        deleted_kind = self.deleted.pop(group, None)
        if deleted_kind is not None and last is not None and (deleted_kind == kind or generation < last):
            self.current[group] = self.current.get(group, 0) + 1
            last = None
        self.last_generation[group] = generation if last is None else max(generation, last)
        return self.current.get(group, 0)

    def now(self, group: str) -> int:
        return self.current.get(group, 0)


def _group_row(
    group: str,
    when: int,
    generation: int,
    protocol_type: str | None,
    protocol: str | None,
    lifetime: int,
    owner: str | None = None,
    static: bool | None = None,
    tp: str | None = None,
) -> tuple[Any, ...]:
    """A row of one owner's partition in a generation (or of a generation with no owner)."""
    return (
        "group",
        group,
        None,
        None,
        None,
        when,
        generation,
        protocol_type,
        protocol,
        owner,
        static,
        tp,
        None,
        lifetime,
    )


class _ConsumerGroups:
    """KIP-848 consumer groups replayed from their records, one topic partition in offset order
    (a group's records are all in one partition): each new target assignment epoch (type 6) is a
    generation, with the target assignment (type 7) of every member then.

    Owners are named as for classic groups (instance id if static, else member id; type 5), and
    partitions as ``topic:partition`` with the topic's name where a subscription metadata record
    (type 4, Kafka 4.0) named its id, else its id."""

    def __init__(self, lifetimes: _Lifetimes) -> None:
        self.lifetimes = lifetimes
        self.instance: dict[tuple[str, str], str | None] = {}
        self.target: dict[str, dict[str, list[tuple[str, int]]]] = {}
        self.topic_names: dict[str, str] = {}

    def apply(self, key: Any, value: Any, ts: int) -> Iterator[tuple[Any, ...]]:
        name, group = type(key).__name__, key.group_id
        if name == "ConsumerGroupMetadataKey" and value is None:  # the group is deleted
            self.lifetimes.delete(group, "consumer")
            self.target.pop(group, None)
            for k in [k for k in self.instance if k[0] == group]:
                del self.instance[k]
        elif name == "ConsumerGroupMemberMetadataKey":
            if value is None:
                self.instance.pop((group, key.member_id), None)
            else:
                self.instance[(group, key.member_id)] = value.instance_id or None
        elif name == "ConsumerGroupPartitionMetadataKey" and value is not None:
            self.topic_names.update((str(t.topic_id), t.topic_name) for t in value.topics)
        elif name == "ConsumerGroupTargetAssignmentMemberKey":
            members = self.target.setdefault(group, {})
            if value is None:
                members.pop(key.member_id, None)
            else:
                members[key.member_id] = [
                    (self.topic_names.get(str(t.topic_id), str(t.topic_id)), p)
                    for t in value.topic_partitions
                    for p in t.partitions
                ]
        elif name == "ConsumerGroupTargetAssignmentMetadataKey" and value is not None:
            when = value.assignment_timestamp if value.assignment_timestamp > 0 else ts
            epoch = value.assignment_epoch
            lifetime = self.lifetimes.of(group, epoch, "consumer")
            members = self.target.get(group, {})
            if not members:
                yield _group_row(group, when, epoch, "kip848", None, lifetime)
            for member_id, parts in sorted(members.items()):
                instance = self.instance.get((group, member_id))
                for t, p in parts or NO_PARTITION:
                    yield _group_row(group, when, epoch, "kip848", None, lifetime, instance or member_id,
                                     instance is not None, None if t is None else f"{t}:{p}")  # fmt: skip


def _bad_row(group: str | None, row: Any, problem: str, detail: str) -> tuple[Any, ...]:
    """A row of the offsets topic that could not be read: counted, with where it is and why
    (``sample`` is "problem: detail"; the table splits it)."""
    return (
        "bad",
        group,
        None,
        row["partition"],
        row["offset"],
        row["timestamp"],
        None,
        None,
        None,
        None,
        None,
        None,
        f"{problem}: {detail}",
        None,
    )


def _decode_offsets_partition(rows: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
    from kcoord.coordinator.core.classic.parts import GroupPartRecords, MissingPartError
    from kcoord.coordinator.ops.event_topic import decode_consumer_assignment
    from kcoord.protocol.records import CONSUMER_GROUP_KEYS, GroupMetadataPartKey, decode_record

    lifetimes = _Lifetimes()
    consumer_groups = _ConsumerGroups(lifetimes)
    # A classic group too large for one record: its members come in part records before its
    # GroupMetadata record, which names them (the same replay as the coordinator's).
    group_parts = GroupPartRecords()
    for row in rows:
        key, value, ts = row["key"], row["value"], row["timestamp"]
        if key is None:
            continue
        try:
            rec = decode_record(bytes(key), None if value is None else bytes(value))
        except Exception as exc:  # corrupt bytes: counted, a sample kept
            yield _bad_row(None, row, type(exc).__name__, f"{exc}; key {bytes(key)[:40].hex()}")
            continue
        if rec is None:  # a record type kcoord has no decoder for
            rtype, group = _record_type_and_group(bytes(key))
            if rtype in OTHER_RECORD_TYPES:
                yield _other_row(row, rtype, group)
            else:
                yield _bad_row(group, row, "UnknownRecordType", f"type {rtype}; key {bytes(key)[:40].hex()}")
            continue
        if isinstance(rec.key, CONSUMER_GROUP_KEYS):
            yield from consumer_groups.apply(rec.key, rec.value, ts)
            continue
        if isinstance(rec.key, GroupMetadataPartKey):
            group_parts.replay_part(rec.key, rec.value)
            continue
        name = type(rec.key).__name__
        if rec.value is None:  # a tombstone: of a group's record, the group is deleted
            if name == "GroupMetadataKey":
                lifetimes.delete(rec.key.group, "classic")
            continue
        if name == "OffsetCommitKey":
            v = rec.value
            yield (
                "offset",
                rec.key.group,
                rec.key.topic,
                rec.key.partition,
                v.offset,
                v.commit_timestamp,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                lifetimes.now(rec.key.group),
            )
        elif name == "GroupMetadataKey":
            try:
                v = group_parts.whole_value(rec.key.group, rec.value)
            except MissingPartError as exc:  # a part this read did not see: counted, a sample kept
                yield _bad_row(rec.key.group, row, type(exc).__name__, str(exc))
                continue
            when = (
                v.current_state_timestamp
                if v.current_state_timestamp and v.current_state_timestamp > 0
                else ts
            )
            group = rec.key.group
            lifetime = lifetimes.of(group, v.generation, "classic")
            if not v.members:
                yield _group_row(group, when, v.generation, v.protocol_type, v.protocol, lifetime)
            for mb in v.members:
                owner = mb.group_instance_id or mb.member_id
                parts = decode_consumer_assignment(mb.assignment) if v.protocol_type == "consumer" else None
                for t, p in parts or NO_PARTITION:
                    yield _group_row(group, when, v.generation, v.protocol_type, v.protocol, lifetime, owner,
                                     mb.group_instance_id is not None, None if t is None else f"{t}:{p}")  # fmt: skip


DECODED_BATCH_ROWS = 10_000


def _decode_offsets_batches(batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow``'s function: one Spark partition (one topic partition, in offset order) of
    Arrow record batches in, the decoded rows out as Arrow record batches. DataFrame operations
    only, no RDD: the same code runs on a classic session and under Spark Connect."""
    import pyarrow as pa

    arrow_types = {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64(), "boolean": pa.bool_()}
    schema = pa.schema([pa.field(f.name, arrow_types[f.dataType.simpleString()]) for f in OFFSET_ROWS.fields])

    def rows() -> Iterator[dict[str, Any]]:
        for batch in batches:
            yield from batch.to_pylist()

    out: list[tuple[Any, ...]] = []
    for decoded in _decode_offsets_partition(rows()):
        out.append(decoded)
        if len(out) >= DECODED_BATCH_ROWS:
            yield pa.RecordBatch.from_pylist([dict(zip(schema.names, r, strict=True)) for r in out], schema)
            out = []
    if out:
        yield pa.RecordBatch.from_pylist([dict(zip(schema.names, r, strict=True)) for r in out], schema)


def decode_offsets_topic(spark: SparkSession, raw: DataFrame) -> DataFrame:
    return raw.select("partition", "offset", "key", "value", "timestamp").mapInArrow(
        _decode_offsets_batches, OFFSET_ROWS
    )


# The tables built from the event topic (build_from), the others from the offsets topic.
EVENT_TABLES = frozenset(
    {
        "events",
        "bad_events",
        "movement",
        "rebalances",
        "reconciliations",
        "commits",
        "fencing",
        "zombies",
        "churn",
        "shard_loads",
    }
)


def build(
    spark: SparkSession, raw_events: DataFrame | None, raw_offsets: DataFrame | None
) -> dict[str, DataFrame]:
    """Every table from the raw records, the events' parse in the in-memory cache (tests, small
    inputs: :func:`parse_events`)."""
    return build_from(spark, None if raw_events is None else parse_events(raw_events), raw_offsets)


def build_from(
    spark: SparkSession, parsed: tuple[DataFrame, DataFrame] | None, raw_offsets: DataFrame | None
) -> dict[str, DataFrame]:
    """The tables (not yet computed) from the events' (events, bad_events), when there are events,
    and the offsets topic's raw records."""
    tables: dict[str, DataFrame] = {}
    if parsed is not None:
        events, bad = parsed
        # not cached: a broadcast join over the events, cheaper to do again than to keep
        lives = with_lifetimes(events)
        moves = movement(assignment_generations(lives)).cache()
        tables["events"] = events
        tables["bad_events"] = bad
        tables.update(
            movement=moves,
            rebalances=rebalances(events, lives, moves),
            reconciliations=reconciliations(events),
            commits=commits(events),
            fencing=fencing(events),
            zombies=zombies(events),
            churn=churn(events),
            shard_loads=events.where(F.col("type") == "shard_loaded").select(
                "ts", "shard", "records", "records_read", "seconds"
            ),
        )
    if raw_offsets is not None:
        decoded = decode_offsets_topic(spark, raw_offsets).cache()
        tables["offset_commits"] = decoded.where(F.col("kind") == "offset").select(
            "group", "topic", "partition", "offset", "ts"
        )
        gen_rows = decoded.where(F.col("kind") == "group").select(
            "group", "lifetime", "generation", "ts", "protocol_type", "protocol", "owner", "static", "tp"
        )
        tables["generations"] = gen_rows.groupBy("group", "lifetime", "generation").agg(
            F.max("ts").alias("ts"),
            F.first("protocol_type").alias("protocol_type"),
            F.first("protocol").alias("protocol"),
            F.countDistinct("owner").alias("members"),
            # distinct: a generation's record is written again on a static member's rejoin
            F.countDistinct("tp").alias("partitions"),
        )
        tables["generation_movement"] = movement(
            generations_from_rows(gen_rows.where(F.col("owner").isNotNull()))
        )
        tables["other_offset_records"] = (
            decoded.where(F.col("kind") == "other")
            .groupBy(F.col("sample").alias("record_type"), "group")
            .agg(F.count(F.lit(1)).alias("records"), F.max("ts").alias("last_ts"))
        )
        tables["bad_offset_records"] = decoded.where(F.col("kind") == "bad").select(
            "partition",
            "offset",
            "ts",
            F.regexp_extract("sample", r"^([^:]+):", 1).alias("problem"),
            "sample",
        )
    return tables
