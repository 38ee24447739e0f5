"""Constant relations on DuckLake: ``VALUES`` lists (in FROM and as a CTE), ``range`` /
``generate_series`` with constant arguments, and SELECTs without FROM (as ``dbt.date_spine``
and ``dbt_utils.generate_series`` write them), unioned with tables, joined to them (inner,
LEFT either way, FULL, CROSS) and grouped over those joins. Each scenario is maintained through
windows that insert, delete and update the table, and compared with recomputation after every
refresh, with and without ``schema=`` and through ``auto`` as well as forced maintenance
(each scenario by one of those paths in turn; by every one under ``DUCKSTREAM_DEEP=1``).

``tests/spark/test_spark_constants.py`` runs some of them on Spark + Iceberg.
"""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from duckstream import UnsupportedSQLError, compile_ivm
from duckstream.testing.differential import (
    Column,
    Cycle,
    Delete,
    Insert,
    Scenario,
    TableSpec,
    Update,
    run_on_ducklake,
)
from strategies import ducklake_runs  # tests/ is on sys.path (its conftest)

A = TableSpec(
    "a",
    [Column("k", "INTEGER"), Column("v", "VARCHAR")],
    [(0, "x"), (1, "x"), (1, "y"), (3, "z"), (None, None), (None, "n")],
)
CYCLES: list[Cycle] = [
    [[Insert("a", ((2, "e"), (2, "e"), (None, "q")))]],
    [[Delete("a", "k = 1")]],  # a spine value loses its only rows
    [[Update("a", "k = 4", "k = 3")], [Insert("a", ((1, "back"),))]],
    [[Insert("a", ((9, "t"),)), Delete("a", "k = 9")], [Delete("a", "k IS NULL")]],
    [[Delete("a", "true")]],  # every spine value unmatched
    [[Insert("a", ((0, "x"), (5, "w"), (-1, "m")))]],
]

# dbt-core 1.11's date_spine("month", "cast('2020-01-01' as date)",
# "cast('2021-01-01' as date)") as dbt-duckdb renders it (macros/utils/date_spine.sql and
# generate_series.sql of dbt's global project, duckdb__dateadd): 12 intervals, 4 powers of two.
DATE_SPINE = """
    with rawdata as (
    with p as (
        select 0 as generated_number union all select 1
    ), unioned as (
    select
    p0.generated_number * power(2, 0)
     +
    p1.generated_number * power(2, 1)
     +
    p2.generated_number * power(2, 2)
     +
    p3.generated_number * power(2, 3)
    + 1
    as generated_number
    from
    p as p0
     cross join
    p as p1
     cross join
    p as p2
     cross join
    p as p3
    )
    select *
    from unioned
    where generated_number <= 12
    order by generated_number
    ),
    all_periods as (
        select (
            (cast('2020-01-01' as date) + cast(row_number() over (order by 1) - 1 as bigint) * interval 1 month)
        ) as date_month
        from rawdata
    ),
    filtered as (
        select *
        from all_periods
        where date_month <= cast('2021-01-01' as date)
    )
    select * from filtered
"""  # noqa: E501

ORDERS = TableSpec(
    "orders",
    [Column("id", "INTEGER"), Column("ordered", "DATE"), Column("amount", "DECIMAL(10,2)")],
    [
        (1, datetime.date(2020, 1, 5), Decimal("10.00")),
        (2, datetime.date(2020, 1, 20), Decimal("5.50")),
        (3, datetime.date(2020, 3, 1), Decimal("7.25")),
        (4, datetime.date(2019, 12, 31), Decimal("1.00")),  # before the spine
        (5, None, Decimal("2.00")),
    ],
)
ORDER_CYCLES: list[Cycle] = [
    [[Insert("orders", ((6, datetime.date(2020, 2, 14), Decimal("3.00")),))]],
    [[Delete("orders", "id = 3")], [Update("orders", "amount = amount * 2", "id = 1")]],
    [[Update("orders", "ordered = DATE '2020-12-31'", "id IN (2, 4)")]],
    [[Delete("orders", "true")]],
    [[Insert("orders", ((7, datetime.date(2020, 6, 30), Decimal("0.50")),) * 2)]],
]

SCENARIOS: dict[str, Scenario] = {
    "union_with_constants": Scenario(
        [A],
        "SELECT k, v FROM a UNION ALL SELECT 0 AS k, 'zero' AS v UNION ALL SELECT 7, 'x'",
        CYCLES,
    ),
    "constants_first_in_union": Scenario(
        [A], "SELECT -1 AS k UNION ALL SELECT k FROM a WHERE v <> 'y'", CYCLES
    ),
    "union_distinct_with_values": Scenario(
        [A], "SELECT k FROM a UNION SELECT n FROM (VALUES (0), (2), (NULL)) AS c(n)", CYCLES
    ),
    "except_constants": Scenario([A], "SELECT k FROM a EXCEPT SELECT 1 UNION ALL SELECT 3", CYCLES),
    "spine_left_join_aggregate": Scenario(
        [A],
        "SELECT s.n, count(a.k) AS rows_, count(DISTINCT a.v) AS kinds, min(a.v) AS lo"
        " FROM range(0, 5) AS s(n) LEFT JOIN a ON a.k = s.n GROUP BY s.n",
        CYCLES,
    ),
    "table_left_join_spine": Scenario(
        [A],
        "SELECT a.k, a.v, s.n FROM a LEFT JOIN generate_series(0, 4, 2) AS s(n) ON a.k = s.n",
        CYCLES,
    ),
    "spine_full_join": Scenario(
        [A],
        "SELECT s.n, a.v FROM a FULL JOIN generate_series(3, 0, -1) AS s(n) ON a.k = s.n",
        CYCLES,
    ),
    "cross_join_spine": Scenario(
        [A],
        "SELECT a.k, s.n, a.k * s.n AS product FROM a CROSS JOIN range(3) AS s(n)"
        " WHERE a.k IS NOT NULL",
        CYCLES,
    ),
    "values_cte_joined": Scenario(
        [A],
        "WITH labels(k, label) AS (VALUES (1, 'one'), (2, 'two'), (NULL, 'none'), (1, 'uno'))"
        " SELECT a.k, a.v, l.label FROM a JOIN labels AS l ON a.k = l.k",
        CYCLES,
    ),
    "values_left_joined_grouped": Scenario(
        [A],
        "SELECT l.label, count(a.v) AS n FROM (VALUES (0, 'zero'), (1, 'one'), (2, 'two'))"
        " AS l(k, label) LEFT JOIN a ON a.k = l.k GROUP BY l.label",
        CYCLES,
    ),
    "from_less_spine_joined": Scenario(
        [A],
        "WITH p AS (SELECT 0 AS b UNION ALL SELECT 1), spine AS (SELECT p0.b + 2 * p1.b AS n"
        " FROM p AS p0 CROSS JOIN p AS p1) SELECT spine.n, sum(a.k) AS total"
        " FROM spine LEFT JOIN a ON a.k = spine.n GROUP BY spine.n",
        CYCLES,
    ),
    "global_aggregate_over_spine_join": Scenario(
        [A],
        "SELECT count(*) AS pairs, count(a.k) AS matched FROM range(-1, 3) AS s(n)"
        " LEFT JOIN a ON a.k = s.n",
        CYCLES,
    ),
    "dbt_date_spine": Scenario(
        [ORDERS],
        f"WITH util_months AS ({DATE_SPINE}) SELECT m.date_month, count(o.id) AS orders,"
        " coalesce(sum(o.amount), 0) AS revenue FROM util_months AS m"
        " LEFT JOIN orders AS o ON date_trunc('month', o.ordered) = m.date_month"
        " GROUP BY m.date_month",
        ORDER_CYCLES,
    ),
}


# Each scenario by one of the paths users run, in turn (every path under DUCKSTREAM_DEEP).
RUNS, RUN_IDS = ducklake_runs(SCENARIOS)


@pytest.mark.parametrize(("name", "strategy", "schema"), RUNS, ids=RUN_IDS)
def test_constant_relation(tmp_path, name, strategy, schema):
    plan = run_on_ducklake(str(tmp_path / "lake"), SCENARIOS[name], strategy, schema)
    assert "constant_relation" in plan.features


def test_a_join_reads_no_delta_of_a_constant_relation():
    """``Δ(R ⋈ C) = ΔR ⋈ C``: the refresh has one join term, reading the spine as written."""
    plan = compile_ivm(
        "SELECT s.n, a.v FROM range(0, 5) AS s(n) JOIN a ON a.k = s.n",
        schema={"a": {"k": "INTEGER", "v": "VARCHAR"}},
    )
    maintain = "\n".join(plan.maintain)
    assert "RANGE(0, 5) AS s(n)" in maintain
    assert "WHERE FALSE" not in maintain  # no term over the spine's (empty) delta


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1 AS one",
        "SELECT * FROM range(3) AS r(i)",
        "WITH v(a) AS (VALUES (1), (2)) SELECT a FROM v",
        "SELECT 0 AS n UNION ALL SELECT 1",
    ],
)
def test_a_view_that_reads_no_table_is_refused(sql):
    """Nothing can change it, so there is nothing to maintain: refused, saying so."""
    with pytest.raises(UnsupportedSQLError) as raised:
        compile_ivm(sql)
    assert raised.value.feature == "no_source"
    assert "reads no table nor the clock" in raised.value.message


@pytest.mark.parametrize(
    ("sql", "feature"),
    [
        ("SELECT a.k FROM a FULL JOIN range(0, a.k) AS r(i) ON TRUE", "lateral_join"),
        ("SELECT a.k FROM a, (VALUES (a.k)) AS v(x)", "table_function"),
        ("SELECT (SELECT max(k) FROM a) AS m", "no_source"),
    ],
)
def test_what_is_not_constant_is_named(sql, feature):
    with pytest.raises(UnsupportedSQLError) as raised:
        compile_ivm(sql)
    assert raised.value.feature == feature


def test_spark_renders_series_as_range_and_refuses_date_series():
    plan = compile_ivm(
        "SELECT s.n, count(a.k) AS c FROM generate_series(1, 3) AS s(n) LEFT JOIN a"
        " ON a.k = s.n GROUP BY s.n",
        dialect="spark",
        schema={"a": {"k": "INT"}},
    )
    assert "RANGE(1, 3 + 1, 1) AS s(n)" in "\n".join(plan.initialize_cursors)
    with pytest.raises(UnsupportedSQLError) as raised:
        compile_ivm(
            "SELECT a.k, d.day FROM a, generate_series(DATE '2024-01-01', DATE '2024-01-03',"
            " INTERVAL 1 DAY) AS d(day)",
            dialect="spark",
        )
    assert raised.value.feature == "spark_unsupported"
    assert "date_add" in raised.value.message
