"""Each operator's delta rule against its non-incremental definition (DBSP's oracle).

For a relation ``Q`` of the operator tree and a change ``ΔR`` of its sources (inserted rows
+1, deleted rows -1, not netted: a row may be inserted and deleted in the same window),
``Q.delta`` must equal ``Q(R_new) - Q(R_old)`` as a signed multiset. The engine here is
DuckDB with plain tables standing for the states and the change (``old_t``, ``new_t``,
``delta_t``), no lakehouse: thousands of cases run in seconds, and a failure points at one
operator's rule, not at a whole refresh.
"""

from __future__ import annotations

from collections import Counter

import duckdb
from hypothesis import given
from hypothesis import strategies as st
from sqlglot import exp, parse_one

from duckstream.engines.base import MULT, Source, Target, Version
from duckstream.engines.ducklake.engine import DuckLakeEngine
from duckstream.normalize import normalize
from duckstream.testing.differential import TableSpec, as_multiset, sql_literal
from duckstream.tree.base import Context
from duckstream.tree.build import build_relation
from duckstream.tree.columns import table_key
from duckstream.tree.top_k import TopK
from strategies import (  # tests/ is on sys.path (its conftest)
    SHAPES,
    constant_views,
    lateral_views,
    rows,
    set_operation_views,
    tables,
    top_k_views,
    views,
)


class PlainTables(DuckLakeEngine):
    """States and changes of a source are the tables ``old_<t>``, ``new_<t>``, ``delta_<t>``."""

    def state(self, source: Source, version: Version) -> exp.Expr:
        prefix = "old" if version is Version.OLD else "new"
        return exp.select("*").from_(f"{prefix}_{source.name}")

    def changes(self, source: Source) -> exp.Expr:
        return exp.select("*").from_(f"delta_{source.name}")

    def changed(self, source: Source) -> exp.Expr:
        return exp.true()


def relation_of(view_sql: str):
    select = normalize(
        parse_one(view_sql, dialect="duckdb"), dialect="duckdb", catalog="dl", schema="main"
    )
    found: dict[str, Source] = {}

    def resolve(table: exp.Table) -> Source:
        key = table_key(table)
        found.setdefault(key, Source(table.catalog, table.db, table.name, len(found)))
        return found[key]

    engine = PlainTables()
    ctx = Context(engine=engine)
    relation = build_relation(select, ctx, resolve)
    engine.bind(Target("dl", "main", "mv", "_ivm_cursors"), list(found.values()))
    return relation, ctx


@st.composite
def changes(draw, table: TableSpec):
    """Deleted rows (a sub-bag of the old rows), inserted rows, and rows inserted and deleted
    within the window (in the feed twice, in neither state)."""
    kept = [row for row in table.rows if draw(st.integers(0, 2)) > 0]
    deleted = list((Counter(table.rows) - Counter(kept)).elements())
    inserted = draw(rows(table.columns, min_size=1, max_size=4))
    transient = draw(rows(table.columns, max_size=2))
    return kept, deleted, inserted, transient


def _load(con, name: str, table: TableSpec, rows_: list[tuple], mult: bool = False) -> None:
    columns = ", ".join(f"{c.name} {c.type}" for c in table.columns)
    extra = f", {MULT} BIGINT" if mult else ""
    con.execute(f"CREATE TABLE {name} ({columns}{extra})")
    if rows_:
        values = ", ".join("(" + ", ".join(sql_literal(v) for v in row) + ")" for row in rows_)
        con.execute(f"INSERT INTO {name} VALUES {values}")


def _narrow(rows_: list[tuple]) -> list[tuple]:
    """Join keys ``k`` (the first column) in {0, 1, NULL}: rows gain and lose their only
    partner often, which is where outer joins go wrong."""
    return [(None if r[0] is None else abs(r[0]) % 2, *r[1:]) for r in rows_]


@st.composite
def cases(
    draw,
    table_count: int,
    outer: bool = False,
    set_operations: bool = False,
    constants: bool = False,
    lateral: bool = False,
    top_k: bool = False,
):
    tables_ = draw(tables(table_count))
    if top_k:
        view_sql = draw(top_k_views(tables_))
    elif lateral:
        view_sql = draw(lateral_views(tables_))
    elif constants:
        view_sql = draw(constant_views(tables_))
    elif set_operations:
        view_sql = draw(set_operation_views(tables_))
    else:
        # A projection sees every term of the join's delta; aggregates above a join in a
        # subquery recompute the groups it touches, which hides most mistakes in the terms.
        shape = draw(st.sampled_from(["project"] * 4 + ["derived"] * 2 + SHAPES)) if outer else None
        view_sql = draw(views(tables_, shape=shape, outer=outer))
    changes_ = [draw(changes(t)) for t in tables_]
    if outer:
        tables_ = [TableSpec(t.name, t.columns, _narrow(t.rows)) for t in tables_]
        changes_ = [tuple(_narrow(part) for part in c) for c in changes_]
    return tables_, view_sql, changes_


def check(case, kept_in_a_table: bool = False) -> None:
    """``kept_in_a_table``: a top-k at the view's top reads the rows it kept from a table
    holding its old state, as from the view's table (:meth:`TopK.keep_from`)."""
    tables_, view_sql, changes_ = case
    relation, ctx = relation_of(view_sql)
    con = duckdb.connect()
    try:
        for table, (kept, deleted, inserted, transient) in zip(tables_, changes_, strict=True):
            _load(con, f"old_{table.name}", table, table.rows)
            _load(con, f"new_{table.name}", table, kept + inserted)
            feed = [(*r, -1) for r in deleted + transient] + [(*r, 1) for r in inserted + transient]
            _load(con, f"delta_{table.name}", table, feed, mult=True)
        if kept_in_a_table and isinstance(relation, TopK):
            state = relation.state(ctx, Version.OLD).sql("duckdb")
            con.execute(f"CREATE TABLE old_view AS {state}")
            relation.keep_from(exp.to_table("old_view"))
        old = as_multiset(con.execute(relation.state(ctx, Version.OLD).sql("duckdb")).fetchall())
        new = as_multiset(con.execute(relation.state(ctx, Version.NEW).sql("duckdb")).fetchall())
        delta: Counter = Counter()
        for *row, mult in con.execute(relation.delta(ctx).sql("duckdb")).fetchall():
            (key,) = as_multiset([tuple(row)])
            delta[key] += mult
    finally:
        con.close()
    expected = Counter(new)
    expected.subtract(old)
    assert {k: v for k, v in delta.items() if v} == {k: v for k, v in expected.items() if v}, (
        f"delta rule differs from Q(new) - Q(old)\nview: {view_sql}"
    )


@given(cases(1))
def test_single_table_operators(case):
    check(case)


@given(cases(2))
def test_join_operators(case):
    check(case)


@given(cases(3))
def test_three_way_join_operators(case):
    check(case)


@given(cases(2, outer=True))
def test_outer_join_operators(case):
    check(case)


@given(cases(3, outer=True))
def test_three_way_outer_join_operators(case):
    check(case)


@given(cases(2, set_operations=True))
def test_set_operation_operators(case):
    """UNION ALL, INTERSECT / EXCEPT [ALL] (and UNION, as DISTINCT over UNION ALL), nested and
    under projections, DISTINCT, aggregates and joins."""
    check(case)


@given(cases(2, constants=True))
def test_constant_relation_operators(case):
    """Constant relations (VALUES, range / generate_series, FROM-less SELECTs) unioned with,
    joined to and grouped with a table: their delta is empty, the table's carries through."""
    check(case)


@given(cases(2, lateral=True))
def test_lateral_operators(case):
    """Table functions over a row's columns (unnest, range, generate_series) and LATERAL
    subqueries, projected, grouped and joined: ``ΔJ ⋈lat f(ΔJ)``, and a subquery re-evaluated
    at both snapshots for the rows whose correlation keys changed."""
    check(case)


@given(cases(2, top_k=True), st.booleans())
def test_top_k_operator(case, kept_in_a_table):
    """ORDER BY ... LIMIT k [OFFSET m] (and DISTINCT ON, a window) at the top, in a derived
    table joined or aggregated, a union's branch or over a union: the rows kept merged with
    the input's delta when they decide the new top-k, the input renumbered when a kept row
    leaves; the kept rows numbered at the old state, or read from a table of them."""
    check(case, kept_in_a_table)
