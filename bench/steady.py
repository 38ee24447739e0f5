"""Steady state: a view refreshed many times in a row refreshes as fast at the end as at the start.

``python -m bench.steady --sf 0.1 --refreshes 1000`` (issue "Performance", item 6): on one
TPC-H lake, the views of ``--queries`` are set up, then ``--refreshes`` rounds each commit a
small batch (``--workload``, ``--fraction`` of the orders: at SF 0.1 and the default 1e-5,
two orders with their lines) and refresh every view (``--strategy``, auto by default), each
round on a new connection as a scheduled ``dbt run`` opens one: 1,000 rounds are what a
five-minute schedule runs in 3.5 days. Every ``--every`` rounds it prints, per view, the
median refresh time of the last rounds (wall and CPU), the data and delete files of the view's
table, the rows inlined in the catalog, and the catalog's snapshots.

``--compact-every K``: every K rounds, first ``CALL ducklake_flush_inlined_data`` and
``ducklake_merge_adjacent_files`` on each view's table (both keep the change feed and time
travel, so the cursors stay valid), timed apart. ``--expire-every K``: every K rounds, first
expire the snapshots no view needs (``duckstream expire``:
:mod:`duckstream.engines.ducklake.expire`, with ``--cleanup``), timed apart (in the same
column). At the end every view is checked against
recomputation (exit 1 when one differs).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import duckdb

from bench import lakes
from bench.measure import measure
from bench.run import LAKE, SUPPORTED, compile_views, prepare_views
from duckstream.engines.ducklake.expire import expire
from duckstream.engines.ducklake.runner import refresh
from duckstream.testing.differential import as_multiset
from duckstream.testing.tpch import WORKLOADS, tpch_view


def files_of(con: duckdb.DuckDBPyConnection, table: str) -> tuple[int, int]:
    """The data files and delete files the current snapshot of ``table`` reads."""
    row = con.execute(
        "SELECT count(*), count(delete_file) FROM ducklake_list_files(?, ?)", [LAKE, table]
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def inlined_rows(con: duckdb.DuckDBPyConnection, table: str) -> int:
    """Rows of ``table`` held in the catalog's inlined-data tables (not yet in files)."""
    meta = f"__ducklake_metadata_{LAKE}"
    names = con.execute(
        f"SELECT i.table_name FROM {meta}.ducklake_inlined_data_tables i"
        f" JOIN {meta}.ducklake_table t USING (table_id)"
        " WHERE t.table_name = ? AND t.end_snapshot IS NULL",
        [table],
    ).fetchall()
    return sum(
        int(con.execute(f"SELECT count(*) FROM {meta}.{name}").fetchone()[0])  # type: ignore[index]
        for (name,) in names
    )


def snapshots(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute(f"SELECT count(*) FROM ducklake_snapshots('{LAKE}')").fetchone()
    return int(row[0]) if row else 0


def compact(con: duckdb.DuckDBPyConnection, tables: Sequence[str]) -> None:
    """Flush each table's inlined rows into a file and merge its adjacent small files."""
    for table in tables:
        con.execute(f"CALL ducklake_flush_inlined_data('{LAKE}', table_name => '{table}')")
        con.execute(f"CALL ducklake_merge_adjacent_files('{LAKE}', '{table}', schema => 'main')")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.steady", description=__doc__)
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--queries", nargs="+", default=["1", "3", "dedup"], choices=SUPPORTED)
    parser.add_argument("--workload", default="append", choices=list(WORKLOADS))
    parser.add_argument("--fraction", type=float, default=1e-5)
    parser.add_argument("--refreshes", type=int, default=1000)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--strategy", default="auto", choices=["auto", "incremental", "full"])
    parser.add_argument("--compact-every", type=int, default=0)
    parser.add_argument("--expire-every", type=int, default=0)
    parser.add_argument("--cache", type=Path, default=lakes.CACHE)
    args = parser.parse_args(argv)

    plans = compile_views(args.queries)
    tables = [plan.mv_table.split(".")[-1] for plan in plans.values()]
    generate = WORKLOADS[args.workload]
    print(
        f"SF {args.sf:g}, {args.workload} of {args.fraction:g} of the orders per round,"
        f" {args.refreshes} rounds, strategy {args.strategy}, compaction every"
        f" {args.compact_every or 'never'}, snapshot expiry every {args.expire_every or 'never'}"
    )
    print("| rounds | view | refresh ms (median) | CPU ms | data files | delete files | inlined"
          " rows | snapshots | compaction / expiry ms |")  # fmt: skip
    print("|--:|---|--:|--:|--:|--:|--:|--:|--:|")
    with tempfile.TemporaryDirectory(prefix="duckstream-steady-") as tmp:
        lake = prepare_views(lakes.template(args.sf, args.cache), Path(tmp) / "lake", plans)
        times: dict[str, list[tuple[float, float]]] = {q: [] for q in plans}
        compactions: list[float] = []
        for n in range(1, args.refreshes + 1):
            con = lakes.connect(lake)
            try:
                generate(con, LAKE, random.Random(n), args.fraction)
                if args.compact_every and n % args.compact_every == 0:
                    _, sample = measure(lambda con=con: compact(con, tables))
                    compactions.append(sample.ms)
                if args.expire_every and n % args.expire_every == 0:
                    _, sample = measure(lambda con=con: expire(con, LAKE, cleanup=True))
                    compactions.append(sample.ms)
                for q, plan in plans.items():
                    _, sample = measure(
                        lambda plan=plan, con=con: refresh(con, plan, args.strategy)
                    )
                    times[q].append((sample.ms, sample.cpu_seconds * 1000))
                if n % args.every == 0 or n == args.refreshes:
                    for q, table in zip(plans, tables, strict=True):
                        recent = times[q][-args.every :]
                        data, deletes = files_of(con, table)
                        print(
                            f"| {n} | {table} | {statistics.median(t for t, _ in recent):.1f}"
                            f" | {statistics.median(c for _, c in recent):.1f} | {data}"
                            f" | {deletes} | {inlined_rows(con, table)} | {snapshots(con)}"
                            f" | {statistics.median(compactions) if compactions else 0:.0f} |",
                            flush=True,
                        )
                    compactions.clear()
            finally:
                con.close()
        con = lakes.connect(lake)
        try:
            differ = [
                q
                for q, plan in plans.items()
                if as_multiset(con.execute(plan.query_mv).fetchall())
                != as_multiset(con.execute(tpch_view(q)).fetchall())
            ]
        finally:
            con.close()
    if differ:
        print(f"DIFFERENT from recomputation: {', '.join(differ)}", file=sys.stderr)
        return 1
    print("every view equals recomputation")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
