"""``python -m bench.spark``: the same contest on Spark + Iceberg, in a local Spark session.

Per scale factor, TPC-H is generated with DuckDB's dbgen and loaded into Iceberg tables
(namespace ``tpch_sf<sf>``); one view per supported query is set up with
``duckstream.spark.setup`` (the DuckDB query text transpiled to Spark SQL by sqlglot). Per
workload, the batch is the one the DuckDB benchmark commits (the same generators, run on a
DuckDB copy of the data); its rows are applied to the Iceberg tables as Spark commits:
``append`` inserts orders and lineitems, ``mixed`` also deletes orders with their lineitems
(Iceberg copy-on-write: the data files holding them are rewritten), ``update`` merges new
values into 0.1% of the lineitems. Then, per query and repetition:

* **auto**: ``duckstream.spark.refresh(strategy="auto")``, the estimate from Iceberg metadata
  included: what users get; which path it took and why are in the report. Auto calibrates
  on the view's measured refreshes, so two untimed auto refreshes of the window (rolled
  back) come first, as a user's first refreshes: the timed ones show its settled choice;
* **incremental**: ``refresh(strategy="incremental")`` (the change read from Iceberg's
  changelog, one ``MERGE`` into the view carrying its cursors);
* after each refresh the view's table is rolled back to its snapshot before it, so every
  refresh applies the same window;
* **recompute**: ``CREATE OR REPLACE TABLE ... AS`` the query;
* **floor**: counting the window's changelog rows of the touched sources;
* a check that every refreshed view equals recomputation (as multisets).

Writes ``docs/benchmarks_spark.md`` (medians). Timings are wall clock and include Spark's
job scheduling: on a 2-core laptop-sized machine that fixed cost dominates small batches.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import math
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from bench.run import SUPPORTED, query_order
from duckstream import UnsupportedSQLError, compile_ivm
from duckstream.normalize.number_rows import break_ties_sql
from duckstream.plan import IVMPlan
from duckstream.testing.differential import as_multiset, multiset_diff
from duckstream.testing.ducklake import load_extension
from duckstream.testing.spark_harness import to_spark
from duckstream.testing.tpch import TABLES, tpch_schema
from duckstream.testing.tpch import WORKLOADS as GENERATORS
from duckstream.testing.tpch import tpch_view as _tpch_view

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = {
    "append": ("append", "0.1% new orders with their lineitems", 1),
    "mixed": ("mixed", "0.1% new orders + 0.1% of orders deleted, with lineitems", 2),
    "update": ("update_lineitem", "0.1% of lineitem rows updated", 3),
}
KEYS = {"orders": ["o_orderkey"], "lineitem": ["l_orderkey", "l_linenumber"]}
# Spark on 2 cores: whole-stage code generation pays off on millions of rows, so it stays on
# (unlike the test suite's tiny tables); no waiting for locality.
SPARK_CONF = {
    "spark.driver.memory": "3g",
    "spark.locality.wait": "0",
    "spark.sql.shuffle.partitions": "4",
}


ENVIRONMENT_KEYS = ("command", "date", "spark", "cpus", "load", "reps")
# Views without aggregates (bags), beside the TPC-H queries: one that only grows on appends
# (an inner join: an INSERT applies a window of appends), to compare with the MERGE.
BAG_VIEWS = {
    "lines": (
        "SELECT o_orderkey, o_orderdate, l_linenumber, l_extendedprice FROM orders"
        " JOIN lineitem ON l_orderkey = o_orderkey WHERE l_quantity > 45"
    ),
}
VIEWS = (*SUPPORTED, *BAG_VIEWS)
# Iceberg's row-level write modes: copy-on-write (the default: a delete rewrites the data
# files holding the rows) or merge-on-read (a delete writes delete files beside them).
MERGE_ON_READ = {f"write.{op}.mode": "merge-on-read" for op in ("delete", "update", "merge")}


def tpch_view(name: str) -> str:
    """A benchmark view's DuckDB SQL: a bag view of :data:`BAG_VIEWS` or ``testing.tpch``'s."""
    return BAG_VIEWS.get(name) or _tpch_view(name)


@dataclass
class Row:
    sf: float
    workload: str
    query: str
    auto: list[float] = field(default_factory=list)
    incremental: list[float] = field(default_factory=list)
    recompute: list[float] = field(default_factory=list)
    floor: float = 0.0
    source_commit: float = 0.0  # ms the workload's commits to the sources took
    incremental_rebuilt: str = ""  # why incremental rebuilt, if it did (merge-on-read)
    equal: bool = True
    picks: list[tuple[str, str]] = field(default_factory=list)  # auto's (strategy, reason)
    estimate: list[float] = field(default_factory=list)  # ms of auto's estimate

    @property
    def picked(self) -> tuple[str, str]:
        """The strategy auto took most often, and its reason the first time."""
        strategy = collections.Counter(s for s, _ in self.picks).most_common(1)[0][0]
        return strategy, next(r for s, r in self.picks if s == strategy)


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # query -> why Spark refuses it


@dataclass
class Batch:
    """A workload's changes, as parquet files and key lists Spark can apply."""

    inserted: dict[str, Path]  # table -> parquet of rows to insert
    deleted: dict[str, Path]  # table -> parquet of the deleted rows' keys
    updated: dict[str, Path]  # table -> parquet of the updated rows' new values
    counts: dict[str, dict[str, int]]


def generate(sf: float, directory: Path) -> duckdb.DuckDBPyConnection:
    """TPC-H at ``sf`` in an in-memory DuckDB, every table also written to parquet."""
    con = duckdb.connect()
    load_extension(con, "tpch")
    con.execute(f"CALL dbgen(sf = {sf})")
    directory.mkdir(parents=True, exist_ok=True)
    for table in TABLES:
        con.execute(f"COPY {table} TO '{directory / table}.parquet' (FORMAT parquet)")
    return con


def make_batch(con: duckdb.DuckDBPyConnection, workload: str, out: Path) -> Batch:
    """Run the DuckDB benchmark's generator on a copy of orders/lineitem; diff by key."""
    generator, _, seed = WORKLOADS[workload]
    out.mkdir(parents=True, exist_ok=True)
    con.execute("CREATE OR REPLACE SCHEMA work")
    for table in TABLES:
        source = f"memory.main.{table}"
        if table in KEYS:
            con.execute(f"CREATE TABLE work.{table} AS SELECT * FROM {source}")
        else:
            con.execute(f"CREATE VIEW work.{table} AS SELECT * FROM {source}")
    GENERATORS[generator](con, "memory", random.Random(seed), 0.001, schema="work")
    batch = Batch({}, {}, {}, {})
    for table, keys in KEYS.items():
        on = " AND ".join(f"a.{k} = b.{k}" for k in keys)
        before, after = f"memory.main.{table}", f"work.{table}"
        files = {
            "inserted": f"SELECT a.* FROM {after} a ANTI JOIN {before} b ON {on}",
            "deleted": f"SELECT {', '.join('a.' + k for k in keys)} FROM {before} a"
            f" ANTI JOIN {after} b ON {on}",
            "updated": f"SELECT a.* FROM {after} a SEMI JOIN {before} b ON {on}"
            f" EXCEPT ALL SELECT * FROM {before}",
        }
        counts = {}
        for kind, query in files.items():
            found = con.execute(f"SELECT count(*) FROM ({query})").fetchone()
            n = int(found[0]) if found else 0
            counts[kind] = n
            if n:
                path = out / f"{table}_{kind}.parquet"
                con.execute(f"COPY ({query}) TO '{path}' (FORMAT parquet)")
                getattr(batch, kind)[table] = path
        batch.counts[table] = counts
    con.execute("DROP SCHEMA work CASCADE")
    return batch


def _snapshot(spark: SparkSession, table: str) -> int:
    rows = spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").collect()
    return int(rows[0][0])


def apply_batch(spark: SparkSession, namespace: str, batch: Batch) -> dict[str, tuple[int, int]]:
    """Commit the batch's changes; returns each touched table's (before, after) snapshot."""
    windows: dict[str, tuple[int, int]] = {}
    for table, keys in KEYS.items():
        fqn = f"lake.{namespace}.{table}"
        before = _snapshot(spark, fqn)
        match = " AND ".join(f"t.{k} = c.{k}" for k in keys)
        if table in batch.deleted:
            spark.sql(
                f"MERGE INTO {fqn} t USING parquet.`{batch.deleted[table]}` c ON {match}"
                " WHEN MATCHED THEN DELETE"
            )
        if table in batch.updated:
            spark.sql(
                f"MERGE INTO {fqn} t USING parquet.`{batch.updated[table]}` c ON {match}"
                " WHEN MATCHED THEN UPDATE SET *"
            )
        if table in batch.inserted:
            spark.sql(f"INSERT INTO {fqn} SELECT * FROM parquet.`{batch.inserted[table]}`")
        after = _snapshot(spark, fqn)
        if after != before:
            windows[table] = (before, after)
    return windows


def roll_back(spark: SparkSession, namespace: str, windows: dict[str, tuple[int, int]]) -> None:
    """Undo a batch: the sources back at their snapshots before it (the views' cursors)."""
    for table, (before, _) in windows.items():
        spark.sql(f"CALL lake.system.rollback_to_snapshot('{namespace}.{table}', {before})")


def compile_views(namespace: str, queries: list[str]) -> tuple[dict[str, IVMPlan], dict[str, str]]:
    """The plans of the queries the Spark engine maintains, and why it refuses the others."""
    plans, refused = {}, {}
    for q in queries:
        try:
            plans[q] = compile_ivm(
                to_spark(tpch_view(q)),
                dialect="spark",
                mv_name=f"mv_q{q}",
                mv_catalog="lake",
                mv_schema=namespace,
                schema=tpch_schema(),  # keeps Spark's DECIMAL types of Q8, Q14, Q17
            )
        except UnsupportedSQLError as error:
            refused[q] = str(error)
    return plans, refused


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) * 1000


def measure(
    spark: SparkSession,
    namespace: str,
    plans: dict[str, IVMPlan],
    windows: dict[str, tuple[int, int]],
    sf: float,
    workload: str,
    reps: int,
    log: Callable[[str], None],
    source_commit: float = 0.0,
) -> list[Row]:
    rows = []
    for q, plan in plans.items():
        row = Row(sf, workload, q, source_commit=source_commit)
        spark.sql(f"USE lake.{namespace}")
        spark.sql(to_spark(tpch_view(q))).collect()  # warm: file listings, JIT
        _settle_auto(spark, plan)
        for _ in range(reps):
            _repetition(spark, namespace, plan, row, log)
        row.floor = _floor(spark, namespace, plan, windows)
        log(
            f"  q{q:<8} auto {statistics.median(row.auto):8,.0f} ms ({row.picked[0]:<11}"
            f" estimate {statistics.median(row.estimate):5,.0f})"
            f"  incremental {statistics.median(row.incremental):8,.0f}"
            f"  recompute {statistics.median(row.recompute):8,.0f}  floor {row.floor:6,.0f}"
            f"  {'equal' if row.equal else 'DIFFERENT'}"
            + (
                f"  (incremental rebuilt: {row.incremental_rebuilt})"
                * bool(row.incremental_rebuilt)
            )
        )
        rows.append(row)
    return rows


def _settle_auto(spark: SparkSession, plan: IVMPlan, runs: int = 2) -> None:
    """Untimed ``auto`` refreshes of the window, each rolled back, as a user's first
    refreshes: auto calibrates on the view's measured refreshes (its first a rebuild when
    the model says so, its next one trying the refresh), so the timed ones show its
    settled choice."""
    from duckstream.spark import refresh

    name = plan.mv_table.split(".", 1)[1]
    start = _snapshot(spark, plan.mv_table)
    for _ in range(runs):
        refresh(spark, plan, strategy="auto", rebuild=True)
        spark.sql(f"CALL lake.system.rollback_to_snapshot('{name}', {start})")


def _repetition(
    spark: SparkSession, namespace: str, plan: IVMPlan, row: Row, log: Callable[[str], None]
) -> None:
    """Recompute the query, then refresh the view with auto and with incremental, each
    compared with the recomputation and rolled back (the next one applies the same window)."""
    from duckstream.spark import refresh

    table = f"lake.{namespace}.bench_recompute_q{row.query}"
    view = break_ties_sql(tpch_view(row.query), "duckdb")  # a top-k: the view's tie-break
    recompute = f"CREATE OR REPLACE TABLE {table} AS {to_spark(view)}"
    row.recompute.append(_timed(lambda: spark.sql(recompute)))
    expected = as_multiset([tuple(r) for r in spark.table(table).collect()])
    start = _snapshot(spark, plan.mv_table)
    for strategy, times in (("auto", row.auto), ("incremental", row.incremental)):
        began = time.perf_counter()
        # rebuild=True: a window Iceberg cannot read (merge-on-read delete files) is rebuilt
        report = refresh(spark, plan, strategy=strategy, rebuild=True)
        times.append((time.perf_counter() - began) * 1000)
        if strategy == "incremental" and report.strategy == "full":
            row.incremental_rebuilt = report.reason
        if strategy == "auto":
            row.picks.append((report.strategy, report.reason))
            row.estimate.append(report.estimate_seconds * 1000)
        actual = as_multiset([tuple(r) for r in spark.sql(plan.query_mv).collect()])
        if expected != actual:
            row.equal = False
            log(f"Q{row.query} ({strategy}) differs:\n{multiset_diff(expected, actual)}")
        name = plan.mv_table.split(".", 1)[1]
        spark.sql(f"CALL lake.system.rollback_to_snapshot('{name}', {start})")


def _floor(
    spark: SparkSession, namespace: str, plan: IVMPlan, windows: dict[str, tuple[int, int]]
) -> float:
    """Reading the window's rows of the sources ``plan`` reads, as a refresh reads them."""
    touched = [t for t in windows if t in {s.table for s in plan.sources}]
    appends = {t for t in touched if _appends_only(spark, f"lake.{namespace}.{t}", *windows[t])}

    def read() -> None:
        for table in touched:
            before, after = windows[table]
            if table in appends:  # as the refresh reads it: the incremental append scan
                spark.read.format("iceberg").option("start-snapshot-id", str(before)).option(
                    "end-snapshot-id", str(after)
                ).load(f"lake.{namespace}.{table}").count()
                continue
            if _has_delete_files(spark, f"lake.{namespace}.{table}", *windows[table]):
                raise _NoChangelog
            spark.sql(
                f"CALL lake.system.create_changelog_view(table => '{namespace}.{table}',"
                f" options => map('start-snapshot-id', '{before}', 'end-snapshot-id',"
                f" '{after}'), changelog_view => 'bench_floor_{table}')"
            )
            spark.sql(f"SELECT count(*) FROM bench_floor_{table}").collect()

    try:
        return _timed(read)
    except _NoChangelog:  # merge-on-read: Iceberg's changelog refuses delete files
        return math.nan


class _NoChangelog(Exception):
    pass


def _appends_only(spark: SparkSession, table: str, before: int, after: int) -> bool:
    """Whether ``table``'s snapshots after ``before`` up to ``after`` only append rows."""
    from duckstream.engines.iceberg import window as iceberg_window

    log = iceberg_window._read_log(spark, table, before, data=False)
    window = log.since(before) if log.current == after else None
    return window is not None and all(s.operation in iceberg_window.APPENDS for s in window)


def _has_delete_files(spark: SparkSession, table: str, before: int, after: int) -> bool:
    """Whether ``table``'s snapshots after ``before`` up to ``after`` hold delete files."""
    rows = spark.sql(
        f"SELECT max(CAST(summary['total-delete-files'] AS BIGINT)) FROM {table}.snapshots"
        f" WHERE snapshot_id IN ({before}, {after})"
    ).collect()
    return bool(rows[0][0])


def load(
    spark: SparkSession, namespace: str, parquet: Path, *, merge_on_read: bool = False
) -> None:
    """The TPC-H tables into Iceberg; with ``merge_on_read``, their row-level writes set to
    merge-on-read (:data:`MERGE_ON_READ`)."""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{namespace}")
    for table in TABLES:
        frame = spark.read.parquet(str(parquet / f"{table}.parquet"))
        writer = frame.writeTo(f"lake.{namespace}.{table}").using("iceberg")
        for key, value in (MERGE_ON_READ if merge_on_read else {}).items():
            writer = writer.tableProperty(key, value)
        writer.createOrReplace()


def markdown(results: Results, environment: dict[str, str]) -> str:
    rows = results.rows
    lines = [
        "# Benchmark: incremental refresh against recomputation on Spark + Iceberg",
        "",
        f"Generated by `{environment['command']}` on {environment['date']}: Spark"
        f" {environment['spark']} (local session, {environment['cpus']} cores), Iceberg"
        " tables in a Hadoop catalog on local disk; load average"
        f" {environment['load']}. Medians of repetitions ({environment['reps']}), wall clock, ms.",
        "",
        "- **auto**: `duckstream.spark.refresh(strategy='auto')`, the estimate from Iceberg"
        " metadata included: what users get, after two untimed auto refreshes of the batch"
        " (auto calibrates on the view's measured refreshes); **auto picks** is the path it"
        " chose, **estimate** the time auto spent reading the metadata and deciding.",
        "- **incremental**: `refresh(strategy='incremental')` (changelog reads, one `MERGE`"
        " carrying the cursors). The view is rolled back after each refresh, so each applies"
        " the same batch.",
        "- **recompute**: `CREATE OR REPLACE TABLE ... AS` the query.",
        "- **floor**: counting the batch's rows of the touched sources as a refresh reads"
        " them: Iceberg's incremental append scan for a window of appends, its changelog"
        " otherwise.",
        "- **equal**: auto and incremental both equal recomputation (as multisets) in every"
        " repetition.",
        "",
    ]
    for q, why in sorted(results.refused.items(), key=lambda item: query_order(item[0])):
        lines.append(f"Q{q} is not in the tables: the Spark engine refuses it ({why}).")
    if results.refused:
        lines.append("")
    keys = sorted(
        {(r.sf, r.workload) for r in rows}, key=lambda k: (k[0], list(WORKLOADS).index(k[1]))
    )
    for sf, workload in keys:
        part = [r for r in rows if (r.sf, r.workload) == (sf, workload)]
        part.sort(key=lambda r: query_order(r.query))
        lines += [
            f"## SF {sf:g}, {workload}: {WORKLOADS[workload][1]}",
            "",
            f"The batch's commits to the sources took {part[0].source_commit:,.0f} ms.",
            "",
            "| Q | auto picks | auto | estimate | incremental | recompute | floor"
            " | recompute ÷ auto | recompute ÷ incremental | incremental ÷ floor | equal |",
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|:-:|",
        ]
        for r in part:
            auto, incremental = statistics.median(r.auto), statistics.median(r.incremental)
            recompute = statistics.median(r.recompute)
            lines.append(
                f"| {r.query} | {r.picked[0]} | {auto:,.0f} | {statistics.median(r.estimate):,.0f}"
                f" | {incremental:,.0f} | {recompute:,.0f}"
                f" | {r.floor:,.0f} | {recompute / auto:.2f}x | {recompute / incremental:.2f}x"
                f" | {incremental / max(r.floor, 1):.1f}x | {'yes' if r.equal else '**no**'} |"
            )
        geo_auto = _geomean(
            [statistics.median(r.recompute) / statistics.median(r.auto) for r in part]
        )
        geo = _geomean(
            [statistics.median(r.recompute) / statistics.median(r.incremental) for r in part]
        )
        lines += [f"| geo-mean | | | | | | | {geo_auto:.2f}x | {geo:.2f}x | | |", ""]
        rebuilt = [r for r in part if r.incremental_rebuilt]
        if rebuilt:
            lines += [
                "incremental rebuilt "
                + ", ".join(f"Q{r.query}" for r in rebuilt)
                + f": {rebuilt[0].incremental_rebuilt}",
                "",
            ]
    lines += ["## What auto chose, and why (the reason of the first query of each kind)", ""]
    for sf, workload in keys:
        part = [r for r in rows if (r.sf, r.workload) == (sf, workload)]
        part.sort(key=lambda r: query_order(r.query))
        picks = []
        for strategy in ("incremental", "full"):
            chosen = [r for r in part if r.picked[0] == strategy]
            if chosen:
                queries = ", ".join(f"Q{r.query}" for r in chosen)
                picks.append(
                    f"**{strategy}** for {queries} (Q{chosen[0].query}: {chosen[0].picked[1]})"
                )
        lines.append(f"- SF {sf:g} {workload}: " + "; ".join(picks))
    return "\n".join(lines) + "\n"


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in values) / len(values))


def run(
    spark: SparkSession,
    work: Path,
    sfs: list[float],
    queries: list[str],
    workloads: list[str],
    reps: int | list[int],
    log: Callable[[str], None],
    done: Callable[[Results], None] = lambda results: None,
    *,
    merge_on_read: bool = False,
) -> Results:
    """Every (scale factor, workload, query) measured; ``work`` holds the generated files.
    ``reps``: one count, or one per scale factor; ``done`` sees the rows after each workload
    (the report is rewritten as results come in: a long run stopped early keeps them)."""
    from duckstream.spark import setup

    counts = reps if isinstance(reps, list) else [reps] * len(sfs)
    results = Results()
    for sf, sf_reps in zip(sfs, counts, strict=True):
        namespace = f"tpch_sf{sf:g}".replace(".", "_")
        log(f"SF {sf:g}: generating TPC-H, loading it into Iceberg, setting up the views")
        con = generate(sf, work / namespace)
        load(spark, namespace, work / namespace, merge_on_read=merge_on_read)
        plans, refused = compile_views(namespace, queries)
        for q, why in refused.items():
            log(f"SF {sf:g}: Q{q} is not maintainable on Spark: {why}")
            results.refused[q] = why
        for plan in plans.values():
            setup(spark, plan)
        for workload in workloads:
            batch = make_batch(con, workload, work / f"{namespace}-{workload}")
            began = time.perf_counter()
            windows = apply_batch(spark, namespace, batch)
            committed = (time.perf_counter() - began) * 1000
            log(f"SF {sf:g} {workload}: {batch.counts}, committed in {committed:,.0f} ms")
            results.rows += measure(
                spark, namespace, plans, windows, sf, workload, sf_reps, log, committed
            )
            roll_back(spark, namespace, windows)
            done(results)
        con.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spark", description=__doc__)
    parser.add_argument("--sf", type=float, nargs="+", default=[0.1, 1.0])
    parser.add_argument("--queries", nargs="+", default=list(SUPPORTED), choices=VIEWS)
    parser.add_argument(
        "--merge-on-read",
        action="store_true",
        help="create the sources with merge-on-read row-level writes (write.delete.mode,"
        " write.update.mode, write.merge.mode): deletes write delete files",
    )
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument(
        "--reps", type=int, nargs="+", default=[3], help="repetitions, or one count per --sf"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks_spark.md")
    args = parser.parse_args(argv)
    from duckstream.spark import local_session

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if len(args.reps) not in (1, len(args.sf)):
        parser.error("--reps takes one count, or one per --sf")
    reps = args.reps if len(args.reps) > 1 else args.reps * len(args.sf)
    environment = {
        "command": " ".join(["python -m bench.spark", *(argv or sys.argv[1:])]),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": str(os.cpu_count()),
        "reps": " / ".join(f"{r} at SF {sf:g}" for r, sf in zip(reps, args.sf, strict=True)),
    }

    def write(results: Results) -> None:
        environment["load"] = "/".join(f"{x:.1f}" for x in os.getloadavg())
        args.out.write_text(markdown(results, environment))

    with tempfile.TemporaryDirectory(prefix="duckstream-bench-spark-") as tmp:
        work = Path(tmp)
        spark = local_session(
            str(work / "warehouse"), app_name="duckstream-bench", extra_conf=SPARK_CONF
        )
        environment["spark"] = spark.version
        results = run(
            spark,
            work,
            args.sf,
            args.queries,
            args.workloads,
            reps,
            log,
            write,
            merge_on_read=args.merge_on_read,
        )
        spark.stop()
    log(f"wrote {args.out}")
    return 0 if all(r.equal for r in results.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
