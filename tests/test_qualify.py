"""QUALIFY moved into a wrapping query (``normalize.eliminate_qualify``), maintained on
DuckLake through refreshes and compared with recomputation, with ``schema=`` and without:
QUALIFY filters before DISTINCT and ORDER BY ... LIMIT, reads aggregates of a GROUP BY and
columns the select list does not show, over a join and a star, in a derived table.
"""

from __future__ import annotations

import pytest

from duckstream import compile_ivm
from duckstream.testing.differential import (
    FROM_CATALOG,
    Column,
    Cycle,
    Delete,
    DuckLakeHarness,
    Insert,
    TableSpec,
    Update,
    run_scenario,
)

# e: events (id unique, k the partition, ts unique, v with ties and a NULL); u: a dimension
E = TableSpec(
    "e",
    [
        Column("id", "INTEGER"),
        Column("k", "INTEGER"),
        Column("ts", "INTEGER"),
        Column("v", "INTEGER"),
    ],
    [
        (1, 1, 10, 5),
        (2, 1, 20, 5),
        (3, 1, 30, 7),
        (4, 2, 15, 1),
        (5, None, 25, 3),
        (6, 3, 35, None),
    ],
)
U = TableSpec("u", [Column("k", "INTEGER"), Column("name", "VARCHAR")], [(1, "a"), (2, "b")])
CYCLES: list[Cycle] = [
    [[Insert("e", ((7, 1, 40, 9), (8, 4, 45, 2))), Insert("u", ((4, "d"),))]],
    [[Delete("e", "id = 7")], [Update("e", "k = 3", "id = 4")]],
    [[Insert("e", ((9, 2, 50, 5), (10, None, 55, 3))), Update("e", "v = 7", "id = 1")]],
    [[Update("u", "name = 'z'", "k = 1"), Delete("e", "k = 4")]],
    [[Update("e", "k = NULL", "id = 2")], [Insert("e", ((12, 1, 70, 0),))]],
]

VIEWS = {
    # DISTINCT applies to the rows QUALIFY kept: one k per partition, not one per (k, number)
    "distinct_after_qualify": "SELECT DISTINCT k FROM e"
    " QUALIFY row_number() OVER (PARTITION BY k ORDER BY ts) <= 2",
    # ORDER BY ... LIMIT over the rows QUALIFY kept, by a column the select list does not show
    "top_k_after_qualify": "SELECT id, k FROM e"
    " QUALIFY row_number() OVER (PARTITION BY k ORDER BY ts DESC) = 1 ORDER BY ts LIMIT 2",
    # a column outside windows not selected, two windows, one of them twice
    "columns_and_windows": "SELECT id, v FROM e WHERE v IS NOT NULL"
    " QUALIFY ts > 12 AND rank() OVER (PARTITION BY k ORDER BY v) <= 2"
    " AND rank() OVER (PARTITION BY k ORDER BY v) < count(*) OVER (PARTITION BY k)",
    # aggregates of the GROUP BY in QUALIFY, and a select alias of one
    "grouped": "SELECT k, sum(v) AS s FROM e GROUP BY k"
    " QUALIFY s > 1 AND dense_rank() OVER (ORDER BY count(*) DESC, k) <= 3",
    "over_a_join": "SELECT e.id, u.name, row_number() OVER (PARTITION BY u.k ORDER BY e.ts) AS rn"
    " FROM e JOIN u ON e.k = u.k QUALIFY rn = 1",
    "in_a_derived_table": "SELECT d.k, count(*) AS n FROM (SELECT k, v FROM e"
    " QUALIFY row_number() OVER (PARTITION BY k ORDER BY ts) <= 2) AS d GROUP BY d.k",
}
NEEDS_SCHEMA = {
    "star": "SELECT * FROM e QUALIFY row_number() OVER (PARTITION BY k ORDER BY ts) = 1"
}


@pytest.mark.parametrize("known_schema", [True, False])
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_qualify(lake, name, known_schema):
    kwargs = {"schema": FROM_CATALOG} if known_schema else {}
    run_scenario(DuckLakeHarness(lake, check_names=True), [E, U], VIEWS[name], CYCLES, **kwargs)


def test_qualify_over_a_star(lake):
    view = NEEDS_SCHEMA["star"]
    run_scenario(
        DuckLakeHarness(lake, check_names=True), [E], view, CYCLES[1:3], schema=FROM_CATALOG
    )
    assert "window_function" in compile_ivm(view, schema={"e": {"id": "INT", "k": "INT"}}).features


def test_unnamed_item_named_as_without_qualify():
    """An item without a name is named as the compiler names it anywhere (``_col_1``)."""
    plain = compile_ivm("SELECT k, v + 1 FROM e")
    view = "SELECT k, v + 1 FROM e QUALIFY row_number() OVER (PARTITION BY k ORDER BY id) = 1"
    assert compile_ivm(view).output_columns == plain.output_columns == ["k", "_col_1"]
