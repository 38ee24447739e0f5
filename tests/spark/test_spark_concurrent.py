"""Refreshes of one view racing on Spark + Iceberg: a refresh commits its delta to the view
as it pinned it, or not at all (:mod:`duckstream.engines.iceberg.pinned_commit`).

The default run stages the race in one process, deterministically: a refresh pins the view's
cursors, another refresh of the same view commits, then the first one commits. Under
``DUCKSTREAM_SPARK_ALL`` the same happens for real: a writer in another Spark process commits
to the sources while this one and a second refresher process refresh the views."""

from __future__ import annotations

import pytest

from duckstream.engines.iceberg.runner import run_steps
from duckstream.engines.iceberg.window import read_logs
from duckstream.errors import RefreshConflict
from duckstream.spark import refresh
from duckstream.testing.differential import FROM_CATALOG, Column, Delete, Insert, TableSpec, Update
from duckstream.testing.spark_harness import SparkHarness

pytestmark = pytest.mark.spark

GROUPS = "SELECT k, count(*) AS n, sum(v) AS total FROM t GROUP BY k"  # a MERGE
ROWS = "SELECT k, v FROM t WHERE v >= 0"  # only grows on inserts: the appends-only INSERT
FACTS = TableSpec(
    "t", [Column("k", "INTEGER"), Column("v", "INTEGER")], [(i % 4, i) for i in range(12)]
)


def test_a_refresh_that_lost_the_race_applies_nothing(spark) -> None:
    harness = SparkHarness(spark)
    harness.create(FACTS)
    plans = {
        GROUPS: harness.compile(GROUPS, "groups", schema=FROM_CATALOG),
        ROWS: harness.compile(ROWS, "rows_"),
    }
    for plan in plans.values():
        harness.setup(plan)
    harness.apply([Insert("t", ((1, 100), (5, 5)))])  # appends only: ROWS takes the INSERT
    for view, plan in plans.items():
        pinned = read_logs(spark, plan.mv_table, plan.tables)  # the loser pins first
        refresh(spark, plan, strategy="incremental")  # the winner commits
        with pytest.raises(RefreshConflict, match=plan.mv_table):
            run_steps(spark, plan.steps["maintain"], logs=pinned)
        harness.check(plan, view, "after the lost race")
        refs = harness.rows(f"SELECT name FROM {plan.mv_table}.refs")
        assert refs == [("main",)], f"branches left behind: {refs}"
    harness.apply([Update("t", "v = v + 1", "k = 1"), Delete("t", "k = 2")])
    for view, plan in plans.items():  # the next refresh catches up
        refresh(spark, plan, strategy="incremental")
        harness.check(plan, view, "caught up")
