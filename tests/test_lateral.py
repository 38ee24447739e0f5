"""Table functions over a row's columns on DuckLake: ``unnest(t.tags)``, ``range(t.a, t.b)``,
``generate_series(...)`` after the relation they read (comma, CROSS JOIN LATERAL, LEFT JOIN
LATERAL ... ON TRUE, WITH ORDINALITY), aggregated, joined after, and ``unnest`` in the select
list; LATERAL subqueries correlated with the row before them (by an equality or not, with
ORDER BY ... LIMIT, aggregates, outer columns, over a join), their tables changed in the same
windows as the outer one. Lists with duplicate and NULL elements, empty and NULL lists, NULL
and reversed series bounds. Each scenario is maintained through windows that insert, delete
and update the tables, compared with recomputation after every refresh, with and without
``schema=`` and through ``auto`` as well as forced maintenance (each scenario by one of those
paths in turn; by every one under ``DUCKSTREAM_DEEP=1``).

``tests/spark/test_spark_lateral.py`` runs some of them on Spark + Iceberg.
"""

from __future__ import annotations

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

T = TableSpec(
    "t",
    [
        Column("k", "INTEGER"),
        Column("tags", "INTEGER[]"),
        Column("a", "INTEGER"),
        Column("b", "INTEGER"),
    ],
    [
        (1, [1, 2, 2], 1, 3),
        (2, [], 2, 2),
        (3, None, 5, 3),
        (4, [None, 7], None, 1),
        (4, [None, 7], 0, 1),
    ],
)
S = TableSpec(
    "s",
    [Column("tag", "INTEGER"), Column("w", "VARCHAR")],
    [(1, "one"), (2, "two"), (2, "deux"), (7, "seven"), (None, "none")],
)
CYCLES: list[Cycle] = [
    [[Insert("t", ((5, [2, 2, None], 2, 4), (6, [], None, None), (5, [2, 2, None], 2, 4)))]],
    [[Delete("t", "k = 1")], [Update("t", "tags = [7, 7]", "k = 4")]],
    [[Update("t", "tags = list_append(tags, 1), b = b + 1", "k IN (2, 5)")]],
    [[Insert("s", ((2, "zwei"), (9, "nine"))), Delete("s", "tag = 7")]],
    [[Update("t", "tags = NULL, a = NULL", "k = 5")], [Update("s", "tag = 1", "w = 'two'")]],
    [[Insert("t", ((7, [9], 1, 1),)), Delete("t", "k = 7")], [Delete("s", "true")]],
    [[Delete("t", "true")], [Insert("t", ((8, [1, 9, 9], -1, 2),))]],
]
U = TableSpec(
    "u",
    [Column("k", "INTEGER"), Column("x", "INTEGER"), Column("w", "VARCHAR")],
    [(1, 10, "a"), (1, 11, "b"), (1, 12, "a"), (2, 20, "c"), (None, 5, "n"), (4, 3, "d")],
)
# t and u change in the same windows; u's rows move between keys, and keys come and go
U_CYCLES: list[Cycle] = [
    [[c for c in batch if c.table == "t"] for batch in cycle]
    + [
        [
            [Insert("u", ((1, 9, "z"), (3, 30, "e")))],
            [Delete("u", "x = 11")],
            [Update("u", "k = 2", "k = 1 AND x = 12"), Update("u", "x = x + 10", "k = 4")],
            [Insert("u", ((5, 1, "p"), (5, 1, "p"), (None, 2, "q")))],
            [Delete("u", "k = 1")],
            [Update("u", "w = NULL", "k = 2"), Insert("u", ((8, 0, "r"),))],
            [Delete("u", "true"), Insert("u", ((8, 4, "s"),))],
        ][i]
    ]
    for i, cycle in enumerate(CYCLES)
]

# the windows as they change t alone (for the views that read no s)
T_CYCLES: list[Cycle] = [
    [[c for c in batch if c.table == "t"] for batch in cycle] for cycle in CYCLES
]

SCENARIOS: dict[str, Scenario] = {
    "unnest_comma": Scenario([T], "SELECT t.k, u.tag FROM t, unnest(t.tags) AS u(tag)", T_CYCLES),
    "unnest_cross_join_lateral_filtered": Scenario(
        [T],
        "SELECT t.k, u.tag FROM t CROSS JOIN LATERAL unnest(t.tags) AS u(tag)"
        " WHERE u.tag IS NULL OR u.tag > 1",
        T_CYCLES,
    ),
    "unnest_left_join_lateral": Scenario(
        [T],
        "SELECT t.k, u.tag FROM t LEFT JOIN LATERAL unnest(t.tags) AS u(tag) ON TRUE",
        T_CYCLES,
    ),
    "unnest_without_alias": Scenario([T], "SELECT k, unnest FROM t, unnest(t.tags)", T_CYCLES),
    "unnest_with_ordinality": Scenario(
        [T],
        "SELECT t.k, u.tag, u.n FROM t, unnest(t.tags) WITH ORDINALITY AS u(tag, n)",
        T_CYCLES,
        # transpiled as Spark's LATERAL VIEW POSEXPLODE (counts from 0), refused by name
        spark_refused="table_function",
    ),
    "unnest_aggregated": Scenario(
        [T],
        "SELECT u.tag, count(*) AS n, count(DISTINCT t.k) AS ks, sum(t.a) AS sa"
        " FROM t, unnest(t.tags) AS u(tag) GROUP BY u.tag",
        T_CYCLES,
    ),
    "unnest_left_aggregated_per_row": Scenario(
        [T],
        "SELECT t.k, count(u.tag) AS n, max(u.tag) AS top FROM t"
        " LEFT JOIN LATERAL unnest(t.tags) AS u(tag) ON TRUE GROUP BY t.k",
        T_CYCLES,
    ),
    "unnest_then_join": Scenario(
        [T, S],
        "SELECT t.k, u.tag, s.w FROM t, unnest(t.tags) AS u(tag) JOIN s ON s.tag = u.tag",
        CYCLES,
    ),
    "unnest_then_left_join_grouped": Scenario(
        [T, S],
        "SELECT s.w, count(*) AS n FROM t CROSS JOIN LATERAL unnest(t.tags) AS u(tag)"
        " LEFT JOIN s ON s.tag = u.tag GROUP BY s.w",
        CYCLES,
    ),
    "join_then_unnest": Scenario(
        [T, S],
        "SELECT t.k, s.w, u.tag FROM s JOIN t ON t.k = s.tag, unnest(t.tags) AS u(tag)",
        CYCLES,
    ),
    "range_over_columns": Scenario(
        [T], "SELECT t.k, r.i FROM t, range(t.a, t.b) AS r(i)", T_CYCLES
    ),
    "generate_series_left_stepped": Scenario(
        [T],
        "SELECT t.k, g.i FROM t LEFT JOIN LATERAL generate_series(t.a, t.b + 2, 2) AS g(i) ON TRUE",
        T_CYCLES,
    ),
    "series_summed": Scenario(
        [T],
        "SELECT t.k, sum(g.generate_series) AS total FROM t, generate_series(t.a, t.b) AS g"
        " GROUP BY t.k",
        T_CYCLES,
    ),
    "unnest_in_select_list": Scenario(
        [T], "SELECT t.k, unnest(t.tags) AS tag FROM t WHERE t.k > 1", T_CYCLES
    ),
    "unnest_in_derived_table_aggregated": Scenario(
        [T],
        "SELECT x.tag, count(*) AS n FROM (SELECT unnest(t.tags) AS tag FROM t) AS x"
        " GROUP BY x.tag",
        T_CYCLES,
    ),
    "unnest_in_derived_table_distinct": Scenario(
        [T],
        "SELECT DISTINCT x.tag, x.a FROM (SELECT unnest(t.tags) AS tag, t.a FROM t) AS x",
        T_CYCLES,
    ),
    "lateral_top_k": Scenario(
        [T, U],
        "SELECT t.k, s.x, s.w FROM t, LATERAL (SELECT u.x, u.w FROM u WHERE u.k = t.k"
        " ORDER BY u.x DESC LIMIT 2) AS s",
        U_CYCLES,
        spark_refused="spark_unsupported",
    ),
    "lateral_left_aggregate": Scenario(
        [T, U],
        "SELECT t.k, s.c, s.total FROM t LEFT JOIN LATERAL (SELECT count(*) AS c, sum(u.x)"
        " AS total FROM u WHERE u.k = t.k) AS s ON TRUE",
        U_CYCLES,
    ),
    "lateral_reads_outer_columns": Scenario(
        [T, U],
        "SELECT t.k, s.y FROM t, LATERAL (SELECT u.x + t.a AS y FROM u"
        " WHERE u.k = t.k AND u.x > t.a) AS s",
        U_CYCLES,
    ),
    "lateral_without_equality": Scenario(
        [T, U],
        "SELECT t.k, s.x FROM t LEFT JOIN LATERAL (SELECT u.x FROM u"
        " WHERE u.x BETWEEN t.a AND t.b + 10 ORDER BY u.x LIMIT 1) AS s ON TRUE",
        U_CYCLES,
        spark_refused="spark_unsupported",
    ),
    "lateral_first_grouped": Scenario(
        [T, U],
        "SELECT s.w, count(*) AS n FROM t, LATERAL (SELECT u.w FROM u WHERE u.k = t.k"
        " ORDER BY u.x LIMIT 1) AS s GROUP BY s.w",
        U_CYCLES,
        spark_refused="spark_unsupported",
    ),
    "lateral_reads_no_table": Scenario(
        [T],
        "SELECT t.k, l.y, l.d FROM t LEFT JOIN LATERAL (SELECT t.a * 2 AS y, t.b - t.a AS d)"
        " AS l ON TRUE",
        T_CYCLES,
    ),
    "lateral_over_a_join": Scenario(
        [T, U, S],
        "SELECT t.k, l.x, l.w FROM t, LATERAL (SELECT u.x, s.w FROM u JOIN s ON s.tag = u.x"
        " - 9 WHERE u.k = t.k) AS l",
        [[*cycle, *extra] for cycle, extra in zip(U_CYCLES, CYCLES, strict=True)],
    ),
}


# Each scenario by one of the paths users run, in turn (every path under DUCKSTREAM_DEEP).
RUNS, RUN_IDS = ducklake_runs(SCENARIOS)


@pytest.mark.parametrize(("name", "strategy", "schema"), RUNS, ids=RUN_IDS)
def test_lateral_function(tmp_path, name, strategy, schema):
    run_on_ducklake(str(tmp_path / "lake"), SCENARIOS[name], strategy, schema)


def test_a_changed_row_alone_is_unnested():
    """``Δ(t ⋈lat f(t)) = Δt ⋈lat f(Δt)``: the delta unnests the changed rows, never t."""
    plan = compile_ivm(
        "SELECT t.k, u.tag FROM t, unnest(t.tags) AS u(tag)",
        schema={"t": {"k": "INTEGER", "tags": "INTEGER[]"}},
    )
    maintain = "\n".join(plan.maintain)
    assert "_changes_0) AS t CROSS JOIN LATERAL UNNEST(t.tags) AS u(tag)" in maintain
    assert "dl.main.t AS t CROSS JOIN LATERAL" not in maintain
    assert "lateral_function" in plan.features


@pytest.mark.parametrize(
    ("sql", "feature"),
    [
        ("SELECT u.x FROM unnest([1, 2]) AS u(x), t", "table_function"),
        ("SELECT t.k, u.x FROM t RIGHT JOIN unnest(t.tags) AS u(x) ON TRUE", "lateral_join"),
        ("SELECT t.k, u.x FROM t LEFT JOIN unnest(t.tags) AS u(x) ON u.x > 1", "lateral_join"),
        ("SELECT t.k, u.x FROM t, unnest(t.tags, t.tags) AS u(x, y)", "table_function"),
        ("SELECT t.k, v.x FROM t, (VALUES (t.k)) AS v(x)", "table_function"),
        ("SELECT k, unnest(list(a)) AS x FROM t GROUP BY k", "table_function"),
        ("SELECT unnest(t.tags) AS x, row_number() OVER () AS n FROM t", "table_function"),
        # DISTINCT groups by unnest(...), which DuckDB cannot: unnest in FROM instead
        ("SELECT DISTINCT unnest(t.tags) AS tag, t.a FROM t", "table_function"),
        (
            "SELECT t.k, l.x FROM t, LATERAL (SELECT u.x FROM u WHERE u.k = t.k"
            " UNION ALL SELECT 1) AS l",
            "table_function",
        ),
    ],
)
def test_what_is_not_maintained_is_named(sql, feature):
    with pytest.raises(UnsupportedSQLError) as raised:
        compile_ivm(sql)
    assert raised.value.feature == feature
