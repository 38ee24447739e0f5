"""``status`` and the refresh history on Spark + Iceberg: a view's cursors and history entry
are snapshot properties of its commits; its sources' later snapshots are its lag."""

from __future__ import annotations

import pytest

from duckstream.cli import main
from duckstream.engines.iceberg.status import views_status
from duckstream.history import FIRST_BUILD
from duckstream.spark import refresh
from duckstream.status import status_text
from duckstream.testing.differential import Column, Insert, TableSpec
from duckstream.testing.spark_harness import SparkHarness

pytestmark = pytest.mark.spark

VIEW = "SELECT k, count(*) AS n, sum(v) AS total FROM t GROUP BY k"
FACTS = TableSpec(
    "t", [Column("k", "INTEGER"), Column("v", "INTEGER")], [(i % 5, i) for i in range(50)]
)


def test_status_lists_views_with_lag_and_history(spark, warehouse, capsys) -> None:
    harness = SparkHarness(spark)
    harness.create(FACTS)
    plan = harness.compile(VIEW)
    harness.setup(plan)
    t = harness.fqn("t")
    harness.apply([Insert("t", ((1, 100), (7, 7)))])
    report = refresh(spark, plan, strategy="incremental")
    harness.check(plan, VIEW)
    harness.apply([Insert("t", ((2, 2),))])  # not applied yet: one snapshot behind

    (status,) = views_status(spark, harness.catalog, harness.schema)  # t itself is no view
    assert status.view == plan.mv_table and status.pending == 1 and status.behind_since
    assert set(status.cursors) == {t}
    newest, first = status.refreshes
    assert newest.entry is not None and first.entry is not None
    assert (newest.entry.outcome, newest.entry.requested, newest.entry.reason) == (
        "incremental",
        "incremental",
        report.reason,
    )
    assert newest.entry.changes == {t: 2}  # two rows appended (Iceberg's summary)
    assert newest.entry.inserted and newest.entry.phases  # rows out: Iceberg's own counts
    assert (first.entry.outcome, first.entry.reason) == ("rebuild", FIRST_BUILD)
    assert first.entry.inserted == 5  # five groups

    refresh(spark, plan, strategy="full")
    (status,) = views_status(spark, harness.catalog, harness.schema, recent=1)
    assert status.pending == 0 and status.behind_since is None and len(status.refreshes) == 1
    assert "| up to date |" in status_text([status])

    assert main(["status", warehouse, "--engine", "spark", "--namespace", harness.schema]) == 0
    out = capsys.readouterr().out
    assert f"{plan.mv_table} | up to date |" in out and "rebuild (full: requested)" in out
