"""Recursive CTEs (``tree.recursive``): the operator's delta against its definition over
random edge tables (trees, DAGs, cycles under UNION), and maintained views on DuckLake
through windows of inserts, deletes and updates."""

from __future__ import annotations

import re
from collections import Counter

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duckstream.compiler import compile_ivm
from duckstream.engines.base import Version
from duckstream.errors import UnsupportedSQLError
from duckstream.explain import explain
from duckstream.plan import Iterate
from duckstream.testing.differential import (
    Column,
    Delete,
    DuckLakeHarness,
    Insert,
    Scenario,
    TableSpec,
    Update,
    as_multiset,
    run_scenario,
    sql_literal,
    tables_schema,
)
from duckstream.testing.ducklake import connect_ducklake
from strategies import examples  # tests/ is on sys.path (its conftest)
from test_operators import relation_of  # tests/ is on sys.path (its conftest)

EDGES = [Column("src", "INTEGER"), Column("dst", "INTEGER"), Column("w", "INTEGER")]
ROOTS = [Column("id", "INTEGER")]
NODES = 6

# reachability and hierarchies: {kind} is UNION or UNION ALL
REACH = (
    "WITH RECURSIVE r(node) AS (SELECT id FROM roots {kind}"
    " SELECT e.dst FROM r JOIN edges AS e ON e.src = r.node) SELECT node FROM r"
)
LEVELS = (
    "WITH RECURSIVE h(node, lvl) AS (SELECT id, 0 FROM roots UNION ALL"
    " SELECT e.dst, h.lvl + 1 FROM h JOIN edges e ON e.src = h.node WHERE e.w > 0)"
    " SELECT node, lvl FROM h"
)
CLOSURE = (
    "WITH RECURSIVE tc(a, b) AS (SELECT src, dst FROM edges {kind}"
    " SELECT tc.a, e.dst FROM tc, edges AS e WHERE e.src = tc.b) SELECT a, b FROM tc"
)
COUNTED = (
    "WITH RECURSIVE r(node) AS (SELECT id FROM roots {kind}"
    " SELECT e.dst FROM r JOIN edges AS e ON e.src = r.node)"
    " SELECT node, count(*) AS n FROM r GROUP BY node"
)
# the parts of a bill of materials: quantities multiply along the paths (UNION ALL, a DAG)
PARTS = (
    "WITH RECURSIVE bom(part, qty) AS (SELECT id, 1 FROM roots UNION ALL"
    " SELECT e.dst, bom.qty * e.w FROM bom JOIN edges e ON e.src = bom.part)"
    " SELECT part, sum(qty) AS total FROM bom GROUP BY part"
)
# no column list; read twice and joined to a table in the outer query
UNNAMED = (
    "WITH RECURSIVE r AS (SELECT id AS node FROM roots {kind}"
    " SELECT e.dst AS node FROM r JOIN edges AS e ON e.src = r.node AND e.w <> 2)"
    " SELECT a.node, x.w FROM r AS a JOIN edges AS x ON x.src = a.node, r AS b"
    " WHERE a.node = b.node"
)
BAG_VIEWS = [
    REACH.format(kind="UNION ALL"),
    LEVELS,
    CLOSURE.format(kind="UNION ALL"),
    PARTS,
    UNNAMED.format(kind="UNION ALL"),
]
SET_VIEWS = [
    REACH.format(kind="UNION"),
    CLOSURE.format(kind="UNION"),
    COUNTED.format(kind="UNION"),
    UNNAMED.format(kind="UNION"),
]


def edge(draw, acyclic: bool) -> tuple:
    src = draw(st.integers(0, NODES - 1))
    if acyclic:  # src < dst: a DAG (several paths to a node, no cycle)
        dst = draw(st.integers(src, NODES)) if src < NODES else NODES
        dst = max(dst, src + 1)
    else:
        dst = draw(st.integers(0, NODES - 1))
    return (src, dst, draw(st.integers(0, 3)))


@st.composite
def graphs(draw, acyclic: bool):
    """Edges (duplicates allowed) and roots: old rows, deleted, inserted, transient."""
    edges = [edge(draw, acyclic) for _ in range(draw(st.integers(0, 10)))]
    roots = [(draw(st.integers(0, NODES - 1)),) for _ in range(draw(st.integers(0, 3)))]

    def change(rows_, make):
        kept = [r for r in rows_ if draw(st.integers(0, 2)) > 0]
        deleted = list((Counter(rows_) - Counter(kept)).elements())
        inserted = [make() for _ in range(draw(st.integers(0, 3)))]
        transient = [make() for _ in range(draw(st.integers(0, 1)))]
        return kept, deleted, inserted, transient

    return (
        (TableSpec("edges", EDGES, edges), change(edges, lambda: edge(draw, acyclic))),
        (
            TableSpec("roots", ROOTS, roots),
            change(roots, lambda: (draw(st.integers(0, NODES - 1)),)),
        ),
    )


def _load(con, name: str, table: TableSpec, rows_: list[tuple], mult: bool = False) -> None:
    columns = ", ".join(f"{c.name} {c.type}" for c in table.columns)
    con.execute(f"CREATE TABLE {name} ({columns}{', _ivm_mult BIGINT' if mult else ''})")
    if rows_:
        values = ", ".join("(" + ", ".join(sql_literal(v) for v in r) + ")" for r in rows_)
        con.execute(f"INSERT INTO {name} VALUES {values}")


def check_operator(view_sql: str, graph) -> None:
    """``delta`` equals ``state(new) - state(old)`` as a signed multiset."""
    relation, ctx = relation_of(view_sql)
    con = duckdb.connect()
    try:
        for table, (kept, deleted, inserted, transient) in graph:
            _load(con, f"old_{table.name}", table, table.rows)
            _load(con, f"new_{table.name}", table, kept + inserted)
            feed = [(*r, -1) for r in deleted + transient] + [(*r, 1) for r in inserted + transient]
            _load(con, f"delta_{table.name}", table, feed, mult=True)
        old = as_multiset(con.execute(relation.state(ctx, Version.OLD).sql("duckdb")).fetchall())
        new = as_multiset(con.execute(relation.state(ctx, Version.NEW).sql("duckdb")).fetchall())
        # the engine's own recursion is the oracle for the states
        for version, state in (("old", old), ("new", new)):
            renamed = view_sql.replace("roots", f"{version}_roots").replace(
                "edges", f"{version}_edges"
            )
            assert as_multiset(con.execute(renamed).fetchall()) == state, version
        delta: Counter = Counter()
        for *row, mult in con.execute(relation.delta(ctx).sql("duckdb")).fetchall():
            (key,) = as_multiset([tuple(row)])
            delta[key] += mult
    finally:
        con.close()
    expected = Counter(new)
    expected.subtract(old)
    assert {k: v for k, v in delta.items() if v} == {k: v for k, v in expected.items() if v}


@given(st.sampled_from(BAG_VIEWS), graphs(acyclic=True))
def test_bag_recursion_delta(view_sql, graph):
    check_operator(view_sql, graph)


@given(st.sampled_from(SET_VIEWS), graphs(acyclic=False))
def test_set_recursion_delta_with_cycles(view_sql, graph):
    check_operator(view_sql, graph)


# -- maintained on DuckLake ----------------------------------------------------------------
@st.composite
def edge_changes(draw, acyclic: bool) -> list:
    """One transaction over the edge and root tables: inserts, deletes, updates (an update
    under UNION ALL keeps dst > src: the graph stays a DAG)."""
    statements: list = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["insert", "insert", "delete", "update", "roots"]))
        node = draw(st.integers(0, NODES - 1))
        if kind == "insert":
            rows_ = tuple(edge(draw, acyclic) for _ in range(draw(st.integers(1, 3))))
            statements.append(Insert("edges", rows_))
        elif kind == "delete":
            column = draw(st.sampled_from(["src", "dst", "w"]))
            statements.append(Delete("edges", f"{column} = {node % 4 if column == 'w' else node}"))
        elif kind == "update":
            target = f"src + {draw(st.integers(1, 2))}" if acyclic else str(node)
            assignment = draw(st.sampled_from([f"dst = {target}", f"w = {node % 4}"]))
            statements.append(Update("edges", assignment, f"src = {draw(st.integers(0, NODES))}"))
        elif draw(st.booleans()):
            statements.append(Insert("roots", ((node,),)))
        else:
            statements.append(Delete("roots", f"id = {node}"))
    return statements


@st.composite
def lake_scenarios(draw, views_: list[str], acyclic: bool):
    view_sql = draw(st.sampled_from(views_))
    edges = [edge(draw, acyclic) for _ in range(draw(st.integers(0, 8)))]
    roots = [(draw(st.integers(0, NODES - 1)),) for _ in range(draw(st.integers(0, 3)))]
    windows = [
        [draw(edge_changes(acyclic)) for _ in range(draw(st.integers(1, 3)))]
        for _ in range(draw(st.integers(1, 4)))
    ]
    return (
        view_sql,
        [TableSpec("edges", EDGES, edges), TableSpec("roots", ROOTS, roots)],
        windows,
        draw(st.booleans()),  # schema= (as dbt compiles) or not
        draw(st.sampled_from(["incremental", "auto"])),
        draw(st.sampled_from([0, None])),  # data inlining off / DuckLake's default
    )


def check_lake(scenario, tmp_path_factory) -> None:
    view_sql, tables_, windows, with_schema, strategy, inlining = scenario
    directory = tmp_path_factory.mktemp("lake")
    con = connect_ducklake(str(directory / "lake"), "dl", inlining)
    try:
        kwargs = {"schema": tables_schema(tables_)} if with_schema else {}
        harness = DuckLakeHarness(con, strategy=strategy)
        run_scenario(harness, tables_, view_sql, windows, **kwargs)
    finally:
        con.close()


# Fewer examples than the delta tests above (which check the same rules in memory): each runs
# a refresh loop on a real catalog; DUCKSTREAM_DEEP runs 500.
on_lake = settings(max_examples=examples(10, 500))


def test_bag_recursion_maintained_on_ducklake(tmp_path_factory):
    on_lake(
        given(lake_scenarios(BAG_VIEWS, acyclic=True))(
            lambda scenario: check_lake(scenario, tmp_path_factory)
        )
    )()


def test_set_recursion_maintained_on_ducklake_with_cycles(tmp_path_factory):
    on_lake(
        given(lake_scenarios(SET_VIEWS, acyclic=False))(
            lambda scenario: check_lake(scenario, tmp_path_factory)
        )
    )()


# -- what is refused, and the depth bound ------------------------------------------------
@pytest.mark.parametrize(
    ("view_sql", "says"),
    [
        (
            "WITH RECURSIVE r(n) AS (SELECT id FROM roots UNION ALL SELECT a.n FROM r AS a"
            " JOIN r AS b ON a.n = b.n) SELECT n FROM r",
            "non-linear recursion",
        ),
        (
            "WITH RECURSIVE r(n) AS (SELECT id FROM roots UNION ALL SELECT max(e.dst) FROM r"
            " JOIN edges AS e ON e.src = r.n) SELECT n FROM r",
            "aggregate in the recursive term",
        ),
        (
            "WITH RECURSIVE r(n) AS (SELECT id FROM roots UNION SELECT DISTINCT e.dst FROM r"
            " JOIN edges AS e ON e.src = r.n) SELECT n FROM r",
            "DISTINCT in the recursive term",
        ),
        (
            "WITH RECURSIVE r(n) AS (SELECT id FROM roots UNION ALL SELECT e.dst FROM r"
            " LEFT JOIN edges AS e ON e.src = r.n) SELECT n FROM r",
            "outer join",
        ),
        (
            "WITH RECURSIVE r(n) AS (SELECT id FROM roots UNION ALL SELECT e.dst FROM edges"
            " AS e WHERE e.src IN (SELECT n FROM r)) SELECT n FROM r",
            "must be a FROM item",
        ),
        (
            "WITH RECURSIVE r(n) AS (SELECT id FROM roots EXCEPT SELECT e.dst FROM r"
            " JOIN edges AS e ON e.src = r.n) SELECT n FROM r",
            "base UNION [ALL] recursive term",
        ),
        (
            "WITH RECURSIVE a(n) AS (SELECT id FROM roots UNION ALL SELECT b.n FROM b),"
            " b(n) AS (SELECT n + 1 FROM a WHERE n < 3) SELECT n FROM a",
            "mutual recursion",
        ),
    ],
)
def test_refused_by_name(view_sql, says):
    with pytest.raises(UnsupportedSQLError, match=r"recursive_cte: .*" + re.escape(says)):
        compile_ivm(view_sql)


@pytest.mark.parametrize("kind", ["UNION", "UNION ALL"])
def test_iterated_on_spark(kind):
    """Spark 3.5 has no WITH RECURSIVE: its plan iterates the recursion in steps of its own
    (engines/iceberg/recursion.py), in the fill and in the refresh, and no statement keeps
    a WITH RECURSIVE."""
    plan = compile_ivm(REACH.format(kind=kind), dialect="spark", max_recursion_depth=7)
    for protocol in ("initialize_cursors", "maintain"):
        # under UNION a refresh iterates twice: the over-deleted rows, then the rederived
        iterates = [s for s in plan.steps[protocol] if isinstance(s, Iterate)]
        assert len(iterates) == (2 if kind == "UNION" and protocol == "maintain" else 1)
        iterate = iterates[-1]
        assert iterate.distinct == (kind == "UNION")
        assert iterate.bound == 7
        assert "max_recursion_depth" in iterate.message
        statements = [
            "\n".join(line for line in s.splitlines() if not line.startswith("--"))
            for s in getattr(plan, protocol)
        ]
        assert not any("WITH RECURSIVE" in s.upper() for s in statements)
        assert any(iterate.table.name in s and "${k-1}" in s for s in statements)
    assert "WITH RECURSIVE" not in plan.create_mv.upper()
    # the iterations read the edges (at the end snapshot): auto's cost model weighs them
    assert "dl.main.edges" in {r.table for r in plan.maintain_reads or []}
    (cte,) = [
        o
        for o in explain(REACH.format(kind=kind), dialect="spark").operators
        if o.operator == "recursive CTE"
    ]
    assert "iterated by the runner" in cte.rule
    (cte,) = [
        o for o in explain(REACH.format(kind=kind)).operators if o.operator == "recursive CTE"
    ]
    assert "engine's own WITH RECURSIVE" in cte.rule


def test_a_recursive_cte_that_reads_no_table_joined_to_one(lake):
    """A counter (its base term reads no table) is the same at every snapshot: joined to a
    table, only the table's changes reach the view."""
    run_scenario(
        DuckLakeHarness(lake),
        [TableSpec("roots", ROOTS, [(1,), (3,)])],
        "WITH RECURSIVE nums(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM nums WHERE n < 5)"
        " SELECT t.id, nums.n FROM roots AS t JOIN nums ON nums.n <= t.id",
        [[[Insert("roots", ((4,), (7,)))]], [[Delete("roots", "id = 3")]]],
    )


def test_non_recursive_ctes_under_with_recursive_are_inlined():
    plan = compile_ivm("WITH RECURSIVE c AS (SELECT id FROM roots) SELECT id FROM c")
    assert "recursive_cte" not in plan.features


@pytest.mark.parametrize("strategy", ["incremental", "auto"])
def test_a_cycle_under_union_all_fails_at_the_depth_bound(lake, strategy):
    """A cycle never ends under UNION ALL: the refresh fails naming the setting, and the
    view keeps its rows (the refresh's transaction is rolled back)."""
    harness = DuckLakeHarness(lake, strategy=strategy)
    view_sql = REACH.format(kind="UNION ALL")
    harness.create(TableSpec("edges", EDGES, [(0, 1, 1), (1, 2, 1)]))
    harness.create(TableSpec("roots", ROOTS, [(0,)]))
    plan = harness.compile(view_sql, max_recursion_depth=5)
    harness.setup(plan)
    harness.check(plan, view_sql)
    harness.apply([Insert("edges", ((2, 0, 1),))])
    with pytest.raises(duckdb.Error, match="max_recursion_depth"):
        harness.refresh(plan)
    assert sorted(harness.rows(plan.query_mv)) == [(0,), (1,), (2,)]


def test_a_path_as_long_as_the_bound_is_maintained(lake):
    harness = DuckLakeHarness(lake)
    view_sql = LEVELS
    chain = [(i, i + 1, 1) for i in range(5)]
    run_scenario(
        harness,
        [TableSpec("edges", EDGES, chain[:2]), TableSpec("roots", ROOTS, [(0,)])],
        view_sql,
        [[[Insert("edges", tuple(chain[2:]))]], [[Delete("edges", "src = 1")]]],
        max_recursion_depth=5,
    )


# -- hand-written scenarios (also run on Spark: tests/spark/test_spark_recursive.py) ---------
def _tree() -> list[tuple]:
    """A category tree: 1 and 2 are roots; parent_id below a node's id."""
    return [(1, None), (2, None), (3, 1), (4, 1), (5, 3), (6, 5), (7, 2)]


CATEGORIES = [Column("id", "INTEGER"), Column("parent_id", "INTEGER")]
SCENARIOS = {
    "hierarchy_paths": Scenario(
        tables=[TableSpec("categories", CATEGORIES, _tree())],
        view=(
            "WITH RECURSIVE tree (id, root, depth) AS ("
            " SELECT id, id, 0 FROM categories WHERE parent_id IS NULL"
            " UNION ALL SELECT c.id, tree.root, tree.depth + 1 FROM tree"
            " JOIN categories AS c ON c.parent_id = tree.id)"
            " SELECT id, root, depth FROM tree"
        ),
        cycles=[
            [[Insert("categories", ((8, 6), (9, 7)))]],
            [[Update("categories", "parent_id = 2", "id = 3")]],  # a subtree moves
            [[Delete("categories", "id = 5")], [Insert("categories", ((10, 5),))]],
            [[Update("categories", "parent_id = NULL", "id = 4")]],  # a new root
        ],
    ),
    "bill_of_materials": Scenario(
        tables=[
            TableSpec("edges", EDGES, [(0, 1, 2), (0, 2, 3), (1, 3, 4), (2, 3, 1), (3, 4, 2)]),
            TableSpec("roots", ROOTS, [(0,)]),
        ],
        view=PARTS,  # a DAG: 3 is reached by two paths, each path's quantity counted
        cycles=[
            [[Insert("edges", ((1, 4, 5),))]],
            [[Update("edges", "w = 10", "src = 0 AND dst = 1")]],
            [[Delete("edges", "src = 2")], [Insert("roots", ((2,),))]],
        ],
    ),
    "reachability_with_cycles": Scenario(
        tables=[
            TableSpec("edges", EDGES, [(0, 1, 1), (1, 2, 1), (2, 0, 1), (3, 4, 1)]),
            TableSpec("roots", ROOTS, [(0,)]),
        ],
        view=CLOSURE.format(kind="UNION"),
        cycles=[
            [[Insert("edges", ((2, 3, 1),))]],
            [[Delete("edges", "src = 1")]],  # the cycle breaks: 0 no longer reaches itself
            [[Update("edges", "dst = 1", "src = 2 AND dst = 0")]],
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("with_schema", [False, True])
def test_scenario(lake, name, with_schema):
    scenario = SCENARIOS[name]
    kwargs = {"schema": tables_schema(scenario.tables)} if with_schema else {}
    run_scenario(DuckLakeHarness(lake), scenario.tables, scenario.view, scenario.cycles, **kwargs)
