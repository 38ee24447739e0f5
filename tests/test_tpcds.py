"""TPC-DS queries maintained through change windows at scale factor 0.01 (or DUCKSTREAM_TPCDS_SF).

Each query (DuckDB's tpcds text, its ORDER BY ... LIMIT kept: a top-k) is compiled with the TPC-DS
schema and set up on a copy of one loaded DuckLake, then refreshed after windows that copy and
delete orders (sales lines with their returns) in the three channels, update fact rows
(quantities, measures, dates) and dimension attributes, several tables in one window, and must
equal recomputation after every refresh.

By default twelve queries covering the constructs TPC-DS leans on run (about 90 s on a busy two-core
machine); ``DUCKSTREAM_TPCDS=1`` runs all 97 the compiler maintains (30 minutes at SF 0.01).
"""

from __future__ import annotations

import os
import random
import shutil

import pytest

from duckstream.testing.differential import DuckLakeHarness
from duckstream.testing.ducklake import connect_ducklake, current_snapshot
from duckstream.testing.tpcds import (
    TABLES,
    WINDOWS,
    WORKLOADS,
    load_tpcds,
    tpcds_query,
    tpcds_schema,
)

# DUCKSTREAM_TPCDS_SF=0.1 for the deeper run (11 queries still stay empty there).
SF = float(os.environ.get("DUCKSTREAM_TPCDS_SF", "0.01"))

# Too slow to maintain here: they compile, but their first refresh runs for minutes. Q72's
# spills GBs: DuckDB estimates the change tables (temporary tables created in the refresh's own
# transaction) at 0 rows and starts the delta joins with the inequality join
# d3.d_date > d1.d_date + 5 of date_dim with itself. Q64's delta statement (200 KB of SQL) runs
# over 90 s; cause not yet looked into.
TOO_SLOW = [64, 72]
# The queries maintained correctly (checked against recomputation through WINDOWS): all the
# others. At SF 0.01 3 4 8 10 19 23 24 25 30 31 37 49 65 74 82 83 85 91 93 stay empty through
# every window: for them the check only shows that nothing appears. Q31 found at SF 0.1 that
# DuckLake's data inlining altered a DOUBLE of a view row (test_regressions_ducklake's
# test_double_view_row_is_deleted_after_inlining).
MAINTAINED = [q for q in range(1, 100) if q not in TOO_SLOW]
# The default run: a correlated scalar subquery over a CTE (1), UNION ALL of channels joined
# to itself (2), a top-k of a ROLLUP over unions (5), a window over an aggregate (12), EXISTS /
# NOT EXISTS with count (35), ROLLUP ranked by a window (36), INTERSECT (38), LEFT JOIN of
# sales to returns (40), scalar subqueries that are not aggregates (58), COUNT(DISTINCT) with
# EXISTS / NOT EXISTS (94), a subquery correlated in each branch of an OR (41), rank() over
# ROLLUP (86); each with its ORDER BY ... LIMIT.
DEFAULT = [1, 2, 5, 12, 35, 36, 38, 40, 41, 58, 86, 94]
QUERIES = MAINTAINED if os.environ.get("DUCKSTREAM_TPCDS") else DEFAULT

FRACTION = 0.02


@pytest.fixture(scope="module")
def tpcds_template(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tpcds") / "lake"
    con = connect_ducklake(str(directory), alias="dl")
    load_tpcds(con, "dl", SF)
    con.close()
    return directory


def _copy(template, tmp_path, name="lake"):
    directory = tmp_path / name
    shutil.copytree(template, directory)
    return connect_ducklake(str(directory), alias="dl")


@pytest.mark.parametrize("query", QUERIES)
def test_tpcds_query_is_maintained(tpcds_template, tmp_path, query):
    con = _copy(tpcds_template, tmp_path)
    harness = DuckLakeHarness(con)
    view = tpcds_query(query, keep_limit=True)
    plan = harness.compile(view, mv_name=f"q{query}", schema=tpcds_schema())
    harness.setup(plan)
    harness.check(plan, view, "after setup")
    rng = random.Random(query)
    for n, window in enumerate(WINDOWS, 1):
        for workload in window:
            WORKLOADS[workload](con, "dl", rng, FRACTION)
        harness.refresh(plan)
        harness.check(plan, view, f"after window {n} ({', '.join(window) or 'no changes'})")
    con.close()


def test_every_query_is_accounted_for():
    assert set(TOO_SLOW) <= set(range(1, 100))
    assert set(DEFAULT) <= set(MAINTAINED)


def test_workloads_commit_one_reproducible_snapshot_each(tpcds_template, tmp_path):
    """Each workload is one snapshot that changes what it says; the same seed gives the same
    tables on another copy of the lake."""
    cons = [_copy(tpcds_template, tmp_path, name) for name in ("a", "b")]
    for con in cons:
        rng = random.Random(7)
        for name, workload in WORKLOADS.items():
            before = current_snapshot(con, "dl")
            counts = workload(con, "dl", rng, FRACTION)
            assert current_snapshot(con, "dl") == before + 1, name
            assert any(sum(c.values()) for c in counts.values()), name
    for table in TABLES:
        digest = f"SELECT count(*), sum(hash(t)) FROM dl.main.{table} t"
        assert cons[0].execute(digest).fetchone() == cons[1].execute(digest).fetchone(), table
    for con in cons:
        con.close()
