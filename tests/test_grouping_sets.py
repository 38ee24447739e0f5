"""ROLLUP, CUBE and GROUPING SETS (issue 18), maintained as a UNION ALL of one GROUP BY per
grouping set (``normalize/expand_grouping_sets.py``).

Each scenario goes through windows that add groups, empty a group and the whole table (the
grand total stays, counting 0), change keys to and from NULL (a NULL key and a rolled-up
NULL are different rows: GROUPING tells them apart), and update values; after every refresh
the view's table is compared with recomputation as a multiset.
"""

from __future__ import annotations

import pytest

from duckstream import UnsupportedSQLError, compile_ivm
from duckstream.normalize.expand_grouping_sets import MAX_SETS
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

SALES = TableSpec(
    "sales",
    [
        Column("region", "VARCHAR"),
        Column("product", "VARCHAR"),
        Column("year", "INTEGER"),
        Column("amount", "INTEGER"),
    ],
    [
        ("north", "a", 2024, 10),
        ("north", "b", 2024, 5),
        ("south", "a", 2025, 7),
        ("south", "a", 2025, 7),
        (None, "b", 2024, 1),
    ],
)
CYCLES: list[Cycle] = [
    [[Insert("sales", (("east", "c", 2025, 3), ("north", None, 2025, 2)))]],
    [[Update("sales", "region = NULL", "region = 'east'")], [Delete("sales", "product = 'b'")]],
    [[Update("sales", "amount = amount + 1", "region = 'south'")]],
    [[Delete("sales", "TRUE")]],  # every group empties; the grand totals count 0
    [[Insert("sales", (("west", "a", 2024, 4), ("west", "a", 2024, 4), (None, None, None, 9)))]],
]

SCENARIOS = {
    "rollup": Scenario(
        [SALES],
        "SELECT region, product, grouping(region) AS gr, grouping(product) AS gp,"
        " sum(amount) AS total, count(region) AS nr FROM sales GROUP BY ROLLUP (region, product)",
        CYCLES,
    ),
    "cube_with_grouping_id": Scenario(
        [SALES],
        "SELECT region, year, grouping_id(region, year) AS level, count(amount) AS n,"
        " max(amount) AS top FROM sales GROUP BY CUBE (region, year)",
        CYCLES,
    ),
    "grouping_sets_listed_with_a_repeat": Scenario(
        [SALES],
        "SELECT region, product, avg(amount) AS mean FROM sales"
        " GROUP BY GROUPING SETS ((region, product), (region), (region), ())",
        CYCLES,
    ),
    "key_and_rollup_with_having_and_where": Scenario(
        [SALES],
        "SELECT year, region, product, sum(amount) AS total FROM sales WHERE amount > 1"
        " GROUP BY year, ROLLUP (region, product) HAVING count(*) > 1",
        CYCLES,
    ),
    "rollup_of_an_expression_in_a_cte": Scenario(
        [SALES],
        "WITH totals AS (SELECT coalesce(region, '?') AS r, year % 2 AS odd,"
        " sum(amount) AS total FROM sales GROUP BY ROLLUP (coalesce(region, '?'), year % 2))"
        " SELECT t.r, t.odd, t.total FROM totals AS t WHERE t.total > 3",
        CYCLES,
    ),
    # windows over the union of the sets' rows (TPC-DS Q36, Q70, Q86): the aggregate under
    # them is expanded, the windows recompute the partitions a change touches
    "ranked_within_its_rollup_level": Scenario(
        [SALES],
        "SELECT region, product, sum(amount) AS total,"
        " grouping(region) + grouping(product) AS level,"
        " rank() OVER (PARTITION BY grouping(region) + grouping(product),"
        " CASE WHEN grouping(product) = 0 THEN region END"
        " ORDER BY sum(amount) DESC) AS r"
        " FROM sales GROUP BY ROLLUP (region, product)",
        CYCLES,
    ),
    "share_of_each_cube_level": Scenario(
        [SALES],
        "SELECT region, year, count(*) AS n,"
        " sum(amount) * 100.0 / sum(sum(amount)) OVER (PARTITION BY grouping_id(region, year))"
        " AS share, lag(count(*)) OVER (ORDER BY grouping_id(region, year), region NULLS FIRST,"
        " year NULLS FIRST)"
        " AS previous FROM sales WHERE amount > 1 GROUP BY CUBE (region, year)",
        CYCLES,
    ),
    "distinct_over_windows_over_a_rollup": Scenario(
        [SALES],
        "SELECT DISTINCT grouping(product) AS g, count(*) AS n,"
        " rank() OVER (PARTITION BY grouping(product) ORDER BY count(*)) AS r"
        " FROM sales GROUP BY ROLLUP (product)",
        CYCLES,
    ),
    "top_k_of_a_ranked_rollup_with_having": Scenario(
        [SALES],
        "SELECT region, count(*) AS n, dense_rank() OVER (PARTITION BY grouping(region)"
        " ORDER BY count(*) DESC) AS dr FROM sales GROUP BY ROLLUP (region)"
        " HAVING count(*) > 1 ORDER BY dr, CASE WHEN grouping(region) = 0 THEN region END,"
        " n DESC LIMIT 3",
        CYCLES,
    ),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_grouping_sets(lake, name):
    SCENARIOS[name].run(DuckLakeHarness(lake, check_names=True))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT a, grouping(b) AS g FROM t GROUP BY ROLLUP (a)",
        "SELECT count(*) AS n FROM t GROUP BY CUBE (a, b, c, d, e, f)",
    ],
)
def test_grouping_set_shapes_refused(sql):
    with pytest.raises(UnsupportedSQLError) as raised:
        compile_ivm(sql)
    assert raised.value.feature == "grouping_sets"


def test_cube_limit_is_what_the_message_says():
    assert MAX_SETS == 2**5  # CUBE of five expressions is the largest maintained
    compile_ivm("SELECT count(*) AS n FROM t GROUP BY CUBE (a, b, c, d, e)")


@pytest.mark.parametrize("kind", ["ROLLUP", "CUBE"])
def test_spark_with_rollup_is_rollup(kind):
    """Spark's (and MySQL's) ``GROUP BY a, b WITH ROLLUP`` is ``GROUP BY ROLLUP (a, b)``."""

    def plan(group: str):
        return compile_ivm(
            f"SELECT a, b, count(*) AS n FROM t GROUP BY {group}",
            dialect="spark",
            mv_catalog="lake",
            mv_schema="db",
        )

    with_form, function_form = plan(f"a, b WITH {kind}"), plan(f"{kind} (a, b)")
    assert with_form.create_mv == function_form.create_mv
    assert with_form.maintain == function_form.maintain
    assert with_form.create_mv.count("UNION ALL") == (2 if kind == "ROLLUP" else 3)
