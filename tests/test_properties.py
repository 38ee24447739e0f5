"""Differential property tests: random schemas, views, and change windows on real DuckLake
catalogs; after every refresh the maintained view must equal recomputation as a multiset.

Depth: DUCKSTREAM_EXAMPLES=<n> (default 25 per test in CI), DUCKSTREAM_DEEP=1 for 500.
"""

from __future__ import annotations

import tempfile

from hypothesis import given
from hypothesis import strategies as st

from duckstream.testing.differential import DuckLakeHarness, run_scenario
from duckstream.testing.ducklake import connect_ducklake
from duckstream.testing.strategies import cycles, tables, views


@st.composite
def scenarios(draw, table_count: int):
    tables_ = draw(tables(table_count))
    return tables_, draw(views(tables_)), draw(cycles(tables_))


def _run(scenario) -> None:
    tables_, view_sql, cycles_ = scenario
    with tempfile.TemporaryDirectory() as directory:
        con = connect_ducklake(f"{directory}/lake", alias="dl")
        try:
            run_scenario(DuckLakeHarness(con), tables_, view_sql, cycles_)
        finally:
            con.close()


@given(scenarios(1))
def test_single_table_views(scenario):
    _run(scenario)


@given(scenarios(2))
def test_two_table_joins_with_simultaneous_changes(scenario):
    _run(scenario)


@given(scenarios(3))
def test_three_table_joins(scenario):
    _run(scenario)
