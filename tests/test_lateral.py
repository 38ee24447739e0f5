"""Table functions over a row's columns on DuckLake: ``unnest(t.tags)``, ``range(t.a, t.b)``,
``generate_series(...)`` after the relation they read (comma, CROSS JOIN LATERAL, LEFT JOIN
LATERAL ... ON TRUE, WITH ORDINALITY), aggregated, joined after, and ``unnest`` in the select
list. Lists with duplicate and NULL elements, empty and NULL lists, NULL and reversed series
bounds. Each scenario is maintained through windows that insert, delete and update the
tables, compared with recomputation after every refresh, with and without ``schema=`` and
through ``auto`` as well as forced maintenance.

``tests/spark/test_spark_lateral.py`` runs some of them on Spark + Iceberg.
"""

from __future__ import annotations

import pytest

from duckstream import UnsupportedSQLError, compile_ivm
from duckstream.testing.differential import (
    FROM_CATALOG,
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
        spark_refused="spark_unsupported",
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
}


@pytest.mark.parametrize(
    ("strategy", "schema"),
    [("incremental", None), ("incremental", FROM_CATALOG), ("auto", FROM_CATALOG)],
    ids=["incremental", "incremental-schema", "auto-schema"],
)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_lateral_function(tmp_path, name, strategy, schema):
    from duckstream.testing.ducklake import connect_ducklake

    scenario = SCENARIOS[name]
    con = connect_ducklake(str(tmp_path / "lake"), "dl", 0)
    try:
        harness = DuckLakeHarness(con, check_names=True, strategy=strategy)
        kwargs = {"schema": schema} if schema is not None else {}
        run_scenario(harness, scenario.tables, scenario.view, scenario.cycles, **kwargs)
    finally:
        con.close()


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
    ],
)
def test_what_is_not_maintained_is_named(sql, feature):
    with pytest.raises(UnsupportedSQLError) as raised:
        compile_ivm(sql)
    assert raised.value.feature == feature
