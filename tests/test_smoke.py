"""One plain test per construct: a view, a few change cycles, equality with recomputation."""

from __future__ import annotations

import pytest

from duckstream.testing.differential import (
    Column,
    Delete,
    DuckLakeHarness,
    Insert,
    TableSpec,
    Update,
    run_scenario,
)

ORDERS = TableSpec(
    "orders",
    [
        Column("id", "INTEGER"),
        Column("customer", "VARCHAR"),
        Column("amount", "DECIMAL(10,2)"),
        Column("qty", "INTEGER"),
        Column("day", "DATE"),
        Column("paid", "BOOLEAN"),
    ],
    [
        (1, "ann", 10.5, 1, "2024-01-01", True),
        (2, "bob", 20, 2, "2024-01-02", False),
        (3, "ann", None, 3, "2024-01-02", None),
        (4, None, 7.25, None, "2024-01-03", True),
        (4, None, 7.25, None, "2024-01-03", True),
    ],
)

CYCLES = [
    [
        [
            Insert(
                "orders",
                ((5, "cy", 1, 1, "2024-01-04", False), (6, "ann", 2, 2, "2024-01-04", True)),
            )
        ]
    ],
    [[Delete("orders", "id = 1")], [Update("orders", "amount = amount + 1", "customer = 'bob'")]],
    [
        [Delete("orders", "id = 4")],
        [Insert("orders", ((4, None, 7.25, None, "2024-01-03", True),))],
    ],
    [],  # an empty window
    [[Insert("orders", ((7, "dee", 3, 3, "2024-01-05", None),))], [Delete("orders", "id = 7")]],
    [[Update("orders", "customer = 'zed'", "id >= 5")], [Update("orders", "qty = NULL", "id = 6")]],
    [[Delete("orders", "true")]],
    [[Insert("orders", ((8, "ann", 5, 1, "2024-02-01", True),))]],
]

VIEWS = {
    "select_all_columns": "SELECT id, customer, amount, qty, day, paid FROM orders",
    "filter_project": "SELECT id, amount * 2 AS double_amount FROM orders WHERE qty > 1 OR paid",
    "expressions": (
        "SELECT upper(customer) AS who, CASE WHEN amount > 10 THEN 'big' ELSE 'small' END AS size,"
        " CAST(qty AS DOUBLE) / 2 AS half, day + INTERVAL 1 DAY AS next_day,"
        " coalesce(customer, '?') || '-' || CAST(id AS VARCHAR) AS label FROM orders"
    ),
    "duplicates": "SELECT customer FROM orders",
    "distinct": "SELECT DISTINCT customer, paid FROM orders",
    "group_by": (
        "SELECT customer, count(*) AS n, count(qty) AS nq, sum(amount) AS total,"
        " avg(qty) AS avg_qty, min(amount) AS lo, max(day) AS last_day"
        " FROM orders GROUP BY customer"
    ),
    "group_by_expression": (
        "SELECT qty % 2 AS parity, sum(amount) AS total FROM orders GROUP BY qty % 2"
    ),
    "global_aggregate": (
        "SELECT count(*) AS n, sum(amount) AS total, min(qty) AS lo, max(qty) AS hi,"
        " avg(amount) AS mean FROM orders"
    ),
    "having": "SELECT customer, sum(qty) AS q FROM orders GROUP BY customer HAVING count(*) > 1",
    "having_on_global": "SELECT sum(qty) AS q FROM orders HAVING sum(qty) > 5",
    "count_distinct": (
        "SELECT paid, count(DISTINCT customer) AS customers FROM orders GROUP BY paid"
    ),
    "filtered_aggregate": (
        "SELECT customer, sum(amount) FILTER (WHERE paid) AS paid_total FROM orders"
        " GROUP BY customer"
    ),
    "aggregate_expression": (
        "SELECT customer, 100.0 * sum(CASE WHEN paid THEN amount ELSE 0 END) / sum(amount) AS pct,"
        " sum(qty) + count(*) AS mix FROM orders GROUP BY customer"
    ),
    "derived_table": (
        "SELECT who, amount FROM (SELECT customer AS who, amount, qty FROM orders"
        " WHERE qty > 0) AS s WHERE amount > 5"
    ),
    "derived_aggregate": (
        "SELECT customer, total FROM (SELECT customer, sum(amount) AS total FROM orders"
        " GROUP BY customer) AS s WHERE total > 10"
    ),
    "aggregate_over_derived": (
        "SELECT count(*) AS groups, sum(total) AS total FROM (SELECT customer, sum(amount) AS total"
        " FROM orders GROUP BY customer) AS s"
    ),
    "cte": (
        "WITH paid AS (SELECT customer, amount FROM orders WHERE paid)"
        " SELECT customer, sum(amount) AS total FROM paid GROUP BY customer"
    ),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view_matches_recomputation(lake, name):
    harness = DuckLakeHarness(lake)
    run_scenario(harness, [ORDERS], VIEWS[name], CYCLES)


def test_refresh_without_changes_writes_nothing(lake):
    harness = DuckLakeHarness(lake)
    plan = run_scenario(harness, [ORDERS], VIEWS["group_by"], CYCLES[:1])
    before = lake.execute("SELECT max(snapshot_id) FROM ducklake_snapshots('dl')").fetchone()
    harness.refresh(plan)
    harness.refresh(plan)
    after = lake.execute("SELECT max(snapshot_id) FROM ducklake_snapshots('dl')").fetchone()
    assert before == after
