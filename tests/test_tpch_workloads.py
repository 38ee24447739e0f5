"""TPC-H on DuckLake: loading, the change workloads and the 22 query texts.

Query texts use unqualified table names; they run after ``USE lake`` (catalog lake, schema
main), the same resolution the compiler applies with the catalog and schema it is given.
"""

import random
import sys
from pathlib import Path

import pytest
import sqlglot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from duckstream.testing.ducklake import (  # noqa: E402
    attach_ducklake,
    connect_ducklake,
    current_snapshot,
)
from duckstream.testing.tpch import (  # noqa: E402
    RECENT_SHARE,
    TABLES,
    WORKLOADS,
    load_tpch,
    load_tpch_by_month,
    tpch_query,
)

SF = 0.01


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    """One SF 0.01 lake shared by the module; each test checks only its own batch."""
    con = connect_ducklake(str(tmp_path_factory.mktemp("lake")))
    load_tpch(con, "lake", SF)
    yield con
    con.close()


def scalar(con, sql, params=None):
    row = con.execute(sql, params or []).fetchone()
    return row[0]


def row_counts(con):
    return {t: scalar(con, f"SELECT count(*) FROM lake.main.{t}") for t in TABLES}


def feed_count(con, kind, table, start, end):
    """Rows in ducklake_table_insertions/deletions for ``table`` over snapshots start..end."""
    sql = f"SELECT count(*) FROM ducklake_table_{kind}('lake', 'main', ?, ?, ?)"
    return scalar(con, sql, [table, start, end])


def check_integrity(con):
    orphans = scalar(
        con,
        "SELECT count(*) FROM lake.lineitem l ANTI JOIN lake.orders o ON l_orderkey = o_orderkey",
    )
    empty = scalar(
        con,
        "SELECT count(*) FROM lake.orders ANTI JOIN lake.lineitem ON l_orderkey = o_orderkey",
    )
    bad_ps = scalar(
        con,
        "SELECT count(*) FROM lake.lineitem ANTI JOIN lake.partsupp"
        " ON l_partkey = ps_partkey AND l_suppkey = ps_suppkey",
    )
    bad_cust = scalar(
        con, "SELECT count(*) FROM lake.orders ANTI JOIN lake.customer ON o_custkey = c_custkey"
    )
    dup = scalar(con, "SELECT count(*) - count(DISTINCT o_orderkey) FROM lake.orders")
    assert (orphans, empty, bad_ps, bad_cust, dup) == (0, 0, 0, 0, 0)


def test_load(con):
    counts = row_counts(con)
    assert counts["region"] == 5 and counts["nation"] == 25
    assert counts["orders"] == 15000 and counts["customer"] == 1500
    check_integrity(con)


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_workload(con, name):
    before_rows, start = row_counts(con), current_snapshot(con, "lake")
    max_key = scalar(con, "SELECT max(o_orderkey) FROM lake.orders")
    counts = WORKLOADS[name](con, "lake", random.Random(name), 0.01)
    end = current_snapshot(con, "lake")
    assert end == start + 1, "a batch is exactly one snapshot"
    assert counts and any(sum(c.values()) for c in counts.values())

    after_rows = row_counts(con)
    for table in TABLES:
        c = counts.get(table, {"inserted": 0, "deleted": 0, "updated": 0})
        assert after_rows[table] - before_rows[table] == c["inserted"] - c["deleted"], table
        assert feed_count(con, "insertions", table, start + 1, end) == c["inserted"] + c["updated"]
        assert feed_count(con, "deletions", table, start + 1, end) == c["deleted"] + c["updated"]
    check_integrity(con)

    deleted_keys_left = scalar(
        con,
        "SELECT count(*) FROM lake.lineitem WHERE l_orderkey IN (SELECT o_orderkey"
        " FROM ducklake_table_deletions('lake', 'main', 'orders', ?, ?))",
        [start + 1, end],
    )
    assert deleted_keys_left == 0
    new_keys_below_max = scalar(
        con,
        "SELECT count(*) FROM ducklake_table_insertions('lake', 'main', 'orders', ?, ?)"
        " WHERE o_orderkey <= ?",
        [start + 1, end, max_key],
    )
    assert new_keys_below_max == 0


def test_append_rows_are_plausible(con):
    start = current_snapshot(con, "lake")
    WORKLOADS["append"](con, "lake", random.Random(1), 0.01)
    lines = f"ducklake_table_insertions('lake', 'main', 'lineitem', {start + 1}, {start + 1})"
    bad_dates, q1_hits, discounts = con.execute(
        f"SELECT count(*) FILTER (l_shipdate <= o_orderdate OR l_receiptdate <= l_shipdate),"
        f" count(*) FILTER (l_shipdate <= DATE '1998-09-02'),"
        f" count(DISTINCT l_discount)"
        f" FROM {lines} JOIN lake.orders ON l_orderkey = o_orderkey"
    ).fetchone()
    assert bad_dates == 0 and q1_hits > 0 and discounts > 5


def test_a_lake_grown_by_monthly_appends_holds_the_same_data(tmp_path):
    """The "monthly" layout (bench.lakes): the same rows as one bulk load, orders and
    lineitem written by one commit per month, each a data file of its own; the "recent"
    workloads change only orders among the newest 2%."""
    con = connect_ducklake(str(tmp_path / "a"), alias="a")
    attach_ducklake(con, str(tmp_path / "b"), alias="b")
    load_tpch(con, "a", SF)
    start = current_snapshot(con, "b")
    months = load_tpch_by_month(con, "b", SF)
    assert months >= 75 and current_snapshot(con, "b") == start + 1 + months
    for t in TABLES:
        differ = f"(FROM a.main.{t} EXCEPT ALL FROM b.main.{t})"
        differ += f" UNION ALL (FROM b.main.{t} EXCEPT ALL FROM a.main.{t})"
        assert scalar(con, f"SELECT count(*) FROM ({differ})") == 0, t
    files = "SELECT count(*) FROM ducklake_list_files('b', ?)"
    assert scalar(con, files, ["lineitem"]) == months
    oldest_recent = scalar(
        con, f"SELECT quantile_disc(o_orderdate, {1 - RECENT_SHARE}) FROM b.main.orders"
    )
    for name in ("recent_update", "recent_delete"):
        before = current_snapshot(con, "b")
        WORKLOADS[name](con, "b", random.Random(name), 0.01)
        changed = (
            f"SELECT DISTINCT l_orderkey FROM ducklake_table_deletions('b', 'main', 'lineitem',"
            f" {before + 1}, {before + 1})"
        )
        dates = con.execute(
            f"SELECT count(*), min(o_orderdate) FROM a.main.orders WHERE o_orderkey IN ({changed})"
        ).fetchone()
        assert dates[0] > 0 and dates[1] >= oldest_recent, (name, dates, oldest_recent)


def test_workloads_are_reproducible(tmp_path):
    con = connect_ducklake(str(tmp_path / "a"), alias="a")
    attach_ducklake(con, str(tmp_path / "b"), alias="b")
    for catalog in ("a", "b"):
        load_tpch(con, catalog, SF)
        for name in ("mixed", "update_lineitem", "update_dimensions"):
            WORKLOADS[name](con, catalog, random.Random(42), 0.01)
    for t in TABLES:
        differ = f"(FROM a.main.{t} EXCEPT ALL FROM b.main.{t})"
        differ += f" UNION ALL (FROM b.main.{t} EXCEPT ALL FROM a.main.{t})"
        assert scalar(con, f"SELECT count(*) FROM ({differ})") == 0, t


@pytest.mark.parametrize("n", range(1, 23))
def test_queries_run_on_lake(con, n):
    text = tpch_query(n)
    tree = sqlglot.parse_one(text, dialect="duckdb")
    assert tree.args.get("order") is None and tree.args.get("limit") is None
    con.execute("USE lake")
    try:
        result = con.execute(text).fetchall()
        original = con.execute(f"SELECT query FROM tpch_queries() WHERE query_nr = {n}").fetchone()
        expected = con.execute(original[0]).fetchall()
    finally:
        con.execute("USE memory")
    if "LIMIT" in original[0]:
        assert len(result) >= len(expected)
    else:
        assert sorted(map(repr, result)) == sorted(map(repr, expected))
