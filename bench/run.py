"""The measurement loop: lakes, views, change batches and, per query, every way to refresh.

Per scale factor: copy the TPC-H template, set up one view per query (``mv_q<n>``) and keep
that lake. Per workload: copy it, give every view a history (``history`` earlier batches of
the same workload, each refreshed by auto, untimed: auto learns each path's time from them,
as it does on a schedule) and commit the workload's measured batch (one snapshot). Per
repetition, two fresh copies of that lake, so every repetition refreshes the same batch:

* pass A, per query (after running the query once, untimed, to warm the caches):
  ``refresh(strategy="auto")`` (estimate included), recomputation
  (``CREATE OR REPLACE TABLE lake.main.bench_recompute_q<n> AS`` the query), a check that the
  view equals it, and the floor: reading the window's inserted and deleted rows of the
  touched sources (the columns the query uses) from ``ducklake_table_insertions/deletions``;
* pass B, per query, each path on a connection of its own (warmed the same way):
  ``refresh(strategy="incremental")``, the rows it wrote to the view's table (from the table's
  own change feed) and a check; then ``refresh(strategy="full")`` (a rebuild at the same
  snapshot) and a check. Each path runs first on its connection, as auto's path does in pass A
  and in a scheduled run: the first statement to read a view's table on a connection waits for
  DuckLake to load that table's metadata, and a rebuild run after the refresh on the same
  connection skipped that wait (TPC-H Q1: 56 against 69 ms at SF 0.1, 196 against 211 ms at
  SF 1), which made the rebuild look up to a fifth cheaper than it is.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import duckdb
import sqlglot
from sqlglot import exp

from bench import lakes
from bench.measure import Sample, measure
from duckstream import compile_ivm
from duckstream.engines.ducklake.runner import refresh
from duckstream.normalize.number_rows import break_ties_sql
from duckstream.plan import IVMPlan
from duckstream.runtime import setup
from duckstream.testing.differential import as_multiset, multiset_diff
from duckstream.testing.ducklake import current_snapshot
from duckstream.testing.tpch import WORKLOADS as GENERATORS
from duckstream.testing.tpch import tpch_schema, tpch_view

# TPC-H query numbers (``tpch_view``); ``13_inner`` is Q13 with its LEFT OUTER JOIN made inner,
# to set the outer join's refresh cost against the inner join's. Queries 2, 4, 11, 15, 16, 17,
# 18, 20, 21 and 22 have subqueries (decorrelated into joins; Q21's EXISTS / NOT EXISTS are
# correlated by an inequality). ``tests/test_bench_smoke.py`` checks that every query listed
# compiles.
# ``<n>_limit``: the query with its ORDER BY ... LIMIT kept (top-k); ``dedup``: dbt's dedup
# idiom over orders (``tpch.NAMED_VIEWS``).
SUPPORTED = (
    *("1", "2", "3", "3_limit", "4", "5", "6", "7", "8", "9", "10", "10_limit", "11", "12"),
    *("13", "13_inner", "14", "15", "16", "17", "18", "18_limit", "19", "20", "21", "22"),
    "dedup",
)


def query_order(query: str) -> tuple[int, str]:
    """Sort key of a benchmark view's name: by query number, a variant after its query, the
    named views last."""
    number, _, variant = query.partition("_")
    return (int(number), variant) if number.isdigit() else (100, query)


LAKE = lakes.LAKE


@dataclass(frozen=True)
class Workload:
    """One committed change batch: ``generator`` from ``duckstream.testing.tpch``."""

    name: str
    generator: str
    fraction: float
    description: str
    seed: int
    fixed_size_of: float | None = None  # scaling variant: the change size at this SF
    layout: str = "bulk"  # the lake it runs on (bench.lakes.LAYOUTS)

    def at(self, sf: float) -> float:
        """The generator's fraction at ``sf`` (scaled up for a fixed-size variant)."""
        if self.fixed_size_of is None:
            return self.fraction
        return self.fraction * self.fixed_size_of / sf

    @property
    def key(self) -> str:
        if self.fixed_size_of is None:
            return self.name
        return f"{self.name}@sf{self.fixed_size_of:g}"


WORKLOADS = {
    "append": Workload("append", "append", 0.001, "0.1% new orders with their lineitems", 1),
    "mixed": Workload(
        "mixed", "mixed", 0.001, "0.1% new orders + 0.1% of orders deleted, with lineitems", 2
    ),
    "update": Workload("update", "update_lineitem", 0.001, "0.1% of lineitem rows updated", 3),
    # the other batches change only orders and lineitem: Q2, Q11 and Q16 read neither
    "dimensions": Workload(
        "dimensions",
        "update_dimensions",
        0.001,
        "0.1% of customer, part, supplier and partsupp rows updated",
        5,
    ),
    "large": Workload("large", "large", 0.05, "5% new + 5% deleted orders, with lineitems", 4),
    # on a lake grown by monthly appends (bench.lakes "monthly"), late changes to recent data
    "monthly_append": Workload(
        "monthly_append",
        "append",
        0.001,
        "0.1% new orders with their lineitems, on a lake grown by monthly appends",
        8,
        layout="monthly",
    ),
    "recent_update": Workload(
        "recent_update",
        "recent_update",
        0.001,
        "0.1% of lineitem rows updated, all of the newest 2% of orders, on a lake grown by"
        " monthly appends",
        6,
        layout="monthly",
    ),
    "recent_delete": Workload(
        "recent_delete",
        "recent_delete",
        0.001,
        "0.1% of orders deleted with their lineitems, all among the newest 2%, on a lake grown"
        " by monthly appends",
        7,
        layout="monthly",
    ),
}
SCALING = ("append", "mixed", "update")  # fixed-size variants for the scaling view


@dataclass
class Batch:
    sf: float
    workload: Workload
    before: int  # snapshot before the batch
    after: int  # snapshot of the batch
    counts: dict[str, dict[str, int]]

    @property
    def tables(self) -> set[str]:
        return {t for t, c in self.counts.items() if any(c.values())}


@dataclass
class Run:
    """One query, one repetition."""

    sf: float
    workload: str  # Workload.key
    query: str
    rep: int
    auto_strategy: str
    auto_reason: str
    estimate_ms: float
    auto: Sample
    incremental: Sample
    full: Sample
    recompute: Sample
    floor: Sample
    mv_rows_written: int
    equal: bool
    change_rows: dict[str, int] = field(default_factory=dict)
    # auto's estimate of each source (SourceEstimate's fields), to re-fit the cost model's
    # constants offline against the measured paths
    estimates: dict[str, dict[str, int]] = field(default_factory=dict)
    # the sources' exact changes when auto copied them, netted, before deciding (else None)
    netted: dict[str, dict[str, int]] | None = None
    # the view's measurements auto read (History's fields; None: results before it did)
    measured: dict | None = None
    # per path ("auto", "incremental", "full"), the refresh's phases: [name, seconds,
    # statements] (RefreshReport.phases; empty: results before they were recorded)
    phases: dict[str, list[list]] = field(default_factory=dict)


@dataclass
class Config:
    sfs: Sequence[float]
    queries: Sequence[str] = SUPPORTED
    workloads: Sequence[str] = tuple(WORKLOADS)
    reps: int = 3
    history: int = 3  # auto's untimed batches before the measured one (:func:`commit_batch`)
    scaling: bool = True
    cache: Path = lakes.CACHE


def compile_views(queries: Sequence[str]) -> dict[str, IVMPlan]:
    return {
        q: compile_ivm(
            tpch_view(q),
            mv_name=f"mv_q{q}",
            mv_catalog=LAKE,
            mv_schema="main",
            schema=tpch_schema(),  # as the dbt adapter passes it: exact change reads
        )
        for q in queries
    }


def scaling_reference(sfs: Sequence[float]) -> float:
    """The SF whose change size the fixed-size variants copy: SF 1 (the targets' scale)
    when measured, else the largest."""
    return 1.0 if 1.0 in sfs else max(sfs)


def plan_workloads(config: Config) -> list[tuple[float, Workload]]:
    """(sf, workload) pairs in run order; at every other SF, fixed-size variants that apply
    the reference SF's absolute change (``append@sf1`` at SF 0.1 and at SF 3)."""
    reference = scaling_reference(config.sfs)
    pairs: list[tuple[float, Workload]] = []
    for sf in sorted(config.sfs):
        for name in config.workloads:
            pairs.append((sf, WORKLOADS[name]))
            if config.scaling and name in SCALING and sf != reference:
                pairs.append((sf, replace(WORKLOADS[name], fixed_size_of=reference)))
    return pairs


def _used_columns(con: duckdb.DuckDBPyConnection, query: str, table: str) -> list[str]:
    names = {c.name.lower() for c in sqlglot.parse_one(tpch_view(query)).find_all(exp.Column)}
    columns = [
        r[0]
        for r in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_catalog = ?"
            " AND table_schema = 'main' AND table_name = ? ORDER BY ordinal_position",
            [LAKE, table],
        ).fetchall()
    ]
    return [c for c in columns if c.lower() in names] or columns[:1]


def floor_statements(
    con: duckdb.DuckDBPyConnection, query: str, plan: IVMPlan, batch: Batch
) -> list[str]:
    """Read the batch's changed rows of the query's touched sources (used columns only)."""
    statements = []
    for table in sorted({s.table for s in plan.sources} & batch.tables):
        cols = ", ".join(_used_columns(con, query, table))
        args = f"'{LAKE}', 'main', '{table}', {batch.before + 1}, {batch.after}"
        statements.append(
            f"CREATE OR REPLACE TEMP TABLE bench_floor_{table} AS"
            f" SELECT {cols} FROM ducklake_table_insertions({args})"
            f" UNION ALL SELECT {cols} FROM ducklake_table_deletions({args})"
        )
    return statements


def _mv_rows_written(con: duckdb.DuckDBPyConnection, query: str, start: int, end: int) -> int:
    if end <= start:
        return 0
    args = f"'{LAKE}', 'main', 'mv_q{query}', {start + 1}, {end}"
    row = con.execute(
        f"SELECT (SELECT count(*) FROM ducklake_table_insertions({args}))"
        f" + (SELECT count(*) FROM ducklake_table_deletions({args}))"
    ).fetchone()
    return int(row[0]) if row else 0


@contextmanager
def _lake(source: Path, target: Path) -> Generator[duckdb.DuckDBPyConnection]:
    """A fresh copy of the lake, on a :func:`_connected` connection; removed on leaving."""
    lakes.copy_lake(source, target)
    try:
        with _connected(target) as con:
            yield con
    finally:
        shutil.rmtree(target, ignore_errors=True)


@contextmanager
def _connected(directory: Path) -> Generator[duckdb.DuckDBPyConnection]:
    """A new connection to the lake in ``directory``, written back to disk first (so no
    measured commit waits for earlier dirty pages), that has already read the catalog once;
    closed on leaving."""
    os.sync()
    con = lakes.connect(directory)
    try:
        con.execute(f"SELECT count(*) FROM ducklake_snapshots('{LAKE}')").fetchall()
        con.execute(
            f"SELECT count(*) FROM __ducklake_metadata_{LAKE}.ducklake_data_file"
        ).fetchall()
        yield con
    finally:
        con.close()


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return con.execute(sql).fetchall()


def _warm(con: duckdb.DuckDBPyConnection, query: str) -> None:
    """Run the query once, untimed, so every measured operation starts with its sources in
    the OS page cache and DuckDB's caches, whichever operation comes first."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE bench_warm AS {tpch_view(query)}")


def prepare_views(template: Path, target: Path, plans: dict[str, IVMPlan]) -> Path:
    """Set every view up; each fill is measured (the view's first rebuild time, which auto
    reads), so its query runs once before it, as before every measured operation."""
    lakes.copy_lake(template, target)
    con = lakes.connect(target)
    try:
        for q, plan in plans.items():
            _warm(con, q)
            setup(con, plan)
    finally:
        con.close()
    return target


def commit_batch(
    views: Path,
    target: Path,
    sf: float,
    workload: Workload,
    plans: dict[str, IVMPlan],
    history: int = 0,
) -> Batch:
    """Commit the workload's batch on a copy of the views' lake. Before it, ``history``
    batches of the same workload (other seeds), each followed by an auto refresh of every
    view, untimed: what a view maintained on a schedule has behind it. Auto records how long
    each path took (:class:`duckstream.strategy.History`): the measured batch's auto decides
    on them. Each batch's refreshes run on a new connection, after the batch's files are
    written back to disk, as a scheduled ``dbt run`` does and as the measured passes do, so
    that auto learns from the same conditions it is judged in (the connection that wrote the
    batch refreshes no faster: TPC-H Q3, Q6 and Q10 on appends at SF 0.1, five batches)."""
    lakes.copy_lake(views, target)
    generate = GENERATORS[workload.generator]
    for k in range(history):
        with _connected(target) as con:
            generate(con, LAKE, random.Random(1000 * (k + 1) + workload.seed), workload.at(sf))
        with _connected(target) as con:
            for q, plan in plans.items():
                _warm(con, q)
                refresh(con, plan, "auto")
    with _connected(target) as con:
        before = current_snapshot(con, LAKE)
        counts = generate(con, LAKE, random.Random(workload.seed), workload.at(sf))
        after = current_snapshot(con, LAKE)
    return Batch(sf, workload, before, after, counts)


def measure_rep(
    batch_dir: Path,
    work: Path,
    batch: Batch,
    plans: dict[str, IVMPlan],
    rep: int,
    log: Callable[[str], None],
) -> list[Run]:
    """Both passes of one repetition over every query (see the module docstring)."""
    first: dict[str, dict] = {}
    expected: dict[str, Counter] = {}
    with _lake(batch_dir, work / "pass-a") as con:
        for q, plan in plans.items():
            _warm(con, q)
            report, auto = measure(lambda plan=plan: refresh(con, plan, "auto"))
            recompute_table = f"{LAKE}.main.bench_recompute_q{q}"
            # a top-k's ties broken as the view breaks them (an equal cost)
            view = break_ties_sql(tpch_view(q), "duckdb")
            ctas = f"CREATE OR REPLACE TABLE {recompute_table} AS {view}"
            _, recompute = measure(lambda ctas=ctas: con.execute(ctas))
            expected[q] = as_multiset(_rows(con, f"SELECT * FROM {recompute_table}"))
            equal = as_multiset(_rows(con, plan.query_mv)) == expected[q]
            statements = floor_statements(con, q, plan, batch)
            _, floor = measure(lambda s=statements: [con.execute(x) for x in s])
            first[q] = dict(report=report, auto=auto, recompute=recompute, floor=floor, equal=equal)
            if not equal:
                log(f"  q{q} auto ({report.strategy}) differs from recomputation")
    runs = []
    pass_b = lakes.copy_lake(batch_dir, work / "pass-b")
    try:
        for q, plan in plans.items():
            with _connected(pass_b) as con:
                _warm(con, q)
                start = current_snapshot(con, LAKE)
                incremental_report, incremental = measure(
                    lambda plan=plan: refresh(con, plan, "incremental")
                )
                written = _mv_rows_written(con, q, start, current_snapshot(con, LAKE))
                got = as_multiset(_rows(con, plan.query_mv))
            equal_incremental = got == expected[q]
            if not equal_incremental:
                log(f"  q{q} incremental differs:\n{multiset_diff(expected[q], got)}")
            with _connected(pass_b) as con:
                _warm(con, q)
                full_report, full = measure(lambda plan=plan: refresh(con, plan, "full"))
                equal_full = as_multiset(_rows(con, plan.query_mv)) == expected[q]
            a = first[q]
            report = a["report"]
            run = Run(
                sf=batch.sf,
                workload=batch.workload.key,
                query=q,
                rep=rep,
                auto_strategy=report.strategy,
                auto_reason=report.reason,
                estimate_ms=report.estimate_seconds * 1000,
                auto=a["auto"],
                incremental=incremental,
                full=full,
                recompute=a["recompute"],
                floor=a["floor"],
                mv_rows_written=written,
                equal=a["equal"] and equal_incremental and equal_full,
                change_rows=report.change_rows,
                estimates={n: asdict(e) for n, e in report.sources.items()},
                netted=(
                    None
                    if report.netted is None
                    else {n: asdict(e) for n, e in report.netted.items()}
                ),
                measured=None if report.history is None else asdict(report.history),
                phases={
                    path: [list(p) for p in r.phases]
                    for path, r in (
                        ("auto", report),
                        ("incremental", incremental_report),
                        ("full", full_report),
                    )
                },
            )
            runs.append(run)
            log(
                f"  q{q:<8} auto {run.auto.ms:7.0f} ms ({run.auto_strategy:<11})"
                f" incr {run.incremental.ms:7.0f}  full {run.full.ms:7.0f}"
                f"  recompute {run.recompute.ms:7.0f}  floor {run.floor.ms:6.0f}"
                f"  {'equal' if run.equal else 'DIFFERENT'}"
            )
    finally:
        shutil.rmtree(pass_b, ignore_errors=True)
    return runs


@dataclass
class Results:
    runs: list[Run] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)


def run_benchmark(config: Config, log: Callable[[str], None] = print) -> Results:
    plans = compile_views(config.queries)
    results = Results()
    pairs = plan_workloads(config)
    with tempfile.TemporaryDirectory(prefix="duckstream-bench-") as tmp:
        work = Path(tmp)
        for sf in sorted(config.sfs):
            for layout in lakes.LAYOUTS:
                todo = [w for s, w in pairs if s == sf and w.layout == layout]
                if todo:
                    _run_lake(config, sf, layout, todo, plans, work, results, log)
    return results


def _run_lake(
    config: Config,
    sf: float,
    layout: str,
    workloads: Sequence[Workload],
    plans: dict[str, IVMPlan],
    work: Path,
    results: Results,
    log: Callable[[str], None],
) -> None:
    """Every workload of one TPC-H lake (``sf``, ``layout``), its views set up once."""
    log(f"SF {sf:g}: TPC-H template ({layout})")
    template = lakes.template(sf, config.cache, layout)
    log(f"SF {sf:g}: setting up {len(plans)} views")
    views = prepare_views(template, work / "views", plans)
    for workload in workloads:
        batch = commit_batch(views, work / "batch", sf, workload, plans, config.history)
        results.batches.append(batch)
        changed = ", ".join(
            f"{t} +{c['inserted'] + c['updated']:,}/-{c['deleted'] + c['updated']:,}"
            for t, c in batch.counts.items()
            if any(c.values())
        )
        for rep in range(config.reps):
            log(f"SF {sf:g} {workload.key} ({changed}) rep {rep + 1}/{config.reps}")
            results.runs += measure_rep(work / "batch", work, batch, plans, rep, log)
        shutil.rmtree(work / "batch", ignore_errors=True)
    shutil.rmtree(views, ignore_errors=True)
