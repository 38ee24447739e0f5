"""The plan is SQL: its rendered statements, run one by one with plain ``con.execute``, keep
the view equal to recomputation -- and the runner's steps (the fast window pin) do too."""

from __future__ import annotations

from collections import Counter

import duckdb
import pytest

from duckstream.compiler import compile_ivm
from duckstream.plan import Begin, Cleanup, Commit, PinSnapshot, PinWindow, Sql, StopUnless
from duckstream.runtime import refresh, setup
from duckstream.testing.ducklake import attach_ducklake

VIEW = (
    "SELECT o.customer, c.region, count(*) AS n, sum(o.amount) AS total"
    " FROM orders o JOIN customers c ON o.customer = c.id GROUP BY o.customer, c.region"
)

CHANGES = [
    # inserts on both sides
    [
        "INSERT INTO dl.main.orders VALUES (10, 1, 5), (11, 3, 7)",
        "INSERT INTO dl.main.customers VALUES (3, 'south')",
    ],
    # deletes on both sides, one deleting a row and its only partner in one window
    [
        "DELETE FROM dl.main.orders WHERE id = 2",
        "DELETE FROM dl.main.customers WHERE id = 2",
    ],
    # updates on both sides (key columns and values), and an insert then update in one commit
    [
        "UPDATE dl.main.orders SET amount = amount + 1 WHERE customer = 1",
        "UPDATE dl.main.customers SET region = 'east' WHERE id = 1",
        "BEGIN; INSERT INTO dl.main.orders VALUES (12, 3, 1); "
        "UPDATE dl.main.orders SET customer = 1 WHERE id = 12; COMMIT",
    ],
    [],  # nothing changed
    ["UPDATE dl.main.orders SET customer = 3 WHERE id = 1"],
]


def create_orders_and_customers(con) -> None:
    """The tables :data:`VIEW` and :data:`CHANGES` use, in the DuckLake catalog ``dl``."""
    con.execute("CREATE TABLE dl.main.orders (id INTEGER, customer INTEGER, amount INTEGER)")
    con.execute("CREATE TABLE dl.main.customers (id INTEGER, region VARCHAR)")
    con.execute("INSERT INTO dl.main.orders VALUES (1, 1, 10), (2, 2, 20), (3, 1, 30)")
    con.execute("INSERT INTO dl.main.customers VALUES (1, 'north'), (2, 'west')")


@pytest.fixture(params=[None, 0], ids=["inlined", "files"])
def con(tmp_path, request):
    con = duckdb.connect()
    attach_ducklake(con, str(tmp_path / "lake"), "dl", data_inlining_row_limit=request.param)
    create_orders_and_customers(con)
    yield con
    con.close()


def rows(con, sql) -> Counter:
    """The rows of ``sql``, as a multiset."""
    return Counter(con.execute(sql).fetchall())


def execute_all(con, statements) -> None:
    """Run ``statements`` one by one with plain ``con.execute``."""
    for statement in statements:
        con.execute(statement)


def test_plain_sql_keeps_the_view_equal_to_recomputation(con):
    plan = compile_ivm(VIEW, mv_catalog="dl")
    assert not any(s.lstrip().startswith("--") for s in plan.maintain)  # no directives
    execute_all(con, [plan.create_cursors_table, plan.create_mv, *plan.initialize_cursors])
    recompute = plan.view_sql
    assert rows(con, plan.query_mv) == rows(con, recompute)
    for changes in CHANGES:
        execute_all(con, changes)
        execute_all(con, plan.maintain)
        assert rows(con, plan.query_mv) == rows(con, recompute)


def test_runner_keeps_the_view_equal_to_recomputation(con):
    plan = compile_ivm(VIEW, mv_catalog="dl")
    setup(con, plan)
    for changes in CHANGES:
        execute_all(con, changes)
        refresh(con, plan, "incremental")
        assert rows(con, plan.query_mv) == rows(con, plan.view_sql)


def test_both_pins_give_the_same_window(con):
    """The SQL pin and the runner's Python pin set the same window variable."""
    plan = compile_ivm(VIEW, mv_catalog="dl")
    setup(con, plan)
    (pin,) = [s for s in plan.steps["maintain"] if isinstance(s, PinWindow)]
    sql = next(s for s in plan.maintain if s.startswith(f"SET VARIABLE {pin.spec.variable} "))
    from duckstream.engines.ducklake import window as ducklake_window

    for changes in CHANGES:
        execute_all(con, changes)
        con.execute("BEGIN")
        con.execute(sql)
        by_sql = con.execute(f"SELECT getvariable('{pin.spec.variable}')").fetchone()
        ducklake_window.read(con, pin.spec, pin=True)
        by_python = con.execute(f"SELECT getvariable('{pin.spec.variable}')").fetchone()
        con.execute("ROLLBACK")
        assert by_sql == by_python
        refresh(con, plan, "incremental")


def test_plain_sql_raises_rebuild_required(con):
    plan = compile_ivm(VIEW, mv_catalog="dl")
    execute_all(con, [plan.create_cursors_table, plan.create_mv, *plan.initialize_cursors])
    con.execute("DROP TABLE dl.main.customers")
    con.execute("CREATE TABLE dl.main.customers (id INTEGER, region VARCHAR)")
    with pytest.raises(duckdb.Error, match="duckstream: rebuild required: source dl.main.cust"):
        execute_all(con, plan.maintain)
    con.execute("ROLLBACK")
    execute_all(con, plan.initialize_cursors)  # the rebuild
    con.execute("INSERT INTO dl.main.customers VALUES (1, 'north')")
    execute_all(con, plan.maintain)
    assert rows(con, plan.query_mv) == rows(con, plan.view_sql)


def test_plain_sql_without_cursors_raises_rebuild_required(con):
    plan = compile_ivm(VIEW, mv_catalog="dl")
    execute_all(con, [plan.create_cursors_table, plan.create_mv])
    with pytest.raises(duckdb.Error, match="duckstream: rebuild required: no cursors"):
        execute_all(con, plan.maintain)


def test_steps_are_typed_and_cleanup_follows_the_commit():
    plan = compile_ivm(VIEW, mv_catalog="dl")
    maintain = plan.steps["maintain"]
    kinds = [type(s) for s in maintain]
    assert kinds[0] is Begin and PinWindow in kinds
    commit = kinds.index(Commit)
    assert all(k is Cleanup for k in kinds[commit + 1 :]) and kinds[commit + 1 :]
    initialize = plan.steps["initialize_cursors"]
    # builds no temporary tables: nothing to drop; after the COMMIT, the view's table is
    # kept out of DuckLake's data inlining, and a fill that was inlined is written again in
    # a transaction of its own (the engine's after_fill), unless the table had the option,
    # read with the pinned snapshot (the window's ``unset``)
    assert isinstance(initialize[0], Begin)
    pin = next(s for s in initialize if isinstance(s, PinSnapshot))
    assert "unset := NOT EXISTS (SELECT 1 FROM" in pin.statement
    commit = [type(s) for s in initialize].index(Commit)
    after = initialize[commit + 1 :]
    assert [type(s) for s in after[:4]] == [StopUnless, Sql, Sql, StopUnless]
    assert (after[0].field, after[0].about_old_table) == ("unset", True)
    assert "set_option('data_inlining_row_limit', 0" in after[1].statement
    assert [type(s) for s in after[4:]] == [Begin, Sql, Sql, Commit]  # delete, fill: no cursors


def test_sources_in_two_catalogs_are_both_reported():
    plan = compile_ivm("SELECT x.k, y.v FROM dl.main.a AS x JOIN raw.main.a AS y ON x.k = y.k")
    assert [(s.catalog, s.schema, s.table, s.alias) for s in plan.sources] == [
        ("dl", "main", "a", "x"),
        ("raw", "main", "a", "y"),
    ]
    assert plan.tables == ["dl.main.a", "raw.main.a"]
    self_join = compile_ivm("SELECT a.k FROM t AS a JOIN t AS b ON a.k = b.k")
    assert [s.alias for s in self_join.sources] == ["a", "b"]
    assert self_join.tables == ["dl.main.t"]


def test_compile_prints_a_runnable_script(con, capsys):
    from duckstream.cli import main

    assert main(["compile", VIEW, "--mv-name", "cli_view"]) == 0
    script = capsys.readouterr().out
    con.execute(script)  # build, maintain once, read: every protocol step, plain SQL
    con.execute("INSERT INTO dl.main.orders VALUES (20, 2, 4)")
    plan = compile_ivm(VIEW, mv_name="cli_view", mv_catalog="dl")
    assert "\n".join(plan.maintain) in script.replace(";\n", "\n")
    execute_all(con, plan.maintain)
    assert rows(con, plan.query_mv) == rows(con, plan.view_sql)
