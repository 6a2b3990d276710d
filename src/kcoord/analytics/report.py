"""The self-contained HTML report: plots (PNG files in ``plots/``, also inlined as base64) and tables."""

from __future__ import annotations

import base64
import html
import json
import textwrap
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

TOP = 12
TABLE_ROWS = 20  # rows a table of the report shows
TITLE_WIDTH = 70  # characters per line of a plot title: a longer one wraps rather than being cut


def readable_time(ms: Any) -> str:
    """Epoch ms → ``2026-11-27 03:04:05.678 UTC`` ("" for a missing value)."""
    try:
        value = int(ms)
    except (TypeError, ValueError):
        return ""
    stamp = datetime.fromtimestamp(value / 1000, UTC)
    return stamp.strftime("%Y-%m-%d %H:%M:%S.") + f"{value % 1000:03d} UTC"


def is_time_column(name: str) -> bool:
    """The tables' epoch-ms columns: ``ts`` and ``*_ts``."""
    return name == "ts" or name.endswith("_ts")


def with_readable_times(pdf: Any) -> Any:
    """A copy of a table to show, its epoch-ms columns as UTC date-times."""
    shown = pdf.copy()
    for column in shown.columns:
        if is_time_column(str(column)):
            shown[column] = shown[column].map(readable_time)
    return shown


def time_axis(ax: Any, stamps_ms: Any) -> None:
    """Dates on an x axis as short readable labels (ConciseDateFormatter), whatever the span.
    ``stamps_ms``: the epoch-ms times plotted. All at one moment (a short history: a group that
    committed within one second; a broker that answers ListOffsets by timestamp with the log start,
    as tansu does), the axis spans a minute either side: matplotlib would stretch it over years."""
    import pandas as pd

    moments = pd.Series(stamps_ms).dropna().unique()
    if len(moments) == 1:
        moment = pd.to_datetime(moments[0], unit="ms")
        ax.set_xlim(moment - pd.Timedelta(minutes=1), moment + pd.Timedelta(minutes=1))
    # matplotlib leaves these two constructors unannotated.
    locator = matplotlib.dates.AutoDateLocator()  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(matplotlib.dates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]


def count_axis(axis: Any) -> None:
    """Counts on an axis as whole numbers with thousands separators (``1,400,000``), five ticks at
    most: not matplotlib's ``1e6`` offset, nor long labels run into each other."""
    axis.set_major_locator(matplotlib.ticker.MaxNLocator(nbins=5, integer=True))
    axis.set_major_formatter(matplotlib.ticker.StrMethodFormatter("{x:,.0f}"))


def _table(spark: Any, out: str, name: str) -> Any:
    from .tables import read_table

    return read_table(spark, out, name)


def _pdf(df: Any, columns: tuple[str, ...] = ()) -> Any:
    """A table as pandas: only ``columns`` (all when empty). Transferred as Arrow (the session's
    settings, :data:`kcoord.analytics.run.RUNTIME_CONF`): a column of a few distinct strings is one
    object per distinct string, not one per row."""
    import pandas as pd

    if df is None:
        return pd.DataFrame(columns=list(columns))
    return (df.select(*columns) if columns else df).toPandas()


@dataclass(frozen=True)
class CommitRates:
    """What the commit rate section shows: the busiest groups' totals and their sums per step."""

    totals: Any  # pandas: group, commits, requests, first_ts, last_ts (the busiest first)
    busiest: list[str]  # the groups plotted
    sums: Any  # pandas: group, step_ts, partitions
    step_ms: int


# What the report reads of the fencing table.
FENCING_COLUMNS = ("ts", "mode", "error", "n", "outcome", "api", "source")
# Tables read (and brought to pandas) at a time while the report is drawn. Drawing is the
# driver's Python alone; reading is Spark's jobs and Arrow's transfers: each table is read in
# another thread while the sections before it are drawn, in the order they are drawn.
REPORT_READERS = 2


class Frames:
    """The report's tables as pandas, each read in ``pool`` as soon as a reader is free, in the
    order the sections use them; :meth:`get` waits for one. (Every plot is drawn by the calling
    thread: pyplot is not thread-safe.)"""

    def __init__(self, pool: ThreadPoolExecutor, spark: Any, out: str, with_events: bool) -> None:
        def table(name: str, columns: tuple[str, ...] = ()) -> Callable[[], Any]:
            return lambda: _pdf(_table(spark, out, name), columns)

        readers: dict[str, Callable[[], Any]] = {
            "bad_events": table("bad_events"),
            "bad_offset_records": table("bad_offset_records"),
            "other_offset_records": table("other_offset_records"),
        }
        if with_events:
            readers.update(
                rebalances=table("rebalances", REBALANCE_COLUMNS),
                reconciliations=table("reconciliations"),
                commit_rate=lambda: commit_rates(_table(spark, out, "commits")),
                fencing=table("fencing", FENCING_COLUMNS),
                zombies=table("zombies"),
                churn=table("churn"),
            )
        readers["lag"] = table("lag")
        self._futures: dict[str, Future[Any]] = {name: pool.submit(read) for name, read in readers.items()}

    def get(self, name: str) -> Any:
        return self._futures[name].result()


class Report:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.plots = out / "plots"
        self.plots.mkdir(parents=True, exist_ok=True)
        self.parts: list[str] = []
        self.pngs: list[Path] = []

    def h2(self, text: str) -> None:
        self.parts.append(f"<h2>{html.escape(text)}</h2>")

    def p(self, text: str) -> None:
        self.parts.append(f"<p>{html.escape(text)}</p>")

    def table(self, pdf: Any, limit: int = TABLE_ROWS) -> None:
        if pdf is None or pdf.empty:
            self.p("(no rows)")
            return
        shown = with_readable_times(pdf.head(limit))
        self.parts.append(shown.to_html(index=False, border=0, classes="t", escape=True))

    def figure(self, name: str, title: str) -> Any:
        # constrained layout makes room for the (wrapped) title, labels and legend
        fig, ax = plt.subplots(figsize=(8, 3.6), dpi=100, layout="constrained")
        ax.set_title("\n".join(textwrap.wrap(title, TITLE_WIDTH)))
        return fig, ax

    def save(self, fig: Any, name: str) -> None:
        path = self.plots / f"{name}.png"
        fig.savefig(path)
        plt.close(fig)
        self.pngs.append(path)
        data = base64.b64encode(path.read_bytes()).decode()
        self.parts.append(f'<img alt="{html.escape(name)}" src="data:image/png;base64,{data}">')

    def write(self, title: str) -> Path:
        css = (
            "body{font-family:sans-serif;max-width:1000px;margin:auto}table.t{border-collapse:collapse;font-size:12px}"
            "table.t td,table.t th{padding:2px 6px;border-bottom:1px solid #ddd}img{max-width:100%}"
        )
        doc = (
            f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{css}</style></head><body><h1>{html.escape(title)}</h1>{''.join(self.parts)}</body></html>"
        )
        path = self.out / "report.html"
        path.write_text(doc)
        return path


def write_report(
    spark: Any, out: str | Path, summary: dict[str, Any], report_dir: Path | None = None
) -> Path:
    """The report of the tables under ``out`` (any Spark path), written to the local ``report_dir``
    (default: ``out``, when it is a local directory)."""
    report_dir = Path(out) if report_dir is None else report_dir
    out = str(out)
    r = Report(report_dir)
    rows = summary.get("rows", {})
    since = summary.get("since_ms")
    r.p(
        f"Source: {summary.get('source')}; since: {readable_time(since) if since else 'the beginning'}; "
        f"pipeline {summary.get('pipeline_seconds')} s. Rows: {json.dumps(rows)}"
    )
    n_events = rows.get("events", 0)
    with ThreadPoolExecutor(REPORT_READERS, thread_name_prefix="kcoord-report") as pool:
        frames = Frames(pool, spark, out, with_events=bool(n_events))
        if n_events == 0 and rows.get("offset_commits", 0) == 0:
            r.h2("No events")
            r.p(
                "The event topic holds no events for this period (and the offsets topic no commits): "
                "nothing to report. Is kcoord running with --events-topic set?"
            )
        _bad_input_section(r, frames.get("bad_events"), frames.get("bad_offset_records"), summary)
        other = frames.get("other_offset_records")
        if not other.empty:
            r.p(
                f"{summary.get('offsets_topic') or 'offsets topic'}: {int(other['records'].sum())} records of "
                "share or streams groups (or kcoord's shard fences), counted by type, not analysed."
            )
            r.table(other.groupby("record_type")["records"].sum().reset_index())
        if n_events:
            _rebalance_section(r, frames.get("rebalances"), frames.get("reconciliations"))
            _commit_rate_section(r, frames.get("commit_rate"))
            _fencing_section(r, frames.get("fencing"), frames.get("zombies"))
            _churn_section(r, frames.get("churn"))
        _lag_section(r, frames.get("lag"))
    path = r.write("kcoord analytics")
    summary["plots"] = [str(p) for p in r.pngs]
    if r.pngs:
        overview(r.pngs, report_dir / "overview.png")
    return path


def _bad_input_section(r: Report, bad_events: Any, bad_offsets: Any, summary: dict[str, Any]) -> None:
    """Records of either topic that were skipped, counted by problem, with a few samples: bad
    input is reported, never read as numbers."""
    r.h2("Bad input")
    topics = [(summary.get("events_topic") or "events topic", bad_events)]
    if not bad_offsets.empty or "bad_offset_records" in summary.get("rows", {}):
        topics.append((summary.get("offsets_topic") or "offsets topic", bad_offsets))
    for topic, bad in topics:
        if bad.empty:
            r.p(f"{topic}: no bad records.")
            continue
        r.p(f"{topic}: {len(bad)} records were skipped.")
        r.table(bad.groupby("problem").size().reset_index(name="records"))
        shown = [c for c in ("partition", "offset", "problem", "detail", "sample") if c in bad.columns]
        r.table(bad[shown], limit=5)


def overview(pngs: list[Path], path: Path, columns: int = 2) -> None:
    """One picture of the report's plots (docs/analytics.md shows one)."""
    import matplotlib.image as mpimg

    rows = (len(pngs) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(8 * columns, 3.6 * rows), dpi=60)
    for ax in fig.axes:
        ax.axis("off")
    for ax, png in zip(fig.axes, pngs, strict=False):
        ax.imshow(mpimg.imread(str(png)))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _last_known(values: Any) -> Any:
    """The last value that is not "unknown" (a generation no assignment described), else "unknown"."""
    known = [v for v in values if v is not None and v != "unknown"]
    return known[-1] if known else "unknown"


def per_group_rebalances(reb: Any) -> Any:
    """The per-group table of the report: rebalances, partitions moved, stop-the-world seconds, mean
    duration, and the group's protocol and protocol class as last known (in completion order)."""
    return (
        reb.sort_values("completed_ts")
        .groupby("group")
        .agg(
            rebalances=("generation", "count"),
            moved=("moved", "sum"),
            stw_partition_seconds=("stw_partition_seconds", "sum"),
            mean_duration_ms=("duration_ms", "mean"),
            protocol=("protocol", "last"),
            protocol_class=("protocol_class", _last_known),
        )
        .reset_index()
        .sort_values("rebalances", ascending=False)
    )


# What the report reads of the rebalances table (per_group_rebalances and the plots).
REBALANCE_COLUMNS = (
    "group",
    "generation",
    "completed_ts",
    "moved",
    "stw_partition_seconds",
    "duration_ms",
    "protocol",
    "protocol_class",
    "reason",
    "static_members",
)


def _rebalance_section(r: Report, reb: Any, rec: Any) -> None:
    r.h2("Rebalances")
    if reb.empty:
        r.p("No rebalance completed in this period.")
        return
    per_group = per_group_rebalances(reb)
    r.table(per_group)
    fig, ax = r.figure("rebalances_over_time", "Rebalances per group over time")
    import pandas as pd

    reb["time"] = pd.to_datetime(reb["completed_ts"], unit="ms")
    for group in per_group["group"].head(TOP):
        g = reb[reb["group"] == group].sort_values("time")
        ax.step(g["time"], range(1, len(g) + 1), where="post", label=str(group)[:30])
    ax.set_ylabel("rebalances (cumulative)")
    count_axis(ax.yaxis)
    time_axis(ax, reb["completed_ts"])
    ax.legend(fontsize=7)
    r.save(fig, "rebalances_over_time")
    # A KIP-848 rebalance's duration is the epoch bump to the new target assignment, computed at
    # once; the members' reconciliation (every member at the new epoch) is its own table.
    classic = reb[reb["protocol_class"] != "kip848"]
    fig, ax = r.figure("durations", "Rebalance duration distribution (classic protocol: join to stable)")
    ax.hist(classic["duration_ms"].clip(lower=0), bins=30)
    count_axis(ax.yaxis)
    ax.set_xlabel("ms")
    r.save(fig, "rebalance_durations")
    _reconciliation_section(r, rec)
    fig, ax = r.figure("causes", "Rebalance causes")
    reb["reason"].value_counts().plot.bar(ax=ax)
    count_axis(ax.yaxis)
    short_category_labels(ax)
    r.save(fig, "rebalance_causes")
    fig, ax = r.figure("stw", "Stop-the-world partition-seconds per group")
    per_group.head(TOP).set_index("group")["stw_partition_seconds"].plot.bar(ax=ax)
    short_category_labels(ax)
    r.save(fig, "stop_the_world")
    r.h2("State shuffling")
    r.p(
        "Partitions moved per rebalance (owned before it, not by the same owner after it), by protocol "
        "class and member kind; the quantity KIP-415/KIP-429 (incremental) and KIP-345 (static members) reduce."
    )
    reb["members_kind"] = reb["static_members"].map(lambda n: "static" if n > 0 else "dynamic")
    shuffle = (
        reb.groupby(["protocol_class", "protocol", "members_kind"])
        .agg(
            rebalances=("generation", "count"),
            moved=("moved", "sum"),
            moved_per_rebalance=("moved", "mean"),
        )
        .reset_index()
    )
    r.table(shuffle)
    fig, ax = r.figure("moved", "Partitions moved per group")
    per_group.head(TOP).set_index("group")["moved"].plot.bar(ax=ax)
    count_axis(ax.yaxis)
    short_category_labels(ax)
    r.save(fig, "partitions_moved")


def _reconciliation_section(r: Report, rec: Any) -> None:
    if rec is None or rec.empty:
        return
    r.h2("KIP-848 reconciliation")
    r.p(
        "From a group epoch bump until every member reported the target assignment (bumps that follow "
        "one another before the members settle count as one, timed from the first)."
    )
    per_group = (
        rec.groupby("group")
        .agg(
            reconciliations=("epoch", "count"),
            p50_ms=("duration_ms", "median"),
            max_ms=("duration_ms", "max"),
            last_epoch=("epoch", "max"),
        )
        .reset_index()
        .sort_values("reconciliations", ascending=False)
    )
    r.table(per_group)
    fig, ax = r.figure(
        "reconciliation", "KIP-848 reconciliation time (epoch bump to every member reconciled)"
    )
    ax.hist(rec["duration_ms"].clip(lower=0), bins=30)
    count_axis(ax.yaxis)
    ax.set_xlabel("ms")
    r.save(fig, "reconciliation_durations")


def short_category_labels(ax: Any, width: int = 24) -> None:
    """Bar labels (group names) cut to ``width`` characters and slanted, so none runs off the plot."""
    labels = [t.get_text() for t in ax.get_xticklabels()]
    ax.set_xticks(ax.get_xticks(), [t if len(t) <= width else t[: width - 1] + "…" for t in labels])
    ax.tick_params(axis="x", labelrotation=30)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")


def commit_rates(c: Any) -> CommitRates | None:
    """The commit rate section's numbers from the commits table ``c`` (None: no commits). Summed in
    Spark: the table has a row per group and second (most of the events), the plot a point per busy
    group and step."""
    from pyspark.sql import functions as F

    if c is None:
        return None
    # a row per group (the time span from them too: one pass over the commits, not two)
    groups = (
        c.groupBy("group")
        .agg(F.sum("partitions").alias("commits"), F.sum("requests").alias("requests"),
             F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"))
        .toPandas()
    )  # fmt: skip
    if groups.empty or groups["first_ts"].isna().all():
        return None
    lo, hi = groups["first_ts"].min(), groups["last_ts"].max()
    step_ms = 60_000 if hi - lo > 3_600_000 else 1000
    totals = (
        groups.sort_values(["commits", "group"], ascending=[False, True])
        .head(max(TOP, TABLE_ROWS))
        .reset_index(drop=True)
    )
    busiest = [str(group) for group in totals["group"].head(TOP)]
    sums = (
        c.where(F.col("group").isin(busiest))
        .groupBy("group", (F.col("ts") - F.col("ts") % step_ms).alias("step_ts"))
        .agg(F.sum("partitions").alias("partitions"))
        .toPandas()
    )
    return CommitRates(totals, busiest, sums, step_ms)


def _commit_rate_section(r: Report, rates: CommitRates | None) -> None:
    """Committed partitions per second for each group over time (from the per-second commit sums),
    the busiest groups; a minute's mean when the history is longer than an hour."""
    import pandas as pd

    r.h2("Commit rate")
    if rates is None:
        r.p("No commits in this period.")
        return
    totals, busiest, sums, step_ms = rates.totals, rates.busiest, rates.sums, rates.step_ms
    step = "1min" if step_ms == 60_000 else "1s"
    per_step = step_ms / 1000
    fig, ax = r.figure("commit_rate", f"Committed partitions per second per group ({step} steps)")
    for group in busiest:
        g = sums[sums["group"] == group].set_index("step_ts")["partitions"].sort_index()
        # every step from the group's first to its last, a step without commits at 0
        steps = range(int(g.index[0]), int(g.index[-1]) + step_ms, step_ms)
        g = g.reindex(steps, fill_value=0) / per_step
        # markers: a group that committed in one step only is a point, not an invisible line
        ax.plot(pd.to_datetime(g.index, unit="ms"), g.values, marker="o", markersize=3, label=str(group)[:30])
    ax.set_ylabel("partitions committed / s")
    time_axis(ax, sums["step_ts"])
    ax.legend(fontsize=7)
    r.save(fig, "commit_rate")
    r.table(totals)


def _fencing_section(r: Report, f: Any, z: Any) -> None:
    r.h2("Fenced and rejected commits")
    if f.empty:
        r.p("No fenced or rejected requests.")
    else:
        commits = f[f["source"] == "commits"]
        by = commits.groupby(["outcome", "error", "mode"])["n"].sum().reset_index()
        r.table(by)
        if not by.empty:
            fig, ax = r.figure("fenced", "Refused commits by error and fencing mode")
            labels = by["outcome"] + ": " + by["error"] + " (" + by["mode"].fillna("?") + ")"
            ax.barh(labels, by["n"])
            count_axis(ax.xaxis)
            ax.set_xlabel("commits")
            r.save(fig, "fenced_commits")
            _fencing_over_time(r, f)
        r.table(f[f["source"] == "member_fenced"].groupby(["api", "error", "mode"])["n"].sum().reset_index())
    r.h2("Zombie members")
    if z.empty:
        r.p("No fenced members.")
    else:
        z = z[z["zombie"]]
        r.p(f"{len(z)} members kept sending requests after they were fenced, left or replaced.")
        r.table(z[["group", "member", "instance", "fenced_requests", "client_id", "host"]])


def _fencing_over_time(r: Report, fencing: Any) -> None:
    """Fenced commits and requests over time, one line per fencing mode (cumulative)."""
    import pandas as pd

    fenced = fencing[fencing["outcome"] == "fenced"].copy()
    if fenced.empty:
        return
    fenced["time"] = pd.to_datetime(fenced["ts"], unit="ms")
    fenced["mode"] = fenced["mode"].fillna("unknown")
    fig, ax = r.figure("fenced_over_time", "Fenced requests over time by fencing mode (cumulative)")
    for mode, g in fenced.sort_values("time").groupby("mode"):
        ax.step(g["time"], g["n"].cumsum(), where="post", marker="o", markersize=3, label=str(mode))
    ax.set_ylabel("fenced (cumulative)")
    count_axis(ax.yaxis)
    time_axis(ax, fenced["ts"])
    ax.legend(fontsize=7)
    r.save(fig, "fenced_over_time")


def _churn_section(r: Report, c: Any) -> None:
    r.h2("Member churn")
    if c.empty:
        r.p("No members joined or left.")
        return
    c = c.sort_values("joins", ascending=False)
    r.table(c)
    fig, ax = r.figure("churn", "Joins, leaves and session expiries per client id")
    by = c.groupby("client_id")[["joins", "static_rejoins", "leaves", "expiries"]].sum().head(TOP)
    by.plot.bar(ax=ax, stacked=True)
    count_axis(ax.yaxis)
    short_category_labels(ax)
    r.save(fig, "member_churn")


def _lag_section(r: Report, lag: Any) -> None:
    r.h2("Consumer lag")
    if lag.empty:
        r.p("No committed offsets (or no end offsets) in this period.")
        return
    import pandas as pd

    per = lag.groupby(["group", "ts"])["lag"].sum(min_count=1).reset_index().dropna()
    fig, ax = r.figure("lag", "Consumer lag per group over time (records)")
    for group, g in list(per.groupby("group"))[:TOP]:
        ax.plot(pd.to_datetime(g["ts"], unit="ms"), g["lag"], marker="o", label=str(group)[:30])
    time_axis(ax, per["ts"])
    ax.legend(fontsize=7)
    r.save(fig, "consumer_lag")
    r.table(per.sort_values("ts").groupby("group").tail(1))
