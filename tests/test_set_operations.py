"""Set operations on DuckLake: the hard cases, each maintained through windows that change
one branch, both branches, or rows in both at once, with duplicates and NULLs, and compared
with recomputation after every refresh: rows, column names and column types.

``tests/spark/test_spark_set_operations.py`` runs the same scenarios on Spark + Iceberg.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from duckstream import UnsupportedSQLError, ViewSQLError, compile_ivm
from duckstream.testing.differential import (
    Column,
    Cycle,
    Delete,
    DuckLakeHarness,
    Insert,
    Scenario,
    TableSpec,
    Update,
    run_scenario,
)

# k: INTEGER in a, BIGINT in b (the union type is BIGINT); rows in both, duplicates, NULLs
A = TableSpec(
    "a",
    [Column("k", "INTEGER"), Column("v", "VARCHAR")],
    [(1, "x"), (1, "x"), (2, "y"), (3, "z"), (None, None), (None, "n")],
)
B = TableSpec(
    "b",
    [Column("k", "BIGINT"), Column("w", "VARCHAR")],
    [(1, "x"), (3, "z"), (3, "z"), (4, "w"), (None, None)],
)
CYCLES: list[Cycle] = [
    # a row inserted into both branches in one window
    [[Insert("a", ((5, "e"),)), Insert("b", ((5, "e"),))]],
    # a row deleted from one branch only
    [[Delete("b", "k = 1")]],
    # duplicates: more copies on one side, then on the other
    [[Insert("a", ((3, "z"), (3, "z"), (3, "z")))], [Insert("b", ((1, "x"), (1, "x")))]],
    # NULLs: the NULL row leaves one branch and comes to the other
    [[Delete("a", "k IS NULL AND v IS NULL"), Insert("b", ((None, "n"), (None, None)))]],
    # both branches changing in one window: an update on one side, a delete on the other
    [[Update("a", "v = 'q'", "k = 1")], [Delete("b", "k = 3"), Update("b", "k = 2", "k = 4")]],
    # a row inserted and deleted inside one window, and a branch emptied
    [[Insert("a", ((9, "t"),)), Delete("a", "k = 9")], [Delete("b", "true")]],
    [[Insert("b", ((2, "y"), (1, "q"), (None, None)))], [Delete("a", "k >= 2")]],
]

# DECIMAL meets DOUBLE (the union type is DOUBLE), INTEGER meets BIGINT
C = TableSpec(
    "c",
    [Column("k", "INTEGER"), Column("d", "DECIMAL(10,2)")],
    [(1, Decimal("0.50")), (2, Decimal("2.00")), (2, Decimal("2.00")), (None, None)],
)
D = TableSpec(
    "d",
    [Column("k", "BIGINT"), Column("x", "DOUBLE")],
    [(1, 0.5), (2, 2.0), (3, 1.25), (None, None)],
)
CD_CYCLES: list[Cycle] = [
    [[Insert("c", ((3, Decimal("1.25")),)), Delete("d", "k = 1")]],
    [[Update("d", "x = 2.0", "k = 3"), Insert("c", ((2, Decimal("2.00")),))]],
    [[Delete("c", "k IS NULL")], [Insert("d", ((None, None), (1, 0.5)))]],
]

SCENARIOS: dict[str, Scenario] = {
    "union_all": Scenario([A, B], "SELECT k, v FROM a UNION ALL SELECT k, w FROM b", CYCLES),
    "union": Scenario([A, B], "SELECT k, v FROM a UNION SELECT k, w FROM b", CYCLES),
    "intersect": Scenario([A, B], "SELECT k, v FROM a INTERSECT SELECT k, w FROM b", CYCLES),
    "intersect_all": Scenario(
        [A, B], "SELECT k, v FROM a INTERSECT ALL SELECT k, w FROM b", CYCLES
    ),
    "except": Scenario([A, B], "SELECT k, v FROM a EXCEPT SELECT k, w FROM b", CYCLES),
    "except_all": Scenario([A, B], "SELECT k, v FROM a EXCEPT ALL SELECT k, w FROM b", CYCLES),
    "except_all_bigint_first": Scenario(
        [A, B], "SELECT k, w FROM b EXCEPT ALL SELECT k, v FROM a", CYCLES, names=["k", "w"]
    ),
    # the first branch names the columns; INTEGER ∪ BIGINT is BIGINT
    "names_from_first_branch": Scenario(
        [A, B],
        'SELECT k AS "MyKey", v AS Val FROM a UNION ALL SELECT k AS other, w FROM b',
        CYCLES,
        names=["MyKey", "Val"],
    ),
    "decimal_meets_double": Scenario(
        [C, D], "SELECT k, d FROM c INTERSECT SELECT k, x FROM d", CD_CYCLES, names=["k", "d"]
    ),
    "decimal_meets_double_all": Scenario(
        [C, D], "SELECT k, d AS amount FROM c UNION ALL SELECT k, x FROM d", CD_CYCLES
    ),
    "same_table_both_branches": Scenario(
        [A],
        "SELECT k, v FROM a WHERE k > 1 INTERSECT ALL SELECT k, v FROM a WHERE v <> 'y'",
        [
            [[Insert("a", ((3, "z"), (2, "y"), (2, "x")))]],
            [[Update("a", "k = 4", "k = 3")], [Delete("a", "v = 'x'")]],
            [[Update("a", "v = 'x'", "k = 2")]],
        ],
    ),
    # a set operation inside a CTE, joined to a table
    "cte_joined_to_table": Scenario(
        [A, B],
        "WITH u AS (SELECT k, v FROM a INTERSECT ALL SELECT k, w FROM b)"
        " SELECT u.k, u.v, b.w FROM u JOIN b ON u.k = b.k",
        CYCLES,
    ),
    "except_in_derived_table_joined": Scenario(
        [A, B],
        "SELECT a.v, e.k FROM a JOIN (SELECT k FROM a EXCEPT SELECT k FROM b) AS e ON a.k = e.k",
        CYCLES,
    ),
    # stack two sources, then group
    "group_by_over_union_all": Scenario(
        [A, B],
        "SELECT k, count(*) AS n, min(v) AS lo, max(v) AS hi, count(DISTINCT v) AS kinds"
        " FROM (SELECT k, v FROM a UNION ALL SELECT k, w FROM b) AS s GROUP BY k",
        CYCLES,
    ),
    "global_aggregate_over_union": Scenario(
        [A, B],
        "WITH s AS (SELECT k FROM a UNION SELECT k FROM b)"
        " SELECT count(*) AS n, count(k) AS keys, sum(k) AS total FROM s",
        CYCLES,
    ),
    "having_over_intersect_all": Scenario(
        [A, B],
        "SELECT k, count(*) AS n FROM (SELECT k FROM a INTERSECT ALL SELECT k FROM b) AS s"
        " GROUP BY k HAVING count(*) > 1",
        CYCLES,
    ),
    # joins and aggregates in the branches
    "branches_with_joins_and_aggregates": Scenario(
        [A, B],
        "SELECT a.k, count(*) AS n FROM a JOIN b ON a.k = b.k GROUP BY a.k"
        " EXCEPT ALL SELECT k, count(*) FROM b GROUP BY k",
        CYCLES,
    ),
    "distinct_branch_in_union_all": Scenario(
        [A, B],
        "SELECT DISTINCT k, v FROM a UNION ALL SELECT k, w FROM b WHERE w IS NOT NULL",
        CYCLES,
    ),
    # nested: precedence (INTERSECT first, then left to right) and parentheses
    "nested_precedence": Scenario(
        [A, B],
        "SELECT k FROM a UNION ALL SELECT k FROM b INTERSECT SELECT k FROM a WHERE v = 'x'",
        CYCLES,
    ),
    "nested_left_to_right": Scenario(
        [A, B], "SELECT k FROM a UNION ALL SELECT k FROM b EXCEPT ALL SELECT k FROM a", CYCLES
    ),
    "nested_parenthesized": Scenario(
        [A, B],
        "(SELECT k FROM a EXCEPT ALL SELECT k FROM b)"
        " UNION (SELECT k FROM b INTERSECT SELECT k FROM a)",
        CYCLES,
    ),
    "union_chain": Scenario(
        [A, B],
        "SELECT v FROM a UNION ALL SELECT w FROM b UNION SELECT v FROM a WHERE k = 1",
        CYCLES,
    ),
    "cte_used_twice": Scenario(
        [A, B],
        "WITH u AS (SELECT k FROM a UNION ALL SELECT k FROM b)"
        " SELECT x.k, count(*) AS n FROM u AS x JOIN u AS y ON x.k = y.k GROUP BY x.k",
        CYCLES,
    ),
    "order_by_dropped": Scenario(
        [A, B], "SELECT k, v FROM a UNION ALL SELECT k, w FROM b ORDER BY k DESC", CYCLES
    ),
    "star_with_schema": Scenario(
        [A, B],
        "SELECT * FROM a INTERSECT ALL SELECT * FROM b",
        CYCLES,
        compile_kwargs={
            "schema": {"a": {"k": "INTEGER", "v": "VARCHAR"}, "b": {"k": "BIGINT", "w": "VARCHAR"}}
        },
        names=["k", "v"],
    ),
}


def _described(harness: DuckLakeHarness, sql: str) -> list[tuple[str, str]]:
    """``sql``'s column names and types, as DuckDB describes them."""
    harness.con.execute(f"USE {harness.catalog}.{harness.schema}")
    try:
        return [(r[0], r[1]) for r in harness.con.execute(f"DESCRIBE {sql}").fetchall()]
    finally:
        harness.con.execute("USE memory.main")


@pytest.mark.parametrize("inlining", [0, None], ids=["files", "inlined"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_set_operation(tmp_path, name, inlining):
    from duckstream.testing.ducklake import connect_ducklake

    scenario = SCENARIOS[name]
    con = connect_ducklake(str(tmp_path / "lake"), "dl", inlining)
    try:
        harness = DuckLakeHarness(con, check_names=True)
        plan = run_scenario(
            harness, scenario.tables, scenario.view, scenario.cycles, **scenario.compile_kwargs
        )
        assert _described(harness, plan.query_mv) == _described(harness, scenario.view)
        if scenario.names is not None:
            assert [n for n, _ in _described(harness, plan.query_mv)] == scenario.names
    finally:
        con.close()


def test_features_name_the_set_operations():
    plan = compile_ivm(SCENARIOS["nested_parenthesized"].view)
    assert {"union", "except_all", "intersect"} <= plan.features
    assert "derived_table" not in plan.features  # the wrappers normalize adds are not the user's


@pytest.mark.parametrize(
    ("sql", "feature"),
    [
        ("SELECT a FROM t UNION BY NAME SELECT a FROM u", "set_operation"),
        ("SELECT a FROM t UNION ALL SELECT a FROM u ORDER BY a LIMIT -a", "limit"),
        ("SELECT 1 AS a UNION ALL SELECT 2", "no_source"),  # reads no table: never changes
        ("SELECT * FROM t EXCEPT SELECT a FROM u", "star"),
    ],
)
def test_unsupported_set_operations_are_named(sql, feature):
    with pytest.raises(UnsupportedSQLError) as raised:
        compile_ivm(sql)
    assert raised.value.feature == feature


def test_branches_of_different_widths_are_a_view_error():
    with pytest.raises(ViewSQLError, match="2 and 1 columns"):
        compile_ivm("SELECT a, b FROM t UNION ALL SELECT a FROM u")


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        ("SELECT a, NULL AS z FROM t UNION ALL SELECT b, NULL FROM u", True),
        ("SELECT s.z FROM (SELECT a, NULL AS z FROM t EXCEPT SELECT b, NULL FROM u) AS s", True),
        (
            "SELECT a, NULL AS z FROM t"
            " UNION ALL (SELECT b, NULL FROM u INTERSECT SELECT c, 2 FROM v)",
            False,
        ),
    ],
)
def test_spark_refuses_a_column_null_in_every_branch(sql, refused):
    """Spark types such a column void, which an Iceberg table cannot hold."""
    if not refused:
        compile_ivm(sql, dialect="spark")
        return
    with pytest.raises(UnsupportedSQLError, match="untyped NULL") as raised:
        compile_ivm(sql, dialect="spark")
    assert raised.value.feature == "spark_unsupported"
