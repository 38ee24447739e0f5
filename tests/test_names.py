"""Name resolution: a select-list alias against an input column of the same name, and bare
names in subqueries outside FROM (issue "Correctness II").

DuckDB 1.5.5, checked by hand, and Spark (its analyzer; sqlglot's dialect flags say the same):
an input column wins over a select-list alias of its name in the select list (a window's
PARTITION BY included), WHERE, GROUP BY and QUALIFY; in HAVING a column wins inside an
aggregate and when it is grouped, elsewhere the alias shadows it. ORDER BY is the other way
round (a bare name is the alias). Each scenario is maintained with ``schema=`` (as dbt passes
it) and, where the view itself tells which is meant, without; where only the table's columns
could tell, compiling without ``schema=`` refuses with ``unresolved_column``.
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
    TableSpec,
    Update,
    run_scenario,
)

# dbt Labs' mrr-playbook: `select ..., false as is_last_month from mrr where is_last_month`
FLAGS = TableSpec(
    "t", [Column("id", "INTEGER"), Column("flag", "BOOLEAN")], [(1, True), (2, False)]
)
FLAG_CYCLES: list[Cycle] = [
    [[Insert("t", ((3, True), (4, None)))]],
    [[Update("t", "flag = NOT flag", "id <= 2")]],
    [[Delete("t", "id = 3")]],
]
T = TableSpec(
    "t",
    [Column(name, "INTEGER") for name in ("id", "k", "v", "o2")],
    [(1, 1, 10, None), (2, 2, 20, 5), (3, 2, 30, None), (4, 3, 1, 1)],
)
T_CYCLES: list[Cycle] = [
    [[Insert("t", ((5, 3, 40, None), (6, 1, 2, 7)))]],
    [[Update("t", "o2 = NULL, v = v + 5", "id = 2")], [Delete("t", "id = 1")]],
    [[Update("t", "k = 2", "k = 3")]],
    [[Delete("t", "true")]],
    [[Insert("t", ((7, 1, 30, None),))]],
]
T0 = TableSpec(
    "t0",
    [Column("a", "INTEGER"), Column("s", "TIMESTAMP")],
    [(3, "2020-01-05"), (4, "2020-01-09"), (1, "2020-02-01")],
)
T0_CYCLES: list[Cycle] = [
    [[Insert("t0", ((9, "2020-02-10"),))]],
    [[Update("t0", "a = 0", "s < '2020-01-06'")]],
    [[Delete("t0", "a = 4")]],
]
U = TableSpec("u", [Column("id", "INTEGER"), Column("w", "INTEGER")], [(1, 7), (2, 8), (3, 9)])

# name -> (tables, view, cycles, whether the view alone tells what each name is)
SCENARIOS: dict[str, tuple[list[TableSpec], str, list[Cycle], bool]] = {
    "where_flag_shadowed": (
        [FLAGS],
        "SELECT id, false AS flag FROM t WHERE flag",
        FLAG_CYCLES,
        False,
    ),
    # HAVING inside an aggregate reads the derived table's column o0, not the DATE alias
    "having_sum_of_shadowed_column": (
        [T0],
        "SELECT CAST(date_trunc('month', o1) AS DATE) AS o0, count(*) AS n"
        " FROM (SELECT a AS o0, s AS o1 FROM t0) AS d GROUP BY 1 HAVING sum(o0) >= 5",
        T0_CYCLES,
        True,
    ),
    # a FILTER in HAVING over column o2, while o2 is also an aggregate's alias
    "having_filter_over_shadowed_column": (
        [T],
        "SELECT k, sum(k) AS o2 FROM t GROUP BY k HAVING sum(k) FILTER (WHERE o2 IS NULL) > 0",
        T_CYCLES,
        True,
    ),
    "filter_named_like_its_column": (
        [T],
        "SELECT o0, sum(k) FILTER (WHERE o2 IS NULL) AS o2"
        " FROM (SELECT id % 2 AS o0, k, o2 FROM t) AS d GROUP BY o0",
        T_CYCLES,
        True,
    ),
    # outside aggregates the alias shadows an ungrouped column (DuckDB, Spark)
    "having_alias_shadows_ungrouped_column": (
        [T],
        "SELECT k, sum(v) AS v FROM t GROUP BY k HAVING v > 25",
        T_CYCLES,
        True,
    ),
    "having_grouped_column_wins": (
        [T],
        "SELECT k + 1 AS k, count(*) AS n FROM t GROUP BY t.k HAVING k > 1",
        T_CYCLES,
        True,
    ),
    "having_alias_over_grouped_expression": (
        [T],
        "SELECT k * 10 AS k, count(*) AS n FROM t GROUP BY k * 10 HAVING k > 15",
        T_CYCLES,
        True,
    ),
    "having_count_of_shadowed_column": (
        [T],
        "SELECT k, count(*) AS o2 FROM t GROUP BY k HAVING count(o2) > 0",
        T_CYCLES,
        True,
    ),
    "group_by_shadowed_literal": (
        [T],
        "SELECT k, 100 AS v, count(*) AS n FROM t GROUP BY k, v",
        T_CYCLES,
        False,
    ),
    "partition_by_shadowed_column": (
        [T],
        "SELECT id, -id AS k, sum(v) OVER (PARTITION BY k) AS s FROM t",
        T_CYCLES,
        False,
    ),
    "later_item_reads_column": (
        [T],
        "SELECT id + 1 AS k, k * 2 AS y FROM t",
        T_CYCLES,
        False,
    ),
    "where_shadowed_in_derived_table": (
        [T],
        "SELECT d.o0 AS x, false AS o2 FROM (SELECT id AS o0, k, o2 FROM t) AS d WHERE o2 IS NULL",
        T_CYCLES,
        True,
    ),
    # QUALIFY: the column k, not the alias -id (sqlglot's eliminate_qualify substituted it)
    "qualify_partition_by_shadowed_column": (
        [T],
        "SELECT id, -id AS k FROM t QUALIFY row_number() OVER (PARTITION BY k ORDER BY id) = 1",
        T_CYCLES,
        False,
    ),
    "qualify_partition_by_column_read_before_its_alias": (
        [T],
        "SELECT id, k + 0 AS k0, -id AS k FROM t"
        " QUALIFY row_number() OVER (PARTITION BY k ORDER BY id) = 1",
        T_CYCLES,
        True,
    ),
    "qualify_shadowed_column_outside_windows": (
        [T],
        "SELECT id, k, -id AS v FROM t"
        " QUALIFY v > 5 AND row_number() OVER (PARTITION BY k ORDER BY id) <= 2",
        T_CYCLES,
        False,
    ),
    # -v reads the column v before its alias: t has it
    "qualify_column_read_by_its_alias": (
        [T],
        "SELECT id, k, -v AS v FROM t"
        " QUALIFY v > 5 AND row_number() OVER (PARTITION BY k ORDER BY id) <= 2",
        T_CYCLES,
        True,
    ),
    # the dedup idiom: rn is no column of t, the alias
    "qualify_window_alias": (
        [T],
        "SELECT id, k, row_number() OVER (PARTITION BY k ORDER BY v DESC, id) AS rn FROM t"
        " QUALIFY rn = 1",
        T_CYCLES,
        True,
    ),
    "where_shadowed_over_join": (
        [T, U],
        "SELECT t.id, 5 AS w FROM t JOIN u ON t.id = u.id WHERE w > 7",
        T_CYCLES,
        False,
    ),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_shadowed_name_with_schema(lake, name):
    tables, view, cycles, _ = SCENARIOS[name]
    run_scenario(DuckLakeHarness(lake), tables, view, cycles, schema=FROM_CATALOG)


@pytest.mark.parametrize("name", sorted(n for n, s in SCENARIOS.items() if s[3]))
def test_shadowed_name_without_schema(lake, name):
    tables, view, cycles, _ = SCENARIOS[name]
    run_scenario(DuckLakeHarness(lake), tables, view, cycles)


@pytest.mark.parametrize("name", sorted(n for n, s in SCENARIOS.items() if not s[3]))
def test_ambiguous_name_without_schema_is_refused(name):
    """Only the table's columns tell: compiling refuses and says what to write, never
    guesses (the guess `WHERE (FALSE)` emptied the mrr-playbook's view)."""
    _, view, _, _ = SCENARIOS[name]
    with pytest.raises(UnsupportedSQLError, match="schema=") as raised:
        compile_ivm(view)
    assert raised.value.feature == "unresolved_column"


@pytest.mark.parametrize(
    "view",
    [
        # the name is read where no alias of it is visible: a column
        "SELECT CAST(k AS BIGINT) AS k, count(*) AS n FROM t GROUP BY k",
        # an aggregate alias cannot stand in WHERE or inside an aggregate: the column
        "SELECT k, sum(v) AS v FROM t WHERE v > 0 GROUP BY k",
        "SELECT k, sum(v) AS id FROM t GROUP BY k HAVING max(id) > 2",
        # were m a column, the view would not run (s is not grouped): the alias
        "SELECT date_trunc('month', s) AS m, count(*) AS n FROM t GROUP BY m",
        # qualified: the column
        "SELECT t.id, false AS flag FROM t WHERE t.flag",
        # QUALIFY: read qualified elsewhere, the column; an alias of a window, the alias
        "SELECT t.rn AS x, row_number() OVER (ORDER BY id) AS rn FROM t QUALIFY rn = 1",
        "SELECT id, row_number() OVER (ORDER BY id) AS rn FROM t QUALIFY rn = 1",
    ],
)
def test_names_the_view_itself_resolves_compile_without_schema(view):
    compile_ivm(view)


def test_alias_read_as_its_expression_without_schema(lake):
    """A name that is no column of the table (DuckDB would take the alias): with the schema
    maintained as the alias; refused without, as the table could have the column."""
    view = "SELECT id + 1 AS zz FROM t WHERE zz > 2"
    run_scenario(DuckLakeHarness(lake), [T], view, T_CYCLES, schema=FROM_CATALOG)
    with pytest.raises(UnsupportedSQLError, match="`zz` in WHERE"):
        compile_ivm(view)


# GROUP BY ALL (the compiler read no keys from it: every such view was a global aggregate
# whose items read columns of no relation, e.g. `Referenced table "t" not found`)
FACTS = TableSpec(
    "t",
    [Column("g", "INTEGER"), Column("v", "INTEGER")],
    [(1, 10), (1, 5), (2, 7), (3, None)],
)
DIMS = TableSpec(
    "dims",
    [Column("g", "INTEGER"), Column("name", "VARCHAR")],
    [(1, "one"), (2, "two"), (3, "three")],
)
FACT_CYCLES: list[Cycle] = [
    [[Insert("t", ((2, 1), (4, 9))), Insert("dims", ((4, "four"),))]],
    [[Update("dims", "name = 'uno'", "g = 1")], [Delete("t", "g = 2")]],
    [[Update("t", "g = 3", "g = 1")]],
    [[Delete("t", "true")]],
]


@pytest.mark.parametrize("known_schema", [True, False])
@pytest.mark.parametrize(
    "view",
    [
        "SELECT t.g, d.name, sum(t.v) AS s FROM t t JOIN dims d ON t.g = d.g GROUP BY ALL",
        # a constant is no key (DuckDB): one row over no rows, as without GROUP BY
        "SELECT 1 AS one, count(*) AS n, sum(t.v) AS s FROM t t GROUP BY ALL",
        "SELECT t.g + 1 AS g1, 'x' AS c, count(*) AS n, rank() OVER (ORDER BY count(*)) AS r"
        " FROM t t GROUP BY ALL",
    ],
)
def test_group_by_all(lake, view, known_schema):
    kwargs = {"schema": FROM_CATALOG} if known_schema else {}
    run_scenario(DuckLakeHarness(lake), [FACTS, DIMS], view, FACT_CYCLES, **kwargs)


def test_qualify_reads_a_column_named_like_a_window_alias(lake):
    """In QUALIFY an input column wins over an alias of its name outside windows too (DuckDB
    1.5.5): with the schema, ``v`` is the column. Without it the alias of a window function is
    taken (the ``QUALIFY rn = 1`` idiom), so such a view needs ``schema=``."""
    view = "SELECT id, k, row_number() OVER (PARTITION BY k ORDER BY id) AS v FROM t QUALIFY v > 5"
    run_scenario(DuckLakeHarness(lake), [T], view, T_CYCLES, schema=FROM_CATALOG)
