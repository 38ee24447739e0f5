r"""A forced rebuild against recomputation, per TPC-H view (issue "Performance", item 2).

``python -m bench.rebuild --sf 0.1 --pairs 5``: on one lake holding every view of
``bench.run.SUPPORTED`` (set up once), per query, ``--pairs`` alternating pairs: the rebuild
(``refresh(strategy="full")``) and ``CREATE OR REPLACE TABLE lake.main.bench_recompute_<q> AS``
the query, each on a fresh connection that ran the query once first (``bench.run``'s
conditions), in the same process. Prints per query the median of the pairs' ratios
(rebuild / recompute) and the geometric mean over the queries.

``--compare``: the rebuild as the tree's form fills it (``Engine.fill_from_view`` off) in each
pair too, alternated with the others: the fill's change measured before and after in one run.

``--against PACKAGE``: the rebuild of another version of duckstream in each pair too (its own
plans and runner), alternated with the others: a change measured before and after in one
process. ``PACKAGE`` is a copy of that version importable under another name, e.g. main's::

    git -C <main checkout> archive HEAD python/duckstream | tar -x -C /tmp/before
    mv /tmp/before/python/duckstream /tmp/before/duckstream_before
    grep -rl duckstream /tmp/before/duckstream_before | xargs sed -i -E \
        's/(from|import) duckstream(\.| |$)/\1 duckstream_before\2/g'
    PYTHONPATH=/tmp/before:python:. python -m bench.rebuild --against duckstream_before

The views are set up by this version: both must build the same table.

``--split``: per query, once more on a fresh connection, the rebuild's statements timed one
by one (the fill's INSERT, the DELETE, the commit, the rest), and the SELECTs alone: the
fill's query and the view's query, each materialized into a temporary table (no lake
write), alternated in ``--pairs`` pairs; CPU milliseconds. The DELETE is the first read of
the view's table on the connection: DuckLake 1.5.5 then loads its catalog as of the
snapshot that created the table's inlined-data table (every table has one, scanned even
when empty), 15-20 ms at SF 0.1 whatever the view's size, which a CREATE TABLE AS never
pays; its COMMIT (of a new table) costs DuckLake 25-35 ms CPU more than the rebuild's (Q1,
Q3, Q6), about what the DELETE costs.

What the DELETE's cost is not (measured by hand, SF 1 lake with three views, DuckDB 1.5.5,
CPU on a fresh connection): not the read (a ``count(*)`` of the view's table first, 3-6 ms,
leaves the DELETE at 14-20 ms), not the rows (an empty table's costs the same; all of a data
file's rows deleted end the file, no delete file is written), not its form (``WHERE true``,
``WHERE rowid IS NOT NULL``, ``TRUNCATE``: the same). It is the table's age: a table created
after the catalog's last schema change deletes in ~3 ms; the same table after one more
``CREATE TABLE`` anywhere in the catalog, in 19-24 ms (TPC-H's ``region``, a view's table:
13-16 ms). Every view's table in a lake is soon that old, so a rebuild in place (which keeps
the table id the views over it follow) pays it, and so does every incremental DELETE. The
rebuild's other statements: its pin (one SET VARIABLE, ~6 ms CPU at SF 1) as a read checked
in Python and a literal SET saved only ~0.4 ms, not done.
"""

from __future__ import annotations

import argparse
import importlib
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlglot

from bench import lakes
from bench.run import LAKE, SUPPORTED, _connected, _warm, compile_views, prepare_views
from duckstream.engines.ducklake.engine import DuckLakeEngine
from duckstream.engines.ducklake.runner import refresh, without_table_statistics
from duckstream.normalize.number_rows import break_ties_sql
from duckstream.plan import IVMPlan
from duckstream.testing.tpch import tpch_view


def _ms(operation: Callable[[], object]) -> float:
    """CPU milliseconds of ``operation`` (all of the process's threads: DuckDB's workers),
    steadier than wall time on a machine shared with other work."""
    start = time.process_time()
    operation()
    return (time.process_time() - start) * 1000


def _both(operation: Callable[[], object]) -> tuple[float, float]:
    """Wall-clock and CPU milliseconds (all of the process's threads: DuckDB's workers). On a
    machine shared with other work the CPU time is the steadier of the two."""
    wall, cpu = time.perf_counter(), time.process_time()
    operation()
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def recompute_sql(query: str) -> str:
    view = break_ties_sql(tpch_view(query), "duckdb")  # a top-k's ties broken as the view's
    return f"CREATE OR REPLACE TABLE {LAKE}.main.bench_recompute_q{query} AS {view}"


Rebuild = Callable[[Any], object]  # a rebuild, run on a connection


def rebuild_of(plan: Any, run: Callable[..., object] = refresh) -> Rebuild:
    return lambda con: run(con, plan, "full")


def pair(
    views: Path, query: str, *rebuilds: Rebuild, flip: bool = False
) -> tuple[tuple[float, float], ...]:
    """One recomputation and each rebuild, each on a fresh warmed connection: (wall, CPU) ms
    of each, the recomputation's last; ``flip``: the rebuilds run in reverse order (the
    times listed in their order still)."""
    times = []
    for rebuild in reversed(rebuilds) if flip else rebuilds:
        with _connected(views) as con:
            _warm(con, query)
            times.append(_both(lambda rebuild=rebuild: rebuild(con)))
    with _connected(views) as con:
        _warm(con, query)
        ctas = recompute_sql(query)
        times.append(_both(lambda: con.execute(ctas)))
    if flip:
        times[: len(rebuilds)] = times[: len(rebuilds)][::-1]
    return tuple(times)


def against(package: str, queries: list[str]) -> dict[str, Rebuild]:
    """The rebuilds of the views as another version of duckstream, importable as
    ``package``, compiles and runs them (``--against``)."""
    compiler = importlib.import_module(package)
    runner = importlib.import_module(f"{package}.engines.ducklake.runner")
    tpch = importlib.import_module(f"{package}.testing.tpch")
    return {
        q: rebuild_of(
            compiler.compile_ivm(
                tpch.tpch_view(q),
                mv_name=f"mv_q{q}",
                mv_catalog=LAKE,
                mv_schema="main",
                schema=tpch.tpch_schema(),
            ),
            runner.refresh,
        )
        for q in queries
    }


def tree_filled(queries: list[str]) -> dict[str, IVMPlan]:
    """The views compiled with the fill from the operator tree's form (before the change)."""
    engine = DuckLakeEngine.fill_from_view
    DuckLakeEngine.fill_from_view = False
    try:
        return compile_views(queries)
    finally:
        DuckLakeEngine.fill_from_view = engine


def _label(statement: str) -> str:
    words = statement.split()
    head = " ".join(words[:2]).upper()
    if head.startswith("SET VARIABLE"):
        return "set " + words[2].rsplit("_", 1)[-1]
    if head.startswith("INSERT INTO") and "_ivm_cursors" in words[2]:
        return "cursors"
    if head.startswith("INSERT INTO"):
        return "fill INSERT"
    if head.startswith("CALL"):
        return "commit message" if "commit_message" in statement else "call"
    return head.split()[0].lower()


def split(views: Path, query: str, plan: IVMPlan, pairs: int) -> dict[str, float]:
    """The rebuild's statements timed one by one, and the two SELECTs alone (medians)."""
    statements = plan.initialize_cursors
    times: dict[str, float] = {}
    with _connected(views) as con:
        _warm(con, query)
        with without_table_statistics(con):
            for statement in statements:
                label = _label(statement)
                if label == "call" and "set_option" in statement:
                    break  # after the COMMIT: skipped by the runner once the option is set
                times[label] = times.get(label, 0.0) + _ms(lambda s=statement: con.execute(s))
    fill = next(s for s in statements if _label(s) == "fill INSERT")
    select = sqlglot.parse_one(fill, dialect="duckdb").expression
    fill_select = select.sql(dialect="duckdb")
    pin = next(s for s in statements if s.startswith("SET VARIABLE") and "_window" in s)
    view = break_ties_sql(tpch_view(query), "duckdb")
    fills, views_ = [], []
    with _connected(views) as con:
        _warm(con, query)
        with without_table_statistics(con):
            con.execute(pin)
            for _ in range(pairs):
                fills.append(
                    _ms(lambda: con.execute(f"CREATE OR REPLACE TEMP TABLE f AS {fill_select}"))
                )
                views_.append(_ms(lambda: con.execute(f"CREATE OR REPLACE TEMP TABLE v AS {view}")))
    times["fill SELECT"] = statistics.median(fills)
    times["view SELECT"] = statistics.median(views_)
    return times


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.rebuild", description=__doc__)
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--queries", nargs="*", default=list(SUPPORTED))
    parser.add_argument("--split", action="store_true")
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--against", metavar="PACKAGE")
    parser.add_argument("--cache", type=Path, default=lakes.CACHE)
    args = parser.parse_args(argv)
    plans = compile_views(args.queries)
    template = lakes.template(args.sf, args.cache)
    ratios: dict[str, float] = {}
    cpu_ratios: dict[str, float] = {}
    old: dict[str, float] = {}
    cpu_old: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="duckstream-rebuild-") as tmp:
        views = prepare_views(template, Path(tmp) / "views", plans)
        print(f"SF {args.sf:g}: medians of {args.pairs} pairs, ms (rebuild / recompute)")
        before: dict[str, Rebuild] = {}
        if args.compare:
            before = {q: rebuild_of(p) for q, p in tree_filled(args.queries).items()}
        elif args.against:
            before = against(args.against, args.queries)
        for q, plan in plans.items():
            runs = [
                pair(views, q, *([before[q]] if before else []), rebuild_of(plan), flip=i % 2)
                for i in range(args.pairs)
            ]
            ratios[q] = statistics.median(r[-2][0] / r[-1][0] for r in runs)
            cpu_ratios[q] = statistics.median(r[-2][1] / r[-1][1] for r in runs)
            full = statistics.median(r[-2][0] for r in runs)
            recompute = statistics.median(r[-1][0] for r in runs)
            line = (
                f"q{q:<9} rebuild {full:7.0f}  recompute {recompute:7.0f}"
                f"  ratio {ratios[q]:5.2f}  cpu ratio {cpu_ratios[q]:5.2f}"
            )
            if before:
                old[q] = statistics.median(r[0][0] / r[-1][0] for r in runs)
                cpu_old[q] = statistics.median(r[0][1] / r[-1][1] for r in runs)
                line += f"  | before: ratio {old[q]:5.2f}  cpu ratio {cpu_old[q]:5.2f}"
            if args.split:
                parts = split(views, q, plan, args.pairs)
                line += "  | " + "  ".join(f"{k} {v:.0f}" for k, v in parts.items())
            print(line, flush=True)
        found_ratios = [("wall", ratios), ("cpu", cpu_ratios)]
        if before:
            found_ratios += [("before, wall", old), ("before, cpu", cpu_old)]
        for name, found in found_ratios:
            values = list(found.values())
            print(f"{name}: geometric mean {geomean(values):.3f}  max {max(values):.2f}")


if __name__ == "__main__":
    main()
