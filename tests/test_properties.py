"""Differential property tests: random schemas, views, and change windows on real DuckLake
catalogs; after every refresh the maintained view must equal recomputation as a multiset.

One test per construct (view shape, aggregate function) so each gets its own examples, plus
joins of two and three tables whose windows change several tables at once, each table kept in
the view's DuckLake catalog or in a second one.
Depth: DUCKSTREAM_EXAMPLES=<n> (default 25 per test), DUCKSTREAM_DEEP=1 for 500.
"""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duckstream.testing.differential import DuckLakeHarness, run_scenario
from duckstream.testing.ducklake import attach_ducklake, connect_ducklake
from duckstream.testing.strategies import AGGREGATES, SHAPES, cycles, tables, views


@st.composite
def scenarios(
    draw, table_count: int, shape: str | None = None, kind: str | None = None, outer=False
):
    tables_ = draw(tables(table_count))
    view_sql = draw(views(tables_, shape, kind, outer=outer))
    cycles_ = draw(cycles(tables_))
    # With the sources' schema (as dbt passes it) columns are qualified, change reads name
    # only the columns used and delta terms get semi-join filters: both paths must be exact.
    known_schema = draw(st.booleans())
    # Joins may read tables of a second DuckLake catalog, whose snapshots move on their own.
    placement = {t.name: "raw" for t in tables_ if table_count > 1 and draw(st.booleans())}
    return tables_, view_sql, cycles_, known_schema, placement


def check(scenario) -> None:
    tables_, view_sql, cycles_, known_schema, placement = scenario
    schema = {t.name: {c.name: c.type for c in t.columns} for t in tables_}
    with tempfile.TemporaryDirectory() as directory:
        con = connect_ducklake(f"{directory}/lake", alias="dl")
        attach_ducklake(con, f"{directory}/raw", alias="raw")
        try:
            kwargs = {"schema": schema} if known_schema else {}
            harness = DuckLakeHarness(con, placement=placement)
            run_scenario(harness, tables_, view_sql, cycles_, **kwargs)
        finally:
            con.close()


@pytest.mark.parametrize("shape", SHAPES)
def test_single_table_view_shape(shape):
    given(scenarios(1, shape=shape))(check)()


@pytest.mark.parametrize("kind", AGGREGATES)
def test_single_table_aggregate(kind):
    given(scenarios(1, kind=kind))(check)()


@given(scenarios(2))
def test_two_table_joins_with_simultaneous_changes(scenario):
    check(scenario)


@given(scenarios(3))
def test_three_table_joins(scenario):
    check(scenario)


@pytest.mark.parametrize("shape", ["project", "derived", "aggregate", "distinct"])
def test_two_table_outer_joins(shape):
    """LEFT / RIGHT / FULL joins (mixed with inner and CROSS joins, ON conditions over one
    side, USING, a LEFT JOIN to a per-key aggregate) under each kind of view."""
    given(scenarios(2, shape=shape, outer=True))(check)()


@given(scenarios(3, outer=True))
def test_three_table_outer_joins(scenario):
    check(scenario)
