"""Hand edits of the generated maintenance SQL, measured against the SQL as generated.

``python -m bench.proposals --sf 1 --workloads append mixed --queries 3 9`` prepares the
benchmark's lake (views set up, one batch committed), then for each query runs ``maintain``
as generated and with each edit, interleaved, rolling every run back (so each one refreshes
the same window; COMMIT is not timed), checks the result against recomputation and prints
medians. The edits are proposals for the compiler (``engines/duckdb.py``, ``tree/``,
``sinks/``), written as text rewrites of the statements so they can be measured today:

* ``window``: the window check reads the cursors table and ``ducklake_snapshots`` once for all
  sources (one scan each, aggregated with ``bool_or``) instead of once per source;
* ``cursors``: one ``UPDATE`` of the cursors per catalog instead of one per source;
* ``deltas``: each changed source's window is read once into a temp table holding only the
  columns the view uses (``CREATE TEMP TABLE d AS SELECT <cols>, 1 AS _ivm_mult FROM
  ducklake_table_insertions(...) UNION ALL ... deletions ... WHERE <changed>``) and every delta
  term reads the temp table: DuckDB then knows the delta's true size, builds its hash tables
  on it and pushes the delta's key range into the scans of the big tables (dynamic filters),
  instead of building on the big table because a table function has no cardinality;
* ``semijoin``: ``deltas``, plus in each delta term a semi-join filter on every table joined
  to the delta by an equality: ``AND l_orderkey IN (SELECT o_orderkey FROM <delta>)``. The
  semi join is built on the small delta and its key range prunes the big table's scan
  whatever join order DuckDB picks (with ``deltas`` alone it may still join the big table to
  another one first and scan it whole, e.g. Q8);
* ``all``: ``window`` + ``cursors`` + ``semijoin``.

For the full path (``initialize_cursors``, what ``strategy="full"`` runs) one edit is measured
the same way: ``cursor_insert``, one ``INSERT ... VALUES (..), (..)`` of all cursor rows instead
of one ``INSERT`` per source.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import sqlglot
from sqlglot import exp

from bench import lakes
from bench.run import SUPPORTED, WORKLOADS, commit_batch, compile_views, prepare_views
from duckstream.testing.differential import as_multiset
from duckstream.testing.tpch import tpch_query

Edit = Callable[[list[str], dict[str, list[str]]], list[str]]
_INSERTIONS = "(SELECT *, CAST(1 AS BIGINT) AS _ivm_mult FROM DUCKLAKE_TABLE_INSERTIONS("


def _closing(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    raise ValueError("unbalanced parentheses")


def materialize_deltas(statements: list[str], columns: dict[str, list[str]]) -> list[str]:
    out: list[str] = []
    created: set[str] = set()
    for statement in statements:
        found = []
        i = statement.find(_INSERTIONS)
        while i >= 0:
            j = _closing(statement, i)
            found.append((i, j + 1, statement[i + 1 : j]))
            i = statement.find(_INSERTIONS, j)
        if not found:
            out.append(statement)
            continue
        for start, end, inner in reversed(found):
            table = re.search(r"INSERTIONS\('[^']*', '[^']*', '(\w+)'", inner)
            cursor = re.search(r"GETVARIABLE\('(\w+)_cursor_(\d+)'\)", inner)
            assert table and cursor
            name = f"temp.main._ivm_d_{table.group(1)}_{cursor.group(2)}"
            if name not in created:
                created.add(name)
                cols = ", ".join(columns[table.group(1)])
                changed = f"{cursor.group(1)}_changed_{cursor.group(2)}"
                out.append(
                    f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM"
                    f" ({inner.replace('SELECT *,', f'SELECT {cols},')})"
                    f" WHERE GETVARIABLE('{changed}')"
                )
            statement = statement[:start] + f"(SELECT * FROM {name})" + statement[end:]
        out.append(statement)
    return out


_PREFIX = {
    "lineitem": "l_",
    "orders": "o_",
    "customer": "c_",
    "part": "p_",
    "partsupp": "ps_",
    "supplier": "s_",
    "nation": "n_",
    "region": "r_",
}


def semijoin_filters(statements: list[str], columns: dict[str, list[str]]) -> list[str]:
    """In each delta term, restrict every table equi-joined to the (materialized) delta to the
    delta's keys: ``AND other.key IN (SELECT key FROM <delta temp table>)``. A semi join built
    on the small delta pushes its key range into the big table's scan whatever join order the
    optimizer picks (TPC-H column prefixes tell which table a column belongs to)."""
    out = []
    for statement in materialize_deltas(statements, columns):
        if "_ivm_d_" not in statement or not statement.startswith("CREATE OR REPLACE TEMP TABLE"):
            out.append(statement)
            continue
        if re.match(r"CREATE OR REPLACE TEMP TABLE temp\.main\._ivm_d_", statement):
            out.append(statement)
            continue
        tree = sqlglot.parse_one(statement, dialect="duckdb")
        for select in list(tree.find_all(exp.Select)):
            deltas = [
                (sub.alias_or_name, table.name)
                for sub in select.find_all(exp.Subquery)
                if sub.parent_select is select
                for table in sub.find_all(exp.Table)
                if table.name.startswith("_ivm_d_")
            ]
            where = select.args.get("where")
            if len(deltas) != 1 or where is None:
                continue
            alias, temp = deltas[0]
            source = re.sub(r"^_ivm_d_(\w+?)_\d+$", r"\1", temp)
            prefix = _PREFIX.get(source)
            if prefix is None:
                continue

            def mine(c: exp.Expr, alias: str = alias, prefix: str = prefix) -> bool:
                if not isinstance(c, exp.Column):
                    return False
                return c.table == alias or (not c.table and c.name.startswith(prefix))

            added = []
            for eq in where.find_all(exp.EQ):
                left, right = eq.this, eq.expression
                if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
                    continue
                if mine(left) == mine(right):
                    continue
                key, other = (left, right) if mine(left) else (right, left)
                inner = exp.select(exp.column(key.name)).from_(f"temp.main.{temp}")
                added.append(exp.In(this=other.copy(), query=exp.Subquery(this=inner)))
            if added:
                select.set("where", exp.Where(this=exp.and_(where.this, *added)))
        out.append(tree.sql(dialect="duckdb"))
    return out


def one_window_read(statements: list[str], columns: dict[str, list[str]]) -> list[str]:
    out = []
    for s in statements:
        if not (s.startswith("CREATE OR REPLACE TEMP TABLE") and "0 AS source, '" in s):
            out.append(s)
            continue
        name = re.search(r"TEMP TABLE (\S+) AS", s)
        mv = re.search(r"c\.mv_name = '([^']+)'", s)
        cursors = re.search(r"FROM (\S+) AS c WHERE", s)
        end = re.search(r"GETVARIABLE\('([^']+_end_\w+)'\)", s)
        catalog = re.search(r"ducklake_snapshots\('([^']+)'\)", s)
        assert name and mv and cursors and end and catalog
        values = ", ".join(
            f"({i}, '{t}')" for i, t in re.findall(r"SELECT (\d+) AS source, '([^']+)'", s)
        )
        tid = "CAST(c.table_id AS VARCHAR)"
        window = f"w.snapshot_id > c.last_snapshot AND w.snapshot_id <= GETVARIABLE('{end[1]}')"
        gone = (
            f"list_contains(coalesce(w.changes['tables_altered'], []), {tid})"
            f" OR list_contains(coalesce(w.changes['tables_dropped'], []), {tid})"
        )
        out.append(
            f"CREATE OR REPLACE TEMP TABLE {name[1]} AS"
            f" WITH src(source, source_table) AS (VALUES {values}),"
            f" c AS (SELECT *, rowid AS _r FROM {cursors[1]} WHERE mv_name = '{mv[1]}'),"
            f" w AS (SELECT snapshot_id, changes FROM ducklake_snapshots('{catalog[1]}'))"
            " SELECT src.source, src.source_table, c.last_snapshot AS cursor_snapshot,"
            " c.table_id,"
            " coalesce(bool_or(w.snapshot_id = c.last_snapshot), false) AS cursor_exists,"
            f" coalesce(bool_or({window} AND ({gone})), false) AS altered,"
            f" coalesce(bool_or({window} AND list_contains(flatten(map_values(w.changes)),"
            f" {tid})), false) AS changed"
            " FROM src JOIN c USING (source_table) CROSS JOIN w"
            " GROUP BY src.source, src.source_table, c.last_snapshot, c.table_id, c._r"
        )
    return out


def one_cursor_update(statements: list[str], columns: dict[str, list[str]]) -> list[str]:
    out, done = [], False
    for s in statements:
        if s.startswith("UPDATE ") and " SET last_snapshot = " in s:
            if not done:
                out.append(re.sub(r" AND source_table = '[^']+'", "", s))
                done = True
        else:
            out.append(s)
    return out


def one_cursor_insert(statements: list[str], columns: dict[str, list[str]]) -> list[str]:
    out: list[str] = []
    prefix = None
    for s in statements:
        head, sep, values = s.partition(" VALUES ")
        if s.startswith("INSERT INTO ") and "_ivm_cursors" in head and sep:
            if prefix == head:
                out[-1] += ", " + values
                continue
            prefix = head
        else:
            prefix = None
        out.append(s)
    return out


def _all(statements: list[str], columns: dict[str, list[str]]) -> list[str]:
    for edit in (one_window_read, one_cursor_update, semijoin_filters):
        statements = edit(statements, columns)
    return statements


EDITS: dict[str, Edit] = {
    "generated": lambda statements, columns: statements,
    "window": one_window_read,
    "cursors": one_cursor_update,
    "deltas": materialize_deltas,
    "semijoin": semijoin_filters,
    "all": _all,
}


FULL_EDITS: dict[str, Edit] = {
    "generated": lambda statements, columns: statements,
    "cursor_insert": one_cursor_insert,
}


def used_columns(con: duckdb.DuckDBPyConnection, query: int) -> dict[str, list[str]]:
    names = {c.name.lower() for c in sqlglot.parse_one(tpch_query(query)).find_all(exp.Column)}
    out: dict[str, list[str]] = {}
    for table, column in con.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_catalog = ? ORDER BY table_name, ordinal_position",
        [lakes.LAKE],
    ).fetchall():
        if column.lower() in names:
            out.setdefault(table, []).append(column)
    return out


def compare(
    con: duckdb.DuckDBPyConnection,
    query: int,
    generated: list[str],
    query_mv: str,
    reps: int,
    edits: dict[str, Edit] = EDITS,
) -> dict[str, tuple[float, float, int]]:
    """Median wall and CPU ms and statement count per edit; asserts every result is exact."""
    expected = as_multiset(con.execute(tpch_query(query)).fetchall())
    columns = used_columns(con, query)
    samples: dict[str, list[tuple[float, float]]] = {e: [] for e in edits}
    counts: dict[str, int] = {}
    for _ in range(reps):
        for name, edit in edits.items():
            statements = edit(list(generated), columns)
            statements = statements[: statements.index("COMMIT")]
            counts[name] = len(statements)
            wall, cpu = time.perf_counter(), time.process_time()
            for statement in statements:
                con.execute(statement)
            samples[name].append((time.perf_counter() - wall, time.process_time() - cpu))
            got = as_multiset(con.execute(query_mv).fetchall())
            con.execute("ROLLBACK")
            if got != expected:
                raise AssertionError(f"Q{query}: edit {name} changes the result")
    return {
        name: (
            statistics.median(s[0] for s in values) * 1000,
            statistics.median(s[1] for s in values) * 1000,
            counts[name],
        )
        for name, values in samples.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.proposals", description=__doc__)
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--queries", type=int, nargs="+", default=list(SUPPORTED))
    parser.add_argument("--workloads", nargs="+", default=["append", "mixed", "update"])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=lakes.CACHE)
    parser.add_argument(
        "--full", action="store_true", help="measure the full path (initialize_cursors) instead"
    )
    args = parser.parse_args(argv)
    plans = compile_views(args.queries)
    edits = FULL_EDITS if args.full else EDITS
    header = " | ".join(f"{e} ms (cpu; statements)" for e in edits)
    print(f"| workload | Q | recompute ms (cpu) | {header} |")
    print("|---|---|--:|" + "--:|" * len(edits))
    with tempfile.TemporaryDirectory(prefix="duckstream-proposals-") as tmp:
        work = Path(tmp)
        views = prepare_views(lakes.template(args.sf, args.cache), work / "views", plans)
        for name in args.workloads:
            commit_batch(views, work / "batch", args.sf, WORKLOADS[name])
            con = lakes.connect(work / "batch")
            for q, plan in plans.items():
                start, cpu = time.perf_counter(), time.process_time()
                con.execute(f"CREATE OR REPLACE TABLE bench_recompute_q{q} AS {tpch_query(q)}")
                recompute = (time.perf_counter() - start) * 1000
                recompute_cpu = (time.process_time() - cpu) * 1000
                generated = plan.initialize_cursors if args.full else plan.maintain
                result = compare(con, q, generated, plan.query_mv, args.reps, edits)
                cells = " | ".join(f"{w:,.0f} ({c:,.0f}; {n} st.)" for w, c, n in result.values())
                print(
                    f"| {name} | {q} | {recompute:,.0f} ({recompute_cpu:,.0f}) | {cells} |",
                    flush=True,
                )
            con.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
