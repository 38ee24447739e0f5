"""``python -m duckstream expire --engine spark``: the Iceberg snapshots that no maintained view
needs are expired; the views go on refreshing incrementally, equal to recomputation."""

from __future__ import annotations

import datetime

import pytest

from duckstream.cli import main
from duckstream.engines.iceberg.expire import expire
from duckstream.engines.iceberg.window import java_table
from duckstream.spark import refresh
from duckstream.testing.differential import Column, Delete, Insert, TableSpec, Update
from duckstream.testing.spark_harness import SparkHarness

pytestmark = pytest.mark.spark

VIEW = "SELECT k, count(*) AS n, sum(v) AS total FROM t GROUP BY k"
FACTS = TableSpec(
    "t", [Column("k", "INTEGER"), Column("v", "INTEGER")], [(i % 5, i) for i in range(20)]
)


def _snapshots(spark, name: str) -> set[int]:
    return {int(s.snapshotId()) for s in java_table(spark, name).snapshots()}


def _current(spark, name: str) -> int:
    return int(java_table(spark, name).currentSnapshot().snapshotId())


def test_expiry_keeps_each_views_cursor_and_the_views_go_on(spark, warehouse, capsys) -> None:
    harness = SparkHarness(spark)
    harness.create(FACTS)
    t = harness.fqn("t")
    for k in range(3):  # history before the view: expirable
        harness.apply([Insert("t", ((k, 100 + k),))])
    plan = harness.compile(VIEW)
    harness.setup(plan)
    cursor = _current(spark, t)
    older = _snapshots(spark, t) - {cursor}  # the table's history before the view
    harness.apply([Insert("t", ((1, 7),)), Delete("t", "v = 3")])  # after the cursor: kept
    before = _snapshots(spark, t)

    dry = {e.table: e for e in expire(spark, harness.catalog, [harness.schema], dry_run=True)}
    assert _snapshots(spark, t) == before  # a dry run expires nothing
    assert set(dry[t].expired) == older and older
    assert f"{plan.mv_table}'s cursor" in dry[t].needed_by
    assert dry[plan.mv_table].expired == []  # nothing bounds the view's own: left alone

    assert main(["expire", warehouse, "--engine", "spark", "--namespace", harness.schema]) == 0
    assert f"{t}: expired {len(dry[t].expired)} snapshots" in capsys.readouterr().out
    assert _snapshots(spark, t) == before - older

    for batch in (
        [Insert("t", ((9, 1), (2, 2))), Update("t", "v = v + 1", "k = 2")],
        [Delete("t", "k = 0")],
    ):
        harness.apply(batch)
        report = refresh(spark, plan, strategy="incremental")  # an expired cursor would rebuild
        assert report.strategy == "incremental", report.reason
        harness.check(plan, VIEW)

    # older_than bounds the view's own table too (its history before then)
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=1)
    done = {e.table: e for e in expire(spark, harness.catalog, [harness.schema], later)}
    assert len(_snapshots(spark, plan.mv_table)) == 1 and done[plan.mv_table].expired
    assert refresh(spark, plan, strategy="incremental").strategy == "incremental"
    harness.check(plan, VIEW)
