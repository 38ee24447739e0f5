"""Every construct the compiler cannot maintain raises UnsupportedSQLError naming it; SQL that
cannot be read raises ViewSQLError with the parser's message; run-time problems (a missing
source, an altered or recreated source) stop the refresh cleanly, changing nothing."""

from __future__ import annotations

import duckdb
import pytest

from duckstream import UnsupportedSQLError, ViewSQLError, compile_ivm
from duckstream.engines.ducklake import cursors as ducklake_cursors
from duckstream.errors import RebuildRequired
from duckstream.plan import Commit, Sql, index_of
from duckstream.runtime import refresh, setup
from duckstream.testing.differential import DuckLakeHarness

UNSUPPORTED = {
    "window_function": "SELECT a, sum(b) OVER () AS s FROM t GROUP BY a",
    "limit": "SELECT a FROM t ORDER BY a LIMIT b",
    "nondeterministic_function": "SELECT a, random() AS r FROM t",
    "outer_join": "SELECT t.a FROM t, u RIGHT JOIN v ON u.a = v.a",
    "nested_join": "SELECT t.a FROM t LEFT JOIN (u JOIN v ON u.a = v.a) ON t.a = u.a",
    "set_operation": "SELECT a FROM t UNION BY NAME SELECT a FROM u",
    "subquery": "SELECT a FROM t WHERE (a, b) IN (SELECT u.a, u.b FROM u) OR a = 1",
    "reserved_name": "SELECT _ivm_count FROM t",
    "grouping_sets": "SELECT count(*) AS n FROM t GROUP BY CUBE (a, b, c, d, e, f)",
    "distinct_on": "SELECT DISTINCT ON (a) a, b FROM t LIMIT 3",
    "star": "SELECT * FROM t",
    "natural_join": "SELECT t.a FROM t NATURAL JOIN u",
    "table_function": "SELECT u.x FROM unnest([1, 2]) AS u(x), t",
    "lateral_join": "SELECT u.x FROM t RIGHT JOIN unnest(t.tags) AS u(x) ON TRUE",
    "no_source": "SELECT 1 AS one",
    "duplicate_column": "SELECT a, b AS a FROM t",
    "time_travel": "SELECT a FROM t AT (VERSION => 3)",
}


@pytest.mark.parametrize("feature", sorted(UNSUPPORTED))
def test_unsupported_construct_is_named(feature):
    with pytest.raises(UnsupportedSQLError) as raised:
        compile_ivm(UNSUPPORTED[feature])
    assert raised.value.feature == feature
    assert raised.value.message


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT t.a FROM t LEFT JOIN u USING (a) LEFT JOIN v USING (a)",
        "SELECT t.a FROM t FULL JOIN u ON t.a = u.a FULL JOIN v USING (a)",
        "SELECT t.a FROM t, u LEFT JOIN v ON t.a = v.a",
        "SELECT t.a FROM t LEFT OUTER JOIN u ON t.a = u.a, v FULL JOIN w ON v.a = w.a",
    ],
)
def test_outer_join_shapes_refused(sql):
    """Outer joins are maintained over a left-deep chain: a comma before one (it binds
    looser than JOIN) and USING over a merged column are refused, never mis-maintained."""
    with pytest.raises(UnsupportedSQLError) as raised:
        compile_ivm(sql)
    assert raised.value.feature == "outer_join"


@pytest.mark.parametrize(
    "sql",
    [
        # IN / NOT IN over several columns where UNKNOWN is not FALSE (under OR / NOT)
        "SELECT t.a FROM t WHERE (t.a, t.b) NOT IN (SELECT u.a, u.b FROM u) OR t.b = 1",
        "SELECT t.a, (t.a, t.b) IN (SELECT u.a, u.b FROM u) AS found FROM t",
        "SELECT t.a FROM t WHERE (t.a, t.b) NOT IN (SELECT u.a, u.b FROM u)",
        # correlated other than by comparisons in the subquery's WHERE, or a comparison
        # where only equalities are maintained (NOT IN, scalar subqueries)
        "SELECT t.a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a > t.a OR u.b = 1)",
        "SELECT t.a FROM t WHERE t.b NOT IN (SELECT u.b FROM u WHERE u.a > t.a)",
        "SELECT t.a FROM t WHERE EXISTS (SELECT 1 FROM u JOIN v ON v.a = t.a WHERE u.a = v.a)",
        # correlated scalar subqueries with DISTINCT, scalar subqueries outside the
        # aggregates of a global aggregate, or correlated in HAVING
        "SELECT t.a FROM t WHERE t.a = (SELECT DISTINCT u.a FROM u WHERE u.b = t.b)",
        "SELECT count(*) AS n, (SELECT max(u.a) FROM u) AS top FROM t",
        "SELECT t.a FROM t GROUP BY t.a HAVING t.a > (SELECT max(u.a) FROM u WHERE u.b = t.a)",
        # EXISTS outside WHERE
        "SELECT t.a FROM t JOIN u ON EXISTS (SELECT 1 FROM v WHERE v.a = u.a)",
        # quantified comparisons over several columns or correlated by a comparison,
        # ARRAY(subquery)
        "SELECT t.a FROM t WHERE t.a > ALL (SELECT u.a, u.b FROM u)",
        "SELECT t.a FROM t WHERE t.a < ANY (SELECT u.a FROM u WHERE u.b > t.b)",
        "SELECT t.a FROM t WHERE t.a = ARRAY(SELECT u.a FROM u)",
        # array and string aggregates: their value over no rows differs between engines
        "SELECT t.a FROM t WHERE t.b = (SELECT string_agg(u.b) FROM u WHERE u.a = t.a)",
    ],
)
def test_subquery_shapes_refused(sql):
    """Subqueries are decorrelated into joins only where that keeps SQL's three-valued
    logic and the outer rows' multiplicities; everything else is refused, never guessed."""
    with pytest.raises(UnsupportedSQLError) as raised:
        compile_ivm(sql)
    assert raised.value.feature == "subquery"


@pytest.mark.parametrize("sql", ["SELEC a FROM t", "SELECT a FROM", "SELECT (a FROM t", ""])
def test_syntax_error_is_a_clear_view_error(sql):
    with pytest.raises(ViewSQLError, match="view"):
        compile_ivm(sql)


def test_not_a_select():
    with pytest.raises(ViewSQLError, match="SELECT"):
        compile_ivm("DELETE FROM t")
    with pytest.raises(ViewSQLError, match="exactly one"):
        compile_ivm("SELECT a FROM t; SELECT b FROM t")


def test_star_expands_with_a_schema():
    plan = compile_ivm("SELECT * FROM t", schema={"dl": {"main": {"t": {"a": "INT", "b": "INT"}}}})
    assert plan.output_columns == ["a", "b"]


def test_missing_source_table_fails_setup_cleanly(lake):
    plan = compile_ivm("SELECT a FROM nope")
    with pytest.raises(duckdb.Error, match="nope"):
        setup(lake, plan)
    lake.execute("SELECT 1")  # the connection is usable: the transaction was rolled back


def _setup_simple(lake):
    harness = DuckLakeHarness(lake)
    lake.execute("CREATE TABLE dl.main.t (a INTEGER, b VARCHAR)")
    lake.execute("INSERT INTO dl.main.t VALUES (1, 'x'), (2, 'y')")
    plan = harness.compile("SELECT a, count(*) AS n FROM t GROUP BY a")
    setup(lake, plan)
    return harness, plan


def _cursor(lake):
    return ducklake_cursors.read(lake, "dl", "dl.main.mv")


@pytest.mark.parametrize(
    "ddl",
    [
        "ALTER TABLE dl.main.t ADD COLUMN c INTEGER",
        "CREATE OR REPLACE TABLE dl.main.t AS SELECT 5 AS a, 'z' AS b",
    ],
)
def test_altered_or_recreated_source_requires_rebuild(lake, ddl):
    harness, plan = _setup_simple(lake)
    before, rows = _cursor(lake), harness.rows(plan.query_mv)
    lake.execute(ddl)
    with pytest.raises(RebuildRequired, match="rebuild required"):
        refresh(lake, plan, strategy="incremental")
    assert _cursor(lake) == before
    assert harness.rows(plan.query_mv) == rows


def test_failed_refresh_changes_nothing_and_next_refresh_catches_up(lake):
    harness, plan = _setup_simple(lake)
    lake.execute("INSERT INTO dl.main.t VALUES (1, 'z'), (3, 'w')")
    steps = plan.steps["maintain"]
    late = index_of(steps, Commit) - 2  # after the view's table was written
    broken = [*steps[:late], Sql("SELECT error('boom')"), *steps[late:]]
    before = harness.rows(plan.query_mv)
    with pytest.raises(duckdb.Error, match="boom"):
        refresh(
            lake,
            type(plan)(**{**plan.__dict__, "steps": {**plan.steps, "maintain": broken}}),
            strategy="incremental",
        )
    assert harness.rows(plan.query_mv) == before
    assert _temp_tables(lake) == []  # rolled back with the transaction
    refresh(lake, plan, strategy="incremental")
    harness.check(plan, "SELECT a, count(*) AS n FROM t GROUP BY a")
    assert _temp_tables(lake) == []  # dropped after the commit: no memory held in the session


def _temp_tables(con) -> list[str]:
    return [
        row[0]
        for row in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE temporary AND table_name LIKE '_ivm%'"
        ).fetchall()
    ]


def test_expired_cursor_snapshot_requires_rebuild(lake):
    harness, plan = _setup_simple(lake)
    ((_, cursor),) = _cursor(lake).values()
    lake.execute("INSERT INTO dl.main.t VALUES (9, 'q')")
    lake.execute(f"CALL ducklake_expire_snapshots('dl', versions => [{cursor}])")
    with pytest.raises(
        RebuildRequired,
        match="rebuild required: the cursor snapshot [0-9]+ of dl.main.t was expired",
    ):
        refresh(lake, plan, strategy="incremental")
    setup(lake, plan)  # the rebuild: initialize again from the current snapshot
    harness.check(plan, "SELECT a, count(*) AS n FROM t GROUP BY a")


@pytest.mark.parametrize("name", ["distinct", "my-view", "select"])
def test_view_name_must_be_a_plain_identifier(name):
    with pytest.raises(UnsupportedSQLError, match="plain identifier"):
        compile_ivm("SELECT a FROM t", mv_name=name)
