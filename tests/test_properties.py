"""Differential property tests: random schemas, views, and change windows on real DuckLake
catalogs; after every refresh the maintained view must equal recomputation as a multiset,
with the SELECT's column names.

One test per construct so each gets its own examples: view shapes and aggregate functions;
joins of two and three tables whose windows change several tables at once, each table kept in
the view's DuckLake catalog or in a second one; and the widened grammar
(``strategies.CONSTRUCTS``): several aggregate kinds in one view, literals in select lists,
chained CTEs, a CTE used twice, aggregates and DISTINCT inside derived tables and CTEs, two
levels of nesting, self-joins, mixed-case and quoted identifiers, select aliases named like
the input columns that WHERE, GROUP BY and HAVING read (the column wins), table functions over
a row's columns and LATERAL subqueries (``lateral``). Every example also draws
DuckLake's data inlining (off, the default, 1000 rows). Separate properties: transactions
that insert rows and then update or delete them; sources renamed away, replaced or swapped
(``auto`` rebuilds, ``incremental`` raises ``rebuild required`` and changes nothing); and a
deliberately broken delta rule, which the properties must catch.

Depth (environment):
- ``DUCKSTREAM_EXAMPLES=<n>``: examples per test, for every test here (default: 12 for the
  shape / aggregate / join tests, 6 for each widened-grammar, transaction and rename
  test, so CI stays fast: ``tests/test_operators.py`` checks each operator's delta rule on
  more cases in memory);
- ``DUCKSTREAM_DEEP=1``: the deep run (500 per shape / aggregate / join test, 2000 per
  widened-grammar test, unless DUCKSTREAM_EXAMPLES says otherwise); not derandomized;
  also runs the broken-delta-rule checks (alone: ``DUCKSTREAM_BROKEN_RULES=1``, ~2.5 min).
Shrunk counterexamples are kept below as regression cases (``REGRESSIONS``).
"""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

from duckstream.strategy import Policy
from duckstream.testing.differential import (
    Column,
    Delete,
    DuckLakeHarness,
    Insert,
    TableSpec,
    Update,
    run_scenario,
    tables_schema,
)
from duckstream.testing.ducklake import attach_ducklake, connect_ducklake
from strategies import (  # tests/ is on sys.path (its conftest)
    AGGREGATES,
    CONSTRUCTS,
    SHAPES,
    construct_views,
    cycles,
    examples,
    named_tables,
    rows,
    tables,
    views,
)

_DEEP = bool(os.environ.get("DUCKSTREAM_DEEP"))
WIDE_EXAMPLES = int(os.environ.get("DUCKSTREAM_EXAMPLES") or (2000 if _DEEP else 6))
wide = settings(max_examples=WIDE_EXAMPLES)
# the shape / aggregate / join tests: each on real catalogs, the same rules checked in memory
# by tests/test_operators.py
lake = settings(max_examples=examples(12, 500))

# DuckLake's data_inlining_row_limit: off (every change a file), the default, 1000
INLINING = [0, None, 1000]


@st.composite
def scenarios(
    draw,
    table_count: int,
    shape: str | None = None,
    kind: str | None = None,
    construct: str | None = None,
    transactions: bool = False,
    portable: bool = False,
    outer: bool = False,
    several: tuple = (),
):
    """(tables, view SQL, change windows, known schema?, placement, inlining).
    ``portable``: only what DuckDB and Spark both support; ``outer``: outer joins too;
    ``several``: the strategies of ``transactions`` (``strategies.cycles``)."""
    names = "mixed" if construct == "identifiers" else "plain"
    tables_ = draw(named_tables(table_count, names))
    if construct is not None:
        view_sql = draw(construct_views(tables_, construct, portable))
    else:
        view_sql = draw(views(tables_, shape, kind, outer=outer))
    cycles_ = draw(cycles(tables_, transactions=transactions, several=several))
    # With the sources' schema (as dbt passes it) columns are qualified, change reads name
    # only the columns used and delta terms get semi-join filters: both paths must be exact.
    known_schema = draw(st.booleans())
    # Joins may read tables of a second DuckLake catalog, whose snapshots move on their own.
    placement = {t.name: "raw" for t in tables_ if table_count > 1 and draw(st.booleans())}
    inlining = draw(st.sampled_from(INLINING))
    return tables_, view_sql, cycles_, known_schema, placement, inlining


def check(scenario) -> None:
    """Maintain the scenario's view through its windows (``incremental``), checked after each."""
    check_with(scenario, None)


def check_with(scenario, policy: Policy | None) -> None:
    """:func:`check`; ``policy``: refresh with ``auto`` and that cost model instead."""
    tables_, view_sql, cycles_, known_schema, placement, inlining = scenario
    with tempfile.TemporaryDirectory() as directory:
        con = connect_ducklake(f"{directory}/lake", "dl", inlining)
        attach_ducklake(con, f"{directory}/raw", "raw", inlining)
        try:
            kwargs = {"schema": tables_schema(tables_)} if known_schema else {}
            harness = DuckLakeHarness(
                con,
                placement=dict(placement),
                check_names=True,
                strategy="incremental" if policy is None else "auto",
                policy=policy,
            )
            run_scenario(harness, tables_, view_sql, cycles_, **kwargs)
        finally:
            con.close()


@pytest.mark.parametrize("shape", SHAPES)
def test_single_table_view_shape(shape):
    lake(given(scenarios(1, shape=shape))(check))()


@pytest.mark.parametrize("kind", AGGREGATES)
def test_single_table_aggregate(kind):
    lake(given(scenarios(1, kind=kind))(check))()


@lake
@given(scenarios(2))
def test_two_table_joins_with_simultaneous_changes(scenario):
    check(scenario)


@lake
@given(scenarios(3))
def test_three_table_joins(scenario):
    check(scenario)


@pytest.mark.parametrize("shape", ["project", "derived", "aggregate", "distinct", "nested"])
def test_two_table_outer_joins(shape):
    """LEFT / RIGHT / FULL joins (mixed with inner and CROSS joins, ON conditions over one
    side, USING, a LEFT JOIN to a per-key aggregate) under each kind of view, and under an
    aggregate or DISTINCT inside a derived table (``nested``, TPC-H Q13's shape)."""
    lake(given(scenarios(2, shape=shape, outer=True))(check))()


@lake
@given(scenarios(3, outer=True))
def test_three_table_outer_joins(scenario):
    check(scenario)


@pytest.mark.parametrize("construct", CONSTRUCTS)
def test_widened_grammar(construct):
    wide(given(scenarios(2, construct=construct))(check))()


@pytest.mark.parametrize("table_count", [1, 2])
@lake
@given(overhead=st.integers(0, 60), margin=st.sampled_from([0.25, 1.0]), data=st.data())
def test_auto_copying_the_changes_first(table_count, overhead, margin, data):
    """``auto`` copying every updated source's changes before it decides (any copy is cheap
    enough), with a fixed cost drawn near the tables' sizes (and a margin that makes a copy's
    saved scan count): the copies then lead to a
    rebuild (dropped after it), to a refresh that reuses them, or, all empty, to one that
    only moves the cursors; each is checked against recomputation."""
    scenario = data.draw(scenarios(table_count))
    check_with(scenario, Policy(overhead_rows=overhead, margin=margin, net_first=1e12, copy_rows=0))


@wide
@given(overhead=st.integers(0, 60), margin=st.sampled_from([0.25, 1.0]), data=st.data())
def test_shared_cte_auto(overhead, margin, data):
    """A CTE read twice (its delta and states made once into temporary tables, after the
    change copies) under ``auto``: copies first, then a rebuild, a refresh that reuses them,
    or none when they are empty; ``test_widened_grammar[shared_cte]`` forces the refresh."""
    scenario = data.draw(scenarios(2, construct="shared_cte"))
    check_with(scenario, Policy(overhead_rows=overhead, margin=margin, net_first=1e12, copy_rows=0))


@pytest.mark.parametrize("table_count", [1, 2])
def test_rows_changed_several_times_in_one_transaction(table_count):
    """Transactions that insert and then change rows, update rows twice, update then delete,
    delete and insert again, change each row of a file apart (:func:`rework_rows`)."""
    wide(given(scenarios(table_count, transactions=True))(check))()


@pytest.mark.parametrize("construct", ["self_join", "derived_aggregate"])
def test_rows_changed_several_times_under_a_construct(construct):
    """The same transactions under a self-join (the shape a random tester shrank a double
    update to) and an aggregate of a derived table."""
    wide(given(scenarios(1, construct=construct, transactions=True))(check))()


# -- renamed and swapped sources ---------------------------------------------------------
@st.composite
def rename_scenarios(draw):
    """Two tables of one schema, a view over the first (or both), windows before, and then
    a rename: ``replace`` (t0 renamed away, a new t0 created with new rows) or ``swap`` (t0
    and t1 exchange names through three renames), maybe followed by changes to the new t0."""
    (t0,) = draw(tables(1))
    t1 = TableSpec("t1", t0.columns, draw(rows(t0.columns)))
    both = draw(st.booleans())
    view_sql = draw(views([t0, t1] if both else [t0]))
    before = draw(cycles([t0, t1], max_cycles=2))
    how = draw(st.sampled_from(["replace", "swap"]))
    new_rows = draw(rows(t0.columns))
    after = draw(cycles([t0, t1], max_cycles=1))
    inlining = draw(st.sampled_from(INLINING))
    return [t0, t1], view_sql, before, how, new_rows, after, inlining


def _rename(harness: DuckLakeHarness, how: str, table: TableSpec, new_rows) -> None:
    if how == "replace":
        harness.rename(table.name, f"{table.name}_old")
        harness.create(TableSpec(table.name, table.columns, list(new_rows)))
    else:
        harness.rename("t0", "t_swap")
        harness.rename("t1", "t0")
        harness.rename("t_swap", "t1")


def check_rename(scenario, strategy: str) -> None:
    tables_, view_sql, before, how, new_rows, after, inlining = scenario
    with tempfile.TemporaryDirectory() as directory:
        con = connect_ducklake(f"{directory}/lake", "dl", inlining)
        try:
            harness = DuckLakeHarness(con, check_names=True)
            plan = run_scenario(harness, tables_, view_sql, before)
            _rename(harness, how, tables_[0], new_rows)
            for batch in after[0]:
                harness.apply(batch)
            harness.strategy = strategy
            if strategy == "incremental":
                kept = harness.rows(plan.query_mv)
                with pytest.raises(Exception, match="rebuild required"):
                    harness.refresh(plan)
                assert sorted(map(repr, harness.rows(plan.query_mv))) == sorted(map(repr, kept)), (
                    "a refused refresh changed the view"
                )
                return
            harness.refresh(plan)  # auto: must notice and rebuild
            harness.check(plan, view_sql, f"after {how} and an auto refresh")
            harness.strategy = "incremental"  # and then maintain the new table
            for batch in after[0]:
                harness.apply(batch)
            harness.refresh(plan)
            harness.check(plan, view_sql, f"after {how}, auto, then incremental")
        finally:
            con.close()


@pytest.mark.parametrize("strategy", ["auto", "incremental"])
def test_renamed_or_swapped_sources(strategy):
    wide(given(rename_scenarios())(lambda s: check_rename(s, strategy)))()


# -- a broken delta rule must be caught --------------------------------------------------
def _drop_later_join_terms(monkeypatch) -> None:
    """Join rule without its terms for the second and later tables (their changes lost)."""
    from duckstream.tree.join import Join

    original = Join.delta_terms
    monkeypatch.setattr(Join, "delta_terms", lambda self, ctx: original(self, ctx)[:1])


def _deletions_count_as_insertions(monkeypatch) -> None:
    """Aggregate state updated with |multiplicity|: a deleted row is added, not subtracted."""
    from sqlglot import exp

    from duckstream.sinks.aggregates import AggregateSpec

    original = AggregateSpec.delta_items
    monkeypatch.setattr(
        AggregateSpec, "delta_items", lambda self, x, m: original(self, x, exp.Abs(this=m))
    )


def _unmatched_rows_never_looked_up(monkeypatch) -> None:
    """Affected groups over a last LEFT / FULL join without its unmatched-row terms, even
    when the keys read the NULL-extended side (``Join.key_terms`` without its condition)."""
    from duckstream.tree.join import FULL, LEFT, Join

    def key_terms(self, ctx, aliases):
        last = len(self.leaves) - 1
        if last < 1 or self.kinds[-1] not in (LEFT, FULL):
            return self.delta_terms(ctx)
        return [self._term(p) for p in self._delta_parts(ctx, covered_left=last)]

    monkeypatch.setattr(Join, "key_terms", key_terms)


def _drop_later_union_branches(monkeypatch) -> None:
    """UNION ALL's delta without its second branch's (its changes lost)."""
    from duckstream.tree.union import UnionAll, stack

    monkeypatch.setattr(UnionAll, "delta", lambda self, ctx: stack([self.inputs[0].delta(ctx)]))


def _recount_at_the_end_only(monkeypatch) -> None:
    """INTERSECT / EXCEPT recounting the touched rows at the end snapshot for both terms (the
    old counts read at the new state: every change cancels out)."""
    from duckstream.engines.base import Version
    from duckstream.tree.intersect_except import IntersectExcept

    original = IntersectExcept._recounted
    monkeypatch.setattr(
        IntersectExcept,
        "_recounted",
        lambda self, ctx, version, touched, sign: original(self, ctx, Version.NEW, touched, sign),
    )


BROKEN = {
    "join_terms_dropped": (_drop_later_join_terms, scenarios(2)),
    "aggregate_sign_flipped": (_deletions_count_as_insertions, scenarios(1, kind="sum")),
    "outer_key_terms_cut": (
        _unmatched_rows_never_looked_up,
        scenarios(2, shape="nested", outer=True),
    ),
    "union_branch_dropped": (_drop_later_union_branches, scenarios(2, construct="set_operations")),
    "set_recount_old_state_lost": (
        _recount_at_the_end_only,
        scenarios(2, construct="set_operations"),
    ),
}


@pytest.mark.skipif(
    not (_DEEP or os.environ.get("DUCKSTREAM_BROKEN_RULES")),
    reason="~2.5 min: runs in the deep run or with DUCKSTREAM_BROKEN_RULES=1",
)
@pytest.mark.parametrize("rule", sorted(BROKEN))
def test_broken_delta_rule_is_caught(rule, monkeypatch):
    breaks, strategy = BROKEN[rule]
    breaks(monkeypatch)

    def wrong(scenario) -> bool:
        try:
            check(scenario)
        except AssertionError:
            return True
        return False

    # no shrinking: any counterexample will do
    quick = settings(max_examples=200, derandomize=True, database=None, phases=[Phase.generate])
    found = find(strategy, wrong, settings=quick)
    assert found  # a counterexample: the property run fails on the broken rule


# -- shrunk counterexamples found by the properties above --------------------------------
def _t(name: str, columns: list[tuple[str, str]], rows_: list[tuple]) -> TableSpec:
    return TableSpec(name, [Column(n, t) for n, t in columns], rows_)


_TK = [("k", "INTEGER"), ("c0", "INTEGER")]
REGRESSIONS = [
    pytest.param(
        (
            [_t("t0", _TK, [])],
            "WITH cte1 AS (SELECT DISTINCT k, k AS x0, k AS x1 FROM t0 WHERE k = 0)"
            " SELECT count(*) AS o0, count(*) AS o1 FROM cte1",
            [
                [
                    [Insert("t0", ((None, None),) * 3), Insert("t0", ((0, None),))],
                    [Insert("t0", ((-3, None),))],
                ],
                [[Update("t0", "c0 = NULL", "k >= -3")]],
            ],
            False,
            {},
            0,
        ),
        id="table_statistics_leave_a_value_out",
    ),
    pytest.param(
        (
            [_t("t0", _TK, [(5, 4), (6, 9)])],
            "SELECT min(c0) AS o1, count(DISTINCT k) AS v FROM t0",
            [[[Update("t0", "k = 5", "k = 6")]]],
            False,
            {},
            None,
        ),
        id="min_with_count_distinct",
    ),
    pytest.param(
        (
            [_t("t0", _TK, [(1, 10), (2, 20)])],
            "SELECT k AS o0, c0 AS o1 FROM t0",
            [[[Insert("t0", ((3, 30), (4, 40))), Update("t0", "c0 = 0", "k = 3")]]],
            False,
            {},
            0,
        ),
        id="insert_then_update_one_transaction",
    ),
    pytest.param(
        (
            [_t("t0", _TK, [(1, 10), (2, 20)])],
            "SELECT k AS o0, count(*) AS n FROM t0 GROUP BY k",
            [[[Insert("t0", ((3, 30), (4, 40))), Delete("t0", "k = 3")]]],
            False,
            {},
            0,
        ),
        id="insert_then_delete_one_transaction",
    ),
    pytest.param(
        (
            [_t("t0", _TK, [(1, 10), (2, 20)])],
            "SELECT count(*) AS n, sum(c0) AS s FROM t0",
            [[[Delete("t0", "k = 1"), Update("t0", "c0 = 21", "k = 2")]]],
            False,
            {},
            0,
        ),
        id="deleted_row_listed_twice",
    ),
    pytest.param(
        (
            [_t("t0", _TK, [(1, 10)])],
            "WITH s AS (SELECT k, c0 AS x FROM t0), r AS (SELECT k, x FROM s) SELECT k, x FROM r",
            [[[Insert("t0", ((2, 20),))]]],
            True,
            {},
            None,
        ),
        id="chained_ctes",
    ),
    pytest.param(
        (
            [_t("t0", _TK, [(1, 10), (1, 11)])],
            "SELECT DISTINCT -1 AS a, k, 'x' AS b FROM t0",
            [[[Insert("t0", ((2, 20),)), Delete("t0", "k = 1")]]],
            True,
            {},
            None,
        ),
        id="literals_in_distinct",
    ),
    pytest.param(
        (
            [_t("Orders", [("MyKey", "INTEGER"), ("Größe", "VARCHAR")], [(1, "a")])],
            'SELECT MyKey, "Größe" FROM Orders',
            [[[Insert("Orders", ((2, "b"),))]]],
            True,
            {},
            None,
        ),
        id="mixed_case_identifiers",
    ),
    pytest.param(
        (
            [_t("t0", _TK, [(1, 10)])],
            "SELECT DISTINCT CAST(k AS BIGINT) AS k, k AS x FROM t0",
            [[[Insert("t0", ((2, 20),))]]],
            False,
            {},
            None,
        ),
        id="alias_equals_source_column",
    ),
    pytest.param(  # deep run: DuckDB names an unaliased column as its catalog spells it
        (
            [
                TableSpec("Group", [Column("MyKey", "INTEGER"), Column("Amount", "INTEGER")]),
                TableSpec("MyTable", [Column("MyKey", "INTEGER"), Column("Größe", "INTEGER")]),
            ],
            'SELECT amount FROM "Group"',
            [[[Insert("Group", ((1, 2),))]]],
            False,
            {},
            0,
        ),
        id="unaliased_column_in_another_case",
    ),
    pytest.param(  # inlined, the fill's 1 / 11 read back as 0.09090909090909093
        (
            [_t("t0", _TK, [(1, 10)])],
            "SELECT k / 11 AS o0 FROM t0",
            [[[Delete("t0", "k = 1")]]],
            False,
            {},
            None,
        ),
        id="double_of_an_inlined_fill",
    ),
]


@pytest.mark.parametrize("case", REGRESSIONS)
def test_regression(case):
    check(case)
