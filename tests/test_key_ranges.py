"""Where a Spark plan's key ranges go (``Term.range_filters``, ``engines/iceberg/key_ranges``).

Each delta term that joins a source's changes to another source's state by ``d.x = t.y``
filters ``t.y`` by the run-time range of ``x`` in the changes, where the equality implies it:
never onto the preserved side of an outer join, never onto a derived table or renamed
columns (nothing says how those compare), never on DuckDB (its join filters prune already).
Whether the bounds are right is ``tests/spark/test_spark_key_ranges.py``'s job.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from duckstream import compile_ivm
from duckstream.engines.iceberg.dialect import DIALECT
from duckstream.engines.iceberg.key_ranges import KeyRanges
from duckstream.plan import SetValues
from duckstream.testing.spark_harness import to_spark
from duckstream.testing.tpch import tpch_schema, tpch_view

RANGE = re.compile(r"(\w+\.\w+) BETWEEN COALESCE\((range_\d+_\d+)_low")
VALUE = re.compile(r"\$\{duckstream\.\w+\.(\w+)\}")  # the run-time values, by their names


def _spark(view: str, **kwargs):
    return compile_ivm(to_spark(view), dialect="spark", mv_name="v", mv_catalog="lake",
                       mv_schema="db", **kwargs)  # fmt: skip


def _terms(plan) -> list[tuple[str, str]]:
    """Each delta term's SQL and the index of the source whose change it reads (its guard):
    the SELECTs the delta's view unions."""
    (delta,) = [
        s for s in plan.maintain if re.match(r"CREATE OR REPLACE TEMPORARY VIEW \S+_delta AS", s)
    ]
    parsed = sqlglot.parse_one(VALUE.sub(r"\1", delta), read=DIALECT)
    terms = []
    for union in parsed.find_all(exp.Union):
        for term in (union.this, union.expression):
            where = term.args.get("where") if isinstance(term, exp.Select) else None
            if where is not None:
                (changed,) = re.findall(r"\(changed_(\d+)\)", where.sql(DIALECT))
                terms.append((term.sql(DIALECT), changed))
    return terms


def _ranges(sql: str) -> set[str]:
    return {column for column, _ in RANGE.findall(sql)}


def _spec(plan) -> KeyRanges:
    (spec,) = [s.spec for s in plan.steps["maintain"] if isinstance(s, SetValues)
               and isinstance(s.spec, KeyRanges)]  # fmt: skip
    return spec


def test_each_join_term_bounds_the_states_it_joins_by_key() -> None:
    plan = _spark(tpch_view("3"), schema=tpch_schema())
    names = {str(r.index): r.table.rsplit(".", 1)[1] for r in _spec(plan).ranges}
    expected = {
        "customer": {"orders.o_custkey"},
        "orders": {"customer.c_custkey", "lineitem.l_orderkey"},
        "lineitem": {"orders.o_orderkey"},
    }
    terms = _terms(plan)
    assert {names[changed] for _, changed in terms} == set(expected)
    for sql, changed in terms:
        assert _ranges(sql) == expected[names[changed]], sql
    spec = _spec(plan)
    assert {(r.table.rsplit(".", 1)[1], r.column) for r in spec.ranges} == {
        ("customer", "c_custkey"),
        ("orders", "o_custkey"),
        ("orders", "o_orderkey"),
        ("lineitem", "l_orderkey"),
    }
    orders_key = next(r for r in spec.ranges if r.column == "o_orderkey")
    assert orders_key.uses == (("lake.db.lineitem", "l_orderkey"),)
    # the value query a person runs: least and greatest key over the changes views
    assert "min(o_orderkey)" in spec.query and "max(o_orderkey)" in spec.query


def test_no_range_on_the_preserved_side_of_an_outer_join() -> None:
    plan = _spark("SELECT a.k, b.w FROM a LEFT JOIN b ON a.k = b.k")
    by_change = {}
    for sql, changed in _terms(plan):
        by_change.setdefault(changed, []).append(sql)
    (a_changes,) = by_change["0"]  # ΔA ⟕ B_old: B bounded in the ON, A is the change
    on = sqlglot.parse_one(a_changes, read=DIALECT).find(exp.Join).args["on"].sql(DIALECT)
    assert _ranges(on) == {"b.k"}
    # B's change: A_new ⋈ ΔB and the unmatched-row terms (A_new ⟕ B at both snapshots) bound A
    assert [sorted(_ranges(sql)) for sql in by_change["1"]] == [["a.k"]] * 3


def test_no_range_through_renamed_columns_or_onto_a_derived_table() -> None:
    renamed = _spark("SELECT x.p, b.w FROM a AS x(p, q) JOIN b ON x.p = b.k")
    derived = _spark("SELECT a.k, s.n FROM a JOIN (SELECT k, count(*) AS n FROM b GROUP BY k)"
                     " AS s ON a.k = s.k")  # fmt: skip
    for plan in (renamed, derived):
        assert all(not _ranges(sql) for sql, _ in _terms(plan))
        assert not any(isinstance(s, SetValues) for s in plan.steps["maintain"])


def test_duckdb_plans_have_no_ranges() -> None:
    plan = compile_ivm(tpch_view("3"), mv_name="v", mv_catalog="lake", mv_schema="main",
                       schema=tpch_schema())  # fmt: skip
    assert not any("BETWEEN COALESCE" in s for s in plan.maintain)
