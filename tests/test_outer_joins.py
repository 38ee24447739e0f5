"""Outer joins (issue 16): LEFT, RIGHT and FULL joins maintained on DuckLake.

The hard cases, each a scenario maintained through several windows and compared with
recomputation as a multiset after every refresh: a row flipping between matched and
NULL-extended when its only partner comes or goes, both sides changing in one window, a
partner swapped for another in one window, NULL join keys, duplicates on both sides, a key
whose last partner leaves and comes back; then the shapes dbt projects use (a LEFT JOIN to a
per-key aggregate, chains from a fact to its dimensions with aggregates on top). The same
scenarios run on Spark + Iceberg (``tests/spark/test_spark_outer_joins.py``).
"""

from __future__ import annotations

import pytest

from duckstream.compiler import compile_ivm
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

CUSTOMERS = TableSpec(
    "customers",
    [Column("id", "INTEGER"), Column("name", "VARCHAR"), Column("active", "BOOLEAN")],
    [(1, "ann", True), (2, "bob", False), (3, "cy", True), (None, "nul", True)],
)
ORDERS = TableSpec(
    "orders",
    [Column("oid", "INTEGER"), Column("cid", "INTEGER"), Column("amount", "INTEGER")],
    [(10, 1, 5), (11, 1, 7), (12, 2, 3), (13, None, 9), (14, 9, 1)],
)

# Each window is a list of batches; a batch commits its changes together.
FLIP: list[Cycle] = [
    # customer 3's first partner arrives: (3, NULL) becomes (3, 15)
    [[Insert("orders", ((15, 3, 4),))]],
    # ... and goes again: back to (3, NULL)
    [[Delete("orders", "oid = 15")]],
    # customer 2's only order is deleted, order 14 finds a customer
    [[Delete("orders", "cid = 2")], [Insert("customers", ((9, "nine", False),))]],
    # a partner moves from customer 1 to customer 3 (an update is -old +new)
    [[Update("orders", "cid = 3", "oid = 11")]],
]
BOTH_SIDES: list[Cycle] = [
    # a customer and its order arrive together; another customer and its orders leave
    [
        [Insert("customers", ((4, "dee", True),)), Insert("orders", ((16, 4, 2),))],
        [Delete("customers", "id = 1"), Delete("orders", "cid = 1")],
    ],
    # a customer leaves while its order stays (the order now has no customer), and an
    # order arrives for a customer that arrives in a later batch of the same window
    [[Delete("customers", "id = 2")], [Insert("orders", ((17, 5, 8),))]],
    [[Insert("customers", ((5, "eve", True),))], [Update("customers", "id = 2", "id = 3")]],
]
SWAP: list[Cycle] = [
    # the only partner of customer 2 is deleted and another inserted in the same window
    [[Delete("orders", "oid = 12"), Insert("orders", ((18, 2, 30),))]],
    # the same, across two batches, and back to none
    [[Delete("orders", "oid = 18")], [Insert("orders", ((19, 2, 31),))]],
    [[Delete("orders", "cid = 2")]],
]
NULLS: list[Cycle] = [
    [[Insert("orders", ((20, None, 1),)), Insert("customers", ((None, "nul2", False),))]],
    [[Update("orders", "cid = NULL", "cid = 1")]],
    [[Update("customers", "id = 7", "id IS NULL")], [Insert("orders", ((21, 7, 2),))]],
]
DUPLICATES: list[Cycle] = [
    [[Insert("customers", ((1, "ann", True), (1, "ann", True))), Insert("orders", ((10, 1, 5),))]],
    [[Delete("orders", "oid = 10")]],
    [[Delete("customers", "id = 1")], [Insert("orders", ((10, 1, 5), (10, 1, 5)))]],
    [[Insert("customers", ((1, "ann", True),))]],
]
COMES_BACK: list[Cycle] = [
    [[Delete("orders", "cid = 1")]],  # customer 1 loses both partners
    [[Insert("customers", ((6, "fay", True),))]],  # nothing touches customer 1
    [[Insert("orders", ((22, 1, 6),))]],  # a partner comes back
    [[Delete("orders", "oid = 22")], [Insert("orders", ((23, 1, 6),))]],
    [[Delete("orders", "true")]],
    [[Insert("orders", ((24, 1, 1), (25, 3, 2)))]],
]
ALL = FLIP + BOTH_SIDES + SWAP + NULLS + COMES_BACK

FACT = TableSpec(
    "sales",
    [Column("sid", "INTEGER"), Column("store", "INTEGER"), Column("item", "INTEGER")]
    + [Column("qty", "INTEGER")],
    [(1, 1, 1, 2), (2, 1, 2, 3), (3, 2, 1, 1), (4, 3, 9, 5), (5, None, 1, 1)],
)
STORES = TableSpec(
    "stores", [Column("id", "INTEGER"), Column("city", "VARCHAR")], [(1, "x"), (2, "y")]
)
ITEMS = TableSpec(
    "items", [Column("id", "INTEGER"), Column("cat", "VARCHAR")], [(1, "a"), (2, "b")]
)
STAR: list[Cycle] = [
    [[Insert("stores", ((3, "z"),))]],
    [[Delete("items", "id = 1")], [Insert("sales", ((6, 3, 1, 4),))]],
    [[Update("stores", "city = 'y'", "id = 1")], [Insert("items", ((1, "c"), (9, "a")))]],
    [[Delete("stores", "true"), Delete("sales", "sid = 2")]],
    [[Insert("stores", ((1, "x"), (2, "x"))), Update("sales", "store = 2", "store IS NULL")]],
]

A = TableSpec(
    "a", [Column("k", "INTEGER"), Column("x", "VARCHAR")], [(1, "p"), (2, "q"), (None, "n")]
)
B = TableSpec("b", [Column("k", "INTEGER"), Column("y", "INTEGER")], [(2, 20), (3, 30), (None, 0)])
AB: list[Cycle] = [
    [[Insert("a", ((3, "r"),))]],
    [[Delete("b", "k = 2")], [Insert("b", ((1, 10), (1, 11)))]],
    [[Update("a", "k = 4", "k = 1"), Update("b", "k = 4", "k = 3")]],
    [[Delete("a", "true")]],
    [[Insert("a", ((4, "s"), (None, "t"))), Delete("b", "k IS NULL")]],
]

ORDERS_VIEW = "SELECT c.id, c.name, o.oid, o.amount FROM customers AS c LEFT JOIN orders AS o"
SCENARIOS: dict[str, Scenario] = {
    "left_flip": Scenario([CUSTOMERS, ORDERS], f"{ORDERS_VIEW} ON c.id = o.cid", FLIP),
    "left_both_sides": Scenario([CUSTOMERS, ORDERS], f"{ORDERS_VIEW} ON c.id = o.cid", BOTH_SIDES),
    "left_swap": Scenario([CUSTOMERS, ORDERS], f"{ORDERS_VIEW} ON c.id = o.cid", SWAP),
    "left_null_keys": Scenario([CUSTOMERS, ORDERS], f"{ORDERS_VIEW} ON c.id = o.cid", NULLS),
    "left_duplicates": Scenario([CUSTOMERS, ORDERS], f"{ORDERS_VIEW} ON c.id = o.cid", DUPLICATES),
    "left_comes_back": Scenario([CUSTOMERS, ORDERS], f"{ORDERS_VIEW} ON c.id = o.cid", COMES_BACK),
    "left_one_side_conditions": Scenario(
        [CUSTOMERS, ORDERS],
        f"{ORDERS_VIEW} ON c.id = o.cid AND o.amount > 4 AND c.active",
        ALL,
    ),
    "left_non_equi": Scenario(
        [CUSTOMERS, ORDERS],
        "SELECT c.id, o.oid FROM customers AS c LEFT JOIN orders AS o ON o.cid >= c.id + 1",
        FLIP + SWAP,
    ),
    "anti_join": Scenario(
        [CUSTOMERS, ORDERS],
        "SELECT c.id, c.name FROM customers AS c LEFT JOIN orders AS o ON c.id = o.cid"
        " WHERE o.oid IS NULL",
        ALL,
    ),
    "right_join": Scenario(
        [CUSTOMERS, ORDERS],
        "SELECT c.name, o.oid, o.cid FROM customers AS c RIGHT JOIN orders AS o ON c.id = o.cid",
        ALL,
    ),
    "full_join": Scenario(
        [CUSTOMERS, ORDERS],
        "SELECT c.id, c.name, o.oid FROM customers AS c FULL OUTER JOIN orders AS o"
        " ON c.id = o.cid",
        ALL + DUPLICATES,
    ),
    "full_join_using": Scenario([A, B], "SELECT k, a.x, b.y FROM a FULL JOIN b USING (k)", AB),
    "left_join_using_grouped": Scenario(
        [A, B],
        "SELECT k, count(b.y) AS n, sum(b.y) AS s FROM a LEFT JOIN b USING (k) GROUP BY k",
        AB,
    ),
    "count_matches": Scenario(
        [CUSTOMERS, ORDERS],
        "SELECT c.id, count(o.oid) AS orders, count(*) AS rows_, sum(o.amount) AS total"
        " FROM customers AS c LEFT JOIN orders AS o ON c.id = o.cid GROUP BY c.id",
        ALL + DUPLICATES,
    ),
    "tpch_q13_shape": Scenario(
        [CUSTOMERS, ORDERS],
        "SELECT c_count, count(*) AS custdist FROM (SELECT c.id, count(o.oid) AS c_count"
        " FROM customers AS c LEFT OUTER JOIN orders AS o ON c.id = o.cid AND o.amount <> 3"
        " GROUP BY c.id) AS c_orders GROUP BY c_count",
        ALL,
    ),
    "left_join_aggregate_cte": Scenario(
        [CUSTOMERS, ORDERS],
        "WITH customer_orders AS (SELECT cid, count(*) AS n, sum(amount) AS total,"
        " max(amount) AS biggest FROM orders GROUP BY cid) SELECT c.id, c.name,"
        " coalesce(s.n, 0) AS n, s.total, s.biggest FROM customers AS c"
        " LEFT JOIN customer_orders AS s ON c.id = s.cid",
        ALL + DUPLICATES,
    ),
    "distinct_over_left_join_in_derived": Scenario(
        [CUSTOMERS, ORDERS],
        "SELECT name, cid FROM (SELECT DISTINCT c.name, o.cid FROM customers AS c"
        " LEFT JOIN orders AS o ON c.id = o.cid) AS x",
        ALL + DUPLICATES,
    ),
    "count_by_preserved_side_in_derived": Scenario(
        [CUSTOMERS, ORDERS],
        "SELECT n, count(*) AS customers FROM (SELECT c.id, c.active, count(o.oid) AS n"
        " FROM customers AS c LEFT JOIN orders AS o ON c.id = o.cid AND o.amount > 2"
        " WHERE c.active GROUP BY c.id, c.active) AS x GROUP BY n",
        ALL + DUPLICATES,
    ),
    "left_join_inside_derived": Scenario(
        [CUSTOMERS, ORDERS],
        "SELECT name, has_orders FROM (SELECT c.name, o.oid IS NOT NULL AS has_orders"
        " FROM customers AS c LEFT JOIN orders AS o ON c.id = o.cid) AS x WHERE name <> 'bob'",
        ALL,
    ),
    "fact_to_dimensions": Scenario(
        [FACT, STORES, ITEMS],
        "SELECT f.sid, s.city, i.cat, f.qty FROM sales AS f LEFT JOIN stores AS s"
        " ON f.store = s.id LEFT JOIN items AS i ON f.item = i.id",
        STAR,
    ),
    "fact_to_dimensions_aggregated": Scenario(
        [FACT, STORES, ITEMS],
        "SELECT s.city, count(*) AS n, count(i.id) AS with_item, sum(f.qty) AS qty"
        " FROM sales AS f LEFT JOIN stores AS s ON f.store = s.id"
        " LEFT JOIN items AS i ON f.item = i.id GROUP BY s.city",
        STAR,
    ),
    "mixed_inner_and_outer": Scenario(
        [FACT, STORES, ITEMS],
        "SELECT f.sid, s.city, i.cat FROM sales AS f JOIN stores AS s ON f.store = s.id"
        " FULL JOIN items AS i ON f.item = i.id AND s.city <> 'z'",
        STAR,
    ),
    "right_then_left": Scenario(
        [FACT, STORES, ITEMS],
        "SELECT f.sid, s.id AS store, i.cat FROM sales AS f RIGHT JOIN stores AS s"
        " ON f.store = s.id LEFT JOIN items AS i ON f.item = i.id",
        STAR,
    ),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_outer_join(lake, name):
    SCENARIOS[name].run(DuckLakeHarness(lake, check_names=True))


def test_outer_join_features():
    plan = compile_ivm(SCENARIOS["full_join"].view)
    assert {"join", "outer_join"} <= plan.features
