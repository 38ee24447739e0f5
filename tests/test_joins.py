"""Joins: the counterexample to the seeds' two-term rule, self-joins, join syntaxes, theta
joins, joins under aggregates, and several tables changing in one window."""

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


def r_and_s():
    return [
        TableSpec("r", [Column("k", "INTEGER"), Column("a", "VARCHAR")], [(1, "r1"), (2, "r2")]),
        TableSpec("s", [Column("k", "INTEGER"), Column("b", "VARCHAR")], [(1, "s1"), (2, "s2")]),
    ]


def test_deleting_both_partners_in_one_window_removes_the_joined_row(lake):
    """NOTES.md "The join rule": delete r and its only partner s in the same window. With
    post-update states ∇R⋈S_new and R_new⋈∇S are both empty, so the two-term rule leaves r⋈s
    in the view; the ordered rule's ∇R⋈S_old removes it."""
    cycles = [[[Delete("r", "k = 1"), Delete("s", "k = 1")]]]
    harness = DuckLakeHarness(lake)
    plan = run_scenario(harness, r_and_s(), "SELECT r.a, s.b FROM r JOIN s ON r.k = s.k", cycles)
    assert harness.rows(plan.query_mv) == [("r2", "s2")]


def test_inserting_both_partners_in_one_window_adds_the_joined_row_once(lake):
    cycles = [[[Insert("r", ((3, "r3"),)), Insert("s", ((3, "s3"),))]]]
    harness = DuckLakeHarness(lake)
    plan = run_scenario(harness, r_and_s(), "SELECT r.a, s.b FROM r JOIN s ON r.k = s.k", cycles)
    assert sorted(harness.rows(plan.query_mv)) == [("r1", "s1"), ("r2", "s2"), ("r3", "s3")]


def test_both_partners_deleted_under_an_aggregate(lake):
    cycles = [[[Delete("r", "k = 1")], [Delete("s", "k = 1")]]]
    view = "SELECT count(*) AS n, min(r.a) AS lo FROM r, s WHERE r.k = s.k"
    run_scenario(DuckLakeHarness(lake), r_and_s(), view, cycles)


CUSTOMERS = TableSpec(
    "customers",
    [Column("id", "INTEGER"), Column("name", "VARCHAR"), Column("nation", "INTEGER")],
    [(1, "ann", 1), (2, "bob", 2), (3, "cy", None), (4, "dee", 1)],
)
ORDERS = TableSpec(
    "orders",
    [Column("id", "INTEGER"), Column("customer", "INTEGER"), Column("amount", "DECIMAL(10,2)")],
    [(10, 1, 5), (11, 1, 7), (12, 2, 1), (13, None, 3), (14, 3, 2), (14, 3, 2)],
)
NATIONS = TableSpec(
    "nations",
    [Column("id", "INTEGER"), Column("region", "VARCHAR")],
    [(1, "EU"), (2, "US"), (3, "EU")],
)
CYCLES = [
    [[Insert("orders", ((15, 4, 9), (16, 4, 1)))], [Update("customers", "nation = 2", "id = 4")]],
    [[Delete("customers", "id = 1"), Delete("orders", "customer = 1")]],
    [[Update("nations", "region = 'US'", "id = 1")], [Insert("customers", ((1, "ann", 3),))]],
    [
        [
            Insert("orders", ((17, 1, 4),)),
            Delete("nations", "id = 2"),
            Insert("nations", ((2, "AS"),)),
        ]
    ],
    [[Update("orders", "customer = 2", "id = 14")], [Delete("orders", "amount > 6")]],
]
JOIN_VIEWS = {
    "join_on": ("SELECT c.name, o.amount FROM customers c JOIN orders o ON c.id = o.customer"),
    "comma_join_where": (
        "SELECT c.name, n.region, o.amount FROM customers c, orders o, nations n"
        " WHERE c.id = o.customer AND c.nation = n.id"
    ),
    "using": (
        "SELECT id, name, region FROM customers"
        " JOIN (SELECT id, region FROM nations) AS x USING (id)"
    ),
    "theta": "SELECT c.name, o.id FROM customers c JOIN orders o ON o.amount > c.id",
    "or_predicate": (
        "SELECT c.name, o.id FROM customers c JOIN orders o"
        " ON c.id = o.customer OR (c.nation = 2 AND o.amount < 2)"
    ),
    "self_join": (
        "SELECT a.name AS a_name, b.name AS b_name FROM customers a JOIN customers b"
        " ON a.nation = b.nation AND a.id < b.id"
    ),
    "cross_join": "SELECT n.region, c.name FROM nations n CROSS JOIN customers c WHERE n.id = 3",
    "join_aggregate": (
        "SELECT n.region, count(*) AS orders, sum(o.amount) AS revenue, avg(o.amount) AS mean,"
        " min(c.name) AS first_name, max(o.amount) AS largest"
        " FROM customers c JOIN orders o ON c.id = o.customer JOIN nations n ON c.nation = n.id"
        " GROUP BY n.region"
    ),
    "join_having": (
        "SELECT c.name, sum(o.amount) AS total FROM customers c JOIN orders o ON c.id = o.customer"
        " GROUP BY c.name HAVING sum(o.amount) > 4"
    ),
    "join_distinct": (
        "SELECT DISTINCT n.region FROM customers c JOIN nations n ON c.nation = n.id"
    ),
    "join_count_distinct": (
        "SELECT n.region, count(DISTINCT c.name) AS customers, string_agg(c.name, ',' ORDER BY"
        " c.name) AS names FROM customers c JOIN nations n ON c.nation = n.id GROUP BY n.region"
    ),
    "join_global": (
        "SELECT count(*) AS n, sum(o.amount) AS total FROM customers c, orders o"
        " WHERE c.id = o.customer AND c.nation IS NOT NULL"
    ),
    "derived_join": (
        "SELECT region, sum(amount) AS total FROM (SELECT n.region, o.amount FROM customers c,"
        " orders o, nations n WHERE c.id = o.customer AND c.nation = n.id) AS x GROUP BY region"
    ),
    "join_with_derived_aggregate": (
        "SELECT c.name, t.total FROM customers c JOIN (SELECT customer, sum(amount) AS total"
        " FROM orders GROUP BY customer) AS t ON c.id = t.customer"
    ),
}


@pytest.mark.parametrize("name", sorted(JOIN_VIEWS))
def test_join_view_matches_recomputation(lake, name):
    run_scenario(DuckLakeHarness(lake), [CUSTOMERS, ORDERS, NATIONS], JOIN_VIEWS[name], CYCLES)
