"""A window's change, read from DuckLake's feed: rows changed several times in one transaction.

DuckLake (1.5.5) lists such rows in ways that neither a plain multiset nor a feed
deduplicated by rowid gets right in every case (``prepare_changes`` of
:mod:`duckstream.engines.ducklake.engine` says which rowids it re-reads by time travel):

* a row updated and then deleted in one transaction is deleted twice, legitimately (its old
  and its intermediate version, alike in the columns a view reads);
* a row updated twice in one transaction lists its intermediate version both inserted and
  deleted;
* a transaction that changes every row of a data file through several statements lists some
  deleted rows twice, wrongly.

Each case runs with data inlining off (``0``: rows in data files) and at its default, compiled
with ``schema=`` (as dbt compiles) and without, refreshed by ``auto`` (the default) and by
``incremental``; every view is compared with recomputation as a multiset.
"""

from __future__ import annotations

import pytest

from duckstream.runtime import refresh, schema_of, setup
from duckstream.testing.differential import DuckLakeHarness
from duckstream.testing.ducklake import connect_ducklake


@pytest.fixture(params=[0, None], ids=["inlining-off", "inlining-default"])
def lake(request, tmp_path):
    con = connect_ducklake(
        str(tmp_path / "lake"), alias="dl", data_inlining_row_limit=request.param
    )
    yield con
    con.close()


def _maintained(lake, views: list[str]) -> tuple[DuckLakeHarness, list]:
    """Each view compiled with ``schema=`` and without, set up: ``(view, plan)`` pairs."""
    harness, plans = DuckLakeHarness(lake), []
    for i, view in enumerate(views):
        schema = schema_of(lake, view, catalog="dl", schema="main")
        for with_schema in (True, False):
            name = f"v{i}_{'schema' if with_schema else 'no_schema'}"
            plan = harness.compile(view, mv_name=name, schema=schema if with_schema else None)
            setup(lake, plan)
            harness.check(plan, view, f"{name} after setup")
            plans.append((view, plan))
    return harness, plans


def _refreshed(harness: DuckLakeHarness, plans: list, strategy: str, context: str) -> None:
    for view, plan in plans:
        refresh(harness.con, plan, strategy=strategy)
        harness.check(plan, view, f"{plan.mv_table} {context}")


def _transaction(lake, *statements: str) -> None:
    lake.execute("BEGIN TRANSACTION")
    for statement in statements:
        lake.execute(statement)
    lake.execute("COMMIT")


STRATEGY = pytest.mark.parametrize("strategy", ["auto", "incremental"])


# -- issue "Correctness II, second finding": updated, then deleted, in one transaction ------------
@STRATEGY
def test_a_row_updated_then_deleted_in_one_transaction_leaves_the_view(lake, strategy):
    lake.execute("CREATE TABLE dl.main.t2 (k INTEGER, c VARCHAR, s BOOLEAN, x BIGINT)")
    lake.execute("INSERT INTO dl.main.t2 VALUES (NULL, '', FALSE, 5), (2, 'a b', FALSE, NULL)")
    lake.execute("INSERT INTO dl.main.t2 SELECT 10 + i, 'z', TRUE, i FROM range(2000) r(i)")
    views = [
        "SELECT DISTINCT k, c FROM t2",
        "SELECT k, c FROM t2",
        "SELECT c, count(*) AS n FROM t2 GROUP BY c",
    ]
    harness, plans = _maintained(lake, views)
    _transaction(
        lake,
        "UPDATE dl.main.t2 SET x = x + 1 WHERE s = FALSE",  # touches (2, 'a b'); x stays NULL
        "DELETE FROM dl.main.t2 WHERE k = 2",
    )
    _refreshed(harness, plans, strategy, f"after a {strategy} refresh")
    for _, plan in plans:
        assert "a b" not in str(harness.rows(plan.query_mv))


# -- issue "Correctness II", repro 1: a row updated twice in one transaction -----------------------
PROMO = (
    "SELECT sum(CASE WHEN type LIKE 'PROMO%' THEN price ELSE 0 END) AS promo, sum(price) AS total"
    " FROM line JOIN part ON line.k = part.k"
)


@STRATEGY
def test_a_row_updated_twice_in_one_transaction_counts_once(lake, strategy):
    lake.execute("CREATE TABLE dl.main.part (k INTEGER, size INTEGER, type VARCHAR)")
    lake.execute("CREATE TABLE dl.main.line (k INTEGER, price INTEGER)")
    lake.execute(
        "INSERT INTO dl.main.part SELECT i, i % 7,"
        " CASE WHEN i % 3 = 0 THEN 'PROMO' ELSE 'STD' END FROM range(2000) t(i)"
    )
    lake.execute("INSERT INTO dl.main.line SELECT i % 2000, i FROM range(60000) t(i)")
    harness, plans = _maintained(lake, [PROMO])
    _transaction(
        lake,
        "UPDATE dl.main.part SET size = size + 1 WHERE k % 37 = 4",  # a column the view skips
        "UPDATE dl.main.part SET type = 'PROMO X' WHERE k % 23 = 5",  # overlapping rows
    )
    _refreshed(harness, plans, strategy, f"after a {strategy} refresh")
    for _, plan in plans:
        assert harness.rows(plan.query_mv)[0][1] == sum(range(60000))


# -- every other shape of one row changed several times in one transaction -------------------------
TRANSACTIONS = {
    "each-row-of-a-file-updated-apart": [
        "UPDATE dl.main.t SET v = v + 1 WHERE k = 1",
        "UPDATE dl.main.t SET v = v + 1 WHERE k = 2",
        "UPDATE dl.main.t SET v = v + 1 WHERE k = 3",
    ],
    "each-row-of-a-file-deleted-apart": [
        "DELETE FROM dl.main.t WHERE k = 1",
        "DELETE FROM dl.main.t WHERE k = 2",
        "DELETE FROM dl.main.t WHERE k = 3",
    ],
    "updated-twice-then-deleted": [
        "UPDATE dl.main.t SET v = v + 1 WHERE k = 1",
        "UPDATE dl.main.t SET v = v + 1 WHERE k <= 2",
        "DELETE FROM dl.main.t WHERE k = 1",
        "DELETE FROM dl.main.t WHERE k = 3",
    ],
    "deleted-and-inserted-again": [
        "DELETE FROM dl.main.t WHERE k = 1",
        "INSERT INTO dl.main.t VALUES (1, 10)",
        "DELETE FROM dl.main.t WHERE k = 2",
    ],
    "inserted-updated-deleted": [
        "INSERT INTO dl.main.t VALUES (100, 1), (101, 1), (102, 1)",
        "UPDATE dl.main.t SET v = v + 1 WHERE k >= 100",
        "DELETE FROM dl.main.t WHERE k = 101",
        "UPDATE dl.main.t SET v = v + 5 WHERE k = 3",
    ],
    "deleted-then-updated-twice": [
        "DELETE FROM dl.main.t WHERE k = 1",
        "UPDATE dl.main.t SET v = v + 1 WHERE k = 2",
        "UPDATE dl.main.t SET v = v + 1 WHERE k >= 2",
    ],
}


@pytest.mark.parametrize("case", sorted(TRANSACTIONS))
def test_one_row_changed_several_times_in_one_transaction(lake, case):
    lake.execute("CREATE TABLE dl.main.t (k INTEGER, v INTEGER)")
    lake.execute("INSERT INTO dl.main.t VALUES (1, 10), (2, 20), (3, 30)")
    views = [
        "SELECT k, v FROM t",
        "SELECT k % 2 AS g, count(*) AS n, sum(v) AS s FROM t GROUP BY 1",
    ]
    harness, plans = _maintained(lake, views)
    _transaction(lake, *TRANSACTIONS[case])
    lake.execute("UPDATE dl.main.t SET v = v * 2 WHERE k = 3")  # a second snapshot in the window
    _refreshed(harness, plans, "incremental", "after an incremental refresh")
    _transaction(lake, *TRANSACTIONS[case])  # the next window starts from the rows left
    _refreshed(harness, plans, "incremental", "after a second incremental refresh")
