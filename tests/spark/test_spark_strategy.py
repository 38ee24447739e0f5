"""``strategy='auto'`` on Spark + Iceberg: the estimate read from Iceberg metadata, the choice,
the forced strategies, and after every refresh a view equal to recomputation.

On test-sized tables a rebuild is always cheaper than Spark's fixed cost of maintaining, so
the tests that want the incremental choice pass ``SparkPolicy(overhead_rows=0)``. No timings.
"""

from __future__ import annotations

import pytest

from duckstream.engines.iceberg.estimate import REWRITES, SparkPolicy, choose
from duckstream.plan import IVMPlan
from duckstream.spark import refresh
from duckstream.strategy import SourceEstimate
from duckstream.testing.differential import Column, Delete, Insert, TableSpec
from duckstream.testing.spark_harness import SparkHarness

pytestmark = pytest.mark.spark

VIEW = (
    "SELECT t.k, count(*) AS n, sum(t.v) AS total, max(d.name) AS name"
    " FROM t JOIN d ON t.k = d.k GROUP BY t.k"
)
FACTS = TableSpec(
    "t", [Column("k", "INTEGER"), Column("v", "INTEGER")], [(i % 10, i) for i in range(200)]
)
NAMES = TableSpec(
    "d", [Column("k", "INTEGER"), Column("name", "VARCHAR")], [(k, f"n{k}") for k in range(10)]
)
NO_FIXED_COST = SparkPolicy(overhead_rows=0)


@pytest.fixture
def view(spark) -> tuple[SparkHarness, IVMPlan]:
    harness = SparkHarness(spark)
    harness.create(FACTS)
    harness.create(NAMES)
    plan = harness.compile(VIEW)
    harness.setup(plan)
    return harness, plan


def _mv_snapshot(harness: SparkHarness) -> int:
    mv = harness.fqn("mv")
    return harness.rows(f"SELECT snapshot_id FROM {mv}.refs WHERE name = 'main'")[0][0]


def test_a_small_append_is_maintained_and_counted(view) -> None:
    harness, plan = view
    t, d = harness.fqn("t"), harness.fqn("d")
    harness.apply([Insert("t", ((1, 1000), (2, 2000), (11, 3)))])
    report = refresh(harness.spark, plan, policy=NO_FIXED_COST)
    assert (report.strategy, report.requested) == ("incremental", "auto"), report.reason
    assert report.sources == {
        t: SourceEstimate(t, rows=203, inserted=3),
        d: SourceEstimate(d, rows=10),
    }
    assert "t +3/-0 (1.48%): incremental reads" in report.reason
    assert report.estimate_seconds > 0 and report.elapsed >= report.estimate_seconds
    harness.check(plan, VIEW, "after the incremental refresh")

    # The same change with Spark's fixed cost: a rebuild of 213 rows is cheaper.
    harness.apply([Insert("d", ((11, "n11"),))])
    report = refresh(harness.spark, plan)
    assert report.strategy == "full", report.reason
    assert "d +1/-0" in report.reason and "fixed 12,000,000" in report.reason
    harness.check(plan, VIEW, "after the rebuild")

    before = _mv_snapshot(harness)
    report = refresh(harness.spark, plan)
    assert (report.strategy, report.reason) == ("incremental", "no source changed")
    assert _mv_snapshot(harness) == before  # nothing committed


def test_a_copy_on_write_delete_counts_the_rewritten_files_and_rebuilds(view) -> None:
    harness, plan = view
    t = harness.fqn("t")
    harness.apply([Delete("t", "v = 7")])  # one row; its data file is rewritten whole
    report = choose(harness.spark, plan, NO_FIXED_COST)
    estimate = report.sources[t]
    assert estimate.deleted - estimate.inserted == 1  # the untouched rows come back
    assert estimate.deleted > 1 and estimate.scanned == estimate.deleted
    assert estimate.rows == 199
    assert report.strategy == "full"
    assert "changed more than 10% of its rows" in report.reason
    assert report.reason.endswith(REWRITES)
    done = refresh(harness.spark, plan, policy=NO_FIXED_COST)
    assert done.strategy == "full" and done.sources == report.sources
    harness.check(plan, VIEW, "after the rebuild")


def test_a_compaction_changes_nothing(view) -> None:
    harness, plan = view
    t = harness.fqn("t")
    namespace = t.split(".", 1)[1]
    harness.spark.sql(
        f"CALL lake.system.rewrite_data_files(table => '{namespace}',"
        " options => map('rewrite-all', 'true'))"
    ).collect()
    report = refresh(harness.spark, plan, policy=NO_FIXED_COST)
    assert (report.strategy, report.reason) == ("incremental", "no source changed")
    harness.check(plan, VIEW, "after a refresh over a compaction")


def test_forced_strategies(view) -> None:
    harness, plan = view
    harness.apply([Delete("t", "v = 8")])  # auto would rebuild (a rewritten file)
    report = refresh(harness.spark, plan, strategy="incremental")
    assert (report.strategy, report.requested, report.reason) == (
        "incremental",
        "incremental",
        "requested",
    )
    assert report.sources == {}  # no estimate
    harness.check(plan, VIEW, "after the forced incremental refresh")
    harness.apply([Insert("t", ((3, 3),))])
    report = refresh(harness.spark, plan, strategy="full")
    assert (report.strategy, report.requested) == ("full", "full")
    harness.check(plan, VIEW, "after the forced rebuild")
    with pytest.raises(ValueError, match="strategy must be one of"):
        refresh(harness.spark, plan, strategy="cheapest")


def test_an_expired_cursor_snapshot_rebuilds(view) -> None:
    harness, plan = view
    t = harness.fqn("t")
    namespace = t.split(".", 1)[1]
    harness.apply([Insert("t", ((1, 1),)), Insert("t", ((2, 2),))])
    harness.spark.sql(
        f"CALL lake.system.expire_snapshots(table => '{namespace}',"
        " older_than => TIMESTAMP '9999-12-31 00:00:00', retain_last => 1)"
    ).collect()
    report = refresh(harness.spark, plan, policy=NO_FIXED_COST)
    assert report.strategy == "full"
    assert f"cursor snapshot of {t} is no longer in its history" in report.reason
    harness.check(plan, VIEW, "after the rebuild")
