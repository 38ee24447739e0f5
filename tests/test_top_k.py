"""ORDER BY ... LIMIT / OFFSET (top-k) and DISTINCT ON (issue 18), maintained on DuckLake as a
numbering window (``normalize/rewrite_top_k.py``, ``normalize/rewrite_distinct_on.py``).

Both choose among rows tied in their ORDER BY; the plan keeps one valid choice, ties broken by
the output columns, and the harness recomputes the view with the same tie-break appended to
its ORDER BY (``break_ties``), so a tie is checked, not avoided. The windows insert rows that
enter the top, delete the row at the top, move rows across the k-th place by updates, add
ties, duplicates and NULLs, and empty the table.
"""

from __future__ import annotations

import duckdb
import pytest

from duckstream import UnsupportedSQLError, compile_ivm
from duckstream.normalize.number_rows import break_ties_sql
from duckstream.testing.differential import (
    Column,
    Cycle,
    Delete,
    DuckLakeHarness,
    Insert,
    Scenario,
    TableSpec,
    Update,
)

# s: scores (id unique; g a group with a NULL; v with ties and a NULL)
S = TableSpec(
    "s",
    [Column("id", "INTEGER"), Column("g", "VARCHAR"), Column("v", "INTEGER")],
    [(1, "a", 10), (2, "a", 30), (3, "b", 30), (4, "b", 5), (5, None, 20), (6, "c", None)],
)
# u: a second source for set operations and joins
U = TableSpec(
    "u",
    [Column("id", "INTEGER"), Column("g", "VARCHAR"), Column("v", "INTEGER")],
    [(10, "a", 25), (11, "d", 30)],
)
CYCLES: list[Cycle] = [
    # a new top row, a tie with the top, a duplicate row
    [[Insert("s", ((7, "c", 40), (8, "b", 30), (8, "b", 30)))]],
    # the top row leaves; a row moves across the k-th place
    [[Delete("s", "id = 7")], [Update("s", "v = 1", "id = 2")]],
    # several changes at once; a NULL value and a NULL group gain rows
    [[Insert("s", ((9, None, 35), (10, "a", None))), Update("s", "v = 31", "id = 4")]],
    [[Update("s", "g = 'b'", "g IS NULL"), Insert("u", ((12, "b", 50),))]],
    # everything leaves, then rows come back
    [[Delete("s", "TRUE")]],
    [[Insert("s", ((1, "a", 10), (2, "a", 10), (3, "b", 10))), Delete("u", "id = 11")]],
]

SCENARIOS = {
    # DuckDB 1.5.5 answers `ROW_NUMBER() OVER (ORDER BY ...) <= 1` over no rows with a row of
    # NULLs (found by the generator): the rewrite filters on a range instead
    "top_1_of_an_empty_table": Scenario(
        [TableSpec("s", S.columns, []), U], "SELECT s.id FROM s WHERE s.v > 1 LIMIT 1", CYCLES
    ),
    "top_3_with_ties": Scenario(
        [S, U], "SELECT s.id, s.v FROM s ORDER BY s.v DESC LIMIT 3", CYCLES
    ),
    "limit_and_offset_nulls_first": Scenario(
        [S, U],
        "SELECT s.g, s.v FROM s ORDER BY s.v ASC NULLS FIRST, s.g DESC LIMIT 2 OFFSET 1",
        CYCLES,
    ),
    "nulls_first_implicitly_ascending": Scenario(
        [S, U], "SELECT s.id, s.v FROM s ORDER BY s.v NULLS FIRST LIMIT 2", CYCLES
    ),
    "offset_only": Scenario([S, U], "SELECT s.id FROM s ORDER BY s.v, s.id OFFSET 3", CYCLES),
    "limit_without_order_by": Scenario([S, U], "SELECT s.g FROM s LIMIT 2", CYCLES),
    "fetch_first": Scenario(
        [S, U], "SELECT s.id, s.v FROM s ORDER BY s.v FETCH FIRST 2 ROWS ONLY", CYCLES
    ),
    "top_groups_by_an_aggregate": Scenario(
        [S, U],
        "SELECT s.g, sum(s.v) AS total, count(*) AS n FROM s GROUP BY s.g"
        " ORDER BY total DESC NULLS LAST LIMIT 2",
        CYCLES,
    ),
    "ordered_by_a_column_not_selected": Scenario(
        [S, U], "SELECT s.g FROM s WHERE s.v IS NOT NULL ORDER BY s.v * -1, s.id LIMIT 3", CYCLES
    ),
    "ordered_by_position_and_alias": Scenario(
        [S, U], "SELECT s.g AS grp, s.v + 1 AS w FROM s ORDER BY 2 DESC, grp LIMIT 2", CYCLES
    ),
    # over grouping sets: the ORDER BY / LIMIT of the union of the sets, not of each set
    # (TPC-DS Q5; each branch had the LIMIT before the top-k ran first)
    "top_k_of_a_rollup": Scenario(
        [S, U],
        "SELECT s.g, s.id, sum(s.v) AS total FROM s GROUP BY ROLLUP (s.g, s.id)"
        " ORDER BY s.g NULLS FIRST, s.id NULLS FIRST LIMIT 4",
        CYCLES,
    ),
    "distinct_on_over_a_cube": Scenario(
        [S, U],
        # ordered by count(*), not by n: transpiled for Spark, sqlglot writes DISTINCT ON as a
        # ROW_NUMBER() over the CUBE, whose ORDER BY may not name the alias n there
        "SELECT DISTINCT ON (s.g) s.g, s.id, count(*) AS n FROM s GROUP BY CUBE (s.g, s.id)"
        " ORDER BY s.g, count(*) DESC",
        CYCLES,
    ),
    "distinct_top": Scenario(
        [S, U], "SELECT DISTINCT s.v FROM s ORDER BY s.v DESC LIMIT 2", CYCLES
    ),
    "top_k_in_a_derived_table_joined": Scenario(
        [S, U],
        "SELECT t.id, t.v, u.id AS uid FROM (SELECT s.id, s.g, s.v FROM s ORDER BY s.v DESC"
        " LIMIT 2) AS t LEFT JOIN u ON t.g = u.g",
        CYCLES,
    ),
    "top_k_of_a_union": Scenario(
        [S, U],
        "SELECT s.g, s.v FROM s UNION ALL SELECT u.g, u.v FROM u ORDER BY v DESC LIMIT 3",
        CYCLES,
    ),
    "top_k_in_a_union_branch": Scenario(
        [S, U],
        "(SELECT s.g, s.v FROM s ORDER BY s.v LIMIT 1) UNION ALL SELECT u.g, u.v FROM u",
        CYCLES,
    ),
    "aggregate_over_a_top_k": Scenario(
        [S, U],
        "SELECT count(*) AS n, sum(t.v) AS total FROM (SELECT s.v FROM s ORDER BY s.v DESC"
        " LIMIT 4) AS t",
        CYCLES,
    ),
    # subqueries outside FROM that choose rows
    "in_a_top_k": Scenario(
        [S, U],
        "SELECT s.id, s.g FROM s WHERE s.g IN (SELECT u.g FROM u ORDER BY u.v DESC LIMIT 1)"
        " OR s.v IN (SELECT s2.v FROM s AS s2 ORDER BY s2.id LIMIT 2 OFFSET 1)",
        CYCLES,
    ),
    "exists_with_a_limit": Scenario(
        [S, U],
        "SELECT s.id FROM s WHERE EXISTS (SELECT 1 FROM u WHERE u.g = s.g LIMIT 1)",
        CYCLES,
        spark_gap="Spark 3.5 refuses a LIMIT in a correlated EXISTS: the view does not run there",
    ),
    "scalar_subquery_with_limit_1": Scenario(
        [S, U],
        "SELECT s.id, (SELECT u.g FROM u ORDER BY u.v DESC, u.id LIMIT 1) AS best FROM s"
        " WHERE s.v >= (SELECT s2.v FROM s AS s2 ORDER BY s2.v DESC NULLS LAST LIMIT 1 OFFSET 1)",
        CYCLES,
    ),
    "distinct_on_latest_per_group": Scenario(
        [S, U], "SELECT DISTINCT ON (s.g) s.g, s.id, s.v FROM s ORDER BY s.g, s.v DESC", CYCLES
    ),
    "distinct_on_with_ties_and_no_order_by": Scenario(
        [S, U], "SELECT DISTINCT ON (s.g) s.g, s.v FROM s", CYCLES
    ),
    "distinct_on_an_expression_and_two_keys": Scenario(
        [S, U],
        "SELECT DISTINCT ON (coalesce(s.g, 'none'), s.v > 15) s.id, s.v FROM s"
        " ORDER BY coalesce(s.g, 'none'), s.v > 15, s.id DESC",
        CYCLES,
    ),
    "distinct_on_under_a_top_k": Scenario(
        [S, U],
        "SELECT d.g, d.v FROM (SELECT DISTINCT ON (s.g) s.g, s.v FROM s ORDER BY s.g, s.v)"
        " AS d ORDER BY d.v DESC LIMIT 2",
        CYCLES,
    ),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_top_k(lake, name):
    SCENARIOS[name].run(DuckLakeHarness(lake, check_names=True))


def test_what_recomputes_its_input():
    """A top-k keeps its rows (``tree.top_k``: its input recomputed only to refill them); an
    OFFSET without LIMIT numbers one partition, and the plan says it recomputes its input;
    DISTINCT ON numbers within its groups and does not."""
    top = compile_ivm(SCENARIOS["top_3_with_ties"].view).features
    assert "top_k" in top and "window_recomputes_whole_input" not in top
    offset = compile_ivm(SCENARIOS["offset_only"].view).features
    assert {"window_function", "window_recomputes_whole_input"} <= offset
    first = compile_ivm(SCENARIOS["distinct_on_latest_per_group"].view).features
    assert "window_recomputes_whole_input" not in first


def test_break_ties_chooses_what_the_engine_may():
    """The tie-break appended to a view is one of the answers DuckDB may give, and fixes it:
    the rows tied at the limit are the output columns' smallest."""
    con = duckdb.connect()
    con.execute("CREATE TABLE s AS SELECT * FROM (VALUES (1, 5), (2, 5), (3, 5), (4, 9)) t(id, v)")
    view = "SELECT id, v FROM s ORDER BY v DESC LIMIT 2"
    assert con.execute(break_ties_sql(view, "duckdb")).fetchall() == [(4, 9), (1, 5)]
    assert break_ties_sql("SELECT id FROM s", "duckdb") == "SELECT id FROM s"


@pytest.mark.parametrize(
    ("sql", "feature", "message"),
    [
        ("SELECT s.id FROM s ORDER BY s.v LIMIT s.id", "limit", "whole numbers"),
        ("SELECT s.id FROM s ORDER BY s.v FETCH FIRST 2 ROWS WITH TIES", "limit", "WITH TIES"),
        (
            "SELECT DISTINCT ON (s.g) s.g, s.v FROM s ORDER BY s.g LIMIT 2",
            "distinct_on",
            "derived table",
        ),
        ("SELECT DISTINCT s.g FROM s ORDER BY s.v LIMIT 2", "limit", "output columns"),
        (
            "SELECT s.id, (SELECT u.v FROM u WHERE u.g = s.g ORDER BY u.v LIMIT 1) AS v FROM s",
            "subquery",
            "correlated subquery with LIMIT",
        ),
    ],
)
def test_top_k_shapes_refused(sql, feature, message):
    with pytest.raises(UnsupportedSQLError, match=message) as info:
        compile_ivm(sql)
    assert info.value.feature == feature
