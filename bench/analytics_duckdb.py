"""The floor for ``bench.analytics_scale``: the same events' core tables in DuckDB, in one process.

    .venv/bin/python -m bench.analytics_duckdb /tmp/kcoord-analytics-scale/events-1000000 [--threads 2]

Reads the same Parquet files as the Spark run and computes what the pipeline's core tables hold:
events checked (UTF-8, JSON object, version, integer ``ts``; bad ones counted), rebalances paired
with the first ``rebalance_started`` of their episode, partitions moved per generation against the
previous one, commit sums with fenced/rejected totals, fencing by error, churn per client. Not the
strict schema's every check, nor the offsets topic, nor the report: a lower bound for the same
work, not a replacement (DuckDB runs on one machine; the pipeline on any Spark).
Prints one JSON line: rows per table and seconds.
"""

from __future__ import annotations

import argparse
import json
import time

SQL = """
CREATE TEMP TABLE parsed AS
  SELECT partition, "offset", timestamp AS record_ts, TRY(decode(value)) AS text FROM read_parquet('{directory}/*.parquet');
CREATE TEMP TABLE checked AS
  SELECT partition, "offset", record_ts, text,
         CASE WHEN text IS NULL THEN 'not_utf8' WHEN NOT json_valid(text) THEN 'bad_json'
              WHEN json_type(text) <> 'OBJECT' THEN 'bad_json'
              WHEN json_extract(text, '$.v')::VARCHAR <> '1' THEN 'unknown_version'
              WHEN json_type(text, '$.ts') NOT IN ('UBIGINT', 'BIGINT') THEN 'wrong_type' END AS problem
  FROM parsed;
CREATE TEMP TABLE bad_events AS SELECT partition, "offset", record_ts, problem FROM checked WHERE problem IS NOT NULL;
CREATE TEMP TABLE events AS
  SELECT partition, "offset", text->>'type' AS type, (text->>'ts')::BIGINT AS ts, text->>'group' AS "group",
         text->>'reason' AS reason, (text->>'generation')::INT AS generation, (text->>'duration_ms')::BIGINT AS duration_ms,
         text->>'member' AS member, text->>'instance' AS instance, text->>'client_id' AS client_id, text->>'host' AS host,
         text->>'kind' AS kind, text->>'mode' AS mode, text->>'error' AS error, (text->>'count')::BIGINT AS count,
         text->>'protocol' AS protocol, text->'assignment' AS assignment, text->'fenced' AS fenced, text->'rejected' AS rejected
  FROM checked WHERE problem IS NULL;
CREATE TEMP TABLE marks AS
  SELECT "group", ts, "offset", type, reason, generation, duration_ms,
         coalesce(sum(CASE WHEN type = 'rebalance_completed' THEN 1 ELSE 0 END) OVER (PARTITION BY "group" ORDER BY ts, "offset" ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS episode
  FROM events WHERE type IN ('rebalance_started', 'rebalance_completed');
CREATE TEMP TABLE tps AS
  SELECT "group", generation, unnest(json_extract_string(m, '$.partitions[*]')) AS tp, coalesce(m->>'instance', m->>'member') AS owner
  FROM (SELECT "group", generation, unnest(json_extract(assignment, '$[*]')) AS m FROM events WHERE type = 'assignment');
CREATE TEMP TABLE gens AS
  SELECT "group", generation, lag(generation) OVER (PARTITION BY "group" ORDER BY generation) AS prev_generation
  FROM (SELECT DISTINCT "group", generation FROM events WHERE type = 'assignment');
CREATE TEMP TABLE movement AS
  SELECT g."group", g.generation, count(p.tp) AS partitions_before,
         count(p.tp) FILTER (WHERE c.owner IS NULL OR c.owner <> p.owner) AS moved
  FROM gens g LEFT JOIN tps p ON p."group" = g."group" AND p.generation = g.prev_generation
  LEFT JOIN tps c ON c."group" = g."group" AND c.generation = g.generation AND c.tp = p.tp
  GROUP BY g."group", g.generation;
CREATE TEMP TABLE rebalances AS
  SELECT d."group", d.generation, d.ts AS completed_ts, d.duration_ms, coalesce(s.reason, 'unknown') AS reason, coalesce(mv.moved, 0) AS moved
  FROM (SELECT * FROM marks WHERE type = 'rebalance_completed') d
  LEFT JOIN (SELECT "group", episode, arg_min(reason, ts) AS reason FROM marks WHERE type = 'rebalance_started' GROUP BY ALL) s USING ("group", episode)
  LEFT JOIN movement mv ON mv."group" = d."group" AND mv.generation = d.generation;
CREATE TEMP TABLE commits AS
  SELECT "group", ts, count AS partitions, mode,
         coalesce(list_sum(map_values(json_transform(fenced, '"MAP(VARCHAR, BIGINT)"'))), 0) AS fenced,
         coalesce(list_sum(map_values(json_transform(rejected, '"MAP(VARCHAR, BIGINT)"'))), 0) AS rejected
  FROM events WHERE type = 'commits';
CREATE TEMP TABLE fencing AS
  SELECT "group", ts, mode, unnest(map_keys(f)) AS error, unnest(map_values(f)) AS n
  FROM (SELECT "group", ts, mode, json_transform(fenced, '"MAP(VARCHAR, BIGINT)"') AS f FROM events WHERE type = 'commits')
  UNION ALL SELECT "group", ts, mode, error, 1 FROM events WHERE type = 'member_fenced';
CREATE TEMP TABLE churn AS
  SELECT coalesce(client_id, '') AS client_id, coalesce(host, '') AS host, kind,
         count(*) FILTER (WHERE type = 'member_joined') AS joins, count(*) FILTER (WHERE type = 'member_left') AS leaves,
         count(*) FILTER (WHERE type = 'member_expired') AS expiries, count(DISTINCT "group") AS groups
  FROM events WHERE type IN ('member_joined', 'member_left', 'member_expired') GROUP BY ALL
"""

TABLES = ("events", "bad_events", "rebalances", "movement", "commits", "fencing", "churn")


def run(directory: str, threads: int = 2) -> dict[str, object]:
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads={int(threads)}")
    started = time.monotonic()
    for statement in SQL.format(directory=directory.rstrip("/")).split(";"):
        if statement.strip():
            con.execute(statement)
    rows = {}
    for name in TABLES:
        found = con.execute(f"SELECT count(*) FROM {name}").fetchone()
        rows[name] = int(found[0]) if found else 0
    return {"seconds": round(time.monotonic() - started, 1), "threads": threads, "rows": rows}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("directory")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    print(json.dumps(run(args.directory, args.threads)), flush=True)


if __name__ == "__main__":
    main()
